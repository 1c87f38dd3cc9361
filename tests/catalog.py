"""Reads what a schema holds from PostgreSQL's catalog, in a form two schemas can be compared in.

Every definition has the schema's own spelling replaced by ``<schema>``, so the catalog of the
schema django_pgboss migrated and the one pg-boss installed itself under another name compare
equal when, and only when, they hold the same objects.

queue_stats holds one partition a day, made by whichever monitor or installer ran that day, so
two schemas made a minute apart around midnight hold different days. The day partitions are read
as one, ``queue_stats_<day>``, and every day's must have the same shape as the others.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from django.db import connection

from django_pgboss.db.identifiers import quote_identifier

PLACEHOLDER = "<schema>"
DAY = "<day>"
_DAY_PARTITION = re.compile(r"\bqueue_stats_\d{8}")
_DAY_BOUND = re.compile(r"'\d{4}-\d\d-\d\d[^']*'")


def _fold_days(text: str | None) -> str | None:
    """``text`` with each day partition of queue_stats, and each day in a partition bound, as <day>."""
    if text is None:
        return None
    return _DAY_BOUND.sub(f"'{DAY}'", _DAY_PARTITION.sub(f"queue_stats_{DAY}", text))


def _put(mapping: dict, key, value) -> None:
    """mapping[key] = value, where day partitions folded into one key must agree on the value."""
    if key in mapping and mapping[key] != value:
        raise AssertionError(
            f"the day partitions of queue_stats differ in shape at {key!r}: {mapping[key]!r} != {value!r}"
        )
    mapping[key] = value


@dataclass
class Catalog:
    tables: dict[str, str] = field(default_factory=dict)  # name -> relkind
    partitions: dict[str, tuple[str, str]] = field(default_factory=dict)  # name -> (parent, bound)
    columns: dict[str, list[tuple]] = field(default_factory=dict)  # table -> ordered columns
    indexes: dict[str, str] = field(default_factory=dict)  # name -> definition
    constraints: dict[tuple[str, str], str] = field(default_factory=dict)  # (table, name) -> definition
    functions: dict[str, tuple] = field(default_factory=dict)  # name -> signature, body, ...
    enum: list[str] = field(default_factory=list)


def _normaliser(schema: str):
    spelled = quote_identifier(schema)
    pattern = re.compile(
        re.escape(spelled) + r"\." if spelled != schema else r"\b" + re.escape(schema) + r"\."
    )

    def normalise(text: str | None) -> str | None:
        if text is None:
            return None
        return _fold_days(pattern.sub(PLACEHOLDER + ".", text))

    return normalise


def read_catalog(schema: str, using_connection=None) -> Catalog:
    """The catalog of ``schema``, with the schema's name written as ``<schema>`` throughout."""
    conn = using_connection or connection
    norm = _normaliser(schema)
    catalog = Catalog()
    with conn.cursor() as cursor:
        cursor.execute(
            """
            SELECT c.relname, c.relkind, p.relname, pg_get_expr(c.relpartbound, c.oid)
            FROM pg_class c
            JOIN pg_namespace n ON n.oid = c.relnamespace
            LEFT JOIN pg_inherits i ON i.inhrelid = c.oid
            LEFT JOIN pg_class p ON p.oid = i.inhparent
            WHERE n.nspname = %s AND c.relkind IN ('r', 'p')
            """,
            [schema],
        )
        for name, relkind, parent, bound in cursor.fetchall():
            name = _fold_days(name)
            _put(catalog.tables, name, relkind)
            if parent is not None:
                _put(catalog.partitions, name, (parent, _fold_days(bound)))
        cursor.execute(
            """
            SELECT c.relname, a.attnum, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
                   pg_get_expr(d.adbin, d.adrelid)
            FROM pg_attribute a
            JOIN pg_class c ON c.oid = a.attrelid
            JOIN pg_namespace n ON n.oid = c.relnamespace
            LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
            WHERE n.nspname = %s AND c.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped
            ORDER BY c.relname, a.attnum
            """,
            [schema],
        )
        columns: dict[str, list[tuple]] = {}
        for table, _attnum, column, type_, notnull, default in cursor.fetchall():
            columns.setdefault(table, []).append((column, norm(type_), notnull, norm(default)))
        for table, listed in columns.items():
            _put(catalog.columns, _fold_days(table), listed)
        cursor.execute(
            """
            SELECT c.relname, pg_get_indexdef(i.indexrelid)
            FROM pg_index i
            JOIN pg_class c ON c.oid = i.indexrelid
            JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = %s
            """,
            [schema],
        )
        for name, definition in cursor.fetchall():
            _put(catalog.indexes, _fold_days(name), norm(definition))
        cursor.execute(
            """
            SELECT rel.relname, con.conname, pg_get_constraintdef(con.oid)
            FROM pg_constraint con
            JOIN pg_class rel ON rel.oid = con.conrelid
            JOIN pg_namespace n ON n.oid = rel.relnamespace
            WHERE n.nspname = %s
            """,
            [schema],
        )
        for table, name, definition in cursor.fetchall():
            _put(catalog.constraints, (_fold_days(table), _fold_days(name)), norm(definition))
        cursor.execute(
            """
            SELECT p.proname, pg_get_function_identity_arguments(p.oid), pg_get_function_result(p.oid),
                   l.lanname, p.provolatile, p.prosrc
            FROM pg_proc p
            JOIN pg_namespace n ON n.oid = p.pronamespace
            JOIN pg_language l ON l.oid = p.prolang
            WHERE n.nspname = %s
            """,
            [schema],
        )
        for name, args, result, language, volatility, body in cursor.fetchall():
            # Whitespace in a body carries no meaning; pg-boss's own drift check folds it too.
            catalog.functions[name] = (args, result, language, volatility, norm(" ".join(body.split())))
        cursor.execute(
            """
            SELECT e.enumlabel
            FROM pg_enum e
            JOIN pg_type t ON t.oid = e.enumtypid
            JOIN pg_namespace n ON n.oid = t.typnamespace
            WHERE n.nspname = %s AND t.typname = 'job_state'
            ORDER BY e.enumsortorder
            """,
            [schema],
        )
        catalog.enum = [label for (label,) in cursor.fetchall()]
    return catalog


def schema_exists(schema: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", [schema])
        return cursor.fetchone() is not None
