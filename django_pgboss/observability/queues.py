"""The queue readings a scrape reports: what the monitor cached in the queue table, and the age of
each queue's oldest ready job.

Plain data, no Prometheus: the collector in observability/metrics.py turns it into metric families.
A reading costs one statement on the queue table, plus, for the queues the monitor last counted
with jobs waiting, one index-only probe per job table (plans/metrics.py says how).
"""

from __future__ import annotations

from dataclasses import dataclass

from django_pgboss.db.context import DatabaseContext
from django_pgboss.db.identifiers import quote_job_table
from django_pgboss.plans import metrics as metric_plans
from django_pgboss.records import bins_from_column


@dataclass(frozen=True, slots=True)
class QueueReading:
    """One queue's gauges as the last monitor pass counted them, and its oldest ready job's age."""

    name: str
    dead_letter: str | None
    queued: int
    ready: int
    deferred: int
    active: int
    failed: int
    total: int
    window_created: int
    window_completed: int
    window_failed: int
    window_seconds: int | None
    #: Waiting jobs a flow parent holds back (not in ``ready``).
    blocked: int
    #: Completed and cancelled jobs kept; None before the first maintenance pass of schema 46.
    retained: int | None
    #: The last counted window's wait and run histograms (django_pgboss.latency), None before one.
    wait_bins: list[int] | None
    run_bins: list[int] | None
    #: Seconds since a monitor pass counted the queue; None when none has yet.
    counted_age_seconds: float | None
    #: Seconds since the oldest job ready to run was sent; None when no job is ready.
    oldest_ready_age_seconds: float | None


def read_queues(context: DatabaseContext | None = None, *, oldest: bool = True) -> list[QueueReading]:
    """Every queue's reading, by name. Without ``oldest`` the job tables are not read at all."""
    context = context or DatabaseContext()
    schema = context.quoted_schema
    rows = context.all(metric_plans.queue_gauges(schema))
    ages: dict[str, float | None] = {}
    if oldest:
        # Only queues the monitor saw jobs waiting in: an empty queue costs no probe. A queue
        # never counted is probed too, since its cached zeros say nothing.
        tables: dict[str, list[str]] = {}
        for name, _dl, table, queued, *_rest, counted_age in rows:
            if queued > 0 or counted_age is None:
                tables.setdefault(table, []).append(name)
        for table, names in tables.items():
            ages.update(
                context.all(metric_plans.oldest_ready(schema, quote_job_table(table)), {"names": names})
            )
    return [
        QueueReading(
            name=name,
            dead_letter=dead_letter,
            queued=queued,
            ready=ready,
            deferred=deferred,
            active=active,
            failed=failed,
            total=total,
            window_created=created,
            window_completed=completed,
            window_failed=failed_delta,
            window_seconds=window,
            blocked=blocked,
            retained=retained,
            wait_bins=bins_from_column(wait_bins),
            run_bins=bins_from_column(run_bins),
            counted_age_seconds=counted_age,
            oldest_ready_age_seconds=ages.get(name),
        )
        for (
            name,
            dead_letter,
            _table,
            queued,
            ready,
            deferred,
            active,
            failed,
            total,
            created,
            completed,
            failed_delta,
            window,
            blocked,
            retained,
            wait_bins,
            run_bins,
            counted_age,
        ) in rows
    ]


def read_deltas(context: DatabaseContext, names: list[str]) -> dict[str, tuple[int, int, int]]:
    """The throughput window (created, completed, failed) the last count wrote for each queue."""
    if not names:
        return {}
    rows = context.all(metric_plans.queue_deltas(context.quoted_schema), {"names": names})
    return {name: (created, completed, failed) for name, created, completed, failed in rows}
