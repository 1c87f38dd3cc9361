"""What a job's failure stores, and how the worker tells a refused statement from database trouble.

Both decide whether a worker keeps going. A failure output must be storable whatever the handler
raised (a message with a NUL, an attribute nested too deep to encode), or the job's real error is
lost and the job only expires much later. And a statement the server refuses for what it holds
(SQLSTATE classes such as 22 data exception or 23 integrity) fails the same way on every retry,
so it has to be isolated to the job that holds the bad value, where a lost connection or a
deadlock only needs the same statement again a moment later.
"""

from __future__ import annotations

import traceback
from collections.abc import Mapping
from typing import Any

from django.db import DatabaseError

from django_pgboss.wire import output_value, storable_text, to_json

# SQLSTATE classes of trouble that says nothing about the statement's values: connection
# exceptions (08), invalid transaction state (25: a read-only standby after a failover), transaction
# rollback (40: serialization failure, deadlock), insufficient resources (53), object not in
# prerequisite state (55: lock not available), operator intervention (57: admin shutdown, statement
# timeout) and system errors (58). The same statement may well succeed a moment later.
_TRANSIENT_CLASSES = frozenset({"08", "25", "40", "53", "55", "57", "58"})
# Classes where the server is up but cannot take work yet, or the link to it is gone: the worker
# probes again soon instead of backing off further (see Backoff).
_UNREACHABLE_CLASSES = frozenset({"08", "57"})

#: What a job still running when the worker stops is failed with, so it is retried elsewhere.
SHUTDOWN_OUTPUT = {"name": "WorkerShutdown", "message": "the worker stopped while the job was running"}
#: What a claimed job that never started is failed with, in the one case it cannot be put back
#: (a stately key with a job already waiting in each state).
UNSTARTED_OUTPUT = {"name": "WorkerShutdown", "message": "the worker stopped before the job started"}
#: What the jobs of a handler thread that died are failed with, so they are retried.
THREAD_DIED_OUTPUT = {
    "name": "HandlerThreadDied",
    "message": "the worker thread running the job died before it finished (see the worker's log)",
}


def deadline_output(seconds: float, option: str = "expire_in_seconds") -> dict[str, str]:
    """What a job failed at its deadline stores (pg-boss's message, with the reason named): the
    deadline thread's failure of a threaded unit and the async host's of a coroutine's alike."""
    return {
        "name": "JobDeadlineExceeded",
        "message": f"handler execution exceeded {seconds:g}s ({option}); the worker failed "
        "the attempt and cancelled its signal",
    }


#: How deep a failure output is copied; anything deeper is cut (an error report, not a payload).
_MAX_DEPTH = 32


def sqlstate(exc: BaseException) -> str | None:
    """The SQLSTATE the server answered with, or None when no answer came (a lost connection).

    It is looked for down the chain of causes: Django wraps psycopg's error, and the cursor layer
    wraps that in SchemaNotInstalled (db/installed.py), two links from the error that carries it.
    """
    candidate: BaseException | None = exc
    for _ in range(4):
        if candidate is None:
            break
        code = getattr(candidate, "sqlstate", None)
        if code:
            return str(code)
        candidate = candidate.__cause__
    return None


def is_refusal(exc: BaseException) -> bool:
    """True when the server refused the statement for something it holds, so repeating it is futile.

    Anything that is not a database error at all (a value the package refused before sending it)
    counts as a refusal too: it is about the values, and retrying changes nothing.
    """
    if not isinstance(exc, DatabaseError):
        return True
    code = sqlstate(exc)
    return code is not None and code[:2] not in _TRANSIENT_CLASSES


def is_unreachable(exc: BaseException) -> bool:
    """True when the server could not be reached or is not taking connections yet."""
    code = sqlstate(exc)
    return code is None or code[:2] in _UNREACHABLE_CLASSES


def _storable(value: Any, depth: int = 0) -> Any:
    if isinstance(value, str):
        return storable_text(value)
    if depth >= _MAX_DEPTH:
        return "..."
    if isinstance(value, Mapping):
        return {storable_text(str(key)): _storable(item, depth + 1) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_storable(item, depth + 1) for item in value]
    return value


def failure_output(failure: Any) -> dict[str, Any] | None:
    """What a failed job stores: an exception as its name, message and traceback (plus its JSON
    attributes), a dict as it is; in either case with every string made storable, and falling back
    to name and message alone when the full report cannot be encoded."""
    try:
        output = output_value(failure)
    except Exception:
        # An attribute that breaks the encoder must not lose the error itself.
        output = _minimal(failure)
    if output is None:
        return None
    output = _storable(output)
    try:
        to_json(output, "output")
    except Exception:
        output = _storable(_minimal(failure))
    return output


def _minimal(failure: Any) -> dict[str, Any]:
    if isinstance(failure, BaseException):
        return {
            "name": type(failure).__name__,
            "message": str(failure),
            "traceback": "".join(traceback.format_exception(failure)),
        }
    if isinstance(failure, Mapping):
        return {key: str(failure[key]) for key in ("name", "message") if key in failure}
    return {"value": repr(failure)}


def unstorable_output(label: str, exc: BaseException) -> dict[str, str]:
    """The output of a job whose handler's result the database would not store."""
    return {
        "name": "OutputNotStored",
        "message": storable_text(
            f"the handler {label} returned an output that could not be stored: "
            f"{type(exc).__name__}: {str(exc).strip()}"
        ),
    }
