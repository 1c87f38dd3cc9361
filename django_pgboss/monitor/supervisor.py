"""The monitor's pass over the queues (pg-boss 12.38's supervise).

One pass, for every job table and every chunk of up to 100 of its queues:

1. claim the queues whose count is due (monitor_claim_on, rows locked in name order, SKIP LOCKED,
   so monitors running side by side split the queues instead of counting them twice);
2. count them: the gauges (queued, ready, active, failed ...) and, with PERSIST_QUEUE_STATS, the
   throughput window; snapshot the result into queue_stats; true-up recent snapshots for queues
   whose recount shows late commits; warn about backlogs;
3. fail the claimed queues' jobs past their expiry or their heartbeat (also while the vacuum
   backoff holds the count off: those are narrow updates that pin nothing). Only claimed queues,
   and of those, each sweep only for the ones the count just found a job due in (a job past its
   expiry for the expiry sweep, past its heartbeat for the heartbeat sweep; every claimed queue
   when this pass did not count them): each sweep reads every row of the queues it names, since
   no index of schema 43 holds only active jobs, so running them for queues with nothing to fail
   made the sweeps two thirds of a pass's cost (bench/README.md, "Supervise");
4. claim the queues whose retention is due (maintain_on) and, one queue at a time, delete their
   old jobs, then the flow edges (job_dependency) whose child or parent job is gone, each a
   bounded batch at a time (monitor/retention.py); a queue whose maintenance fails hands back the
   claims of those not yet done.

Then the tail: the vacuum backoff when the pass's aggregates held their snapshots too long, and
retention of queue_stats partitions and warnings. Any number of monitors may run this at once.

One queue never fails the pass for the others: a chunk whose statements fail is run again one
queue at a time, each in a savepoint when the pass runs inside a transaction, so only the queue
that fails is left out (logged, and listed in the report's ``failed``). A queue deleted while the
pass ran (its partition dropped between reading the queue list and counting it) is skipped and
listed in ``vanished``. A chunk that failed after its claim committed is counted and swept again at
the next pass, when its queues are due again.
"""

from __future__ import annotations

import functools
import json
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from django.db import DatabaseError, InterfaceError, connections

from django_pgboss import signals
from django_pgboss.arguments import queue_name as validate_queue_name
from django_pgboss.conf import pgboss_settings
from django_pgboss.constants import queue_claims_skip_locked
from django_pgboss.db.context import DatabaseContext
from django_pgboss.db.identifiers import quote_identifier, quote_job_table
from django_pgboss.db.split_fail import copy_to_dead_letters
from django_pgboss.monitor.retention import maintain
from django_pgboss.monitor.slow_queries import timed_statements
from django_pgboss.observability.logs import queue_extra
from django_pgboss.plans import instances as instance_plans
from django_pgboss.plans import maintenance as maintenance_plans
from django_pgboss.plans import queues as queue_plans
from django_pgboss.plans import stats as stats_plans
from django_pgboss.records import PassReport
from django_pgboss.wire import to_json

logger = logging.getLogger("django_pgboss.monitor")

#: The outputs a sweep stores, the same as pg-boss's, so either side can read why a job failed.
EXPIRED_OUTPUT = {"value": {"message": "job timed out"}}
STALLED_OUTPUT = {"value": {"message": "job heartbeat timeout"}}
#: Queues claimed and counted per statement.
CHUNK_SIZE = 100
#: How many ids of the jobs a sweep failed for good its WARNING names, per queue (the count says
#: how many there were in all), as the worker's record names the first few of a batch.
LOGGED_IDS = 5
#: What each sweep's WARNING says the jobs it failed for good ran past.
_SWEPT_PAST = {"expired": "past their expiry", "stalled": "past their heartbeat"}

__all__ = ["CHUNK_SIZE", "EXPIRED_OUTPUT", "LOGGED_IDS", "STALLED_OUTPUT", "PassReport", "supervise", "warn"]


def supervise(
    boss: Any = None,
    queues: Iterable[str] | None = None,
    *,
    interval_seconds: float | None = None,
    sender: Any = None,
) -> PassReport:
    """Run one monitor pass over ``queues`` (default: every queue); see the module docstring.

    ``boss`` is a Boss or a DatabaseContext (default: settings.PGBOSS's database and schema). A
    queue is counted and swept at most once per ``interval_seconds`` (default
    PGBOSS["MONITOR_INTERVAL_SECONDS"]), whoever runs the passes. The pass's warnings are sent as
    ``signals.warning_raised`` from ``sender`` (the Monitor or Boss class that runs the pass).
    """
    context = DatabaseContext() if boss is None else DatabaseContext.of(boss)
    started = time.monotonic()
    report = PassReport()
    with timed_statements(context, report, sender, warn):
        _supervise(context, report, queues, interval_seconds, sender)
    report.seconds = time.monotonic() - started
    return report


def _supervise(
    context: DatabaseContext,
    report: PassReport,
    queues: Iterable[str] | None,
    interval_seconds: float | None,
    sender: Any,
) -> None:
    interval = interval_seconds if interval_seconds is not None else pgboss_settings.MONITOR_INTERVAL_SECONDS
    names = None if queues is None else [validate_queue_name(q) for q in queues]
    persist = pgboss_settings.PERSIST_QUEUE_STATS
    if persist:
        context.execute(maintenance_plans.ensure_queue_stats_partitions(context.quoted_schema))
    for table, table_queues in _queue_tables(context, names):
        for start in range(0, len(table_queues), CHUNK_SIZE):
            chunk = table_queues[start : start + CHUNK_SIZE]

            def chunk_pass(queues: list[str] = chunk, table: str = table) -> None:
                claimed, due = _count(context, table, queues, persist, interval, report, sender)
                # Each sweep only for the claimed queues the count just found a job due in: a
                # sweep reads every row of the queues it names (no index of schema 43 has
                # state = 'active' as its predicate), so with nothing due it is skipped. A job
                # that passes its expiry or heartbeat after the count is swept at the queue's
                # next pass, as a job that does so just after pg-boss's sweep is.
                expired, stalled = (claimed, claimed) if due is None else due
                _fail_silent(context, table, expired, stalled, report)
                maintain(context, table, queues, report)

            if _isolated(context, chunk_pass) is not None:
                _queue_by_queue(context, table, chunk, chunk_pass, report, sender)
    _apply_backoff(context, report, sender)
    _retention(context, persist)
    _maintain_instances(context, sender)


def _isolated(context: DatabaseContext, step: Callable[[], None]) -> DatabaseError | None:
    """Run ``step``; return the database error it raised instead of raising it.

    Inside a transaction the step runs in a savepoint, so its error leaves the transaction usable;
    outside one each statement commits on its own, as it always did. An error that leaves the
    connection unusable (the server went away) is raised: no other queue would fare better.
    """
    try:
        if context.in_atomic_block:
            with context.atomic():
                step()
        else:
            step()
    except InterfaceError:
        raise
    except DatabaseError as exc:
        connection = connections[context.using]
        if connection.connection is None or not connection.is_usable():
            raise
        return exc
    return None


def _queue_by_queue(
    context: DatabaseContext,
    table: str,
    chunk: list[str],
    chunk_pass: Callable[..., None],
    report: PassReport,
    sender: Any = None,
) -> None:
    """Run a failed chunk's pass again for each of its queues still in ``table``, alone."""
    tables = {name: current for current, queues in _queue_tables(context, chunk) for name in queues}
    for name in chunk:
        if tables.get(name) != table:
            # Deleted (or re-created with another table) since the pass read the queue list.
            logger.info(
                "Monitor pass: queue %r was deleted during the pass; skipped", name, extra=queue_extra(name)
            )
            report.vanished.append(name)
            continue
        error = _isolated(context, functools.partial(chunk_pass, [name]))
        if error is not None:
            logger.error(
                "Monitor pass: queue %r skipped, its statements failed: %s",
                name,
                error,
                extra=queue_extra(name),
            )
            report.failed.append((name, str(error)))
            signals.send(
                signals.error_raised,
                sender,
                error=error,
                doing=f"the monitor pass of queue {name!r}",
                instance=None,
            )


def _queue_tables(context: DatabaseContext, names: list[str] | None) -> list[tuple[str, list[str]]]:
    if names is None:
        rows = context.all(maintenance_plans.queue_tables(context.quoted_schema, by_name=False))
    else:
        rows = context.all(
            maintenance_plans.queue_tables(context.quoted_schema, by_name=True), {"names": names}
        )
    return [(quote_job_table(table), list(queues)) for table, queues in rows]


def _count(
    context: DatabaseContext,
    table: str,
    chunk: list[str],
    persist: bool,
    interval: float,
    report: PassReport,
    sender: Any,
) -> tuple[list[str], tuple[list[str], list[str]] | None]:
    """Claim the due queues of a chunk and count them.

    Returns the claimed names, and those of them the count found a job past its expiry in and
    those it found one past its heartbeat in (a pair of lists); None instead of the pair when
    they were not counted here (the vacuum backoff held the aggregate off, or another monitor
    held the stats lock), so the caller cannot know and sweeps them all.
    """
    schema = context.quoted_schema
    claimed = context.all(
        stats_plans.claim_due_queues(
            schema,
            "monitor_claim_on",
            fallback="monitor_on",
            skip_locked=queue_claims_skip_locked(pgboss_settings.BACKEND),
        ),
        {"names": chunk, "seconds": interval},
    )
    queues = [row[0] for row in claimed]
    if not claimed or not claimed[0][1]:
        # Nothing due, or the vacuum backoff holds the aggregate off (the sweeps still run).
        return queues, None
    params = {
        "names": queues,
        "lock_key": context.lock_key("queue-stats"),
        "reset_max": stats_plans.reset_max_seconds(interval),
    }
    # Only in a transaction of the pass's own: SET LOCAL lasts until the outermost transaction
    # ends, so inside a caller's it would outlive the count.
    own_transaction = not context.in_atomic_block
    with context.atomic():
        if own_transaction:
            context.execute(stats_plans.jit_off())
        rows = context.all(stats_plans.cache_queue_stats(schema, table, throughput=persist), params)
        if rows and persist:
            # The snapshot copies the queue rows the count just wrote, in the count's transaction:
            # its row locks and its stats try-lock keep every other monitor from claiming and
            # counting these queues until the copy is taken. Taken in a transaction of its own, a
            # second monitor's count could commit in between (a claim interval of 0, or a count
            # slower than the interval), and both snapshots then held that count's window: the
            # first window's jobs were in no snapshot at all, and the true-up could not find them,
            # since the duplicated window made the snapshots' sum look complete.
            context.execute(queue_plans.advisory_lock(), {"lock_key": context.lock_key("queue-stats-insert")})
            context.execute(stats_plans.insert_queue_stats(schema), {"names": [row[0] for row in rows]})
    if not rows:
        return queues, None  # another monitor held the stats lock and is counting these queues
    report.counted += [row[0] for row in rows]
    report.stats_seconds += max(row[4] for row in rows)
    if persist:
        late = [row[0] for row in rows if row[3]]
        if late:
            with context.atomic():
                trued = context.one_or_none(
                    stats_plans.true_up_queue_stats(schema, table),
                    {"names": late, "lock_key": context.lock_key("queue-stats")},
                )
            if trued is not None:
                report.trued_up += trued[0]
                report.stats_seconds += trued[1]
    for name, queued, threshold, *_ in rows:
        limit = threshold or pgboss_settings.WARNING_QUEUE_SIZE
        if queued > limit:
            warn(
                context,
                report,
                "queue_backlog",
                f'Warning: large queue backlog: queue "{name}" has {queued} jobs in the created or retry '
                f"state, over its warning threshold of {limit}. Your queue should be reviewed",
                {"name": name, "queuedCount": queued, "warningQueueSize": threshold},
                sender=sender,
            )
    return queues, ([row[0] for row in rows if row[5]], [row[0] for row in rows if row[6]])


def _fail_silent(
    context: DatabaseContext, table: str, expired: list[str], stalled: list[str], report: PassReport
) -> None:
    """Run the expiry sweep over the ``expired`` queues and the heartbeat sweep over ``stalled``."""
    schema = context.quoted_schema
    sweeps = (
        ("expired", "failJobsByTimeout", maintenance_plans.fail_expired_jobs, EXPIRED_OUTPUT, expired),
        ("stalled", "failJobsByHeartbeat", maintenance_plans.fail_stalled_jobs, STALLED_OUTPUT, stalled),
    )
    for kind, lock_name, plan, output, queues in sweeps:
        if not queues:
            continue
        split = context.distributed
        with context.atomic():
            context.execute(
                queue_plans.advisory_lock(), {"lock_key": context.lock_key(f"{table}{lock_name}")}
            )
            row = context.one(
                plan(schema, table, split=split),
                {"output": to_json(output, "output"), "names": queues, "tally_ids": LOGGED_IDS},
            )
            if split:
                # The citus-distributed backend's split fail: the copies, one statement per
                # dead-letter queue, in the same transaction (plans.settle.fail_statement).
                copy_to_dead_letters(context, row[2])
            setattr(report, kind, getattr(report, kind) + row[0])
        # Logged once the sweep's transaction (a savepoint inside a caller's) closed: a sweep that
        # raised failed nothing.
        _log_failed_for_good(kind, row[-1])


def _log_failed_for_good(kind: str, tally: Any) -> None:
    """One WARNING per queue in which a sweep (``kind``: expired or stalled) failed jobs for good,
    with the count and the first ids, as the worker logs a job it fails for good: operators learn
    of a job whose retries ran out whoever failed it. ``tally`` is the sweep's last column
    (plans.settle.fail_statement's ``tally``)."""
    if isinstance(tally, str):
        tally = json.loads(tally)
    for queue, count, dead_lettered, ids in tally or []:
        shown = ", ".join(str(job_id) for job_id in ids) + (" ..." if count > len(ids) else "")
        went = ""
        if dead_lettered:
            went = (
                f"; {dead_lettered} went to their dead letter queue"
                if count > 1
                else "; it went to its dead letter queue"
            )
        logger.warning(
            "%d job(s) of %s failed for good %s, no retries left: %s%s",
            count,
            queue,
            _SWEPT_PAST[kind],
            shown,
            went,
            extra={
                **queue_extra(queue),
                "job_ids": [str(job_id) for job_id in ids],
                "failed": count,
                "dead_lettered": dead_lettered,
                "reason": kind,
            },
        )


def _apply_backoff(context: DatabaseContext, report: PassReport, sender: Any = None) -> None:
    if not report.stats_seconds or not pgboss_settings.MONITOR_VACUUM:
        return
    row = context.one_or_none(
        maintenance_plans.set_monitor_backoff(context.quoted_schema), {"elapsed": report.stats_seconds}
    )
    if row is None:
        return
    naptime, remaining, until = row
    report.backoff_seconds = remaining
    warn(
        context,
        report,
        "monitor_backoff",
        "Warning: queue monitoring spent long enough scanning the job table to risk holding back autovacuum, "
        f"so the next stats refresh is deferred: {report.stats_seconds:.1f}s of aggregate against an "
        f"autovacuum_naptime of {naptime:g}s. Shrink the job table (retention, delete_after_seconds) or "
        "partition its busiest queues.",
        {
            "elapsedSeconds": report.stats_seconds,
            "naptimeSeconds": naptime,
            "backoffSeconds": remaining,
            "backoffUntil": until.isoformat(),
        },
        sender=sender,
    )


def _retention(context: DatabaseContext, persist: bool) -> None:
    schema = context.quoted_schema
    if persist:
        partitions = context.all(
            maintenance_plans.drop_old_queue_stats_partitions(schema),
            {"days": pgboss_settings.QUEUE_STATS_RETENTION_DAYS},
        )
        for (partition,) in partitions:
            context.execute(maintenance_plans.drop_table(schema, quote_identifier(partition)))
    if pgboss_settings.PERSIST_WARNINGS:
        context.execute(
            maintenance_plans.delete_old_warnings(schema), {"days": pgboss_settings.WARNING_RETENTION_DAYS}
        )


def _maintain_instances(context: DatabaseContext, sender: Any) -> None:
    """Prune the instance registry: rows quiet past the retention, then dead rows past the newest
    INSTANCE_DEAD_KEPT, as pg-boss's maintenance does whether or not its instance registers (the
    registry is the database's). Best effort: a role granted privileges table by table may have
    none on the instance table, and that must not fail the pass."""

    def prune() -> None:
        context.execute(instance_plans.delete_old_instances(context.quoted_schema))
        context.execute(instance_plans.trim_dead_instances(context.quoted_schema))

    error = _isolated(context, prune)
    if error is not None:
        logger.warning("pruning the instance registry failed (%s)", error)
        signals.send(
            signals.error_raised, sender, error=error, doing="pruning the instance registry", instance=None
        )


def warn(
    source: Any, report: Any, kind: str, message: str, data: dict[str, Any], *, sender: Any = None
) -> None:
    """Log a warning, with PERSIST_WARNINGS keep it in the warning table of ``source`` (a
    DatabaseContext or a Boss), then send it as ``signals.warning_raised`` from ``sender`` (the class
    that raised it); ``report`` (a PassReport or CronReport) lists its kind.

    pg-boss emits the warning before it stores it; the signal comes after, so a receiver that reads
    the warning table finds the row.
    """
    context = DatabaseContext.of(source)
    name = data.get("name")
    logger.warning(
        message, extra={"pgboss_warning": kind, **(queue_extra(name) if isinstance(name, str) else {})}
    )
    report.warnings.append(kind)
    if pgboss_settings.PERSIST_WARNINGS:
        context.execute(
            maintenance_plans.insert_warning(context.quoted_schema),
            {"type": kind, "message": message, "data": json.dumps(data, default=str)},
        )
    signals.send(
        signals.warning_raised,
        sender,
        type=kind,
        message=message,
        data=data,
        using=context.using,
        schema=context.schema,
    )
