"""The values the job API hands back: Job, QueueInfo, StatsPoint, UpdateResult and UpsertResult
(frozen dataclasses), and the PassReport of a monitor pass."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any


@dataclass(frozen=True, slots=True)
class Job:
    """A job as fetch() claims it, or as get_job_by_id() / find_jobs() read it.

    ``retry_count`` names the attempt: passing the Job (not just its id) to complete(), fail(),
    touch() or delete_job() settles only that attempt, never a newer one (the attempt fence).
    The fields after ``group_tier`` are filled when the job was read with include_metadata (and
    always by get_job_by_id and find_jobs); otherwise they are None.
    """

    id: str
    name: str
    data: Any
    retry_count: int
    expire_in_seconds: int
    heartbeat_seconds: int | None = None
    group_id: str | None = None
    group_tier: str | None = None
    # Metadata.
    policy: str | None = None
    state: str | None = None
    priority: int | None = None
    retry_limit: int | None = None
    retry_delay: int | None = None
    retry_backoff: bool | None = None
    retry_delay_max: int | None = None
    start_after: dt.datetime | None = None
    started_on: dt.datetime | None = None
    singleton_key: str | None = None
    singleton_on: dt.datetime | None = None
    delete_after_seconds: int | None = None
    heartbeat_on: dt.datetime | None = None
    created_on: dt.datetime | None = None
    completed_on: dt.datetime | None = None
    keep_until: dt.datetime | None = None
    dead_letter: str | None = None
    blocked: bool | None = None
    blocking: bool | None = None
    pending_dependencies: int | None = None
    output: Any = None
    source_name: str | None = None
    source_id: str | None = None
    source_created_on: dt.datetime | None = None
    source_retry_count: int | None = None
    source_output: Any = None
    source_root_id: str | None = None

    @property
    def attempt(self) -> dict[str, Any]:
        """The {"id", "retry_count"} pair that fences a settle to this attempt."""
        return {"id": self.id, "retry_count": self.retry_count}


#: Job's field names, in the order the fetch and read statements return their columns.
JOB_FIELDS = tuple(f.name for f in fields(Job))
_UUID_FIELDS = tuple(JOB_FIELDS.index(key) for key in ("id", "source_id", "source_root_id"))
_JSON_FIELDS = tuple(JOB_FIELDS.index(key) for key in ("data", "output", "source_output"))


def job_from_row(row: Sequence[Any]) -> Job:
    """Build a Job from a row in JOB_FIELDS order (a fetch without metadata returns a prefix).

    uuids come back from psycopg as UUID objects and are handed out as strings; jsonb comes back
    from Django's connection as text (Django reads it that way for JSONField) and is decoded.
    Columns past JOB_FIELDS (a fetch's ordering columns) are ignored. Positional, because every
    fetched job passes through here.
    """
    values = list(row[: len(JOB_FIELDS)])
    width = len(values)
    for index in _UUID_FIELDS:
        if index < width and values[index] is not None:
            values[index] = str(values[index])
    for index in _JSON_FIELDS:
        if index < width and isinstance(values[index], str):
            values[index] = json.loads(values[index])
    return Job(*values)


@dataclass(frozen=True, slots=True)
class UpdateResult:
    """What update() edited: the ids of the jobs it changed, oldest first, and how many."""

    jobs: list[str]
    updated: int


@dataclass(frozen=True, slots=True)
class UpsertResult:
    """What upsert() did: the ids of the jobs it edited or the one it inserted, and how many of
    each (one of ``updated`` and ``inserted`` is 0)."""

    jobs: list[str]
    updated: int
    inserted: int


@dataclass(frozen=True, slots=True)
class QueueInfo:
    """A queue's settings, its cached gauges and its last counted throughput window."""

    name: str
    policy: str
    partition: bool
    table_name: str
    dead_letter: str | None
    retry_limit: int
    retry_delay: int
    retry_backoff: bool
    retry_delay_max: int | None
    expire_in_seconds: int
    retention_seconds: int
    delete_after_seconds: int
    heartbeat_seconds: int | None
    warning_queue_size: int
    notify: bool
    deferred_count: int
    queued_count: int
    ready_count: int
    active_count: int
    failed_count: int
    total_count: int
    created_delta: int
    completed_delta: int
    failed_delta: int
    delta_seconds: int | None
    delta_on: dt.datetime | None
    singletons_active: list[str] | None
    monitor_on: dt.datetime | None
    created_on: dt.datetime
    updated_on: dt.datetime


@dataclass(frozen=True, slots=True)
class StatsPoint:
    """One point of a queue's history: a snapshot, or a time bucket of them.

    The gauges are the queue's counts at ``captured_on`` (a bucket: aggregated over it). The
    counters are the jobs created, completed and failed over ``delta_seconds`` ending at
    ``delta_on``; None where no counting pass covered the point yet. A rate is a sum of deltas over
    the sum of their seconds.
    """

    deferred_count: int
    queued_count: int
    ready_count: int
    active_count: int
    failed_count: int
    total_count: int
    created_delta: int | None
    completed_delta: int | None
    failed_delta: int | None
    delta_seconds: int | None
    delta_on: dt.datetime | None
    captured_on: dt.datetime


@dataclass
class PassReport:
    """What one supervise() pass did (filled in by django_pgboss.monitor.supervisor as it runs)."""

    counted: list[str] = field(default_factory=list)
    trued_up: int = 0
    expired: int = 0
    stalled: int = 0
    maintained: list[str] = field(default_factory=list)
    deleted: int = 0
    warnings: list[str] = field(default_factory=list)
    backoff_seconds: float | None = None
    stats_seconds: float = 0.0
    #: Queues left out of this pass because their statements failed: (name, error message).
    failed: list[tuple[str, str]] = field(default_factory=list)
    #: Queues deleted while the pass ran, skipped.
    vanished: list[str] = field(default_factory=list)
