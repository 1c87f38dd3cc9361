"""The ``extra`` fields of django_pgboss's log records about jobs and queues.

Structured handlers (a JSON formatter, Sentry) index a record's extra attributes, so the worker's
and the monitor's records about a job carry ``queue``, ``job_id`` and ``attempt`` (1 for a job's
first run, retry_count + 1 after), and records about a batch ``job_ids``; records about a queue
carry ``queue``. docs/deployment.md shows a JSON logging configuration that prints them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from django_pgboss.records import Job


def queue_extra(queue: str) -> dict[str, Any]:
    """The extra fields of a record about one queue."""
    return {"queue": queue}


def job_extra(queue: str, jobs: Sequence[Job]) -> dict[str, Any]:
    """The extra fields of a record about one job (or the first few of a batch)."""
    if len(jobs) == 1:
        job = jobs[0]
        return {"queue": queue, "job_id": job.id, "attempt": job.retry_count + 1}
    return {"queue": queue, "job_ids": [job.id for job in jobs]}
