"""How long a worker loop waits after a database error, when it says so, and waiting for the
database at startup.

Two kinds of trouble want different waits. While the server cannot be reached (refused
connections, a server starting up or shutting down: no SQLSTATE, or class 08 or 57), a retry
is a cheap connection attempt that tells the loop the moment the server answers, so it probes
at least every UNREACHABLE_MAX_SECONDS: after an outage the jobs resume within about a second,
not after a back-off that grew through the whole outage (up to 10 s, and jobs 7 s late, before).
While the server answers with errors, each retry costs it real work, so the wait grows to
MAX_BACKOFF_SECONDS.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TypeVar

from django.db import DatabaseError

from django_pgboss.worker.outcomes import is_unreachable

logger = logging.getLogger("django_pgboss.worker")

#: Longest wait between retries while the server answers with errors.
MAX_BACKOFF_SECONDS = 10.0
#: Longest wait between connection attempts while the server cannot be reached.
UNREACHABLE_MAX_SECONDS = 1.0

T = TypeVar("T")


def backoff_delay(exc: BaseException, failures: int) -> float:
    """Seconds to wait before retry number ``failures`` (from 1) after ``exc``."""
    cap = UNREACHABLE_MAX_SECONDS if is_unreachable(exc) else MAX_BACKOFF_SECONDS
    return min(cap, 0.1 * 2 ** min(failures, 16))


def worth_logging(failures: int) -> bool:
    """Log the 1st, 2nd, 4th, 8th ... failure in a row: an outage is reported when it begins and
    then ever more rarely, not once a second by every loop for as long as it lasts."""
    return failures & (failures - 1) == 0


def one_line(exc: BaseException) -> str:
    """An exception's message on one line (psycopg's connection errors span several)."""
    return " ".join(str(exc).split()) or type(exc).__name__


def when_reachable(
    attempt: Callable[[], T],
    stop: threading.Event,
    doing: str,
    *,
    on_first_failure: Callable[[BaseException], None] | None = None,
) -> T | None:
    """``attempt()``, retried while the database cannot be reached, until ``stop`` is set.

    Logs one line when the database does not answer and one when it does; returns None when
    stopped first. Errors other than an unreachable database are raised as they are.
    ``on_first_failure`` is told the first failure (the start_retry warning's hook).
    """
    failures = 0
    while True:
        try:
            result = attempt()
        except DatabaseError as exc:
            if not is_unreachable(exc):
                raise
            failures += 1
            if failures == 1:
                logger.warning(
                    "the database is not answering (%s); %s waits for it and retries "
                    "(SIGTERM or Ctrl-C to give up)",
                    one_line(exc),
                    doing,
                )
                if on_first_failure is not None:
                    on_first_failure(exc)
            _close_all()
            if stop.wait(backoff_delay(exc, failures)):
                return None
            continue
        if failures:
            logger.info("the database answers again after %d attempt(s)", failures)
        return result


def _close_all() -> None:
    from django.db import connections

    # A connection that failed to open must not be reused: the next attempt opens a new one.
    connections.close_all()
