"""SQL for the background index builds pg-boss's migrations queue in ``bam`` (its "background async
migrations"), which the monitor's bam pass (monitor/bam.py) runs, and for reading that table.

pg-boss 12.38's migrations 27, 28, 33, 38, 40, 43, 45 and 46 enqueue ``CREATE INDEX CONCURRENTLY``
(and, for job_i5, ``DROP INDEX CONCURRENTLY``) commands instead of running them inside the
migration's transaction, and so do our own upgrade steps; a running pg-boss, or our monitor, builds
them one at a time afterwards. These statements are pg-boss's (its
trySetBamTime, getNextBamCommand on the native-PostgreSQL path, bamHealProbe, bamHealDrop,
releaseBamCommand, setBamCompleted, setBamFailed, getBamStatus, getBamEntries) with the values bound.
"""

from __future__ import annotations

#: An in_progress row younger than this is never taken for dead, whatever the locks say: the
#: claiming process may not have started its build yet (pg-boss's BAM_LIVENESS_GRACE_SECONDS).
LIVENESS_GRACE_SECONDS = 5 * 60


def try_set_bam_time(schema: str) -> str:
    """Claim the cluster-wide bam pass (version.bam_on), as pg-boss's runner does: the row is
    stamped, and a row returned, only when ``seconds`` have passed since the last claim, so one
    pass per interval runs across every Python and Node instance on the schema. Parameter: seconds.
    """
    return f"""
    UPDATE {schema}.version SET bam_on = {schema}.job_now()
    WHERE extract(epoch FROM ({schema}.job_now() - COALESCE(bam_on, {schema}.job_now() - interval '1 week')))
      >= %(seconds)s
    RETURNING true
    """


def _stale(schema: str, started: str, table: str) -> str:
    # An in_progress row is dead when it is past the grace window and no CREATE INDEX CONCURRENTLY
    # is building on its table: such a build holds ShareUpdateExclusiveLock on the table for its
    # whole run and loses it the moment its backend ends. pg_locks is read rather than
    # pg_stat_progress_create_index because the progress view hides other roles' backends, so a
    # peer's live build under another role would read as dead and be healed (dropped) under it.
    # An autovacuum holding the same lock only defers a reclaim, the safe direction.
    return f"""(
      {started} < {schema}.job_now() - make_interval(secs => %(grace)s)
      AND NOT EXISTS (
        SELECT 1 FROM pg_locks l
        WHERE l.locktype = 'relation' AND l.granted AND l.mode = 'ShareUpdateExclusiveLock'
          AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
          AND l.relation = to_regclass(quote_ident(%(nspname)s) || '.' || quote_ident({table}))
      )
    )"""


def claim_bam_command(schema: str) -> str:
    """Claim the next command: the oldest pending one, else a failed or dead in_progress one (so a
    command that keeps failing never starves those behind it), and only while no command is being
    built. A command waits while an earlier command of its migration on its table is not completed
    (pg-boss 12.38's rule): an ordered pair such as version 40's build of job_i11 and retire of job_i5
    never drops the old index beside a new one whose build failed. The earlier command stays
    claimable, so its successful retry releases the ones behind it. Parameters: grace (seconds),
    nspname (the schema's name, unquoted).

    Returns the row (id, name, version, queue, table_name, command) with ``reattempt`` (it ran
    before, so an interrupted build may have left an index behind), the status and started_on the
    claim replaced, and the started_on it set (release_bam_command's compare-and-swap). SKIP
    LOCKED makes two claims at once exclusive: the loser gets no row rather than the same one.
    """
    return f"""
    WITH candidate AS (
      SELECT c.id, c.status AS prior_status, c.started_on AS prior_started_on
      FROM {schema}.bam c
      WHERE (c.status IN ('pending', 'failed')
             OR (c.status = 'in_progress' AND {_stale(schema, "c.started_on", "c.table_name")}))
        AND NOT EXISTS (
          SELECT 1 FROM {schema}.bam p
          WHERE p.version = c.version AND p.table_name = c.table_name
            AND p.created_on < c.created_on AND p.status <> 'completed'
        )
        AND NOT EXISTS (
          SELECT 1 FROM {schema}.bam g
          WHERE g.status = 'in_progress' AND NOT {_stale(schema, "g.started_on", "g.table_name")}
        )
      ORDER BY (c.status <> 'pending'), c.created_on
      LIMIT 1
      FOR UPDATE OF c SKIP LOCKED
    )
    UPDATE {schema}.bam b
    SET status = 'in_progress', started_on = {schema}.job_now()
    FROM candidate
    WHERE b.id = candidate.id
      AND b.status = candidate.prior_status
      AND b.started_on IS NOT DISTINCT FROM candidate.prior_started_on
    RETURNING b.id, b.name, b.version, b.queue, b.table_name, b.command,
              candidate.prior_status <> 'pending' AS reattempt,
              candidate.prior_status, candidate.prior_started_on, b.started_on
    """


def probe_index() -> str:
    """Whether the index a re-attempted command builds exists, and is INVALID (an interrupted
    CREATE INDEX CONCURRENTLY leaves such a stub): one row (invalid) when it exists, none when
    not. Parameters: nspname, relname (unquoted names)."""
    return """
    SELECT NOT i.indisvalid AS invalid
    FROM pg_class c
    JOIN pg_index i ON i.indexrelid = c.oid
    JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = %(nspname)s AND c.relname = %(relname)s
    """


def drop_index_concurrently(schema: str, index: str) -> str:
    """Drop an INVALID stub before its command is run again (``index`` quoted by the caller); outside
    a transaction block, as the build itself."""
    return f"DROP INDEX CONCURRENTLY IF EXISTS {schema}.{index}"


def release_bam_command(schema: str) -> str:
    """Hand a claimed command that never ran back as the claim found it, but only while the claim is
    still this runner's (its started_on unchanged). Parameters: id, status, prior_started_on,
    started_on."""
    return f"""
    UPDATE {schema}.bam SET status = %(status)s, started_on = %(prior_started_on)s
    WHERE id = %(id)s AND status = 'in_progress' AND started_on = %(started_on)s
    """


def set_bam_completed(schema: str) -> str:
    """Mark a command built, clearing the error a failed earlier attempt left. Parameter: id."""
    return f"""
    UPDATE {schema}.bam SET status = 'completed', completed_on = {schema}.job_now(), error = NULL
    WHERE id = %(id)s
    """


def set_bam_failed(schema: str) -> str:
    """Mark a command failed with its error (retried at a later pass). Parameters: id, error."""
    return f"""
    UPDATE {schema}.bam SET status = 'failed', error = %(error)s, completed_on = {schema}.job_now()
    WHERE id = %(id)s
    """


def bam_status(schema: str) -> str:
    """Per status: how many commands, and when the newest of them was queued."""
    return f"SELECT status, count(*)::int, max(created_on) FROM {schema}.bam GROUP BY status ORDER BY status"


def bam_entries(schema: str) -> str:
    """Every command, in the order pg-boss lists them (by version, then as queued)."""
    return f"""
    SELECT id, name, version, status, queue, table_name, command, error, created_on, started_on,
           completed_on
    FROM {schema}.bam
    ORDER BY version, created_on, id
    """
