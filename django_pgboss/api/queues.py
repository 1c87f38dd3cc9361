"""Queues: create, change, delete and read them, and read their stats history.

:class:`QueueStore` holds the statements behind Boss's queue methods (Boss documents them); it
validates its arguments before any SQL and keeps the context's queue-route cache honest by
dropping a queue's route whenever it changes the queue.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterable
from typing import Any

from django.db import IntegrityError

from django_pgboss import arguments
from django_pgboss.arguments import queue_name as validate_queue_name
from django_pgboss.arguments import queue_options as validate_queue_options
from django_pgboss.conf import pgboss_settings
from django_pgboss.constants import QueuePolicy
from django_pgboss.db.context import DatabaseContext
from django_pgboss.exceptions import DeadLetterQueueNotFound, InvalidOption, QueueInUse, QueueNotFound
from django_pgboss.plans import queues as queue_plans
from django_pgboss.plans import stats as stats_plans
from django_pgboss.records import QueueInfo, StatsPoint
from django_pgboss.wire import to_json, to_wire

#: How old a cached queue count get_queue_stats() serves without a stats history: pg-boss's
#: budget, one hour (or the monitor's interval, when longer), and one minute with force=True.
STATS_CACHE_TTL_SECONDS = 60 * 60
FORCED_STATS_TTL_SECONDS = 60


def require_dead_letter(context: DatabaseContext, cursor: Any, dead_letter: str) -> None:
    """Raise DeadLetterQueueNotFound unless queue ``dead_letter`` exists (read on ``cursor``)."""
    cursor.execute(queue_plans.get_queue_routing(context.quoted_schema), {"name": dead_letter})
    if cursor.fetchone() is None:
        raise DeadLetterQueueNotFound(f"dead_letter queue {dead_letter!r} does not exist; create it first")


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
        with context.atomic(), context.cursor() as cursor:
            if options.get("dead_letter") is not None:
                require_dead_letter(context, cursor, options["dead_letter"])
            cursor.execute(queue_plans.advisory_lock(), {"lock_key": context.lock_key("create-queue")})
            cursor.execute(
                queue_plans.create_queue(context.quoted_schema),
                {"name": name, "options": to_json(payload, "queue options")},
            )
        context.forget_route(name)

    def update_queue(self, name: str, **options: Any) -> None:
        """See Boss.update_queue()."""
        validate_queue_name(name)
        validate_queue_options(name, options, creating=False)
        context = self.context
        with context.atomic(), context.cursor() as cursor:
            if options.get("dead_letter") is not None:
                require_dead_letter(context, cursor, options["dead_letter"])
            cursor.execute(
                queue_plans.update_queue(context.quoted_schema),
                {"options": to_json(to_wire(options), "options"), "name": name},
            )
            if cursor.rowcount == 0:
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
            with context.atomic(), context.cursor() as cursor:
                cursor.execute(queue_plans.dead_letter_users(context.quoted_schema), {"name": name})
                users = [row[0] for row in cursor.fetchall()]
                if users:
                    raise QueueInUse(
                        f"queue {name!r} is the dead_letter of {', '.join(map(repr, users))}; "
                        "change or clear their dead_letter first"
                    )
                cursor.execute(queue_plans.advisory_lock(), {"lock_key": context.lock_key("delete-queue")})
                cursor.execute(queue_plans.delete_queue(context.quoted_schema), {"name": name})
        except IntegrityError as exc:
            # Jobs of other queues still name it as their own dead_letter (a send option).
            raise QueueInUse(f"queue {name!r} is still the dead_letter of waiting jobs: {exc}") from exc
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
        with self.context.cursor() as cursor:
            cursor.execute(sql, params)
            return [QueueInfo(*row) for row in cursor.fetchall()]

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
    ) -> list[StatsPoint]:
        """See Boss.get_queue_stats()."""
        validate_queue_name(name)
        arguments.boolean("force", force)
        arguments.limit("limit", limit, maximum=100_000)
        for option, value in (("start", start), ("end", end)):
            if value is not None and not isinstance(value, dt.datetime):
                raise InvalidOption(f"{option} must be a datetime, not {value!r}")
        if aggregate not in stats_plans.GAUGE_AGGREGATES:
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
            sql = stats_plans.queue_stats_buckets(schema, aggregate, auto=bucket_seconds is None)
        else:
            sql = stats_plans.queue_stats_history(schema)
        with self.context.cursor() as cursor:
            cursor.execute(sql, params)
            return [StatsPoint(*row) for row in cursor.fetchall()]

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
        with context.cursor() as cursor:
            cursor.execute(stats_plans.queue_stats_cache(schema), {"name": name})
            row = cursor.fetchone()
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
        with context.atomic(), context.cursor() as cursor:
            cursor.execute(
                stats_plans.cache_queue_stats(schema, table, throughput=False, history=False),
                {"names": [name], "lock_key": lock_key, "reset_max": 0},
            )
            counted = cursor.fetchall()
            if counted:
                cursor.execute(stats_plans.queue_stats_cache(schema), {"name": name})
                *gauges, captured_on, _, _ = cursor.fetchone()
        return _gauges_point(gauges, captured_on)


def _gauges_point(gauges: list[int], captured_on: dt.datetime) -> StatsPoint:
    """The cached gauges (queue_stats_cache's first six columns) as a point no counter covers."""
    deferred, queued, ready, active, failed, total = gauges
    return StatsPoint(
        deferred, queued, ready, active, failed, total, None, None, None, None, None, captured_on
    )
