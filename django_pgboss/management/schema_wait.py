"""Waiting for ``migrate pgboss`` at startup: what the long-running commands (``pgboss_work``
without ``--burst``, ``pgboss_monitor`` without ``--once``) do on a database whose pgboss schema is
not installed yet.

A deployment often starts its workers beside the job that migrates (two containers of one release,
a worker that comes up before the migration finishes). Exiting would have the process supervisor
restart the worker in a loop; waiting lets it start working the moment the schema is there. A
one-shot run (``--burst``, ``--once``) has nothing to wait for and stops with the one line instead.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from django_pgboss.exceptions import SchemaNotInstalled

logger = logging.getLogger("django_pgboss")

#: How often a waiting command looks for the schema again: one failed query, cheap for the server.
POLL_SECONDS = 2.0
#: How often it says again that it is still waiting, after saying so once at the start.
REPEAT_SECONDS = 300.0

T = TypeVar("T")


def missing_schema(exc: BaseException) -> SchemaNotInstalled | None:
    """The SchemaNotInstalled ``exc`` is, or was raised from, else None."""
    for candidate in (exc, exc.__cause__):
        if isinstance(candidate, SchemaNotInstalled):
            return candidate
    return None


def until_installed(attempt: Callable[[], T], stop: threading.Event, doing: str) -> T | None:
    """``attempt()``, tried again every POLL_SECONDS while the schema it needs is not installed,
    until ``stop`` is set (then None); any other error is raised as it is.

    Says so at WARNING when it starts waiting, again every REPEAT_SECONDS, and at INFO when the
    schema appears.
    """
    waiting_since: float | None = None
    said_at = 0.0
    while True:
        try:
            result = attempt()
        except Exception as exc:
            missing = missing_schema(exc)
            if missing is None:
                raise
            now = time.monotonic()
            if waiting_since is None or now - said_at >= REPEAT_SECONDS:
                waited = "" if waiting_since is None else f" (waiting for {now - waiting_since:.0f} s)"
                logger.warning(
                    "%s%s; %s waits for it, looking again every %.0f s (SIGTERM or Ctrl-C to give up)",
                    missing,
                    waited,
                    doing,
                    POLL_SECONDS,
                )
                said_at = now
                waiting_since = waiting_since if waiting_since is not None else now
            if stop.wait(POLL_SECONDS):
                return None
            continue
        if waiting_since is not None:
            logger.info("the pgboss schema is installed: %s starts", doing)
        return result
