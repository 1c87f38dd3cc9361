"""What the worker's parts send as django_pgboss.signals, each from the thread that saw it.

Every function here returns at once when nobody listens to its signal (``signals.has_receivers``),
before building anything: a worker without receivers pays one attribute test per event. The
callers say when: a job started on its handler thread before the call, a completion or a failure
on the settler thread once it committed.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from django_pgboss import signals
from django_pgboss.records import Job
from django_pgboss.wire import EncodedOutput


def jobs_started(worker: Any, name: str, jobs: Sequence[Job]) -> None:
    """job_started for each job of a handler call, just before the call."""
    if not signals.has_receivers(signals.job_started):
        return
    sender = type(worker)
    for job in jobs:
        signals.send(signals.job_started, sender, worker=worker, queue=name, job=job)


def jobs_completed(
    worker: Any, name: str, results: Iterable[tuple[Job, Any]], settled: Collection[str]
) -> None:
    """job_completed for each (job, output) whose completion committed (its id in ``settled``)."""
    if worker is None or not signals.has_receivers(signals.job_completed):
        return
    sender = type(worker)
    settled = set(settled)
    for job, output in results:
        if job.id in settled:
            signals.send(
                signals.job_completed, sender, worker=worker, queue=name, job=job, output=stored_value(output)
            )


def jobs_failed(
    worker: Any,
    name: str,
    jobs: Sequence[Job],
    output: Any,
    failure: Any,
    states: Mapping[str, str],
    copies: Iterable[tuple[str, str, str]],
) -> None:
    """job_failed for each job whose failure committed (its id in ``states``, with the state it
    went to: 'retry' is will_retry), then job_dead_lettered for each copy made, as (source id,
    dead-letter queue, copy id). The fail statement reports both (JobStore.fail_reporting)."""
    if worker is None:
        return
    sender = type(worker)
    if signals.has_receivers(signals.job_failed):
        exception = failure if isinstance(failure, BaseException) else None
        for job in jobs:
            state = states.get(job.id)
            if state is None:
                continue  # another attempt holds it: the fenced fail left it alone
            signals.send(
                signals.job_failed,
                sender,
                worker=worker,
                queue=name,
                job=job,
                output=output,
                exception=exception,
                will_retry=state == "retry",
            )
    if signals.has_receivers(signals.job_dead_lettered):
        by_id = {job.id: job for job in jobs}
        for source, dead_letter, copy in copies:
            failed = by_id.get(source)
            if failed is not None:
                signals.send(
                    signals.job_dead_lettered,
                    sender,
                    worker=worker,
                    queue=name,
                    job=failed,
                    dead_letter=dead_letter,
                    dead_letter_id=copy,
                )


def error(worker: Any, exc: BaseException, doing: str) -> None:
    """error_raised for an error the worker survives (a database error, a handler thread's death)."""
    if worker is None or not signals.has_receivers(signals.error_raised):
        return
    signals.send(signals.error_raised, type(worker), error=exc, doing=doing, instance=worker)


def stored_value(output: Any) -> Any:
    """An output as the job stores it and JSON gives it back (the handler's value, already encoded
    by the worker as an EncodedOutput, decoded again)."""
    if isinstance(output, EncodedOutput):
        return json.loads(output)
    return output
