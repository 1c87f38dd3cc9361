"""The values the job API hands back: Job, QueueInfo, StatsPoint (and its Percentile),
UpdateResult and UpsertResult (frozen dataclasses), the PassReport of a monitor pass, and the
instance registry's Instance with its InstanceWorker and InstanceMetrics."""

from __future__ import annotations

import datetime as dt
import json
import operator
from collections.abc import Sequence
from dataclasses import MISSING, dataclass, field, fields
from typing import TYPE_CHECKING, Any

from django_pgboss.cancellation import JobSignal

if TYPE_CHECKING:
    from django_pgboss.db.context import Table


# Job has no __slots__, unlike the other records: a fetch builds one per claimed row, and with
# the field values in the instance's __dict__ (and each default on the class) it can set the
# columns a statement returned with one dict.update() and leave the rest to the class, rather
# than set all 39 fields one by one (see jobs_from_table() below).
@dataclass(frozen=True)
class Job:
    """A job as fetch() claims it, or as get_job_by_id() / find_jobs() read it.

    ``retry_count`` names the attempt: passing the Job (not just its id) to complete(), fail(),
    touch() or delete_job() settles only that attempt, never a newer one (the attempt fence).
    The fields after ``group_tier`` are filled when the job was read with include_metadata (and
    always by get_job_by_id and find_jobs); otherwise they are None, except ``start_after``, which
    every fetch fills (when the job became ready to run: its send, its delay, or its retry's).
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
    #: The trace context the job was sent with (its trace_context column, pg-boss 12.38's
    #: propagateContext carrier, such as ``{"traceparent": "00-..."}``), or None. Filled only by
    #: the worker's fetch while spans are recorded (observability/tracing.py continues it);
    #: get_job_by_id() and find_jobs() leave it None, as pg-boss's reads do.
    trace_context: dict[str, str] | None = None
    #: The job's cancellation signal (pg-boss's ``job.signal``; see django_pgboss.cancellation):
    #: the worker sets it at the job's deadline, when its claim is lost, and when a stop's grace
    #: period ends. Each Job read gets a fresh one; it is no column and takes no part in ``==``.
    signal: JobSignal = field(default_factory=JobSignal, compare=False, repr=False)

    @property
    def attempt(self) -> dict[str, Any]:
        """The {"id", "retry_count"} pair that fences a settle to this attempt."""
        return {"id": self.id, "retry_count": self.retry_count}


#: Job's field names (those read from the job table: the signal is none).
JOB_FIELDS = tuple(f.name for f in fields(Job) if f.name != "signal")
#: The job table's column names where Job's field is named otherwise (the API's spelling).
_FIELD_OF_COLUMN = {"expire_seconds": "expire_in_seconds", "deletion_seconds": "delete_after_seconds"}
_UUID_FIELDS = frozenset({"id", "source_id", "source_root_id"})
_JSON_FIELDS = frozenset({"data", "output", "source_output", "trace_context"})


def job_fields(columns: Sequence[str]) -> list[tuple[int, str]]:
    """(position, Job field) for each column of a result that is a Job field, by column name."""
    known = frozenset(JOB_FIELDS)
    named = ((index, _FIELD_OF_COLUMN.get(column, column)) for index, column in enumerate(columns))
    return [(index, name) for index, name in named if name in known]


def job_from_row(row: Sequence[Any], columns: Sequence[str]) -> Job:
    """Build a Job from a row whose columns are named ``columns`` (job table column names).

    Columns that are no Job field (a fetch's ordering columns) are ignored, and fields without a
    column (a fetch without metadata) stay None. uuids come back from psycopg as UUID objects and
    are handed out as strings; jsonb comes back from Django's connection as text (Django reads it
    that way for JSONField) and is decoded.
    """
    return _job(row, job_fields(columns))


def jobs_from_table(table: Table) -> list[Job]:
    """Every row a statement returned (``DatabaseContext.table()``), as Jobs matched to its
    columns by name."""
    positions = job_fields(table.columns)
    plan = _build_plan(positions)
    if plan is None:
        return [_job(row, positions) for row in table.rows]
    return [_build(row, plan) for row in table.rows]


def _job(row: Sequence[Any], positions: list[tuple[int, str]]) -> Job:
    values = {}
    for index, name in positions:
        value = row[index]
        if value is not None:
            if name in _UUID_FIELDS:
                value = str(value)
            elif name in _JSON_FIELDS and isinstance(value, str):
                value = json.loads(value)
        values[name] = value
    return Job(**values)


# A fetch builds a Job for every row it claims, and a frozen dataclass's __init__ sets each of
# Job's 39 fields through object.__setattr__, by keyword, defaults included: about half of what
# turning a fetched row into a Job cost (bench/README.md, the batch-50 drain). The rows of one
# statement all have the same columns, so jobs_from_table() works out once which field each
# column is and how it is converted, then for each row puts the columns' values into the new
# Job's __dict__ with one update() (an itemgetter picks them out of the row); the fields without
# a column are not set at all and read the class's default, the value __init__ would have given
# them. The Jobs are the same (tests/test_fetch.py compares the two builders' output).
_FIELD_DEFAULTS = {f.name: f.default for f in fields(Job) if f.name != "signal"}

#: A row's build: the fields in the order the getter returns their values, the getter, and the
#: fields to convert (uuids to text, JSON text to values).
_Plan = tuple[tuple[str, ...], Any, tuple[str, ...], tuple[str, ...]]


def _build_plan(positions: list[tuple[int, str]]) -> _Plan | None:
    """How to build a Job from rows with these columns, or None when a field that has no default
    has no column either (Job(**values) then raises, as it always did)."""
    present = {name for _index, name in positions}
    if any(default is MISSING and name not in present for name, default in _FIELD_DEFAULTS.items()):
        return None
    # Every Job has at least its five fields without a default, so the getter returns a tuple.
    names = tuple(name for _index, name in positions)
    getter = operator.itemgetter(*(index for index, _name in positions))
    return (
        names,
        getter,
        tuple(name for name in names if name in _UUID_FIELDS),
        tuple(name for name in names if name in _JSON_FIELDS),
    )


def _build(row: Sequence[Any], plan: _Plan) -> Job:
    names, getter, uuid_fields, json_fields = plan
    job = object.__new__(Job)
    values = job.__dict__
    values.update(zip(names, getter(row), strict=True))
    for name in uuid_fields:
        value = values[name]
        if value is not None:
            values[name] = str(value)
    for name in json_fields:
        value = values[name]
        if isinstance(value, str):
            values[name] = json.loads(value)
    values["signal"] = JobSignal()
    return job


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
    #: Waiting jobs ready to run now: neither deferred nor blocked (since schema 46).
    ready_count: int
    #: Waiting jobs a flow parent still holds back (``blocked``), counted apart from ready ones.
    blocked_count: int
    active_count: int
    failed_count: int
    #: The live jobs (queued, active, failed) plus ``retained_count``.
    total_count: int
    #: The completed and cancelled jobs the queue holds: counted by the maintenance pass, moved
    #: up by each monitor pass; None until the first maintenance pass since schema 46.
    retained_count: int | None
    created_delta: int
    completed_delta: int
    failed_delta: int
    delta_seconds: int | None
    delta_on: dt.datetime | None
    #: The wait times of the jobs that finished in the last counted window: LATENCY_SLOTS counts
    #: (django_pgboss.latency); None until a pass counted the queue with PERSIST_QUEUE_STATS.
    wait_bins: list[int] | None
    #: Their run times, in the same slots.
    run_bins: list[int] | None
    #: How long the oldest ready job had waited at that pass, in seconds (0: none waited).
    ready_oldest_seconds: int | None
    singletons_active: list[str] | None
    monitor_on: dt.datetime | None
    created_on: dt.datetime
    updated_on: dt.datetime


@dataclass(frozen=True, slots=True)
class Percentile:
    """One percentile of a stats point's wait and run times, in seconds (pg-boss's
    QueueStatsPercentile): None where the point has no histograms, or they hold no job."""

    #: The percentile asked for, from 1 to 100.
    p: float
    wait_seconds: float | None
    run_seconds: float | None


def bins_from_column(value: Sequence[int | None] | None) -> list[int] | None:
    """A stored histogram as handed out: its empty slots (NULL) as 0, None for no histogram."""
    return None if value is None else [0 if n is None else int(n) for n in value]


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
    #: The wait times of the jobs the counters counted as finished, as LATENCY_SLOTS counts
    #: (django_pgboss.latency; a bucket: its passes' summed); None where no pass measured them.
    wait_bins: list[int] | None
    #: Their run times, in the same slots.
    run_bins: list[int] | None
    #: How long the oldest ready job had waited at the pass, in seconds (a bucket: the longest).
    ready_oldest_seconds: int | None
    captured_on: dt.datetime
    #: With get_queue_stats(percentiles=[...]): one entry per distinct percentile, in the order
    #: asked, read from this point's own histograms; None when none were asked for.
    percentiles: list[Percentile] | None = None


@dataclass
class PassReport:
    """What one supervise() pass did (filled in by django_pgboss.monitor.supervisor as it runs)."""

    counted: list[str] = field(default_factory=list)
    trued_up: int = 0
    expired: int = 0
    stalled: int = 0
    maintained: list[str] = field(default_factory=list)
    deleted: int = 0
    #: Flow edges (job_dependency rows) deleted because their child or parent job was gone.
    dependencies_deleted: int = 0
    warnings: list[str] = field(default_factory=list)
    backoff_seconds: float | None = None
    stats_seconds: float = 0.0
    #: Queues left out of this pass because their statements failed: (name, error message).
    failed: list[tuple[str, str]] = field(default_factory=list)
    #: Queues deleted while the pass ran, skipped.
    vanished: list[str] = field(default_factory=list)
    #: How long the pass took, in seconds (wall clock).
    seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class DependencyRef:
    """One end of a flow edge: a job's queue and id (what get_dependencies() and get_dependents()
    return, pg-boss's DependencyRef)."""

    name: str
    id: str


@dataclass(frozen=True, slots=True)
class InstanceWorker:
    """One queue a registered process works, as its last heartbeat recorded it (pg-boss's
    InstanceWorker: one entry per ``work()`` call; a django_pgboss worker writes one per queue).

    ``local_concurrency`` is how many handlers work the queue at once, ``active`` the jobs in hand
    at the heartbeat; the ``last_*`` moments are None until they happen (only the error's moment is
    kept, never the error: the table is readable by anything that can read the schema).
    ``options`` are the other work options set, by pg-boss's names (``includeMetadata``,
    ``groupConcurrency``, ...); one left at its default is absent.
    """

    id: str
    queue: str
    local_concurrency: int
    batch_size: int
    polling_interval_seconds: float | None
    active: int
    last_fetched_on: dt.datetime | None = None
    last_job_ended_on: dt.datetime | None = None
    last_error_on: dt.datetime | None = None
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class InstanceMetrics:
    """A registered process at its last heartbeat (pg-boss's InstanceMetrics): limits are its
    container's where a cgroup sets them (``cgroup`` 1 or 2), else the host's; rates cover the time
    since the previous heartbeat, so they are None on the first.

    ``cpu`` is the cores used, ``cpu_limit`` the cores allowed, ``cpu_throttled`` the share of CPU
    periods the container was paused for (None without a quota); ``rss``, ``memory_used`` (the
    container's working set, None without a memory limit) and ``memory_limit`` are bytes. The heap
    and event-loop figures are a Node process's: a Python process writes None there.
    """

    cgroup: int | None
    cpu: float | None
    cpu_limit: float | None
    cpu_throttled: float | None
    rss: int | None
    heap_used: int | None
    heap_limit: int | None
    memory_used: int | None
    memory_limit: int | None
    loop_delay: float | None
    loop_delay_max: float | None
    loop_utilization: float | None


@dataclass(frozen=True, slots=True)
class Instance:
    """A process registered in the instance registry: a pg-boss (Node) instance, or a django_pgboss
    worker or monitor (``boss.get_instances()``).

    ``live`` is pg-boss's: not stopped, and heard from within three of its own heartbeats. A clean
    stop sets ``stopped_on``; a crashed process goes quiet instead, and ``crash_restarts`` counts
    the lives on its name and host that ended so before this one started. ``node_version`` is
    ``"python 3.x.y"`` for a Python process; ``config`` holds the options it runs with, by pg-boss's
    names (docs/monitoring.md).
    """

    id: str
    name: str | None
    host: str
    pid: int
    version: str
    node_version: str
    application_name: str | None
    heartbeat_seconds: int
    supervise: bool
    schedule: bool
    migrate: bool
    persist_queue_stats: bool
    persist_warnings: bool
    pool_max: int | None
    pool_total: int | None
    pool_idle: int | None
    pool_waiting: int | None
    workers: list[InstanceWorker]
    metrics: InstanceMetrics | None
    config: dict[str, Any]
    crash_restarts: int
    crash_restarts_since: dt.datetime | None
    started_on: dt.datetime
    heartbeat_on: dt.datetime
    stopped_on: dt.datetime | None
    live: bool
