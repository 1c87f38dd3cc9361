"""Queues: create, change, delete and read them, and read their stats history.

:class:`QueueStore` holds the statements behind Boss's queue methods (Boss documents them); it
validates its arguments before any SQL and keeps the context's queue-route cache honest by
dropping a queue's route whenever it changes the queue.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from django.db import DatabaseError, IntegrityError
from django.db.backends.base.base import BaseDatabaseWrapper

from django_pgboss import arguments, signals
from django_pgboss.arguments import queue_name as validate_queue_name
from django_pgboss.arguments import queue_options as validate_queue_options
from django_pgboss.conf import pgboss_settings
from django_pgboss.constants import QueuePolicy
from django_pgboss.db.context import DatabaseContext
from django_pgboss.db.split_stats import split_count
from django_pgboss.exceptions import DeadLetterQueueNotFound, InvalidOption, QueueInUse, QueueNotFound
from django_pgboss.latency import percentile
from django_pgboss.plans import history as history_plans
from django_pgboss.plans import queues as queue_plans
from django_pgboss.plans import stats as stats_plans
from django_pgboss.records import Percentile, QueueInfo, StatsPoint, bins_from_column
from django_pgboss.wire import to_json, to_wire

#: How old a cached queue count get_queue_stats() serves without a stats history: pg-boss's
#: budget, one hour (or the monitor's interval, when longer), and one minute with force=True.
STATS_CACHE_TTL_SECONDS = 60 * 60
FORCED_STATS_TTL_SECONDS = 60

logger = logging.getLogger("django_pgboss.queues")


def require_dead_letter(
    context: DatabaseContext, dead_letter: str, *, connection: BaseDatabaseWrapper | None = None
) -> None:
    """Raise DeadLetterQueueNotFound unless queue ``dead_letter`` exists (read fresh, on
    ``connection`` when the caller holds it: see DatabaseContext.connection())."""
    found = context.one_or_none(
        queue_plans.get_queue_routing(context.quoted_schema), {"name": dead_letter}, connection=connection
    )
    if found is None:
        raise DeadLetterQueueNotFound(f"dead_letter queue {dead_letter!r} does not exist; create it first")


def reduce_retained(context: DatabaseContext, name: str, *, retained: int, removed: int) -> None:
    """Take what a delete or a resume moved out of queue ``name``'s counts off them at once:
    ``retained`` off retained_count (the completed and cancelled jobs of it that went), ``removed``
    off total_count, rather than leave them to the next maintenance pass (pg-boss 12.38's
    reduceRetainedCount). Nothing when neither is above zero, so settling live jobs never touches
    the queue row.

    The change it follows has committed when it runs outside a transaction, so a failure then is
    logged and sent as signals.error_raised rather than raised: the next maintenance pass counts
    the queue again. Inside one, it is raised, as every statement's error is.
    """
    if retained <= 0 and removed <= 0:
        return
    try:
        context.execute(
            stats_plans.reduce_retained_count(context.quoted_schema),
            {"name": name, "retained": retained, "removed": removed},
        )
    except DatabaseError as exc:
        if context.in_atomic_block:
            raise
        logger.error("Queue %r: its retained count was not reduced: %s", name, exc)
        signals.send(
            signals.error_raised,
            QueueStore,
            error=exc,
            doing=f"reducing the retained count of queue {name!r}",
            instance=None,
        )


class QueueStore:
    """Boss's queue methods over one database context (see Boss for what each does)."""

    def __init__(self, context: DatabaseContext) -> None:
        self.context = context

    def create_queue(self, name: str, **options: Any) -> None:
        """See Boss.create_queue()."""
        validate_queue_name(name)
        options.setdefault("policy", QueuePolicy.STANDARD.value)
        validate_queue_options(name, options, creating=True)
        payload = to_wire(options)
        context = self.context
        with context.atomic():
            if options.get("dead_letter") is not None:
                require_dead_letter(context, options["dead_letter"])
            context.execute(queue_plans.advisory_lock(), {"lock_key": context.lock_key("create-queue")})
            context.execute(
                queue_plans.create_queue(context.quoted_schema),
                {"name": name, "options": to_json(payload, "queue options")},
            )
        context.forget_route(name)

    def update_queue(self, name: str, **options: Any) -> None:
        """See Boss.update_queue()."""
        validate_queue_name(name)
        validate_queue_options(name, options, creating=False)
        context = self.context
        with context.atomic():
            if options.get("dead_letter") is not None:
                require_dead_letter(context, options["dead_letter"])
            updated = context.rowcount(
                queue_plans.update_queue(context.quoted_schema),
                {"options": to_json(to_wire(options), "options"), "name": name},
            )
            if updated == 0:
                raise QueueNotFound(f"queue {name!r} does not exist")
        context.forget_route(name)

    def delete_queue(self, name: str) -> None:
        """See Boss.delete_queue()."""
        validate_queue_name(name)
        context = self.context
        try:
            if self.get_queue(name) is None:
                # A queue that does not exist is a no-op, as pg-boss's deleteQueue() makes it (its
                # SQL function alone fails on the missing queue's table name).
                return
            with context.atomic():
                users = [
                    row[0]
                    for row in context.all(
                        queue_plans.dead_letter_users(context.quoted_schema), {"name": name}
                    )
                ]
                if users:
                    raise QueueInUse(
                        f"queue {name!r} is the dead_letter of {', '.join(map(repr, users))}; "
                        "change or clear their dead_letter first"
                    )
                context.execute(queue_plans.advisory_lock(), {"lock_key": context.lock_key("delete-queue")})
                context.execute(queue_plans.delete_queue(context.quoted_schema), {"name": name})
        except IntegrityError as exc:
            constraint = getattr(getattr(exc.__cause__, "diag", None), "constraint_name", None)
            if constraint == "q_fkey":
                # A send committed into the queue while it was being deleted: the job's reference
                # to the queue row holds it, so its delete waited and then found the new job.
                raise QueueInUse(
                    f"queue {name!r} received jobs while it was being deleted; nothing was deleted"
                ) from exc
            # Jobs of other queues still name it as their own dead_letter (a send option).
            raise QueueInUse(
                f"queue {name!r} is still the dead_letter of jobs of other queues; nothing was deleted: {exc}"
            ) from exc
        finally:
            context.forget_route(name)

    def get_queue(self, name: str) -> QueueInfo | None:
        """See Boss.get_queue()."""
        queues = self.get_queues([validate_queue_name(name)])
        return queues[0] if queues else None

    def get_queues(
        self, names: Iterable[str] | None = None, *, limit: int | None = None, after: str | None = None
    ) -> list[QueueInfo]:
        """See Boss.get_queues()."""
        page = arguments.page_limit("get_queues()", limit)
        cursor_name = arguments.page_after("get_queues()", after)
        return self._read(names, page, cursor_name)

    def all_queues(self, names: Iterable[str] | None = None) -> list[QueueInfo]:
        """Every queue (or those named), in name order, however many: what the monitor reads."""
        return self._read(names, None, None)

    def _read(self, names: Iterable[str] | None, limit: int | None, after: str | None) -> list[QueueInfo]:
        schema = self.context.quoted_schema
        params: dict[str, Any] = {"limit": limit, "after": after}
        if names is not None:
            params["names"] = [validate_queue_name(n) for n in ([names] if isinstance(names, str) else names)]
        sql = queue_plans.get_queues(
            schema, by_name=names is not None, paged=limit is not None, after=after is not None
        )
        return [_queue_info(row) for row in self.context.all(sql, params)]

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
        """See Boss.get_queue_stats()."""
        validate_queue_name(name)
        asked = None if percentiles is None else arguments.percentiles(percentiles)
        points = self._stats_points(
            name, start, end, bucket_seconds, max_data_points, aggregate, limit, force
        )
        if asked is None:
            return points
        return [_with_percentiles(point, asked) for point in points]

    def _stats_points(
        self,
        name: str,
        start: dt.datetime | None,
        end: dt.datetime | None,
        bucket_seconds: int | None,
        max_data_points: int | None,
        aggregate: str,
        limit: int,
        force: bool,
    ) -> list[StatsPoint]:
        arguments.boolean("force", force)
        arguments.limit("limit", limit, maximum=100_000)
        for option, value in (("start", start), ("end", end)):
            if value is not None and not isinstance(value, dt.datetime):
                raise InvalidOption(f"{option} must be a datetime, not {value!r}")
        if aggregate not in history_plans.GAUGE_AGGREGATES:
            raise InvalidOption(f"aggregate must be 'max', 'min' or 'avg', not {aggregate!r}")
        width = None
        if bucket_seconds is not None or max_data_points is not None:
            option = "bucket_seconds" if bucket_seconds is not None else "max_data_points"
            width = arguments.integer(
                option, bucket_seconds if bucket_seconds is not None else max_data_points, minimum=1
            )
        if not pgboss_settings.PERSIST_QUEUE_STATS:
            return [self._cached_stats(name, force)]
        self.context.route(name)  # QueueNotFound, rather than an empty history
        params: dict[str, Any] = {"name": name, "start": start, "end": end, "limit": limit}
        schema = self.context.quoted_schema
        if width is not None:
            params["width"] = width
            sql = history_plans.queue_stats_buckets(schema, aggregate, auto=bucket_seconds is None)
        else:
            sql = history_plans.queue_stats_history(schema)
        return [_stats_point(row) for row in self.context.all(sql, params)]

    def _cached_stats(self, name: str, force: bool) -> StatsPoint:
        """The queue's cached count as one point, recounted first when older than pg-boss's budget.

        Without a stats history the monitor's last count on the queue row is all there is. It is
        served while younger than STATS_CACHE_TTL_SECONDS (or the monitor's interval, when longer),
        or FORCED_STATS_TTL_SECONDS with ``force`` (so back-to-back forced reads share one count);
        an older one, or none at all, is recounted and written back. The monitor's vacuum backoff
        outranks both, as in pg-boss: while it holds aggregates off, a cached count is served
        however old (its captured_on says how old), and only a queue never counted is counted.
        """
        context = self.context
        schema = context.quoted_schema
        row = context.one_or_none(history_plans.queue_stats_cache(schema), {"name": name})
        if row is None:
            raise QueueNotFound(f"queue {name!r} does not exist")
        *gauges, captured_on, age, backoff = row
        budget = (
            FORCED_STATS_TTL_SECONDS
            if force
            else max(STATS_CACHE_TTL_SECONDS, pgboss_settings.MONITOR_INTERVAL_SECONDS)
        )
        if captured_on is not None and (backoff or age <= budget):
            return _gauges_point(gauges, captured_on)
        # Another monitor counting this queue holds the stats try-lock; the count it writes is as
        # good as ours, so a loser serves the cache. A queue never counted has no cache to serve,
        # so its first count takes a key no one else holds: it always runs.
        lock_key = context.lock_key(
            "queue-stats" if captured_on is not None else f"queue-stats:{uuid.uuid4()}"
        )
        table = context.route(name).table
        with context.atomic():
            params = {"names": [name], "lock_key": lock_key, "reset_max": 0}
            if context.distributed:
                # Citus runs the count only split (db/split_stats.py).
                counted = split_count(context, table, params, throughput=False, history=False)
            else:
                counted = context.all(
                    stats_plans.cache_queue_stats(schema, table, throughput=False, history=False), params
                )
            if counted:
                *gauges, captured_on, _, _ = context.one(
                    history_plans.queue_stats_cache(schema), {"name": name}
                )
        return _gauges_point(gauges, captured_on)


def _gauges_point(gauges: list[int], captured_on: dt.datetime) -> StatsPoint:
    """The cached gauges (queue_stats_cache's first six columns) as a point no counter covers."""
    deferred, queued, ready, active, failed, total = gauges
    return StatsPoint(
        deferred,
        queued,
        ready,
        active,
        failed,
        total,
        None,
        None,
        None,
        None,
        None,
        None,
        None,
        None,
        captured_on,
    )


def _queue_info(row: Sequence[Any]) -> QueueInfo:
    """A get_queues() row (QUEUE_COLUMNS) as a QueueInfo, its histograms' empty slots as 0."""
    values = dict(zip(queue_plans.QUEUE_COLUMNS, row, strict=True))
    for column in ("wait_bins", "run_bins"):
        values[column] = bins_from_column(values[column])
    return QueueInfo(*values.values())


def _stats_point(row: Sequence[Any]) -> StatsPoint:
    """A history row (history.STATS_COLUMNS) as a StatsPoint, its histograms' empty slots as 0."""
    values = dict(zip(history_plans.STATS_COLUMNS, row, strict=True))
    for column in ("wait_bins", "run_bins"):
        values[column] = bins_from_column(values[column])
    return StatsPoint(*values.values())


def _with_percentiles(point: StatsPoint, asked: list[float]) -> StatsPoint:
    """``point`` with the percentiles asked for, read from its own histograms (None where it has
    none), as pg-boss's getQueueStats() reads them."""
    entries = [Percentile(p, percentile(point.wait_bins, p), percentile(point.run_bins, p)) for p in asked]
    return dataclasses.replace(point, percentiles=entries)
