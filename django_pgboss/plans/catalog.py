"""SQL that reads what a schema holds from PostgreSQL's catalog, for the doctor and for adoption.

Each statement takes the schema's name as a bound parameter (``nspname``, as it is stored)
and reads only pg_catalog, so it runs for a role that may read the schema and nothing more. They
are the live side of the drift check in :mod:`django_pgboss.schema.drift`; the expected side is the
frozen manifest of schema 43.
"""

from __future__ import annotations


def schema_exists() -> str:
    """One row when the schema exists. Parameter: nspname (the schema's name)."""
    return "SELECT 1 FROM pg_namespace WHERE nspname = %(nspname)s"


def tables() -> str:
    """Every ordinary and partitioned table: name, relkind, parent table and partition bound.

    Parameter: nspname (the schema's name). A table that is no partition has a NULL parent and bound.
    """
    return """
    SELECT c.relname, c.relkind, p.relname, pg_get_expr(c.relpartbound, c.oid)
    FROM pg_class c
    JOIN pg_namespace n ON n.oid = c.relnamespace
    LEFT JOIN pg_inherits i ON i.inhrelid = c.oid
    LEFT JOIN pg_class p ON p.oid = i.inhparent
    WHERE n.nspname = %(nspname)s AND c.relkind IN ('r', 'p')
    ORDER BY c.relname
    """


def columns() -> str:
    """Every column of every table: table, column, type (format_type), NOT NULL, default expression.

    Parameter: nspname (the schema's name). format_type gives the canonical spelling (``integer[]``,
    ``timestamp with time zone``, ``<schema>.job_state``), as pg-boss's own drift check reads it.
    """
    return """
    SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
           pg_get_expr(d.adbin, d.adrelid)
    FROM pg_attribute a
    JOIN pg_class c ON c.oid = a.attrelid
    JOIN pg_namespace n ON n.oid = c.relnamespace
    LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
    WHERE n.nspname = %(nspname)s AND c.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped
    ORDER BY c.relname, a.attnum
    """


def indexes() -> str:
    """Every index: name, table, definition (pg_get_indexdef), valid, backs a constraint.

    Parameter: nspname (the schema's name). indisvalid is false while an interrupted CREATE INDEX CONCURRENTLY
    leaves its stub behind: such an index exists but is never used.
    """
    return """
    SELECT c.relname, t.relname, pg_get_indexdef(i.indexrelid), i.indisvalid,
           EXISTS (SELECT 1 FROM pg_constraint con WHERE con.conindid = i.indexrelid)
    FROM pg_index i
    JOIN pg_class c ON c.oid = i.indexrelid
    JOIN pg_class t ON t.oid = i.indrelid
    JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = %(nspname)s
    ORDER BY c.relname
    """


def constraints() -> str:
    """Every table constraint but NOT NULL: table, name, definition (pg_get_constraintdef).

    Parameter: nspname (the schema's name). NOT NULL is a column property here (PostgreSQL 18 also lists it in
    pg_constraint), so it is compared with the columns.
    """
    return """
    SELECT rel.relname, con.conname, pg_get_constraintdef(con.oid)
    FROM pg_constraint con
    JOIN pg_class rel ON rel.oid = con.conrelid
    JOIN pg_namespace n ON n.oid = rel.relnamespace
    WHERE n.nspname = %(nspname)s AND con.contype <> 'n'
    ORDER BY rel.relname, con.conname
    """


def functions() -> str:
    """Every function: name, identity arguments, result, language, volatility, stored body.

    Parameter: nspname (the schema's name). PostgreSQL stores a body verbatim (prosrc), so an untouched function
    reads back exactly as it was written.
    """
    return """
    SELECT p.proname, pg_get_function_identity_arguments(p.oid), pg_get_function_result(p.oid),
           l.lanname, p.provolatile, p.prosrc
    FROM pg_proc p
    JOIN pg_namespace n ON n.oid = p.pronamespace
    JOIN pg_language l ON l.oid = p.prolang
    WHERE n.nspname = %(nspname)s
    ORDER BY p.proname, 2
    """


def enum_labels() -> str:
    """The labels of an enum type in their sort order. Parameters: nspname, type_name."""
    return """
    SELECT e.enumlabel
    FROM pg_enum e
    JOIN pg_type t ON t.oid = e.enumtypid
    JOIN pg_namespace n ON n.oid = t.typnamespace
    WHERE n.nspname = %(nspname)s AND t.typname = %(type_name)s
    ORDER BY e.enumsortorder
    """


def types() -> str:
    """The names of the types a schema defines itself (enums, composites of no table). Parameter:
    nspname."""
    return """
    SELECT t.typname
    FROM pg_type t
    JOIN pg_namespace n ON n.oid = t.typnamespace
    LEFT JOIN pg_class c ON c.oid = t.typrelid
    WHERE n.nspname = %(nspname)s
      AND (t.typtype IN ('e', 'd', 'r', 'm') OR (t.typtype = 'c' AND c.relkind = 'c'))
    ORDER BY t.typname
    """


def version_table() -> str:
    """The version table's oid, NULL when it does not exist. Parameter: relation, its quoted qualified name."""
    return "SELECT to_regclass(%(relation)s)"


def versions(schema: str) -> str:
    """Every row of pg-boss's version table (there should be one). ``schema`` is quoted."""
    return f"SELECT version FROM {schema}.version ORDER BY version"


def unfinished_index_builds(schema: str) -> str:
    """The command of every bam row not completed, as pg-boss's drift check reads them (its
    ``building`` set). ``schema`` is quoted."""
    return f"SELECT command FROM {schema}.bam WHERE status <> 'completed'"


def partitioned_queues(schema: str) -> str:
    """Each queue that has a table of its own: name, table name, policy. ``schema`` is quoted."""
    return f"SELECT name, table_name, policy FROM {schema}.queue WHERE partition ORDER BY name"


def queues_of_policy(schema: str) -> str:
    """The names of the queues of one policy, in order. ``schema`` is quoted. Parameter: policy."""
    return f"SELECT name FROM {schema}.queue WHERE policy = %(policy)s ORDER BY name"


def current_lock_timeout() -> str:
    """The session's lock_timeout, as PostgreSQL prints it (what lock_attempt() restores)."""
    return "SELECT current_setting('lock_timeout')"


def lock_attempt() -> str:
    """Bound the next lock waits of this transaction (``set_config(..., true)``: SET LOCAL that takes
    a parameter). Parameter: timeout, a duration PostgreSQL reads ('200ms'), or '0' for none."""
    return "SELECT set_config('lock_timeout', %(timeout)s, true)"


def lock_for_upgrade(schema: str, *, stats: bool = True) -> str:
    """Lock every table a version step alters, job (with each of its partitions), queue and
    queue_stats, in one statement, for the rest of the transaction. ``schema`` is quoted;
    ``stats`` False leaves out queue_stats, which a schema older than 35 does not have yet."""
    tables = f"{schema}.job, {schema}.queue" + (f", {schema}.queue_stats" if stats else "")
    return f"LOCK TABLE {tables} IN ACCESS EXCLUSIVE MODE"


def forget_migrations_script(table: str) -> str:
    """The statement ``pgboss_rollback --sql`` prints to forget pgboss's recorded migrations, for
    psql (``table`` is Django's migration table, quoted by the connection): printed, never run
    here, where the rollback deletes the records through Django's migration recorder."""
    return f"DELETE FROM {table} WHERE app = 'pgboss';"


def lock_timeout_script(timeout: str) -> str:
    """The statement ``pgboss_rollback --sql`` prints first, for psql: the transaction's lock
    timeout, as lock_attempt() sets it when the rollback runs here. ``timeout`` is our constant."""
    return f"SET LOCAL lock_timeout = '{timeout}';"
