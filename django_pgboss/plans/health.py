"""SQL for index and vacuum health: bloated job indexes, their rebuild, and the job tables' garbage.

Every threshold is a bound parameter; the only text pasted in is the quoted schema and, for the
DDL, an index name read from the catalog and quoted by the caller.
"""

from __future__ import annotations

# The job tables in scope: every table a queue row names (job_common for a queue without a table of
# its own, j<sha224> for one with), plus job_common itself, which outlives every queue row and is
# exactly where a drained backlog leaves its bloat once nothing points at it any more. The
# partitioned parent job has only partitioned indexes (relkind 'I'), which the relkind = 'i' filter
# leaves out: they can only be rebuilt through their leaves anyway.
_JOB_TABLES = "t.relname IN (SELECT table_name FROM {schema}.queue UNION SELECT 'job_common')"

# The pages an index's live entries need, from the average width of what it indexes: pg_stats has
# it per table column, and ANALYZE collects it for an index's expression columns too (job_i1..i4
# and i6 key on COALESCE(singleton_key, '')), keyed by the index. 20 bytes are a btree tuple's
# header and line pointer.
_KEY_WIDTH = """LEFT JOIN LATERAL (
      SELECT COALESCE(sum(COALESCE(ts.avg_width, xs.avg_width, 0)), 0) AS key_width
      FROM unnest(x.indkey::int2[]) WITH ORDINALITY AS k(attnum, pos)
      LEFT JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = k.attnum
      LEFT JOIN pg_stats ts ON ts.schemaname = n.nspname AND ts.tablename = t.relname AND ts.attname = a.attname
      LEFT JOIN pg_attribute ia ON ia.attrelid = i.oid AND ia.attnum = k.pos::int2
      LEFT JOIN pg_stats xs ON xs.schemaname = n.nspname AND xs.tablename = i.relname AND xs.attname = ia.attname
    ) w ON true"""


def bloated_indexes(schema: str) -> str:
    """The job indexes bloated by pg-boss's measure: name, table, pages, entries, bytes, owned.

    Parameters (named): nspname, min_pages, max_entries_per_page, min_size_ratio. An index is
    bloated when it has more than min_pages pages, fewer than max_entries_per_page entries per page
    and more than min_size_ratio times the pages its live entries need. Density alone would flag a
    healthy index over wide keys (singleton_key is unbounded text); the size ratio is what tells
    the two apart (pg-boss measured 4,861x for a drained million-job backlog, 1.6x for 150,000
    1.3 kB keys freshly built). ``reltuples >= 0``: PostgreSQL 14+ writes -1 for "never analysed",
    which would pass both tests. Largest first.
    """
    return f"""
    SELECT i.relname, t.relname, i.relpages, floor(i.reltuples)::float8, pg_relation_size(i.oid)::float8,
           pg_has_role(current_user, i.relowner, 'USAGE')
    FROM pg_class i
    JOIN pg_index x ON x.indexrelid = i.oid
    JOIN pg_class t ON t.oid = x.indrelid
    JOIN pg_namespace n ON n.oid = i.relnamespace
    {_KEY_WIDTH}
    WHERE n.nspname = %(nspname)s
      AND i.relkind = 'i'
      AND x.indisvalid
      AND {_JOB_TABLES.format(schema=schema)}
      AND i.relpages > %(min_pages)s
      AND i.reltuples >= 0
      AND i.reltuples / GREATEST(i.relpages, 1) < %(max_entries_per_page)s
      AND i.relpages > %(min_size_ratio)s * GREATEST(ceil((i.reltuples * (w.key_width + 20)) / 8192.0), 1)
    ORDER BY pg_relation_size(i.oid) DESC
    """


def job_indexes(schema: str) -> str:
    """Every valid leaf index of the job tables, bloated or not (the targets of a forced rebuild),
    in bloated_indexes()'s columns. Parameter (named): nspname."""
    return f"""
    SELECT i.relname, t.relname, i.relpages, floor(i.reltuples)::float8, pg_relation_size(i.oid)::float8,
           pg_has_role(current_user, i.relowner, 'USAGE')
    FROM pg_class i
    JOIN pg_index x ON x.indexrelid = i.oid
    JOIN pg_class t ON t.oid = x.indrelid
    JOIN pg_namespace n ON n.oid = i.relnamespace
    WHERE n.nspname = %(nspname)s
      AND i.relkind = 'i'
      AND x.indisvalid
      AND {_JOB_TABLES.format(schema=schema)}
    ORDER BY pg_relation_size(i.oid) DESC
    """


def reindex_leftovers(schema: str, *, any_owner: bool) -> str:
    """The invalid ``*_ccnew`` stubs an interrupted REINDEX CONCURRENTLY left on the job tables.
    Parameter (named): nspname.

    A rebuild still running looks the same in the catalog (its new index is invalid until the
    swap), so a table with a build in progress (pg_stat_progress_create_index) is left out. The
    background pass can drop only what its role owns; the list for an operator (``any_owner``)
    includes every stub, since the REINDEX after it is for the role that owns the index.
    """
    owner = "" if any_owner else "AND pg_has_role(current_user, i.relowner, 'USAGE')"
    return f"""
    SELECT i.relname
    FROM pg_class i
    JOIN pg_index x ON x.indexrelid = i.oid
    JOIN pg_class t ON t.oid = x.indrelid
    JOIN pg_namespace n ON n.oid = i.relnamespace
    WHERE n.nspname = %(nspname)s
      AND i.relkind = 'i'
      AND NOT x.indisvalid
      AND i.relname ~ '_ccnew[0-9]*$'
      AND {_JOB_TABLES.format(schema=schema)}
      {owner}
      AND NOT EXISTS (SELECT 1 FROM pg_stat_progress_create_index p WHERE p.relid = x.indrelid)
    ORDER BY i.relname
    """


def reindex_index(schema: str, index: str) -> str:
    """Rebuild one index without blocking writes. ``index`` is quoted by the caller. Runs outside
    a transaction block, as REINDEX CONCURRENTLY must."""
    return f"REINDEX INDEX CONCURRENTLY {schema}.{index}"


def drop_index_concurrently(schema: str, index: str) -> str:
    """Drop one index (a stub) without blocking writes. ``index`` is quoted by the caller."""
    return f"DROP INDEX CONCURRENTLY IF EXISTS {schema}.{index}"


def claim_reindex(schema: str) -> str:
    """Claim the reindex interval (version.reindex_on), pg-boss's claim, so one instance in a
    deployment rebuilds per interval. Parameter: interval (seconds). A row back means ours."""
    return f"""
    UPDATE {schema}.version
    SET reindex_on = {schema}.job_now()
    WHERE EXTRACT(EPOCH FROM ({schema}.job_now() - COALESCE(reindex_on, {schema}.job_now() - interval '1 week'))) >= %(interval)s
    RETURNING true
    """


def job_table_garbage(schema: str) -> str:
    """Each job table's live and dead rows, when it was last vacuumed, and the point past which
    autovacuum would vacuum it (its storage parameters honoured): name, live, dead, last vacuum
    (epoch ms), seconds since, threshold, scale factor, autovacuum enabled. Parameter (named):
    nspname."""
    return f"""
    SELECT t.relname, s.n_live_tup, s.n_dead_tup,
      (extract(epoch from GREATEST(s.last_autovacuum, s.last_vacuum)) * 1000)::float8,
      extract(epoch from (now() - GREATEST(s.last_autovacuum, s.last_vacuum)))::int,
      coalesce((SELECT option_value::int FROM pg_options_to_table(t.reloptions)
                WHERE option_name = 'autovacuum_vacuum_threshold'),
               current_setting('autovacuum_vacuum_threshold')::int),
      coalesce((SELECT option_value::float8 FROM pg_options_to_table(t.reloptions)
                WHERE option_name = 'autovacuum_vacuum_scale_factor'),
               current_setting('autovacuum_vacuum_scale_factor')::float8),
      coalesce((SELECT option_value::boolean FROM pg_options_to_table(t.reloptions)
                WHERE option_name = 'autovacuum_enabled'), true)
    FROM pg_class t
    JOIN pg_namespace n ON n.oid = t.relnamespace
    JOIN pg_stat_user_tables s ON s.relid = t.oid
    WHERE n.nspname = %(nspname)s
      AND t.relkind = 'r'
      AND {_JOB_TABLES.format(schema=schema)}
    ORDER BY t.relname
    """


def xmin_horizon() -> str:
    """How far each kind of holder keeps the MVCC horizon back, in transactions (age()): backends
    in a transaction, replication slots, standbys with hot_standby_feedback, prepared transactions;
    and the oldest such backend's pid, application_name, state and transaction seconds. No
    parameters. The asking backend is left out: it always holds a snapshot of its own. The query
    text is not read: it may carry another application's values.
    """
    return """
    WITH holder AS (
      SELECT pid, application_name, state, age(backend_xmin) AS age,
             extract(epoch from (now() - xact_start))::int AS seconds
      FROM pg_catalog.pg_stat_activity
      WHERE backend_xmin IS NOT NULL AND pid <> pg_backend_pid()
      ORDER BY age(backend_xmin) DESC
      LIMIT 1
    )
    SELECT (SELECT age FROM holder),
           (SELECT max(age(xmin)) FROM pg_catalog.pg_replication_slots WHERE xmin IS NOT NULL),
           (SELECT max(age(backend_xmin)) FROM pg_catalog.pg_stat_replication WHERE backend_xmin IS NOT NULL),
           (SELECT max(age(transaction)) FROM pg_catalog.pg_prepared_xacts),
           (SELECT pid FROM holder), (SELECT application_name FROM holder), (SELECT state FROM holder),
           (SELECT seconds FROM holder)
    """
