"""Boss: django_pgboss's public API over pg-boss's schema.

Every statement runs on Django's connection for the configured alias, so a ``send()`` inside
``transaction.atomic()`` commits or rolls back with the caller's own writes. Boss validates its
arguments, picks the job table a queue lives in, and runs the statements of ``plans``; it holds no
SQL of its own.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import threading
from collections.abc import Iterable, Mapping, Sequence
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

from django.db import DatabaseError, IntegrityError, connections, transaction

from django_pgboss.api.deadletters import DeadLetterAPI
from django_pgboss.conf import pgboss_settings
from django_pgboss.constants import QueuePolicy
from django_pgboss.db.cursors import statement_cursor
from django_pgboss.db.identifiers import quote_job_table, quote_schema, schema_key
from django_pgboss.exceptions import (
    DeadLetterQueueNotFound,
    InvalidJobReference,
    InvalidOption,
    QueueInUse,
    QueueNotFound,
)
from django_pgboss.options import (
    to_json,
    to_pgboss_options,
    validate_queue_name,
    validate_queue_options,
)
from django_pgboss.payloads import (
    EncodedOutput,
    JobReference,
    attempt_references,
    group_limits,
    int_option,
    job_attempt,
    job_payload,
    output_value,
    payload_json,
    single_job_params,
)
from django_pgboss.plans import events as event_plans
from django_pgboss.plans import jobs as job_plans
from django_pgboss.plans import queues as queue_plans
from django_pgboss.plans import schedules as schedule_plans
from django_pgboss.plans import settle as settle_plans
from django_pgboss.plans import stats as stats_plans
from django_pgboss.records import Job, QueueInfo, StatsPoint, job_from_row

if TYPE_CHECKING:
    from django_pgboss.monitor.supervisor import PassReport


class _QueueRoute:
    """What the job API needs to know of a queue: where its jobs live and how it behaves."""

    __slots__ = ("notify", "policy", "table")

    def __init__(self, table: str, policy: str, notify: bool) -> None:
        self.table = quote_job_table(table)
        self.policy = policy
        self.notify = notify


class Boss(DeadLetterAPI):
    """The job API for one database alias and one pg-boss schema.

    ``Boss()`` uses settings.PGBOSS (``DATABASE`` and ``SCHEMA``); ``Boss(using=..., schema=...)``
    addresses another. Instances are cheap and thread-safe: each call takes a cursor on the calling
    thread's Django connection. The dead-letter methods (redrive, preview_redrive, get_lineage)
    come from django_pgboss.deadletters.
    """

    def __init__(self, using: str | None = None, schema: str | None = None) -> None:
        self._using = using
        self._schema = schema
        self._routes: dict[str, _QueueRoute] = {}
        self._routes_lock = threading.Lock()

    # -- configuration -------------------------------------------------------------------------

    @property
    def using(self) -> str:
        """The Django database alias every statement runs on."""
        return self._using or pgboss_settings.DATABASE

    @property
    def schema(self) -> str:
        """The schema name, as PostgreSQL stores it."""
        return self._schema or pgboss_settings.SCHEMA

    @property
    def _q(self) -> str:
        return quote_schema(self.schema)

    @property
    def quoted_schema(self) -> str:
        """The schema name as it is written in SQL (quoted only when it must be)."""
        return self._q

    def notify_channel(self) -> str:
        """The LISTEN/NOTIFY channel of this schema, the one pg-boss uses: 'pgboss_' and 24 hex
        digits of sha224 of the schema, so Node and Python workers wake each other."""
        digest = hashlib.sha224(schema_key(self.schema).encode("utf-8")).hexdigest()
        return f"pgboss_{digest[:24]}"

    def cursor(self) -> Any:
        """A cursor on this Boss's Django connection (for the monitor and worker internals)."""
        return self._cursor()

    def lock_key(self, name: str) -> str:
        """pg-boss's advisory-lock key for ``name``: '.pgboss.' + the schema as pg-boss spells it +
        the name, so a pg-boss (Node) instance on the same schema and this one exclude each other."""
        return f".pgboss.{schema_key(self.schema)}{name}"

    def _cursor(self) -> Any:
        """A cursor on Django's connection for this alias (see django_pgboss.connection)."""
        return statement_cursor(self.using)

    # -- queues --------------------------------------------------------------------------------

    def create_queue(self, name: str, **options: Any) -> None:
        """Create a queue; an existing queue of that name is left as it is.

        Options: policy ("standard", "short", "singleton", "stately", "exclusive",
        "key_strict_fifo"), partition (give the queue its own table), dead_letter (an existing
        queue that receives jobs failing for good), retry_limit, retry_delay, retry_backoff,
        retry_delay_max, expire_in_seconds, retention_seconds, delete_after_seconds,
        heartbeat_seconds, warning_queue_size and notify (wake workers by LISTEN/NOTIFY).
        """
        validate_queue_name(name)
        options.setdefault("policy", QueuePolicy.STANDARD.value)
        validate_queue_options(name, options, creating=True)
        payload = to_pgboss_options(options)
        with transaction.atomic(using=self.using), self._cursor() as cursor:
            if options.get("dead_letter") is not None:
                self._require_dead_letter(cursor, options["dead_letter"])
            cursor.execute(queue_plans.advisory_lock(), [self.lock_key("create-queue")])
            cursor.execute(queue_plans.create_queue(self._q), [name, to_json(payload, "queue options")])
        self._forget_route(name)

    def update_queue(self, name: str, **options: Any) -> None:
        """Change a queue's settings; policy and partition are fixed at creation.

        ``dead_letter=None``, ``retry_delay_max=None`` and ``heartbeat_seconds=None`` clear those
        settings. Raises QueueNotFound for an unknown queue.
        """
        validate_queue_name(name)
        validate_queue_options(name, options, creating=False)
        with transaction.atomic(using=self.using), self._cursor() as cursor:
            if options.get("dead_letter") is not None:
                self._require_dead_letter(cursor, options["dead_letter"])
            cursor.execute(
                queue_plans.update_queue(self._q), [to_json(to_pgboss_options(options), "options"), name]
            )
            if cursor.rowcount == 0:
                raise QueueNotFound(f"queue {name!r} does not exist")
        self._forget_route(name)

    def delete_queue(self, name: str) -> None:
        """Delete a queue with all its jobs (its own table, when partitioned), schedules and subscriptions.

        A queue that does not exist is left alone: nothing is raised, as in pg-boss.
        """
        validate_queue_name(name)
        try:
            if self.get_queue(name) is None:
                # A queue that does not exist is a no-op, as pg-boss's deleteQueue() makes it (its
                # SQL function alone fails on the missing queue's table name).
                return
            with transaction.atomic(using=self.using), self._cursor() as cursor:
                cursor.execute(queue_plans.dead_letter_users(self._q), [name])
                users = [row[0] for row in cursor.fetchall()]
                if users:
                    raise QueueInUse(
                        f"queue {name!r} is the dead_letter of {', '.join(map(repr, users))}; "
                        "change or clear their dead_letter first"
                    )
                cursor.execute(queue_plans.advisory_lock(), [self.lock_key("delete-queue")])
                cursor.execute(queue_plans.delete_queue(self._q), [name])
        except IntegrityError as exc:
            # Jobs of other queues still name it as their own dead_letter (a send option).
            raise QueueInUse(f"queue {name!r} is still the dead_letter of waiting jobs: {exc}") from exc
        finally:
            self._forget_route(name)

    def get_queue(self, name: str) -> QueueInfo | None:
        """The queue's settings, cached counts and throughput window, or None when it does not exist."""
        queues = self.get_queues([validate_queue_name(name)])
        return queues[0] if queues else None

    def get_queues(self, names: Iterable[str] | None = None) -> list[QueueInfo]:
        """Every queue (or those named), in name order."""
        with self._cursor() as cursor:
            if names is None:
                cursor.execute(queue_plans.get_queues(self._q, by_name=False))
            else:
                names = [validate_queue_name(n) for n in ([names] if isinstance(names, str) else names)]
                cursor.execute(queue_plans.get_queues(self._q, by_name=True), [names])
            return [QueueInfo(*row) for row in cursor.fetchall()]

    def _require_dead_letter(self, cursor: Any, dead_letter: str) -> None:
        cursor.execute(queue_plans.get_queue_routing(self._q), [dead_letter])
        if cursor.fetchone() is None:
            raise DeadLetterQueueNotFound(
                f"dead_letter queue {dead_letter!r} does not exist; create it first"
            )

    def _route(self, name: str) -> _QueueRoute:
        """Where a queue's jobs live, cached per Boss and dropped whenever this Boss changes the queue."""
        route = self._routes.get(name)
        if route is not None:
            return route
        with self._cursor() as cursor:
            cursor.execute(queue_plans.get_queue_routing(self._q), [validate_queue_name(name)])
            row = cursor.fetchone()
        if row is None:
            raise QueueNotFound(f"queue {name!r} does not exist; create it with create_queue() first")
        route = _QueueRoute(*row)
        with self._routes_lock:
            self._routes[name] = route
        return route

    def _forget_route(self, name: str) -> None:
        with self._routes_lock:
            self._routes.pop(name, None)

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
    ) -> list[Job]:
        """Claim up to ``batch_size`` waiting jobs of a queue, highest priority then oldest first.

        The jobs become active and count an attempt; settle each with complete() or fail() (pass
        the Job to fence the settle to this attempt). ``group_concurrency`` caps active jobs per
        group_id: an int, or ``{"default": n, "tiers": {"gold": m, ...}}`` keyed by group_tier.
        Returns [] when nothing is ready, or when a concurrent claim took the last free slot of a
        singleton or stately key.
        """
        validate_queue_name(name)
        int_option("batch_size", batch_size, minimum=1)
        for option, value in (
            ("include_metadata", include_metadata),
            ("ignore_start_after", ignore_start_after),
        ):
            if not isinstance(value, bool):
                raise InvalidOption(f"{option} must be True or False, not {value!r}")
        params: dict[str, Any] = {"name": name, "batch_size": batch_size}
        for option, value in (("min_priority", min_priority), ("max_priority", max_priority)):
            if value is not None:
                int_option(option, value, minimum=-(2**31))
                params[option] = value
        if min_priority is not None and max_priority is not None and min_priority > max_priority:
            raise InvalidOption(f"min_priority {min_priority} is above max_priority {max_priority}")
        tiers = None
        if group_concurrency is not None:
            limit, tiers = group_limits(group_concurrency)
            params["group_limit"] = limit
            if tiers:
                params["group_tiers"] = to_json(tiers, "group_concurrency tiers")
        route = self._route(name)
        sql = job_plans.fetch_jobs(
            self._q,
            route.table,
            policy=route.policy,
            include_metadata=include_metadata,
            ignore_start_after=ignore_start_after,
            min_priority=min_priority is not None,
            max_priority=max_priority is not None,
            group_concurrency=group_concurrency is not None,
            group_tiers=bool(tiers),
        )
        connection = connections[self.using]
        try:
            # Inside the caller's transaction, a savepoint, so that a lost race for a singleton
            # key undoes only this statement. In autocommit the statement is its own transaction
            # already, and wrapping it would cost two more round trips on the hot path.
            guard = transaction.atomic(using=self.using) if connection.in_atomic_block else nullcontext()
            with guard, self._cursor() as cursor:
                cursor.execute(sql, params)
                rows = cursor.fetchall()
        except IntegrityError:
            # Two fetchers picked different jobs of the same singleton/stately key at once; the
            # unique index let one through. The loser claims nothing this time, as in pg-boss.
            return []
        return [job_from_row(row) for row in rows]

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
        if not isinstance(include_queued, bool):
            raise InvalidOption(f"include_queued must be True or False, not {include_queued!r}")
        plan = functools.partial(settle_plans.complete_jobs, include_queued=include_queued)
        return self._settle(name, jobs, "complete", plan, output=output)

    def fail(self, name: str, jobs: JobReference, output: Any = None) -> int:
        """Fail jobs with ``output`` (an exception is stored as its name, message and traceback).

        A job with attempts left goes back to wait for a retry (after retry_delay, or an
        exponential backoff with jitter capped by retry_delay_max); one without fails for good and
        is copied into its dead-letter queue. Returns how many jobs were failed. Fenced like
        complete().
        """
        return self._settle(name, jobs, "fail", settle_plans.fail_jobs, output=output)

    def cancel(self, name: str, jobs: JobReference) -> int:
        """Cancel jobs that have not finished (fenced jobs: only their active attempt)."""
        return self._settle(name, jobs, "cancel", settle_plans.cancel_jobs)

    def delete_job(self, name: str, jobs: JobReference) -> int:
        """Delete jobs in any state (fenced jobs: only their active attempt)."""
        return self._settle(name, jobs, "delete_job", settle_plans.delete_jobs)

    def touch(self, name: str, jobs: JobReference) -> int:
        """Refresh the heartbeat of active jobs, so the monitor does not fail them as stalled."""
        return self._settle(name, jobs, "touch", settle_plans.touch_jobs)

    def resume(self, name: str, ids: str | Sequence[str]) -> int:
        """Put cancelled jobs back in the queue; returns how many were resumed."""
        return self._settle_unfenced(name, ids, "resume", settle_plans.resume_jobs)

    def retry(self, name: str, ids: str | Sequence[str]) -> int:
        """Give failed jobs one more attempt, right away; returns how many were retried."""
        return self._settle_unfenced(name, ids, "retry", settle_plans.retry_jobs)

    def _settle(self, name: str, jobs: JobReference, verb: str, plan: Any, **output: Any) -> int:
        validate_queue_name(name)
        ids, attempts = attempt_references(jobs, verb)
        params: list[Any] = []
        if output:
            params.append(to_json(output_value(output["output"]), "output"))
        params += [name, ids]
        if attempts is not None:
            params.append(attempts)
        table = self._route(name).table
        with self._cursor() as cursor:
            cursor.execute(plan(self._q, table, fenced=attempts is not None), params)
            return cursor.fetchone()[0]

    def _settle_unfenced(self, name: str, ids: str | Sequence[str], verb: str, plan: Any) -> int:
        validate_queue_name(name)
        # Jobs are accepted too; resume and retry act on finished jobs, so there is no attempt to fence.
        id_list, _ = attempt_references(ids, verb)
        table = self._route(name).table
        with self._cursor() as cursor:
            cursor.execute(plan(self._q, table), [name, id_list])
            return cursor.fetchone()[0]

    # -- reading -------------------------------------------------------------------------------

    def get_job_by_id(self, name: str, job_id: str) -> Job | None:
        """The job with every column, or None when the queue holds no job with that id."""
        validate_queue_name(name)
        (job_id,), _ = attempt_references(job_id, "get_job_by_id")
        with self._cursor() as cursor:
            cursor.execute(job_plans.get_job(self._q, self._route(name).table), [name, job_id])
            row = cursor.fetchone()
        return job_from_row(row) if row else None

    def find_jobs(
        self,
        name: str,
        *,
        id: str | None = None,
        key: str | None = None,
        data: Any = None,
        queued: bool = False,
        limit: int = 100,
    ) -> list[Job]:
        """Jobs of a queue, oldest first, filtered by id, singleton key, data (JSON containment:
        ``data={"customer": 7}`` matches jobs whose data holds that pair) and ``queued`` (waiting
        to run). At most ``limit`` jobs."""
        validate_queue_name(name)
        int_option("limit", limit, minimum=1)
        params: list[Any] = [name]
        if id is not None:
            (job_id,), _ = attempt_references(id, "find_jobs")
            params.append(job_id)
        if key is not None:
            if not isinstance(key, str):
                raise InvalidOption(f"key must be a string, not {key!r}")
            params.append(key)
        if data is not None:
            params.append(to_json(data, "data filter"))
        params.append(limit)
        sql = job_plans.find_jobs(
            self._q,
            self._route(name).table,
            by_id=id is not None,
            by_key=key is not None,
            by_data=data is not None,
            queued=bool(queued),
        )
        with self._cursor() as cursor:
            cursor.execute(sql, params)
            return [job_from_row(row) for row in cursor.fetchall()]

    # -- monitoring ----------------------------------------------------------------------------

    def supervise(
        self, queues: Iterable[str] | None = None, *, interval_seconds: float | None = None
    ) -> PassReport:
        """Run one monitor pass now (see django_pgboss.monitor): count the due queues (gauges,
        throughput, a queue_stats snapshot, the true-up), fail jobs past their expiry or heartbeat
        so they retry, and delete old jobs of queues whose retention is due. Any number of
        monitors may run it at once. A queue is counted and swept at most once per
        ``interval_seconds`` (default PGBOSS["MONITOR_INTERVAL_SECONDS"]), by whichever monitor
        claims it first."""
        from django_pgboss.monitor.supervisor import supervise

        return supervise(self, queues, interval_seconds=interval_seconds)

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
    ) -> list[StatsPoint]:
        """A queue's history from the monitor's snapshots, newest first.

        Raw snapshots by default; with ``bucket_seconds`` (a bucket width) or ``max_data_points``
        (a width derived from the history's extent), time buckets: gauges aggregated with
        ``aggregate`` ("max", "min" or "avg"), counters summed. ``start`` and ``end`` bound the
        range. Without PERSIST_QUEUE_STATS there is no history: the one point returned is the
        queue's last count, without counters.
        """
        validate_queue_name(name)
        int_option("limit", limit, minimum=1)
        if limit > 100_000:
            raise InvalidOption(f"limit must be at most 100000, not {limit}")
        for option, value in (("start", start), ("end", end)):
            if value is not None and not isinstance(value, dt.datetime):
                raise InvalidOption(f"{option} must be a datetime, not {value!r}")
        if aggregate not in stats_plans.GAUGE_AGGREGATES:
            raise InvalidOption(f"aggregate must be 'max', 'min' or 'avg', not {aggregate!r}")
        info = self.get_queue(name)
        if info is None:
            raise QueueNotFound(f"queue {name!r} does not exist")
        if not pgboss_settings.PERSIST_QUEUE_STATS:
            if info.monitor_on is None:
                return []
            gauges = (
                info.deferred_count,
                info.queued_count,
                info.ready_count,
                info.active_count,
                info.failed_count,
                info.total_count,
            )
            return [StatsPoint(*gauges, None, None, None, None, None, info.monitor_on)]
        params: dict[str, Any] = {"name": name, "start": start, "end": end, "limit": limit}
        if bucket_seconds is not None or max_data_points is not None:
            option = "bucket_seconds" if bucket_seconds is not None else "max_data_points"
            width = bucket_seconds if bucket_seconds is not None else max_data_points
            int_option(option, width, minimum=1)
            params["width"] = width
            sql = stats_plans.queue_stats_buckets(self._q, aggregate, auto=bucket_seconds is None)
        else:
            sql = stats_plans.queue_stats_history(self._q)
        with self._cursor() as cursor:
            cursor.execute(sql, params)
            return [StatsPoint(*row) for row in cursor.fetchall()]

    def complete_each(self, name: str, results: Sequence[tuple[Job | Mapping[str, Any], Any]]) -> list[str]:
        """Complete a batch of jobs, each with its own output, each fenced to its attempt.

        ``results`` is a list of (job, output) pairs; returns the ids completed (a job whose
        attempt is no longer active is left alone and missing from the list). An output may be
        an ``EncodedOutput``, JSON text its caller already encoded, which is stored as it is.
        """
        validate_queue_name(name)
        if not results:
            return []
        ids, records = [], []
        for job, output in results:
            job_id, retry_count = job_attempt(job, "complete_each")
            if retry_count is None:
                raise InvalidJobReference(
                    "complete_each() needs jobs or {id, retry_count} pairs, not bare ids"
                )
            encoded = output if isinstance(output, EncodedOutput) else to_json(output_value(output), "output")
            ids.append(job_id)
            # Spliced as text: the outputs are JSON already, and the id is a canonical uuid.
            records.append(f'{{"id":"{job_id}","retry_count":{retry_count},"output":{encoded or "null"}}}')
        with self._cursor() as cursor:
            cursor.execute(
                settle_plans.complete_jobs_with_outputs(self._q, self._route(name).table),
                ["[" + ",".join(records) + "]", name, ids],
            )
            return [str(row[0]) for row in cursor.fetchall()]

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

        ``cron`` has 5 fields, or 6 with seconds first; ``key`` tells several schedules of one queue
        apart (schedule() again with the same name and key replaces it); ``missed="once"`` sends
        one job for occurrences missed while no monitor ran. Other options are send()'s, used for
        each job. Runs on the monitor's timekeeper (manage.py pgboss_monitor); each occurrence is
        sent once however many monitors run.
        """
        from django_pgboss.api.schedules import schedule

        schedule(self, name, cron, data, tz=tz, key=key, missed=missed, **send_options)

    def unschedule(self, name: str, key: str = "") -> None:
        """Remove the schedule (name, key)."""
        validate_queue_name(name)
        with self._cursor() as cursor:
            cursor.execute(schedule_plans.delete_schedule(self._q), [name, key or ""])

    def get_schedules(self, name: str | None = None) -> list[Any]:
        """Every schedule, or the queue's, in name and key order."""
        from django_pgboss.api.schedules import get_schedules

        return get_schedules(self, name)

    def insert_slotted(self, name: str, jobs: list[dict[str, Any]]) -> int:
        """Insert jobs that name their throttle slot ("__singletonSlot"); for the cron pass only.

        Returns how many were inserted: a slot already taken drops its job.
        """
        route = self._route(validate_queue_name(name))
        with self._cursor() as cursor:
            cursor.execute(
                job_plans.insert_jobs(self._q, route.table, returning=False, slots=True),
                [to_json(jobs, "jobs"), name],
            )
            return cursor.rowcount

    # -- events --------------------------------------------------------------------------------

    def subscribe(self, event: str, name: str) -> None:
        """Subscribe queue ``name`` to ``event``: every publish(event) sends it a job."""
        _event_name(event)
        validate_queue_name(name)
        self._route(name)  # QueueNotFound rather than a foreign-key error
        with self._cursor() as cursor:
            cursor.execute(event_plans.subscribe(self._q), [event, name])

    def unsubscribe(self, event: str, name: str) -> None:
        """Stop sending ``event`` to queue ``name`` (nothing happens if it was not subscribed)."""
        _event_name(event)
        validate_queue_name(name)
        with self._cursor() as cursor:
            cursor.execute(event_plans.unsubscribe(self._q), [event, name])

    def publish(self, event: str, data: Any = None, **options: Any) -> dict[str, str | None]:
        """Send one job to every queue subscribed to ``event``, all in one transaction.

        Takes send()'s options. Returns {queue name: job id, or None where the queue's policy
        dropped the job}; {} when nothing is subscribed. If any send fails, none is kept.
        """
        _event_name(event)
        with transaction.atomic(using=self.using):
            with self._cursor() as cursor:
                cursor.execute(event_plans.subscribed_queues(self._q), [event])
                names = [row[0] for row in cursor.fetchall()]
            return {name: self.send(name, data, **options) for name in names}

    # -- sending -------------------------------------------------------------------------------

    def send(self, name: str, data: Any = None, **options: Any) -> str | None:
        """Send one job and return its id, or None when the queue's policy or a throttle slot dropped it.

        Options: id, priority, start_after (seconds, datetime or ISO string), singleton_key,
        singleton_seconds, singleton_next_slot, group_id, group_tier, dead_letter, retry_limit,
        retry_delay, retry_backoff, retry_delay_max, expire_in_seconds, retention_seconds,
        delete_after_seconds, heartbeat_seconds. An option not given takes the queue's setting.
        """
        validate_queue_name(name)
        job = job_payload(data, options)
        route = self._route(name)
        if route.policy == QueuePolicy.KEY_STRICT_FIFO and not job.get("singletonKey"):
            raise InvalidOption(f"queue {name!r} is key_strict_fifo: every job needs a singleton_key")
        if job.get("deadLetter") is not None:
            with self._cursor() as cursor:
                self._require_dead_letter(cursor, job["deadLetter"])
        job_id = self._insert(name, [job], returning=True)
        if job_id or not options.get("singleton_next_slot"):
            return job_id[0] if job_id else None
        # The current slot is taken: a debounced job goes into the next one, starting when it opens.
        with self._cursor() as cursor:
            cursor.execute(job_plans.debounce_delay(self._q), [job["singletonSeconds"]])
            delay = cursor.fetchone()[0]
        job = {**job, "startAfter": f"{delay} seconds", "singletonOffset": job["singletonSeconds"]}
        job_id = self._insert(name, [job], returning=True)
        return job_id[0] if job_id else None

    def send_after(self, name: str, data: Any, after: Any, **options: Any) -> str | None:
        """send() with start_after: seconds, a datetime or an ISO 8601 string."""
        return self.send(name, data, **{**options, "start_after": after})

    def send_throttled(
        self, name: str, data: Any, seconds: int, key: str | None = None, **options: Any
    ) -> str | None:
        """Send at most one job per ``seconds``-long slot (per key); extra sends return None."""
        return self.send(
            name,
            data,
            **{**options, "singleton_seconds": seconds, "singleton_next_slot": False, "singleton_key": key},
        )

    def send_debounced(
        self, name: str, data: Any, seconds: int, key: str | None = None, **options: Any
    ) -> str | None:
        """Like send_throttled(), but a send into a taken slot is queued once for the next slot."""
        return self.send(
            name,
            data,
            **{**options, "singleton_seconds": seconds, "singleton_next_slot": True, "singleton_key": key},
        )

    def insert(
        self, name: str, jobs: Sequence[Mapping[str, Any]], *, return_ids: bool = False
    ) -> list[str] | None:
        """Insert many jobs in one statement; each dict has "data" and any send() option.

        Returns the ids of the jobs inserted (policies may drop some) when return_ids is true.
        """
        validate_queue_name(name)
        if isinstance(jobs, Mapping | str | bytes) or not isinstance(jobs, Sequence):
            raise InvalidOption("insert() takes a list of job dicts")
        payload = []
        seen_ids: set[str] = set()
        for index, job in enumerate(jobs):
            if not isinstance(job, Mapping):
                raise InvalidOption(f"insert() job {index} must be a dict, not {type(job).__name__}")
            options = dict(job)
            data = options.pop("data", None)
            item = job_payload(data, options, where=f"job {index}")
            if item.get("id") is not None:
                if item["id"] in seen_ids:
                    raise InvalidOption(f"insert() job {index} repeats id {item['id']}")
                seen_ids.add(item["id"])
            payload.append(item)
        route = self._route(name)
        if route.policy == QueuePolicy.KEY_STRICT_FIFO and any(not j.get("singletonKey") for j in payload):
            raise InvalidOption(f"queue {name!r} is key_strict_fifo: every job needs a singleton_key")
        for dead_letter in {j["deadLetter"] for j in payload if j.get("deadLetter") is not None}:
            with self._cursor() as cursor:
                self._require_dead_letter(cursor, dead_letter)
        if not payload:
            return [] if return_ids else None
        ids = self._insert(name, payload, returning=return_ids)
        return ids if return_ids else None

    def _insert(self, name: str, payload: list[dict[str, Any]], *, returning: bool) -> list[str]:
        """Insert jobs into the queue's table; returns their ids when ``returning``.

        One job on a queue without notify goes through insert_job() (typed parameters, and no
        ON CONFLICT where no unique index can refuse the row); anything else through the batch
        statement, insert_jobs().

        The queue's table is cached, and another process may have deleted the queue, or deleted
        and created it again with or without a partition or with another policy, since. A
        missing table (42P01), a row that job_common's partition constraint refuses (23514), or,
        without ON CONFLICT, a policy index that refuses it (23505) means the cache is stale: it
        is dropped and, outside the caller's transaction, the insert is tried once more. An
        insert that wrote nothing is checked against the queue row, so a queue deleted under us
        raises QueueNotFound instead of passing for a job the policy dropped.
        """
        in_transaction = connections[self.using].in_atomic_block
        body = None
        for attempt in (1, 2):
            route = self._route(name)
            if len(payload) == 1 and not route.notify:
                job = payload[0]
                # Inside the caller's transaction a refused row must not abort it, so there the
                # statement always carries ON CONFLICT; a stale cache cannot be retried there.
                on_conflict = (
                    in_transaction
                    or attempt == 2
                    or route.policy != QueuePolicy.STANDARD
                    or job.get("id") is not None
                    or job.get("singletonSeconds") is not None
                )
                params: Any = single_job_params(name, job)
                sql = job_plans.insert_job(
                    self._q, route.table, on_conflict=on_conflict, options=params["options"] is not None
                )
                stale = STALE_TABLE_SQLSTATES if on_conflict else STALE_TABLE_SQLSTATES | {"23505"}
                fetch_ids = True
            else:
                body = body or "[" + ",".join(payload_json(job) for job in payload) + "]"
                params = [body, name]
                if route.notify:
                    params += [schema_key(self.schema), name]
                sql = job_plans.insert_jobs(self._q, route.table, returning=returning, notify=route.notify)
                stale = STALE_TABLE_SQLSTATES
                fetch_ids = returning or route.notify
            try:
                with self._cursor() as cursor:
                    cursor.execute(sql, params)
                    if fetch_ids:
                        ids = [str(row[0]) for row in cursor.fetchall()]
                        written = len(ids)
                    else:
                        ids, written = [], cursor.rowcount
            except DatabaseError as exc:
                if _sqlstate(exc) not in stale:
                    raise
                self._forget_route(name)
                if attempt == 2 or in_transaction:
                    # The caller's transaction is aborted and cannot be retried from here; say
                    # plainly when the reason is that the queue is gone.
                    if not self._queue_exists(name):
                        raise QueueNotFound(f"queue {name!r} was deleted") from exc
                    raise
                continue
            if written == 0 and not self._queue_exists(name):
                self._forget_route(name)
                raise QueueNotFound(f"queue {name!r} does not exist (it was deleted)")
            return ids if returning else []
        raise AssertionError("unreachable")  # the loop returns or raises

    def _queue_exists(self, name: str) -> bool:
        with self._cursor() as cursor:
            cursor.execute(queue_plans.get_queue_routing(self._q), [name])
            return cursor.fetchone() is not None


#: SQLSTATEs that mean a cached queue table is out of date: the table is gone (undefined_table), or
#: job_common refused a row whose queue now has a partition of its own (check_violation).
STALE_TABLE_SQLSTATES = frozenset({"42P01", "23514"})


def _sqlstate(exc: BaseException) -> str | None:
    """The SQLSTATE of a database error, through Django's wrapper."""
    return getattr(exc.__cause__, "sqlstate", None) or getattr(exc, "sqlstate", None)


def _event_name(event: object) -> str:
    if not isinstance(event, str) or not event:
        raise InvalidOption(f"event must be a non-empty string, not {event!r}")
    return event


#: The default Boss, bound to settings.PGBOSS["DATABASE"] and ["SCHEMA"] at each call.
boss = Boss()
