"""A task job's attempt history: the errors and worker ids Django's TaskResult lists, read from the
job (its data's record of the attempts a TaskRunner ran, and its output), and the helpers the
backend shares with it. Pure: no database, no Django task framework."""

from __future__ import annotations

import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django_pgboss import exceptions
from django_pgboss.exceptions import TaskAttemptLost
from django_pgboss.records import Job

#: Where a task job's data and output keep what Django's result needs beyond the value or the error.
META_KEY = "django_task"
#: A worker id for an attempt whose worker is not recorded (run by something other than a TaskRunner).
UNKNOWN_WORKER = "unknown"


def traceback_text(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc))


def return_value(output: Any) -> Any:
    if isinstance(output, Mapping):
        if META_KEY in output or "return_value" in output:
            return output.get("return_value")
        # Completed by other means (boss.complete(), pg-boss itself): its output is the value.
        if set(output) == {"value"}:
            return output["value"]
    return output


@dataclass(frozen=True)
class History:
    """The errors and worker ids of a job's attempts so far.

    Each attempt a TaskRunner starts records, in the job's data under META_KEY, the worker ids of
    every attempt up to itself and the errors of those before it, and again with its own error when
    the task raises (PgBossBackend._record_attempt). The output then only adds what ended the
    latest attempt when the task did not end it itself: the monitor's expiry, a worker's shutdown,
    a thread that died. A job with no such record (enqueued before this release, or only ever run
    by someone else) is read from its output as before: the last attempt's output carries the
    history under META_KEY, and an output without it is one error, TaskAttemptLost (or the
    django_pgboss error it names), with any history before it gone.
    """

    errors: list[dict[str, str]]
    worker_ids: list[str]

    @classmethod
    def of(cls, job: Job) -> History:
        data = job.data if isinstance(job.data, Mapping) else {}
        recorded = data.get(META_KEY)
        # A dead-letter copy or a redriven job carries its source's data, record included: only a
        # record of this job counts.
        if isinstance(recorded, Mapping) and recorded.get("job") == job.id:
            return cls._recorded(job, recorded)
        return cls._from_output(job)

    @classmethod
    def _recorded(cls, job: Job, recorded: Mapping[str, Any]) -> History:
        errors = [e for e in recorded.get("errors", []) if _is_error(e)]
        worker_ids = [str(w) for w in recorded.get("worker_ids", [])]
        attempt = recorded.get("attempt")
        if not isinstance(attempt, int):
            return cls(errors, worker_ids)
        output = job.output if isinstance(job.output, Mapping) else None
        # The output shows the end of the latest attempt that ended: the one before the running
        # attempt, or, once none runs, the latest.
        last_ended = job.retry_count - 1 if job.state == "active" else job.retry_count
        if job.state in ("completed", "cancelled"):
            return cls(errors, worker_ids)
        if not recorded.get("ended") and attempt <= last_ended:
            # The recorded attempt ended without its task saying so: expired, shut down, lost.
            if attempt == last_ended and output is not None:
                errors.append(lost_error(output))
            else:
                errors.append(lost_error({}))
        if attempt < last_ended and output is not None:
            # A later attempt, run by something other than a TaskRunner, ended this way.
            errors.append(lost_error(output))
        return cls(errors, worker_ids)

    @classmethod
    def _from_output(cls, job: Job) -> History:
        output = job.output if isinstance(job.output, Mapping) else None
        meta = output.get(META_KEY) if output is not None else None
        if output is not None and isinstance(meta, Mapping):
            errors = [e for e in meta.get("errors", []) if _is_error(e)]
            if "exception_class_path" in meta:
                errors.append(
                    {
                        "exception_class_path": str(meta["exception_class_path"]),
                        "traceback": str(output.get("traceback", "")),
                    }
                )
            return cls(errors, [str(w) for w in meta.get("worker_ids", [])])
        if output is None or job.started_on is None or job.state == "completed":
            return cls([], [])
        return cls([lost_error(output)], [])


def padded(worker_ids: list[str], attempts: int) -> list[str]:
    """One worker id per attempt: the recorded ones, then UNKNOWN_WORKER for those not recorded."""
    return (worker_ids + [UNKNOWN_WORKER] * attempts)[:attempts]


def _is_error(value: Any) -> bool:
    return isinstance(value, Mapping) and set(value) == {"exception_class_path", "traceback"}


def lost_error(output: Mapping[str, Any]) -> dict[str, str]:
    """An attempt the task did not end itself, as an error: the class named, when we have it."""
    name = output.get("name")
    value = output.get("value")
    message = output.get("message") or (value.get("message") if isinstance(value, Mapping) else None)
    cls = getattr(exceptions, name, None) if isinstance(name, str) else None
    path = (
        f"{cls.__module__}.{cls.__qualname__}"
        if isinstance(cls, type) and issubclass(cls, BaseException)
        else f"{TaskAttemptLost.__module__}.{TaskAttemptLost.__qualname__}"
    )
    text = output.get("traceback") or f"{name or 'TaskAttemptLost'}: {message or 'the attempt was lost'}"
    return {"exception_class_path": path, "traceback": str(text)}
