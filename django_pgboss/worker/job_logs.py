"""The worker's log records about a job's run: its start and end, a handler's exception, and a
job that failed for good.

What operators and error trackers read: a handler's exception is one ERROR record per failed
attempt with ``exc_info`` set to the exception itself (Sentry's logging integration, and every
tracker like it, turns exactly those records into events), saying whether the job will retry; a
job that exhausted its retries, or went to its dead letter queue, is a WARNING; and a job's start
and end are DEBUG records (``manage.py pgboss_work -v 2``). Each carries the structured fields of
observability/logs.py.

The exception is logged by the settler, once the failure is written, because only the fail
statement knows whether the job will retry (the worker fetches jobs without their retry_limit,
and a queue's settings may change under a running job). The start and end are logged where the
handler runs, so that their time is the handler's own.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence

from django_pgboss.observability.logs import job_extra
from django_pgboss.records import Job

logger = logging.getLogger("django_pgboss.worker")


def _names(jobs: Sequence[Job]) -> str:
    shown = ", ".join(job.id for job in jobs[:5]) + (" ..." if len(jobs) > 5 else "")
    return f"job {shown}" if len(jobs) == 1 else f"jobs {shown}"


def started(name: str, jobs: Sequence[Job]) -> None:
    """DEBUG: the handler is called with ``jobs``."""
    # Looked at first: the record and its fields would cost every job something at INFO.
    if logger.isEnabledFor(logging.DEBUG):
        logger.debug(
            "%s of %s started (attempt %d)",
            _names(jobs),
            name,
            jobs[0].retry_count + 1,
            extra=job_extra(name, jobs),
        )


def ended(name: str, jobs: Sequence[Job], seconds: float, raised: BaseException | None) -> None:
    """DEBUG: the handler returned, or raised ``raised``, after ``seconds``."""
    if logger.isEnabledFor(logging.DEBUG):
        how = "returned" if raised is None else f"raised {type(raised).__name__}"
        logger.debug(
            "%s of %s ended in %.3fs: the handler %s",
            _names(jobs),
            name,
            seconds,
            how,
            extra={**job_extra(name, jobs), "seconds": round(seconds, 6)},
        )


def raised(name: str, jobs: Sequence[Job], exc: BaseException, states: Mapping[str, str]) -> None:
    """ERROR, with the exception as ``exc_info``: the handler raised ``exc`` on ``jobs``, which
    are failed now; ``states`` is what the fail statement left each job in ('retry' or
    'failed'), by id. A job missing from it was not failed by this attempt (another attempt holds
    it, or the database refused the failure): whether it retries is unknown, so ``will_retry``
    is None.

    One record per handler call: a batch handler's exception is one event, its record naming
    every job (``job_ids``), ``will_retry`` True when any of them will retry.
    """
    known = [states[job.id] for job in jobs if job.id in states]
    will_retry = ("retry" in known) if known else None
    if will_retry is None:
        outcome = "whether it retries is unknown: its failure was not recorded by this attempt"
    elif will_retry:
        outcome = "it will retry" if len(jobs) == 1 else "they will retry"
    else:
        outcome = "no retries left"
    logger.error(
        "%s of %s failed on attempt %d: %s: %s; %s",
        _names(jobs),
        name,
        jobs[0].retry_count + 1,
        type(exc).__name__,
        exc,
        outcome,
        exc_info=exc,
        extra={**job_extra(name, jobs), "will_retry": will_retry},
    )


def failed_for_good(
    name: str,
    jobs: Sequence[Job],
    states: Mapping[str, str],
    copies: Iterable[tuple[str, str, str]],
    *,
    terminal: bool,
) -> None:
    """WARNING for each of ``jobs`` the fail statement left failed for good: with no retries
    left (or, ``terminal``, skipping them, as a per-job result asked), or sent to its dead letter
    queue (``copies``: source id, dead-letter queue, copy id)."""
    by_id = {job.id: job for job in jobs}
    dead_lettered = set()
    for source, dead_letter, copy in copies:
        dead_lettered.add(source)
        job = by_id.get(source)
        attempt = job.retry_count + 1 if job is not None else None
        logger.warning(
            "job %s of %s failed for good and went to its dead letter queue %s as job %s",
            source,
            name,
            dead_letter,
            copy,
            extra={
                "queue": name,
                "job_id": source,
                "attempt": attempt,
                "dead_letter": dead_letter,
                "dead_letter_id": copy,
            },
        )
    for job in jobs:
        if states.get(job.id) == "failed" and job.id not in dead_lettered:
            logger.warning(
                "job %s of %s failed for good after %d attempt(s): %s",
                job.id,
                name,
                job.retry_count + 1,
                "its handler's result skipped the retries left" if terminal else "no retries left",
                extra=job_extra(name, [job]),
            )
