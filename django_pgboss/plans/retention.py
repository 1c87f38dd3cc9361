"""SQL for the monitor's retention sweep (pg-boss 12.38's deletion walk): each queue's old jobs
deleted a bounded batch of keys at a time, the queue's retained count totalled across the batches,
the flow edges left without their job removed the same way, and the maintenance claim handed back
when a pass could not finish.

Why a walk. Nothing indexes the retention predicate or a job's state, so a single DELETE reads every
row of the queue in one transaction: on a large queue it holds every deleted row's lock and pins the
xmin horizon (so autovacuum removes nothing behind it) for as long as it runs, and a LIMIT on the
matching rows would rescan from the start of the queue at each batch, past the dead tuples of the
batches before it. A walk over the (name, id) primary key covers each row once, as the single
DELETE does, but no transaction covers more than a batch of keys: each batch reads its upper key
(the edge) from the index, deletes what the predicate matches up to it, and hands the edge back as
the next batch's cursor, or NULL once fewer keys than a batch are left and the queue is done. A job
inserted into a batch's range after its edge was read is covered too, and deleted only if the
predicate matches it. One queue per walk: an ORDER BY id across several names cannot be served in
index order before PostgreSQL 17, so it would sort every candidate row at each batch.
"""

from __future__ import annotations

from django_pgboss.plans.fragments import RETAINED_STATES, counted_retained, plus_seconds
from django_pgboss.plans.stats import CACHED_LIVE_COUNT, DELTA_LAG

#: How many keys one batch of the retention walk covers (pg-boss's DELETION_BATCH_SIZE).
DELETION_BATCH_SIZE = 10_000
#: How many edges one batch of the dependency clean-up covers (DEPENDENCY_CLEANUP_BATCH_SIZE).
DEPENDENCY_CLEANUP_BATCH_SIZE = 10_000
#: The last key a walk can reach: the edge of a batch that found fewer keys than its size.
MAX_UUID = "ffffffff-ffff-ffff-ffff-ffffffffffff"
#: The sides of a flow edge the clean-up walks, each by its own queue's name and job id.
EDGE_SIDES = ("child", "parent")

#: A job past its retention: finished and past delete_after_seconds (0 keeps it), or still waiting
#: past keep_until (start_after + retention_seconds). The deadline is fragments.plus_seconds(),
#: which Citus runs in the walk's DELETE on the distributed job table.
EXPIRED = f"""(
          (deletion_seconds > 0 AND {plus_seconds("completed_on", "deletion_seconds")} < {{schema}}.job_now())
          OR (state < 'active' AND keep_until < {{schema}}.job_now())
        )"""


def retention_watermark(schema: str) -> str:
    """The moment a walk counts the kept completed and cancelled jobs up to: DELTA_LAG before it
    starts, so a completion committed late is still ahead of it and the next monitor pass counts it
    (see plans.stats._retained_assignments()). One row, one value."""
    return f"SELECT {schema}.job_now() - {DELTA_LAG}"


def _walked(schema: str, table: str, key: str, where: str, *, after: bool) -> tuple[str, str]:
    """The edge CTE of a walk over ``key`` among the rows ``where`` selects, and the range a batch
    covers. Parameters: edge_offset (the batch size less one), after (with ``after``)."""
    cursor = f" AND {key} > %(after)s::uuid" if after else ""
    edge = f"""edge AS (
      SELECT {key} AS id
      FROM {schema}.{table}
      WHERE {where}{cursor}
      ORDER BY {key}
      OFFSET %(edge_offset)s
      LIMIT 1
    )"""
    covered = f"{where}{cursor} AND {key} <= COALESCE((SELECT id FROM edge), '{MAX_UUID}'::uuid)"
    return edge, covered


def deletion_batch(schema: str, table: str, *, after: bool) -> str:
    """One batch of the retention walk over one queue: delete its jobs past their retention among
    the next batch of keys (after the cursor, with ``after``). Parameters: name, edge_offset,
    after, retained_before (the walk's watermark).

    Returns one row: walk_cursor (the batch's last key, NULL when the queue is done), deleted,
    deleted_retained (how many of the deleted jobs the queue's retained_count held, which a walk cut
    short takes off it) and retained (the completed and cancelled jobs of the batch's range that
    finished by the watermark and stay, read from the snapshot the delete started with, so the jobs
    it removed are taken off; the walk totals them for set_retained_count()).
    """
    edge, covered = _walked(schema, table, "id", "name = %(name)s", after=after)
    by_watermark = f"{RETAINED_STATES} AND completed_on <= %(retained_before)s"
    return f"""
    WITH {edge},
    removed AS (
      DELETE FROM {schema}.{table}
      WHERE {covered}
        AND {EXPIRED.format(schema=schema)}
      RETURNING state, completed_on
    )
    SELECT
      (SELECT id FROM edge) AS walk_cursor,
      (SELECT count(*) FROM removed)::int AS deleted,
      (SELECT count(*) FROM removed WHERE {counted_retained(schema)})::int AS deleted_retained,
      ((SELECT count(*) FROM {schema}.{table} WHERE {covered} AND {by_watermark})
        - (SELECT count(*) FROM removed WHERE {by_watermark}))::int AS retained
    """


def retained_since(schema: str, table: str) -> str:
    """The completed and cancelled jobs of queue ``name`` that finished since a walk's watermark,
    which set_retained_count() adds to total_count. Parameters: name, retained_before. One row.

    Read by a statement of its own rather than as a subquery of the update: Citus refuses an
    update of queue (a reference table) that reads the distributed job table, and this read is
    routed to the queue's one shard."""
    return f"""
    SELECT count(*)::int FROM {schema}.{table} j
    WHERE j.name = %(name)s
      AND j.completed_on > %(retained_before)s
      AND j.completed_on <= {schema}.job_now()
      AND j.{RETAINED_STATES}
    """


def set_retained_count(schema: str) -> str:
    """Once a walk has covered the whole queue: its retained_count is the total the batches counted,
    retained_on the walk's watermark, and total_count the live jobs the last monitor pass counted,
    plus those, plus the completed and cancelled jobs that finished since the watermark
    (retained_since(), which the next monitor pass adds to retained_count once they are DELTA_LAG
    old). Parameters: name, retained, retained_before, recent (retained_since()'s count)."""
    return f"""
    UPDATE {schema}.queue SET
      retained_count = %(retained)s,
      retained_on = %(retained_before)s,
      total_count = {CACHED_LIVE_COUNT} + %(retained)s + %(recent)s
    WHERE name = %(name)s
    """


def dependency_cleanup_batch(schema: str, table: str, side: str, *, after: bool) -> str:
    """One batch of the walk over one queue's flow edges on one side (``child`` or ``parent``):
    delete those whose job of that queue is gone from ``table`` (deleted by retention, delete_job()
    or a purge), as pg-boss's cleanupDependencies. Parameters: name, edge_offset, after (with
    ``after``). Returns one row: walk_cursor, deleted.

    A child whose parent was deleted before completing stays blocked (pg-boss's behaviour): its
    pending count is not decremented, so it waits until retention deletes it in turn.
    """
    if side not in EDGE_SIDES:
        raise ValueError(f"{side!r} is not a side of a flow edge")
    edge, covered = _walked(schema, "job_dependency", f"{side}_id", f"{side}_name = %(name)s", after=after)
    job_cursor = " AND j.id > %(after)s::uuid" if after else ""
    return f"""
    WITH {edge},
    removed AS (
      DELETE FROM {schema}.job_dependency d
      WHERE {covered}
        AND NOT EXISTS (
          SELECT 1 FROM {schema}.{table} j
          WHERE j.name = %(name)s{job_cursor}
            AND j.id <= COALESCE((SELECT id FROM edge), '{MAX_UUID}'::uuid)
            AND j.id = d.{side}_id
        )
      RETURNING 1
    )
    SELECT (SELECT id FROM edge) AS walk_cursor, (SELECT count(*) FROM removed)::int AS deleted
    """


def release_maintenance_claim(schema: str) -> str:
    """Hand back the maintenance claim (maintain_on) of queues a pass claimed but did not finish, so
    the next pass takes them again instead of waiting out MAINTENANCE_INTERVAL_SECONDS. Only a claim
    still stamped as the pass stamped it: a pass that outlasted the interval may find a queue claimed
    again by another monitor, and that claim stays. The rows are locked in name order, as every
    write of several queue rows locks them, and a row another session holds is left (its next pass
    claims it). Parameters: names, claimed_on."""
    return f"""
    UPDATE {schema}.queue SET maintain_on = NULL
    FROM (
      SELECT name FROM {schema}.queue
      WHERE name = ANY(%(names)s::text[]) AND maintain_on = %(claimed_on)s
      ORDER BY name
      FOR NO KEY UPDATE SKIP LOCKED
    ) q
    WHERE queue.name = q.name
    """


# The split flow-edge clean-up of the citus-distributed backend. dependency_cleanup_batch() deletes
# from job_dependency, a reference table, the edges whose job is gone from the distributed job
# table, and Citus refuses a change of a reference table that reads a distributed one in the same
# statement. So a batch runs as three statements in one transaction (monitor/retention.py): the
# batch's edges read, those of their jobs still present read on the queue's one shard, the rest
# deleted. The batch covers the same edges, and deletes the same ones, as the one statement.


def dependency_edges(schema: str, side: str, *, after: bool) -> str:
    """The split clean-up's first statement: the ids on ``side`` of queue ``name``'s next batch of
    edges, in id order. Parameters: name, batch_size, after (with ``after``)."""
    if side not in EDGE_SIDES:
        raise ValueError(f"{side!r} is not a side of a flow edge")
    cursor = f" AND {side}_id > %(after)s::uuid" if after else ""
    return f"""
    SELECT {side}_id FROM {schema}.job_dependency
    WHERE {side}_name = %(name)s{cursor}
    ORDER BY {side}_id
    LIMIT %(batch_size)s
    """


def present_jobs(schema: str, table: str) -> str:
    """The split clean-up's second statement: which of the ids are jobs of queue ``name`` in
    ``table``, routed to its shard. Parameters: name, ids."""
    return f"SELECT j.id FROM {schema}.{table} j WHERE j.name = %(name)s AND j.id = ANY(%(ids)s::uuid[])"


def delete_dependency_edges(schema: str, side: str) -> str:
    """The split clean-up's last statement: delete queue ``name``'s edges whose job on ``side`` is
    one of the gone ids. Parameters: name, ids. Returns one row per edge deleted."""
    if side not in EDGE_SIDES:
        raise ValueError(f"{side!r} is not a side of a flow edge")
    return f"""
    DELETE FROM {schema}.job_dependency
    WHERE {side}_name = %(name)s AND {side}_id = ANY(%(ids)s::uuid[])
    RETURNING 1
    """
