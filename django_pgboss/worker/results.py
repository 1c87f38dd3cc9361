"""What a handler call ends as: the settle requests the settler gets for its return value.

A one-job handler's return value is its job's output. A batch handler's is stored as pg-boss
stores it: as the output when the batch held one job, and not at all (the jobs complete with no
output) when it held more, since one value cannot be told apart per job. With
``per_job_results=True`` a batch handler returns one JobResult per job instead (pg-boss's
``perJobResults``): completed with an output, failed with an output (retried as any failure), or
dead-lettered at once (failed for good whatever its retries left, and copied to the queue's dead
letter). A job the result leaves out is failed with a message saying so; an entry for a job the
handler was not given, or one that is no JobResult, is ignored and logged.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django_pgboss.records import Job
from django_pgboss.wire import EncodedOutput, output_value, storable_text, to_json
from django_pgboss.worker.messages import Complete, CompleteEach, DeadLetter, Fail, SettleRequest
from django_pgboss.worker.registry import Registration
from django_pgboss.worker.state import job_ids, logger

#: JobResult statuses, spelled as pg-boss's perJobResults spells them.
COMPLETED = "completed"
FAILED = "failed"
DEAD_LETTER = "deadletter"
STATUSES = (COMPLETED, FAILED, DEAD_LETTER)


@dataclass(frozen=True)
class JobResult:
    """One job's outcome in a ``per_job_results`` batch handler's return value.

    Build one with ``JobResult.completed(job, output)``, ``JobResult.failed(job, output)`` or
    ``JobResult.dead_letter(job, output)``; a mapping ``{"id", "status", "output"}`` with
    pg-boss's statuses ("completed", "failed", "deadletter") is accepted too. ``output`` is what
    the job stores (a failed one's may be an exception, stored as its name, message and traceback).
    """

    id: str
    status: str
    output: Any = None

    @classmethod
    def completed(cls, job: Job | str, output: Any = None) -> JobResult:
        """The job completed, storing ``output``."""
        return cls(_job_id(job), COMPLETED, output)

    @classmethod
    def failed(cls, job: Job | str, output: Any = None) -> JobResult:
        """The job failed with ``output``; it is retried while its retry_limit allows."""
        return cls(_job_id(job), FAILED, output)

    @classmethod
    def dead_letter(cls, job: Job | str, output: Any = None) -> JobResult:
        """The job failed for good with ``output``, skipping any retry left: it goes to its dead
        letter queue at once (or just fails, on a queue without one)."""
        return cls(_job_id(job), DEAD_LETTER, output)


def _job_id(job: Job | str) -> str:
    return job.id if isinstance(job, Job) else str(job)


def settle_items(registration: Registration, name: str, jobs: list[Job], result: Any) -> list[SettleRequest]:
    """The settle requests for a handler call on ``jobs`` that returned ``result``."""
    if registration.batch and registration.per_job_results:
        return _per_job(registration, name, jobs, result)
    if registration.batch and len(jobs) > 1:
        # pg-boss's complete(name, jobs, jobIds.length === 1 ? result : undefined).
        return [Complete(name, jobs, None)]
    encoded, failure = _encoded(registration, result)
    if failure is not None:
        logger.error("job(s) %s of %s: %s", job_ids(jobs), name, failure["message"])
        return [Fail(name, jobs, failure)]
    return [Complete(name, jobs, encoded)]


def _encoded(registration: Registration, value: Any) -> tuple[EncodedOutput | None, dict[str, str] | None]:
    """An output encoded for the settler, or the failure that says why it cannot be stored."""
    try:
        encoded = to_json(output_value(value), "output")
    except Exception as exc:
        # JobDataNotSerializable, and RecursionError for a structure nested deeper than the
        # encoder goes: the job fails with the reason, the thread carries on.
        message = storable_text(
            f"the handler {registration.label} returned a value that cannot be stored as JSON: {exc}"
        )
        return None, {"name": type(exc).__name__, "message": message}
    return (None if encoded is None else EncodedOutput(encoded)), None


def _per_job(registration: Registration, name: str, jobs: list[Job], result: Any) -> list[SettleRequest]:
    if not isinstance(result, list | tuple):
        message = (
            f"the per_job_results handler {registration.label} must return a list of JobResult, one "
            f"per job, not {type(result).__name__}"
        )
        logger.error("job(s) %s of %s: %s", job_ids(jobs), name, message)
        return [Fail(name, jobs, {"name": "InvalidJobResults", "message": message})]
    given = {job.id for job in jobs}
    chosen: dict[str, tuple[str, Any]] = {}
    for entry in result:
        parsed = _parse(entry)
        if parsed is None:
            logger.warning(
                "%s: the handler %s returned %r among its per-job results, which is no JobResult; ignored",
                name,
                registration.label,
                entry,
            )
            continue
        job_id, status, output = parsed
        if job_id not in given:
            logger.warning(
                "%s: the handler %s returned a result for job %s, which it was not given; ignored",
                name,
                registration.label,
                job_id,
            )
            continue
        # As pg-boss: the last entry for a job wins.
        chosen[job_id] = (status, output)
    completed: list[Job] = []
    outputs: list[EncodedOutput | None] = []
    items: list[SettleRequest] = []
    for job in jobs:
        status, output = chosen.get(job.id, ("", None))
        if status == COMPLETED:
            encoded, failure = _encoded(registration, output)
            if failure is None:
                completed.append(job)
                outputs.append(encoded)
            else:
                logger.error("job %s of %s: %s", job.id, name, failure["message"])
                items.append(Fail(name, [job], failure))
        elif status == FAILED:
            items.append(Fail(name, [job], output))
        elif status == DEAD_LETTER:
            items.append(DeadLetter(name, [job], output))
        else:
            message = (
                f"the per_job_results handler {registration.label} returned no result for this job "
                f"(it returned {len(result)} result(s) for a batch of {len(jobs)})"
            )
            logger.error("job %s of %s: %s; failing it", job.id, name, message)
            items.append(Fail(name, [job], {"name": "MissingJobResult", "message": message}))
    if completed:
        items.insert(0, CompleteEach(name, completed, outputs))
    return items


def _parse(entry: Any) -> tuple[str, str, Any] | None:
    """(job id, status, output) of one entry, or None if it is no valid JobResult."""
    if isinstance(entry, JobResult):
        job_id, status, output = entry.id, entry.status, entry.output
    elif isinstance(entry, Mapping) and "id" in entry and "status" in entry:
        job_id, status, output = entry["id"], entry["status"], entry.get("output")
    else:
        return None
    if not isinstance(status, str) or status not in STATUSES:
        return None
    if isinstance(job_id, uuid.UUID):
        job_id = str(job_id)
    elif isinstance(job_id, str):
        # Any spelling of a uuid names the job (upper case, no dashes, braces): the batch's ids
        # are PostgreSQL's canonical text, which str(uuid.UUID(...)) gives.
        try:
            job_id = str(uuid.UUID(job_id))
        except ValueError:
            return None
    else:
        return None
    return job_id, status, output
