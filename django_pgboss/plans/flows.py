"""SQL for flows (pg-boss 12.35's job dependency graphs): the edges, reading them, resolving them.

A flow's jobs are inserted by plans.jobs.insert_jobs(flow=True) with their flow columns: a child
``blocked`` with ``pending_dependencies`` = its number of parents, a parent ``blocking``. The edges
go into job_dependency. Completing a job does no dependency work (pg-boss 12.35 took it off the
completion path, pg-boss #824: chasing dependents inline made completion scale with the number of
partitions). The resolver finds completed blocking parents through job_i9 (``blocking AND state =
'completed'``), decrements their children, unblocks those reaching zero, and clears ``blocking``
on the parents so the index forgets them.
"""

from __future__ import annotations

import functools

#: The most completed parents one resolve statement takes (pg-boss's FLOW_BATCH_SIZE): it bounds the
#: rows one statement locks; the resolver runs it again while a batch comes back full.
FLOW_BATCH_SIZE = 1000
#: The most batches one resolver pass runs per chunk of queues (pg-boss's MAX_BATCHES_PER_PASS), so
#: a large backlog cannot hold the pass; the rest is taken at the next one.
MAX_BATCHES_PER_PASS = 100


def insert_dependencies(schema: str) -> str:
    """The edges of a flow. Parameter: edges, a JSON array of {child_name, child_id, parent_name,
    parent_id}. An edge already there is left alone (ON CONFLICT DO NOTHING, as pg-boss's)."""
    return f"""
    INSERT INTO {schema}.job_dependency (child_name, child_id, parent_name, parent_id)
    SELECT child_name, child_id, parent_name, parent_id
    FROM json_to_recordset(%(edges)s::json) AS x (
      child_name text, child_id uuid, parent_name text, parent_id uuid
    )
    ON CONFLICT DO NOTHING
    """


def get_dependencies(schema: str, *, after: bool = False) -> str:
    """A job's parents, as (name, id), in (name, id) order, at most the parameter limit.
    Parameters: name, id, limit, and with ``after`` after_name and after_id (the previous page's
    last DependencyRef), as pg-boss 12.38 pages them."""
    page = "AND (parent_name, parent_id) > (%(after_name)s, %(after_id)s::uuid)" if after else ""
    return f"""
    SELECT parent_name, parent_id FROM {schema}.job_dependency
    WHERE child_name = %(name)s AND child_id = %(id)s {page}
    ORDER BY parent_name, parent_id
    LIMIT %(limit)s
    """


def get_dependents(schema: str, *, after: bool = False) -> str:
    """A job's children, as (name, id), paged as get_dependencies()."""
    page = "AND (child_name, child_id) > (%(after_name)s, %(after_id)s::uuid)" if after else ""
    return f"""
    SELECT child_name, child_id FROM {schema}.job_dependency
    WHERE parent_name = %(name)s AND parent_id = %(id)s {page}
    ORDER BY child_name, child_id
    LIMIT %(limit)s
    """


def related_jobs(schema: str, *, parents: bool, limited: bool = False) -> str:
    """A job's parents (or children) with what the job table holds of each: (name, id, state,
    output, completed_on), state NULL for a job already deleted. Parameters: name, id, and with
    ``limited`` limit (a fan-out's parent has thousands of children; a page shows a few).

    Through the parent ``job`` table, since the other end of an edge may be in any queue's table.
    """
    near, far = ("child", "parent") if parents else ("parent", "child")
    # The edges are picked (and limited) first, and only those joined to the job table.
    return f"""
    SELECT e.name, e.id, j.state, j.output, j.completed_on
    FROM (
      SELECT d.{far}_name AS name, d.{far}_id AS id
      FROM {schema}.job_dependency d
      WHERE d.{near}_name = %(name)s AND d.{near}_id = %(id)s
      ORDER BY d.{far}_name, d.{far}_id
      {"LIMIT %(limit)s" if limited else ""}
    ) e
    LEFT JOIN {schema}.job j ON j.name = e.name AND j.id = e.id
    ORDER BY e.name, e.id
    """


def edges_of(schema: str) -> str:
    """The edges that touch any of the jobs named by the parallel arrays ``names`` and ``ids``,
    either end: (child_name, child_id, parent_name, parent_id), at most ``limit``. Parameters:
    names, ids, limit.

    One step of the walk the admin's flow page takes over a flow (api/flows.py's graph()). Two
    joins, one per end, so each probes its own index (the primary key for the child end,
    job_dep_parent_idx for the parent end): a recursive CTE joining on either end with OR
    re-read the whole table per step, 90 s for a 10,000-job fan-out.
    """
    return f"""
    (SELECT d.child_name, d.child_id, d.parent_name, d.parent_id
     FROM unnest(%(names)s::text[], %(ids)s::uuid[]) AS f (name, id)
     JOIN {schema}.job_dependency d ON d.child_name = f.name AND d.child_id = f.id
     UNION
     SELECT d.child_name, d.child_id, d.parent_name, d.parent_id
     FROM unnest(%(names)s::text[], %(ids)s::uuid[]) AS f (name, id)
     JOIN {schema}.job_dependency d ON d.parent_name = f.name AND d.parent_id = f.id)
    LIMIT %(limit)s
    """


def job_states(schema: str) -> str:
    """The state of each job named by the parallel arrays ``names`` and ``ids`` (a flow's
    nodes): (name, id, state, blocked). Parameters: names, ids."""
    return f"""
    SELECT j.name, j.id, j.state, j.blocked
    FROM unnest(%(names)s::text[], %(ids)s::uuid[]) AS x (name, id)
    JOIN {schema}.job j ON j.name = x.name AND j.id = x.id
    """


def try_set_flow_time(schema: str) -> str:
    """Claim the cluster-wide flow pass (version.flow_on), as pg-boss's navigator does: the row is
    stamped, and a row returned, only when ``seconds`` have passed since the last claim.
    Parameter: seconds."""
    return f"""
    UPDATE {schema}.version SET flow_on = {schema}.job_now()
    WHERE extract(epoch FROM ({schema}.job_now() - COALESCE(flow_on, {schema}.job_now() - interval '1 week')))
      >= %(seconds)s
    RETURNING true
    """


@functools.lru_cache(maxsize=64)
def resolve_flow_jobs(schema: str, table: str) -> str:
    """One resolver batch on one job table: take up to FLOW_BATCH_SIZE completed blocking parents of
    the named queues (job_i9; SKIP LOCKED, so resolvers running at once split them), decrement
    their children's pending_dependencies by the number of those parents each has, unblock the
    children reaching zero, and clear ``blocking`` on the parents. Returns one row: how many
    parents were resolved. Parameter: names (the queues, for partition pruning).

    The children are locked in (name, id) order through the parent ``job`` table (a child may be
    in any queue's table), so two resolvers never lock them in opposite orders.

    A child released by its last parent has its start_after moved up to the release (pg-boss
    12.38), so its wait, in the monitor's histograms and ready_oldest_seconds, counts from when it
    could first run rather than from when the flow was sent. A start_after still in the future is
    kept.
    """
    return f"""
    WITH locked_parents AS (
      SELECT j.name, j.id
      FROM {schema}.{table} j
      WHERE j.blocking AND j.state = 'completed' AND j.name = ANY(%(names)s::text[])
      ORDER BY j.name, j.id
      LIMIT {FLOW_BATCH_SIZE}
      FOR UPDATE OF j SKIP LOCKED
    ),
    decremented AS (
      SELECT d.child_name, d.child_id, count(*)::int AS n
      FROM {schema}.job_dependency d
      JOIN locked_parents p ON d.parent_name = p.name AND d.parent_id = p.id
      GROUP BY d.child_name, d.child_id
    ),
    locked_children AS (
      SELECT j.name, j.id, d.n
      FROM {schema}.job j
      JOIN decremented d ON d.child_name = j.name AND d.child_id = j.id
      WHERE j.blocked
      ORDER BY j.name, j.id
      FOR UPDATE OF j
    ),
    unblocked AS (
      UPDATE {schema}.job j
      SET pending_dependencies = GREATEST(j.pending_dependencies - lc.n, 0),
          blocked = GREATEST(j.pending_dependencies - lc.n, 0) > 0,
          start_after = CASE WHEN GREATEST(j.pending_dependencies - lc.n, 0) = 0
            THEN GREATEST(j.start_after, {schema}.job_now())
            ELSE j.start_after END
      FROM locked_children lc
      WHERE j.name = lc.name AND j.id = lc.id
      RETURNING 1
    ),
    cleared AS (
      UPDATE {schema}.{table} j
      SET blocking = false
      FROM locked_parents p
      WHERE j.name = p.name AND j.id = p.id
      RETURNING 1
    )
    SELECT count(*)::int FROM cleared
    """


# The split resolve of the citus-distributed backend. resolve_flow_jobs() locks and updates
# children through the parent ``job`` table, on any queue's shard, in one statement: Citus runs
# FOR UPDATE only on one shard, and refuses job_now() beside a column in an UPDATE. So the pass
# runs as pg-boss splits such statements for distributed engines, one queue at a time
# (db/split_flows.py): the completed parents locked on the queue's shard, their children's counts
# read from job_dependency (a reference table), each child queue's children locked in id order
# and updated on their shard with the time bound from the database's clock, then the parents
# cleared, in one transaction.


def resolve_parents(schema: str, table: str) -> str:
    """Lock up to FLOW_BATCH_SIZE completed blocking parents of queue ``name`` in id order (SKIP
    LOCKED, so resolvers running at once split them). Parameter: name. Returns their ids."""
    return f"""
    SELECT j.id FROM {schema}.{table} j
    WHERE j.blocking AND j.state = 'completed' AND j.name = %(name)s
    ORDER BY j.id
    LIMIT {FLOW_BATCH_SIZE}
    FOR UPDATE OF j SKIP LOCKED
    """


def resolve_children(schema: str) -> str:
    """The children of the parents ``ids`` of queue ``name``, with how many of those parents each
    has, in (name, id) order. Parameters: name, ids. Returns (child_name, child_id, count)."""
    return f"""
    SELECT d.child_name, d.child_id, count(*)::int
    FROM {schema}.job_dependency d
    WHERE d.parent_name = %(name)s AND d.parent_id = ANY(%(ids)s::uuid[])
    GROUP BY 1, 2
    ORDER BY 1, 2
    """


def lock_children(schema: str) -> str:
    """Lock the blocked children ``ids`` of queue ``name`` in id order. Parameters: name, ids."""
    return f"""
    SELECT j.id FROM {schema}.job j
    WHERE j.name = %(name)s AND j.id = ANY(%(ids)s::uuid[]) AND j.blocked
    ORDER BY j.id
    FOR UPDATE OF j
    """


def release_children(schema: str) -> str:
    """Take the resolved parents off the blocked children ``ids`` of queue ``name``, as
    resolve_flow_jobs() does. Parameters: name, ids, counts (a JSON object from each child's id to
    how many of its parents were resolved), now (job_now(), read before in the transaction)."""
    resolved = "(%(counts)s::jsonb ->> j.id::text)::int"
    return f"""
    UPDATE {schema}.job j
    SET pending_dependencies = GREATEST(j.pending_dependencies - {resolved}, 0),
        blocked = GREATEST(j.pending_dependencies - {resolved}, 0) > 0,
        start_after = CASE WHEN GREATEST(j.pending_dependencies - {resolved}, 0) = 0
          THEN GREATEST(j.start_after, %(now)s::timestamptz)
          ELSE j.start_after END
    WHERE j.name = %(name)s AND j.id = ANY(%(ids)s::uuid[]) AND j.blocked
    """


def clear_parents(schema: str, table: str) -> str:
    """Clear ``blocking`` on the resolved parents ``ids`` of queue ``name``. Parameters: name, ids."""
    return f"UPDATE {schema}.{table} SET blocking = false WHERE name = %(name)s AND id = ANY(%(ids)s::uuid[])"
