"""SQL for the monitor's maintenance of jobs: failing the ones whose worker went silent."""

from __future__ import annotations

from django_pgboss.plans.fragments import expired, stalled
from django_pgboss.plans.settle import fail_statement


def fail_expired_jobs(schema: str, table: str, *, split: bool = False) -> str:
    """Fail active jobs that ran past their expiry. Parameters: output (json), names, tally_ids.

    Their worker died, hung, or lost its connection: failing them (the same path as fail(), so
    retries and dead letters apply) hands them to another worker. The worker that overran, if it
    ever finishes, is fenced off by the attempt fence. ``split`` is fail_statement's (the
    citus-distributed backend; the caller then writes the dead-letter copies).
    """
    return fail_statement(
        schema, table, f"{expired(schema)} AND name = ANY(%(names)s::text[])", split=split, tally=True
    )


def fail_stalled_jobs(schema: str, table: str, *, split: bool = False) -> str:
    """Fail active jobs whose heartbeat stopped. Parameters: output (json), names, tally_ids.
    ``split`` is fail_statement's, as for fail_expired_jobs()."""
    return fail_statement(
        schema, table, f"{stalled(schema)} AND name = ANY(%(names)s::text[])", split=split, tally=True
    )


def queue_tables(schema: str, *, by_name: bool) -> str:
    """Each job table with the queues in it: every queue, or those in the array parameter."""
    where = "WHERE name = ANY(%(names)s::text[])" if by_name else ""
    return f"SELECT table_name, array_agg(name ORDER BY name) FROM {schema}.queue {where} GROUP BY table_name"


def ensure_queue_stats_partitions(schema: str) -> str:
    """Create today's and tomorrow's queue_stats partitions (UTC days) when missing.

    The bounds are explicit +00 literals: a bare date would be read in the session's TimeZone and
    leave snapshots taken near UTC midnight without a partition.
    """
    return f"""
    DO $$
    DECLARE
      stats_day date;
    BEGIN
      FOR offset_days IN 0..1 LOOP
        stats_day := ({schema}.job_now() AT TIME ZONE 'UTC')::date + offset_days;
        EXECUTE format(
          'CREATE TABLE IF NOT EXISTS {schema}.%I PARTITION OF {schema}.queue_stats FOR VALUES FROM (%L) TO (%L)',
          'queue_stats_' || to_char(stats_day, 'YYYYMMDD'),
          to_char(stats_day, 'YYYY-MM-DD') || ' 00:00:00+00',
          to_char(stats_day + 1, 'YYYY-MM-DD') || ' 00:00:00+00'
        );
      END LOOP;
    END;
    $$
    """


def drop_old_queue_stats_partitions(schema: str) -> str:
    """The names of queue_stats partitions older than N days (UTC). Parameter: days.

    Returned rather than dropped here, so each DROP is its own statement through the identifier
    helper (a DO block cannot take parameters).
    """
    return f"""
    SELECT c.relname
    FROM pg_inherits i
    JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = '{schema}.queue_stats'::regclass
      AND c.relname ~ '^queue_stats_[0-9]{{8}}$'
      AND to_date(substring(c.relname FROM 13), 'YYYYMMDD') < ({schema}.job_now() AT TIME ZONE 'UTC')::date - %(days)s::int
    """


def drop_table(schema: str, table: str) -> str:
    """Drop one table of the schema (a queue_stats partition past retention)."""
    return f"DROP TABLE IF EXISTS {schema}.{table}"


def set_monitor_backoff(schema: str) -> str:
    """Hold off the stats aggregate after one that pinned the vacuum horizon too long.

    Parameter: seconds the pass's aggregates held their snapshots. Past a tenth of
    autovacuum_naptime, no monitor starts another aggregate for twice the naptime (at least as
    long as the pin, at most an hour): a vacuum computes its horizon once, at start, so a free
    window longer than a naptime cannot be missed. The deadline only moves later. Returns a row
    (naptime, seconds left, deadline) only when the backoff engaged.
    """
    return f"""
    WITH budget AS (
      SELECT naptime, LEAST(GREATEST(2 * naptime, LEAST(%(elapsed)s::float8, 600)), 3600) AS backoff
      FROM (SELECT extract(epoch FROM current_setting('autovacuum_naptime')::interval)::float8 AS naptime) n
    )
    UPDATE {schema}.version v
    SET monitor_backoff_on = GREATEST(
      COALESCE(v.monitor_backoff_on, {schema}.job_now()),
      {schema}.job_now() + make_interval(secs => b.backoff)
    )
    FROM budget b
    WHERE %(elapsed)s::float8 > 0.1 * b.naptime
    RETURNING b.naptime, extract(epoch FROM (v.monitor_backoff_on - {schema}.job_now()))::float8,
      v.monitor_backoff_on
    """


def insert_warning(schema: str) -> str:
    """Persist a warning. Parameters: type, message, data json."""
    return (
        f"INSERT INTO {schema}.warning (type, message, data) VALUES (%(type)s, %(message)s, %(data)s::jsonb)"
    )


def recent_warnings(schema: str) -> str:
    """The newest warnings created within the last ``%(seconds)s`` seconds of the schema's clock,
    at most ``%(limit)s``, newest first. Columns: type, message, data (jsonb), created_on.

    warning_i1 (created_on DESC) serves the window and the order, so the read stays a short index
    scan however many warnings WARNING_RETENTION_DAYS keeps.
    """
    return f"""
    SELECT type, message, data, created_on
    FROM {schema}.warning
    WHERE created_on >= {schema}.job_now() - %(seconds)s * interval '1 second'
    ORDER BY created_on DESC
    LIMIT %(limit)s"""


def delete_old_warnings(schema: str) -> str:
    """Delete warnings older than N days. Parameter: days."""
    return f"DELETE FROM {schema}.warning WHERE created_on < {schema}.job_now() - %(days)s * interval '1 day'"
