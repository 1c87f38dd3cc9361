"""Warnings raised outside the monitor's pass: logged, stored as pg-boss stores them, and sent as
``signals.warning_raised`` (pg-boss's ``warning`` event and its ``emitAndPersistWarning()`` /
``persistWarning()``, warning.js).

The monitor's own warnings go through monitor/supervisor.py's ``warn()``, which also lists them in
its pass's report; the worker, which may not import the monitor, raises its warnings here:
``handler_overrun`` (worker/overruns.py) and ``start_retry`` (start_retry() below).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from django.db import DatabaseError

from django_pgboss import signals
from django_pgboss.db.context import DatabaseContext
from django_pgboss.plans import maintenance as maintenance_plans

#: pg-boss's warning type of a start that failed and is retried (index.js).
START_RETRY = "start_retry"
#: pg-boss's warning type of a handler still running past its job's expire_in_seconds (manager.js).
HANDLER_OVERRUN = "handler_overrun"


def emit_warning(
    context: DatabaseContext,
    kind: str,
    message: str,
    data: dict[str, Any],
    *,
    sender: Any,
    logger: logging.Logger | None,
    extra: dict[str, Any] | None = None,
) -> None:
    """Log a warning on ``logger`` (``extra`` fields added; None for a caller that logged the
    event itself) and send it as ``signals.warning_raised`` from ``sender``, without storing it:
    what pg-boss's ``emit('warning', ...)`` does alone."""
    if logger is not None:
        logger.warning(message, extra={"pgboss_warning": kind, **(extra or {})})
    signals.send(
        signals.warning_raised,
        sender,
        type=kind,
        message=message,
        data=data,
        using=context.using,
        schema=context.schema,
    )


def store_warning(context: DatabaseContext, kind: str, message: str, data: dict[str, Any]) -> bool:
    """Write one row to the warning table, as pg-boss's persistWarning() does; the caller checks
    PERSIST_WARNINGS. A write the database refuses is logged, sent as ``signals.error_raised`` and
    dropped (False), never raised: a warning must not fail the worker that raised it."""
    try:
        context.execute(
            maintenance_plans.insert_warning(context.quoted_schema),
            {"type": kind, "message": message, "data": json.dumps(data, default=str)},
        )
    except DatabaseError as exc:
        logging.getLogger("django_pgboss.worker").warning("could not store a %s warning (%s)", kind, exc)
        signals.send(signals.error_raised, None, error=exc, doing=f"storing a {kind} warning", instance=None)
        return False
    return True


def start_retry(context: DatabaseContext, exc: BaseException, *, doing: str, sender: Any) -> None:
    """Raise pg-boss's ``start_retry``: ``doing`` (the worker, the monitor) could not start
    because the database did not answer, and retries.

    pg-boss emits it once per start(), on its first failure, and never stores it (the database
    is what failed); so here. pg-boss's ``attempts`` is its startAttempts bound; our processes
    retry until the database answers or they are stopped, so it is None (JSON null).
    """
    error = " ".join(str(exc).split()) or type(exc).__name__
    emit_warning(
        context,
        START_RETRY,
        f"{doing} could not start and will try again until the database answers: {error}",
        {"type": START_RETRY, "attempts": None, "error": error},
        sender=sender,
        # The wait for the database has logged its own line (worker/backoff.py, monitor/loop.py).
        logger=None,
    )
