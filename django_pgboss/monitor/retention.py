"""The monitor pass's maintenance of a chunk of queues (pg-boss 12.38's maintain): claim the queues
whose retention is due, then, one queue at a time, walk its jobs deleting those past their retention
a bounded batch at a time (plans/retention.py says why a walk), set its retained count, and walk its
flow edges removing those whose job is gone.

A pass that fails part-way (a batch's statement fails, the connection drops) hands back the claim of
every queue it did not finish, as pg-boss's does: without that, those queues would wait a whole
MAINTENANCE_INTERVAL_SECONDS (a day by default) for their next retention, however soon the cause
went away. The supervisor runs a failed chunk again one queue at a time, so the queues behind the
one that failed are maintained in the same pass. A walk cut short has not counted what its queue
keeps, so it only takes the jobs it deleted off the queue's counts, as a delete_job() does; the
next walk that covers the whole queue sets them.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import DatabaseError

from django_pgboss.conf import pgboss_settings
from django_pgboss.constants import queue_claims_skip_locked
from django_pgboss.db.context import DatabaseContext
from django_pgboss.observability.logs import queue_extra
from django_pgboss.plans import queues as queue_plans
from django_pgboss.plans import retention as plans
from django_pgboss.plans import stats as stats_plans
from django_pgboss.records import PassReport

logger = logging.getLogger("django_pgboss.monitor")


@dataclass
class WalkTally:
    """What the committed batches of one retention walk counted (kept when a batch fails)."""

    deleted: int = 0
    deleted_retained: int = 0
    retained: int = 0


def maintain(context: DatabaseContext, table: str, chunk: list[str], report: PassReport) -> None:
    """Claim the queues of ``chunk`` (in job table ``table``, quoted) whose retention is due, and
    maintain each; hand back the claims of those not finished when a queue's maintenance fails."""
    claimed = context.all(
        stats_plans.claim_due_queues(
            context.quoted_schema,
            "maintain_on",
            skip_locked=queue_claims_skip_locked(pgboss_settings.BACKEND),
        ),
        {"names": chunk, "seconds": pgboss_settings.MAINTENANCE_INTERVAL_SECONDS},
    )
    if not claimed:
        return
    due = [row[0] for row in claimed]
    # One statement stamps every queue it claims with the same moment.
    claimed_on = claimed[0][2]
    finished = 0
    try:
        for name in due:
            maintain_queue(context, table, name, report)
            finished += 1
    finally:
        if finished < len(due):
            _release(context, due[finished:], claimed_on)


def maintain_queue(context: DatabaseContext, table: str, name: str, report: PassReport) -> None:
    """The retention walk and the flow-edge clean-up of one queue."""
    schema = context.quoted_schema
    (retained_before,) = context.one(plans.retention_watermark(schema))
    tally = WalkTally()
    done = False

    def deletion(after: str | None) -> str | None:
        context.execute(queue_plans.advisory_lock(), {"lock_key": context.lock_key(f"{table}deletion")})
        cursor_value, deleted, deleted_retained, retained = context.one(
            plans.deletion_batch(schema, table, after=after is not None),
            _batch_params(name, after, plans.DELETION_BATCH_SIZE, retained_before=retained_before),
        )
        tally.deleted += deleted
        tally.deleted_retained += deleted_retained
        tally.retained += retained
        report.deleted += deleted
        return cursor_value

    try:
        _walk(context, deletion)
        done = True
    finally:
        if not done and tally.deleted:
            _reduce_counts(context, name, tally)
    counted = {"name": name, "retained": tally.retained, "retained_before": retained_before}
    with context.atomic():
        (recent,) = context.one(plans.retained_since(schema, table), counted)
        context.execute(plans.set_retained_count(schema), {**counted, "recent": recent})

    # Then the flow edges whose child or parent is gone (deleted just now, or by delete_job() or a
    # purge since), as pg-boss's maintenance follows its deletion with cleanupDependencies.
    for side in plans.EDGE_SIDES:

        def cleanup(after: str | None, side: str = side) -> str | None:
            context.execute(
                queue_plans.advisory_lock(), {"lock_key": context.lock_key(f"{table}cleanupDependencies")}
            )
            if context.distributed:
                cursor_value, deleted = _split_cleanup(context, table, name, side, after)
            else:
                cursor_value, deleted = context.one(
                    plans.dependency_cleanup_batch(schema, table, side, after=after is not None),
                    _batch_params(name, after, plans.DEPENDENCY_CLEANUP_BATCH_SIZE),
                )
            report.dependencies_deleted += deleted
            return cursor_value

        _walk(context, cleanup)
    report.maintained.append(name)


def _split_cleanup(
    context: DatabaseContext, table: str, name: str, side: str, after: str | None
) -> tuple[str | None, int]:
    """One batch of the flow-edge clean-up on the citus-distributed backend (plans.retention's
    split statements say why), in the caller's transaction: the walk's cursor and how many edges
    it deleted, as dependency_cleanup_batch() returns them."""
    schema = context.quoted_schema
    params: dict[str, Any] = {"name": name, "batch_size": plans.DEPENDENCY_CLEANUP_BATCH_SIZE}
    if after is not None:
        params["after"] = after
    ids = [
        row[0] for row in context.all(plans.dependency_edges(schema, side, after=after is not None), params)
    ]
    if not ids:
        return None, 0
    # A full batch ends at its last id; the one statement's edge is the same row (OFFSET size - 1).
    cursor_value = ids[-1] if len(ids) == plans.DEPENDENCY_CLEANUP_BATCH_SIZE else None
    present = {
        str(row[0]) for row in context.all(plans.present_jobs(schema, table), {"name": name, "ids": ids})
    }
    gone = sorted({str(i) for i in ids} - present)
    if not gone:
        return cursor_value, 0
    deleted = context.all(plans.delete_dependency_edges(schema, side), {"name": name, "ids": gone})
    return cursor_value, len(deleted)


def _batch_params(name: str, after: str | None, batch_size: int, **more: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "edge_offset": batch_size - 1, **more}
    if after is not None:
        params["after"] = after
    return params


def _walk(context: DatabaseContext, batch: Callable[[str | None], Any]) -> None:
    """Run ``batch`` (after) each in its own transaction (a savepoint inside the caller's),
    carrying each batch's cursor into the next until one comes back without one."""
    after: str | None = None
    while True:
        with context.atomic():
            edge = batch(after)
        if edge is None:
            return
        after = str(edge)


def _reduce_counts(context: DatabaseContext, name: str, tally: WalkTally) -> None:
    # A failure here is logged rather than raised, so that it does not hide the batch's own error;
    # the next walk that covers the whole queue sets the counts.
    try:
        context.execute(
            stats_plans.reduce_retained_count(context.quoted_schema),
            {"name": name, "retained": tally.deleted_retained, "removed": tally.deleted},
        )
    except DatabaseError as exc:
        logger.error(
            "Monitor pass: could not take the jobs deleted from queue %r off its counts: %s",
            name,
            exc,
            extra=queue_extra(name),
        )


def _release(context: DatabaseContext, names: list[str], claimed_on: dt.datetime) -> None:
    try:
        context.execute(
            plans.release_maintenance_claim(context.quoted_schema), {"names": names, "claimed_on": claimed_on}
        )
    except DatabaseError as exc:
        logger.error(
            "Monitor pass: could not hand back the maintenance claim of %s: %s",
            ", ".join(repr(n) for n in names),
            exc,
        )
