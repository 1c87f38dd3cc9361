"""Boss: django_pgboss's public API over pg-boss's schema.

Every statement runs on Django's connection for the configured alias, so a ``send()`` inside
``transaction.atomic()`` commits or rolls back with the caller's own writes. Boss is a façade: it
documents the API and hands each call to the object that owns it, each over one
:class:`~django_pgboss.db.context.DatabaseContext` (the alias, the schema and the queue-route
cache): queues (api/queues.py), sending (api/sending.py), fetching, settling and reading jobs
(api/jobs.py), publish and subscribe (api/pubsub.py), schedules (api/schedules.py), dead letters
(api/deadletters.py) and the monitor's pass (monitor/supervisor.py). Boss holds no SQL and no
plumbing of its own.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from django_pgboss.api.async_twins import AsyncTwins
from django_pgboss.api.bam import BamEntry, BamStatus, bam_entries, bam_status
from django_pgboss.api.deadletters import DeadLetters, RedrivePreview, RedriveResult
from django_pgboss.api.editing import PURGE_BATCH_SIZE, JobEditor
from django_pgboss.api.event_loop import public_methods, refuse_in_event_loop, runs_no_statement
from django_pgboss.api.flows import FlowGraph, FlowJob, FlowStore, RelatedJob
from django_pgboss.api.indexes import reindex_commands
from django_pgboss.api.instances import InstanceStore
from django_pgboss.api.jobs import JobStore
from django_pgboss.api.pubsub import EventStore
from django_pgboss.api.queues import QueueStore
from django_pgboss.api.schedules import Schedule, ScheduleStore
from django_pgboss.api.sending import JobSender
from django_pgboss.arguments import JobReference
from django_pgboss.constants import UNSET
from django_pgboss.db.context import DatabaseContext
from django_pgboss.exceptions import InvalidOption
from django_pgboss.records import (
    DependencyRef,
    Instance,
    Job,
    PassReport,
    QueueInfo,
    StatsPoint,
    UpdateResult,
    UpsertResult,
)

if TYPE_CHECKING:
    # The worker sits above the API (it is built over a Boss): see worker() for the import.
    from django_pgboss.worker.engine import Worker


@refuse_in_event_loop(public_methods)
class Boss(AsyncTwins):
    """The job API for one database alias and one pg-boss schema.

    ``Boss()`` uses settings.PGBOSS (``DATABASE`` and ``SCHEMA``); ``Boss(using=..., schema=...)``
    addresses another, and ``Boss(context=...)`` runs on an existing database context. Instances
    are cheap and thread-safe: each call takes a cursor on the calling thread's Django connection.

    Every method has an async twin, ``a`` + its name (``await boss.asend(...)``), and refuses to
    run on a running event loop with an error that names that twin.
    """

    def __init__(
        self, using: str | None = None, schema: str | None = None, *, context: DatabaseContext | None = None
    ) -> None:
        if context is not None and (using is not None or schema is not None):
            raise TypeError("Boss() takes either using and schema, or a context, not both")
        self._context = context if context is not None else DatabaseContext(using, schema)
        self._queues = QueueStore(self._context)
        self._jobs = JobStore(self._context)
        self._sender = JobSender(self._context)
        self._editor = JobEditor(self._context, self._sender)
        self._events = EventStore(self._context, self._sender)
        self._schedules = ScheduleStore(self._context)
        self._dead_letters = DeadLetters(self._context)
        self._flows = FlowStore(self._context)
        self._instances = InstanceStore(self._context)

    def __repr__(self) -> str:
        return f"<Boss using={self.using!r} schema={self.schema!r}>"

    # -- configuration -------------------------------------------------------------------------

    @property
    def using(self) -> str:
        """The Django database alias every statement runs on."""
        return self._context.using

    @property
    def schema(self) -> str:
        """The schema name, as PostgreSQL stores it."""
        return self._context.schema

    @property
    def context(self) -> DatabaseContext:
        """The database context this Boss runs on: what the worker, the monitor and the timekeeper
        are built over (``Worker(boss=...)``, ``supervise(boss)``) to share its database, schema
        and queue-route cache."""
        return self._context

    # -- queues --------------------------------------------------------------------------------

    def create_queue(self, name: str, **options: Any) -> None:
        """Create a queue; an existing queue of that name is left as it is.

        Options: policy ("standard", "short", "singleton", "stately", "exclusive",
        "key_strict_fifo"), partition (give the queue its own table), dead_letter (an existing
        queue that receives jobs failing for good), retry_limit, retry_delay, retry_backoff,
        retry_delay_max, expire_in_seconds, retention_seconds, delete_after_seconds,
        heartbeat_seconds, warning_queue_size and notify (wake workers by LISTEN/NOTIFY).
        """
        self._queues.create_queue(name, **options)

    def update_queue(self, name: str, **options: Any) -> None:
        """Change a queue's settings; policy and partition are fixed at creation.

        ``dead_letter=None``, ``retry_delay_max=None`` and ``heartbeat_seconds=None`` clear those
        settings. Raises QueueNotFound for an unknown queue.
        """
        self._queues.update_queue(name, **options)

    def delete_queue(self, name: str) -> None:
        """Delete a queue with all its jobs (its own table, when partitioned), schedules and subscriptions.

        A queue that does not exist is left alone: nothing is raised, as in pg-boss.
        """
        self._queues.delete_queue(name)

    def get_queue(self, name: str) -> QueueInfo | None:
        """The queue's settings, cached counts and throughput window, or None when it does not exist."""
        return self._queues.get_queue(name)

    def get_queues(
        self, names: Iterable[str] | None = None, *, limit: int | None = None, after: str | None = None
    ) -> list[QueueInfo]:
        """The queues (or those named), in name order: a page of at most ``limit`` (None: 1,000; at
        most 100,000), after the queue name ``after`` (the previous page's last). A page shorter
        than ``limit`` is the last."""
        return self._queues.get_queues(names, limit=limit, after=after)

    # -- fetching ------------------------------------------------------------------------------

    def fetch(
        self,
        name: str,
        *,
        batch_size: int = 1,
        include_metadata: bool = False,
        min_priority: int | None = None,
        max_priority: int | None = None,
        group_concurrency: int | Mapping[str, Any] | None = None,
        ignore_start_after: bool = False,
        ignore_groups: Sequence[str] | None = None,
    ) -> list[Job]:
        """Claim up to ``batch_size`` waiting jobs of a queue, highest priority then oldest first.

        The jobs become active and count an attempt; settle each with complete() or fail() (pass
        the Job to fence the settle to this attempt). ``group_concurrency`` caps active jobs per
        group_id: an int, or ``{"default": n, "tiers": {"gold": m, ...}}`` keyed by group_tier.
        ``ignore_groups`` passes over the jobs of these group ids (pg-boss's ``ignoreGroups``; the
        worker's local_group_concurrency sends the groups at their limit). Returns [] when nothing is ready, or when a concurrent claim took the last free slot of a
        singleton or stately key.
        """
        return self._jobs.fetch(
            name,
            batch_size=batch_size,
            include_metadata=include_metadata,
            min_priority=min_priority,
            max_priority=max_priority,
            group_concurrency=group_concurrency,
            ignore_start_after=ignore_start_after,
            ignore_groups=ignore_groups,
        )

    # -- settling ------------------------------------------------------------------------------

    def complete(
        self, name: str, jobs: JobReference, output: Any = None, *, include_queued: bool = False
    ) -> int:
        """Complete active jobs, storing ``output``; returns how many were completed.

        ``jobs`` is a Job, an id, an {"id", "retry_count"} pair, or a list of one kind. Jobs (and
        pairs) are fenced to their attempt: if the claim lapsed and the job was fetched again, the
        stale settle changes nothing and counts 0. Bare ids are not fenced. ``include_queued``
        completes jobs that are still waiting too.
        """
        return self._jobs.complete(name, jobs, output, include_queued=include_queued)

    def fail(self, name: str, jobs: JobReference, output: Any = None) -> int:
        """Fail jobs with ``output`` (an exception is stored as its name, message and traceback).

        A job with attempts left goes back to wait for a retry (after retry_delay, or an
        exponential backoff with jitter capped by retry_delay_max); one without fails for good and
        is copied into its dead-letter queue. Returns how many jobs were failed. Fenced like
        complete().
        """
        return self._jobs.fail(name, jobs, output)

    def cancel(self, name: str, jobs: JobReference) -> int:
        """Cancel jobs that have not finished (fenced jobs: only their active attempt)."""
        return self._jobs.cancel(name, jobs)

    def delete_job(self, name: str, jobs: JobReference) -> int:
        """Delete jobs in any state (fenced jobs: only their active attempt)."""
        return self._jobs.delete_job(name, jobs)

    def touch(self, name: str, jobs: JobReference) -> int:
        """Refresh the heartbeat of active jobs, so the monitor does not fail them as stalled."""
        return self._jobs.touch(name, jobs)

    def resume(self, name: str, ids: str | Sequence[str]) -> int:
        """Put cancelled jobs back in the queue; returns how many were resumed."""
        return self._jobs.resume(name, ids)

    def retry(self, name: str, ids: str | Sequence[str]) -> int:
        """Give failed jobs one more attempt, right away; returns how many were retried."""
        return self._jobs.retry(name, ids)

    # -- reading -------------------------------------------------------------------------------

    def get_job_by_id(self, name: str, job_id: str) -> Job | None:
        """The job with every column, or None when the queue holds no job with that id."""
        return self._jobs.get_job_by_id(name, job_id)

    def find_jobs(
        self,
        name: str,
        *,
        id: str | None = None,
        key: str | None = None,
        data: Any = None,
        queued: bool = False,
        limit: int | None = None,
        after: str | uuid.UUID | Job | None = None,
    ) -> list[Job]:
        """Jobs of a queue, oldest first, filtered by id, singleton key, data (JSON containment:
        ``data={"customer": 7}`` matches jobs whose data holds that pair) and ``queued`` (waiting
        to run). A page of at most ``limit`` (None: 1,000; at most 100,000) after the job
        ``after`` (the previous page's last, or its id); a short page is the last."""
        return self._jobs.find_jobs(name, id=id, key=key, data=data, queued=queued, limit=limit, after=after)

    # -- monitoring ----------------------------------------------------------------------------

    def supervise(
        self, queues: Iterable[str] | None = None, *, interval_seconds: float | None = None
    ) -> PassReport:
        """Run one monitor pass now (see django_pgboss.monitor): count the due queues (gauges,
        throughput, a queue_stats snapshot, the true-up), fail jobs past their expiry or heartbeat
        so they retry, and delete old jobs of queues whose retention is due. Any number of
        monitors may run it at once. A queue is counted and swept at most once per
        ``interval_seconds`` (default PGBOSS["MONITOR_INTERVAL_SECONDS"]), by whichever monitor
        claims it first. Returns the pass's PassReport."""
        # Imported here: the monitor package sits above the API (its timekeeper sends through
        # api/), so the façade reaches the pass, which itself needs only db/ and plans/, only
        # when one is asked for.
        from django_pgboss.monitor.supervisor import supervise

        return supervise(self._context, queues, interval_seconds=interval_seconds, sender=Boss)

    def get_reindex_commands(
        self,
        *,
        force: bool = False,
        min_pages: float | None = None,
        max_entries_per_page: float | None = None,
        min_size_ratio: float | None = None,
        max_index_bytes: int | None = None,
    ) -> list[str]:
        """The statements that rebuild the bloated job indexes, for an operator to run (pg-boss's
        getReindexCommands()): a DROP INDEX CONCURRENTLY for each stub an interrupted rebuild left,
        then a REINDEX INDEX CONCURRENTLY per bloated index (every job index with ``force``).
        pg-boss's thresholds unless given; no size cap unless ``max_index_bytes``. Empty when
        nothing is bloated. Run them outside a transaction block (psql, or autocommit)."""
        return reindex_commands(
            self._context,
            force=force,
            min_pages=min_pages,
            max_entries_per_page=max_entries_per_page,
            min_size_ratio=min_size_ratio,
            max_index_bytes=max_index_bytes,
        )

    def get_bam_status(self) -> list[BamStatus]:
        """The background index builds pg-boss's migrations queued (pg-boss's getBamStatus()): one
        BamStatus per status present (pending, in_progress, completed, failed) with its count and
        its newest command's created_on. The monitor's bam pass builds them (docs/operations.md)."""
        return bam_status(self._context)

    def get_bam_entries(self) -> list[BamEntry]:
        """Every queued background index build, by migration version and then as queued (pg-boss's
        getBamEntries()), with its statement, status, last error and times."""
        return bam_entries(self._context)

    def get_instances(
        self, *, limit: int | None = None, after: str | uuid.UUID | Instance | None = None
    ) -> list[Instance]:
        """The processes registered in the instance registry, pg-boss (Node) instances and
        django_pgboss workers and monitors alike, in start order (pg-boss's getInstances()).

        ``live`` is pg-boss's: not stopped, and heard from within three of its own heartbeats.
        At most ``limit`` (default 1,000, at most 100,000) per page; ``after``, the previous page's
        last Instance (or its id), starts the next, and a short page ends the list. Raises
        InvalidOption for a bad limit or cursor before any SQL, and when ``after`` names an
        instance pruned since its page was read.
        """
        return self._instances.get_instances(limit, after)

    def get_queue_stats(
        self,
        name: str,
        *,
        start: dt.datetime | None = None,
        end: dt.datetime | None = None,
        bucket_seconds: int | None = None,
        max_data_points: int | None = None,
        aggregate: str = "max",
        limit: int = 1000,
        force: bool = False,
        percentiles: Sequence[float] | None = None,
    ) -> list[StatsPoint]:
        """A queue's history from the monitor's snapshots, newest first.

        Raw snapshots by default; with ``bucket_seconds`` (a bucket width) or ``max_data_points``
        (a width derived from the history's extent), time buckets: gauges aggregated with
        ``aggregate`` ("max", "min" or "avg"), counters summed, wait and run histograms added
        slot by slot. ``start`` and ``end`` bound the range. Without PERSIST_QUEUE_STATS there is
        no history: the one point returned is the queue's last count, without counters or
        histograms, recounted first when it is more than an hour old (or the monitor's interval,
        when longer), or more than a minute old with ``force=True``, or missing; never [] for a
        queue that exists.

        ``percentiles`` (percents from 1 to 100, such as ``[50, 95, 99]``) gives each point a
        ``percentiles`` list, one ``Percentile(p, wait_seconds, run_seconds)`` per distinct value
        in the order asked, read from the point's own histograms with pg-boss's arithmetic
        (django_pgboss.latency.percentile()). An empty list, a value outside 1 to 100 or one that
        is not a number raises InvalidOption before any SQL.
        """
        return self._queues.get_queue_stats(
            name,
            start=start,
            end=end,
            bucket_seconds=bucket_seconds,
            max_data_points=max_data_points,
            aggregate=aggregate,
            limit=limit,
            force=force,
            percentiles=percentiles,
        )

    # -- the worker at run time ----------------------------------------------------------------

    @runs_no_statement
    def worker(self, **options: Any) -> Worker:
        """A worker over this Boss's database and schema, working no queue yet: the engine
        ``pgboss_work`` runs, driven from code (pg-boss's ``work()`` and ``offWork()``).

        ``worker.work(name, handler, **work_options)`` adds a queue's handler and returns its work
        id, ``off_work(name_or_work_id, wait=True)`` removes it, ``notify(name)`` wakes a queue,
        ``wip()`` says what runs, ``start()`` / ``stop(grace_seconds=None)`` run it on a thread
        of its own, and ``with boss.worker() as worker:`` does both. ``options`` are the
        process's, as Worker takes them: ``burst``, ``max_jobs``, ``grace_seconds``, ``listen``,
        ``max_abandoned_threads``, ``instruments``, ``clock`` (without it, the clock installed now:
        the system's, or an attached TestClock's timers), and the ports a test fakes, ``store``
        and ``queue_catalog``. Refuses any other, or a bad value, with InvalidOption before
        anything starts.
        """
        # Imported here: the worker sits above the API (it is built over a Boss), so the façade
        # reaches it only when one is asked for, as supervise() reaches the monitor's pass.
        from django_pgboss.worker.engine import PROCESS_OPTIONS, Worker

        unknown = sorted(set(options) - PROCESS_OPTIONS)
        if unknown:
            raise InvalidOption(f"worker() takes no option {', '.join(map(repr, unknown))}")
        return Worker([], boss=self, **options)

    # -- schedules -----------------------------------------------------------------------------

    def schedule(
        self,
        name: str,
        cron: str,
        data: Any = None,
        *,
        tz: str = "UTC",
        key: str = "",
        missed: str = "skip",
        **send_options: Any,
    ) -> None:
        """Send ``data`` to queue ``name`` on every occurrence of ``cron``, in time zone ``tz``.

        ``cron`` is a cron expression (5 fields, or 6 with seconds first) or an RFC 5545
        recurrence rule (``FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=17``, with or without a DTSTART line);
        which one is decided here and stored as the schedule's kind. ``key`` tells several
        schedules of one queue apart (schedule() again with the same name and key replaces it);
        ``missed="once"`` sends one job for occurrences missed while no monitor ran. Other
        options are send()'s, used for each job. Runs on the monitor's timekeeper (manage.py
        pgboss_monitor); each occurrence is sent once however many monitors run.

        Raises InvalidSchedule (an InvalidOption) for an expression or time zone that cannot be
        evaluated, or a rule with no occurrence left, before anything is written.
        """
        self._schedules.schedule(name, cron, data, tz=tz, key=key, missed=missed, **send_options)

    def unschedule(self, name: str, key: str = "") -> None:
        """Remove the schedule (name, key)."""
        self._schedules.unschedule(name, key)

    def get_schedules(
        self,
        name: str | None = None,
        key: str | None = None,
        *,
        limit: int | None = None,
        after: Schedule | None = None,
    ) -> list[Schedule]:
        """Every schedule, the queue's, or (with ``key``) the queue's one of that key, in name and
        key order. A ``key`` without a ``name`` is ignored, as pg-boss ignores it: every schedule.
        A page of at most ``limit`` (None: 1,000; at most 100,000) after the Schedule ``after``
        (the previous page's last); a short page is the last."""
        return self._schedules.get_schedules(name, key, limit=limit, after=after)

    def get_schedule(self, name: str, key: str = "") -> Schedule | None:
        """The schedule (name, key), or None."""
        return self._schedules.get_schedule(name, key)

    def preview_schedule(
        self, expression: str, *, tz: str = "UTC", start: dt.datetime | None = None, count: int = 10
    ) -> list[dt.datetime]:
        """The next ``count`` (1 to 1,000) occurrences of a cron expression or RFC 5545 rule in
        ``tz``, strictly after ``start`` (default: the database's clock, as the timekeeper reads
        it), as aware UTC datetimes; nothing is read or written but the clock.

        A finite rule answers with fewer, a finished one with none; page on by passing the last
        occurrence back as ``start``. Raises InvalidSchedule as schedule() does, and when the walk
        outlasts its one-second budget (a rule too sparse for the count asked).
        """
        return self._schedules.preview_schedule(expression, tz=tz, start=start, count=count)

    # -- events --------------------------------------------------------------------------------

    def subscribe(self, event: str, name: str) -> None:
        """Subscribe queue ``name`` to ``event``: every publish(event) sends it a job."""
        self._events.subscribe(event, name)

    def unsubscribe(self, event: str, name: str) -> None:
        """Stop sending ``event`` to queue ``name`` (nothing happens if it was not subscribed)."""
        self._events.unsubscribe(event, name)

    def publish(self, event: str, data: Any = None, **options: Any) -> dict[str, str | None]:
        """Send one job to every queue subscribed to ``event``, all in one transaction.

        Takes send()'s options. Returns {queue name: job id, or None where the queue's policy
        dropped the job}; {} when nothing is subscribed. If any send fails, none is kept.
        """
        return self._events.publish(event, data, **options)

    # -- sending -------------------------------------------------------------------------------

    def send(self, name: str, data: Any = None, **options: Any) -> str | None:
        """Send one job and return its id, or None when the queue's policy or a throttle slot dropped it.

        Options: id, priority, start_after (seconds, a timedelta, a datetime or date, an ISO 8601
        string, a date-time with a zone name, or an interval string such as "90 minutes" read on
        the database's clock), singleton_key,
        singleton_seconds, singleton_next_slot, group_id, group_tier, dead_letter, retry_limit,
        retry_delay, retry_backoff, retry_delay_max, expire_in_seconds, retention_seconds,
        delete_after_seconds, heartbeat_seconds. An option not given takes the queue's setting.
        """
        return self._sender.send(name, data, **options)

    def send_after(self, name: str, data: Any, after: Any, **options: Any) -> str | None:
        """send() with start_after ``after``, in any form send() takes (seconds, a datetime, "1 hour", ...)."""
        return self._sender.send_after(name, data, after, **options)

    def send_throttled(
        self, name: str, data: Any, seconds: int, key: str | None = None, **options: Any
    ) -> str | None:
        """Send at most one job per ``seconds``-long slot (per key); extra sends return None."""
        return self._sender.send_throttled(name, data, seconds, key, **options)

    def send_debounced(
        self, name: str, data: Any, seconds: int, key: str | None = None, **options: Any
    ) -> str | None:
        """Like send_throttled(), but a send into a taken slot is queued once for the next slot."""
        return self._sender.send_debounced(name, data, seconds, key, **options)

    def insert(
        self, name: str, jobs: Sequence[Mapping[str, Any]], *, return_ids: bool = False
    ) -> list[str] | None:
        """Insert many jobs in one statement; each dict has "data" and any send() option.

        Returns the ids of the jobs inserted (policies may drop some) when return_ids is true.
        """
        return self._sender.insert(name, jobs, return_ids=return_ids)

    # -- editing and purging -------------------------------------------------------------------

    def update(
        self,
        name: str,
        data: Any = UNSET,
        *,
        id: str | uuid.UUID | None = None,
        singleton_key: str | None = None,
        match: str = "newest",
        **options: Any,
    ) -> UpdateResult:
        """Edit jobs that have not started yet (created or waiting to retry); returns an UpdateResult.

        The jobs are the one with ``id``, or those with ``singleton_key``: the newest of them
        (``match="newest"``), the oldest, or ``"all"``. Only what is given changes: ``data``
        left out keeps the payload and ``data=None`` clears it; options are send()'s (priority,
        start_after, group_id, group_tier, dead_letter, retry_limit, retry_delay, retry_backoff,
        retry_delay_max, expire_in_seconds, retention_seconds, delete_after_seconds,
        heartbeat_seconds), and None clears retry_delay_max, dead_letter, heartbeat_seconds and the
        group. The key, the state and the throttle slot are kept. A new start_after keeps the
        job's retention span. Matching nothing is not an error: ``updated`` is 0.
        """
        return self._editor.update(name, data, id=id, singleton_key=singleton_key, match=match, **options)

    def upsert(
        self, name: str, data: Any = UNSET, *, singleton_key: str, match: str = "newest", **options: Any
    ) -> UpsertResult:
        """Edit the waiting job(s) of ``singleton_key`` as update() does, or send one when there is none.

        Returns an UpsertResult: the ids, and how many were updated or inserted. Two upserts of a
        key racing each other never leave two waiting jobs: on standard, singleton and
        key_strict_fifo queues, whose indexes allow that, they take turns on a transaction-scoped
        advisory lock for (queue, key); on short, stately and exclusive queues the policy index
        refuses the second insert and the loser edits the winner's job.
        """
        return self._editor.upsert(name, data, singleton_key=singleton_key, match=match, **options)

    def delete_queued_jobs(self, name: str, *, batch_size: int = PURGE_BATCH_SIZE) -> int:
        """Delete the queue's jobs that have not started (created or waiting to retry); returns how many.

        In batches of ``batch_size``, each its own statement, so the rows it locks are held only
        while one batch runs (outside a transaction; inside one, until it ends).
        """
        return self._editor.delete_queued_jobs(name, batch_size=batch_size)

    def delete_stored_jobs(self, name: str, *, batch_size: int = PURGE_BATCH_SIZE) -> int:
        """Delete the queue's finished jobs (completed, cancelled, failed), in batches; returns how many."""
        return self._editor.delete_stored_jobs(name, batch_size=batch_size)

    def delete_all_jobs(self, name: str | None = None, *, batch_size: int = PURGE_BATCH_SIZE) -> int:
        """Delete every job of the queue, active ones too, or of every queue when ``name`` is None.

        In batches, like delete_queued_jobs(); returns how many jobs were deleted. The queues
        themselves, their settings and schedules stay.
        """
        return self._editor.delete_all_jobs(name, batch_size=batch_size)

    def get_blocked_keys(self, name: str, *, limit: int | None = None, after: str | None = None) -> list[str]:
        """The keys of a key_strict_fifo queue held up by a failed job, in key order: a page of at
        most ``limit`` (None: 1,000; at most 100,000) after the key ``after``.

        A failed job blocks its key's later jobs until it is retried or deleted. Raises
        WrongPolicy for a queue of another policy.
        """
        return self._editor.get_blocked_keys(name, limit=limit, after=after)

    # -- flows ---------------------------------------------------------------------------------

    def flow(self, jobs: Sequence[FlowJob | Mapping[str, Any]]) -> dict[str, str]:
        """Insert a graph of jobs in which each job runs only once the jobs it depends on completed
        (pg-boss's flow()); returns each job's id by its ref.

        ``jobs``: FlowJobs, or dicts of ``ref`` (the job's name in the flow), ``name`` (its queue),
        ``data``, ``options`` (send()'s) and ``depends_on`` (refs). A job with parents is inserted
        blocked; the monitor's flow pass unblocks it once they all completed. A parent failed for
        good, cancelled or deleted leaves its children blocked, as in pg-boss (docs/flows.md).
        All or nothing, in one transaction (a savepoint inside the caller's). Raises, before
        anything is written, EmptyFlow, DuplicateFlowRef, UnknownFlowRef, FlowCycle, QueueNotFound
        (naming the job) or InvalidOption; FlowJobRefused when a queue's policy drops a job.
        """
        return self._flows.flow(jobs)

    def get_dependencies(
        self,
        name: str,
        job_id: str | uuid.UUID,
        *,
        limit: int | None = None,
        after: DependencyRef | None = None,
    ) -> list[DependencyRef]:
        """The jobs job (``name``, ``job_id``) depends on (its parents), as DependencyRef(name, id),
        in that order: a page of at most ``limit`` (None: 1,000) after the DependencyRef ``after``."""
        return self._flows.get_dependencies(name, job_id, limit=limit, after=after)

    def get_dependents(
        self,
        name: str,
        job_id: str | uuid.UUID,
        *,
        limit: int | None = None,
        after: DependencyRef | None = None,
    ) -> list[DependencyRef]:
        """The jobs that depend on job (``name``, ``job_id``) (its children), paged as
        get_dependencies()."""
        return self._flows.get_dependents(name, job_id, limit=limit, after=after)

    def get_parent_outputs(self, name: str, job_id: str | uuid.UUID) -> dict[DependencyRef, Any]:
        """The outputs of the job's completed parents, by DependencyRef: what a flow job's handler
        reads its inputs from (``boss.get_parent_outputs(job.name, job.id)``). A parent deleted
        since (retention, delete_after_seconds) is left out."""
        return self._flows.get_parent_outputs(name, job_id)

    def get_flow_jobs(
        self, name: str, job_id: str | uuid.UUID, *, parents: bool, limit: int | None = None
    ) -> list[RelatedJob]:
        """The job's parents (``parents=True``) or children (at most ``limit``), with state and output."""
        return self._flows.related(name, job_id, parents=parents, limit=limit)

    def get_flow(self, name: str, job_id: str | uuid.UUID) -> FlowGraph:
        """The whole flow of job (``name``, ``job_id``): every job linked to it, and the edges."""
        return self._flows.graph(name, job_id)

    def resolve_flow(self, queues: Iterable[str] | None = None) -> int:
        """Run a flow pass now (pg-boss's resolveFlow()): unblock the children of every completed
        parent of ``queues`` (default all) whose other parents completed too. The monitor runs one
        every PGBOSS["FLOW_INTERVAL_SECONDS"]; this one skips that cadence. Returns how many
        completed parents were resolved. Each batch that resolved any sends signals.flow_resolved
        (sender Boss), as pg-boss's resolveFlow() emits its ``flow`` event."""
        return self._flows.resolve(None if queues is None else list(queues), sender=type(self), instance=self)

    # -- dead letters --------------------------------------------------------------------------

    def redrive(
        self,
        dlq_name: str,
        *,
        destination: str | None = None,
        source_name: str | None = None,
        data: Mapping[str, Any] | None = None,
        created_before: dt.datetime | dt.date | str | None = None,
        ids: str | uuid.UUID | Job | Sequence[str | uuid.UUID | Job] | None = None,
        limit: int = 1000,
    ) -> RedriveResult:
        """Move waiting jobs out of dead-letter queue ``dlq_name``, oldest first, at most ``limit``.

        Each goes back to the queue it came from, or to ``destination``, as a new job with a new
        id, that queue's current settings, and source_root_id naming its chain's first job.
        ``source_name``, ``data`` (JSON containment), ``created_before`` and ``ids`` narrow the
        jobs taken. A job the destination's policy refuses (short, stately, exclusive: its key is
        taken there) is failed in place with a redrive_conflict output, never lost; a job with no
        queue to go to stays. Jobs another redrive holds are skipped, so concurrent redrives never
        move a job twice. Returns a RedriveResult (``int(result)`` is the number moved).
        """
        return self._dead_letters.redrive(
            dlq_name,
            destination=destination,
            source_name=source_name,
            data=data,
            created_before=created_before,
            ids=ids,
            limit=limit,
        )

    def preview_redrive(
        self,
        dlq_name: str,
        *,
        destination: str | None = None,
        source_name: str | None = None,
        data: Mapping[str, Any] | None = None,
        created_before: dt.datetime | dt.date | str | None = None,
        ids: str | uuid.UUID | Job | Sequence[str | uuid.UUID | Job] | None = None,
        limit: int | None = None,
    ) -> RedrivePreview:
        """What redrive() with the same filter would find, without changing anything.

        Counts the matching jobs per destination queue, and those with nowhere to go
        (unroutable), reading at most ``limit`` of each kind (None: 1,000; at most 100,000). It
        cannot foresee conflicts: whether the destination's policy accepts a job is known only
        when it is re-created.
        """
        return self._dead_letters.preview_redrive(
            dlq_name,
            destination=destination,
            source_name=source_name,
            data=data,
            created_before=created_before,
            ids=ids,
            limit=limit,
        )

    def get_lineage(self, job_id: str | uuid.UUID | Job, *, name: str | None = None) -> list[Job]:
        """Every job of the dead-letter chain that job (``name``, ``job_id``) belongs to, oldest first.

        The chain is its first job (if it still exists), every dead-letter copy and every redriven
        job, across queues, however many round trips it took; ``job_id`` may be any of them,
        including a root that retention already deleted. A job never dead-lettered is a chain of
        one; an unknown id gives []. Jobs carry every column, as get_job_by_id() returns them.

        ``name`` is the queue holding ``job_id`` (a Job carries its own). It may be left out while
        only one queue holds that id; when two queues do (``send(id=...)`` allows it, the key is
        (name, id)), leaving it out raises InvalidJobReference, and with it the other queue's
        chain is left out.
        """
        return self._dead_letters.get_lineage(job_id, name=name)


boss = Boss()
"""The default Boss, bound to settings.PGBOSS["DATABASE"] and ["SCHEMA"] at each call."""
