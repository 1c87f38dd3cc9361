"""The ``extra`` fields of django_pgboss's log records about jobs and queues.

Structured handlers (a JSON formatter, Sentry) index a record's extra attributes, so the worker's
and the monitor's records about a job carry ``queue``, ``job_id`` and ``attempt`` (1 for a job's
first run, retry_count + 1 after), and records about a batch ``job_ids``; records about a queue
carry ``queue``. docs/deployment.md shows a JSON logging configuration that prints them.
"""

from __future__ import annotations

import json
import logging
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


#: The attributes every LogRecord has; whatever else a record carries came as ``extra``.
_RECORD_ATTRIBUTES = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message, the ``extra`` fields, and the
    traceback when there is one. The standard library's, no dependency; python-json-logger or a
    Sentry handler read the same ``extra`` fields."""

    def format(self, record: logging.LogRecord) -> str:
        document: dict[str, Any] = {
            "time": self.formatTime(record, self.datefmt),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _RECORD_ATTRIBUTES and not key.startswith("_"):
                document[key] = value
        if record.exc_info:
            document["exc_info"] = self.formatException(record.exc_info)
        return json.dumps(document, default=str)
