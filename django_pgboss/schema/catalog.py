"""What a schema holds, read from PostgreSQL's catalog into plain data two schemas can be compared in.

Every definition has the schema's own spelling replaced by :data:`SCHEMA_TOKEN`, so a schema
django_pgboss migrated, one pg-boss installed under another name, and the frozen manifest of
schema 43 compare equal when, and only when, they hold the same objects.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django_pgboss.db.identifiers import quote_identifier
from django_pgboss.plans import catalog as plans

#: How the manifest and every normalised definition write the schema's name.
SCHEMA_TOKEN = "{{schema}}"


@dataclass(frozen=True)
class Column:
    """One column: its canonical type, NOT NULL, and default expression (None when it has none)."""

    type: str
    not_null: bool
    default: str | None


@dataclass(frozen=True)
class Index:
    """One index: the table it is on, its definition, whether it is valid and backs a constraint."""

    table: str
    definition: str
    valid: bool = True
    constraint_backed: bool = False


@dataclass(frozen=True)
class Function:
    """One function: identity arguments, result type, language, volatility (i/s/v), stored body."""

    arguments: str
    result: str
    language: str
    volatility: str
    body: str


@dataclass
class Catalog:
    """A schema's objects as the catalog reports them, with the schema written as SCHEMA_TOKEN."""

    exists: bool = True
    tables: dict[str, str] = field(default_factory=dict)  # name -> relkind ('r' or 'p')
    partitions: dict[str, tuple[str, str]] = field(default_factory=dict)  # name -> (parent, bound)
    columns: dict[str, dict[str, Column]] = field(default_factory=dict)  # table -> column -> Column
    indexes: dict[str, Index] = field(default_factory=dict)
    constraints: dict[str, dict[str, str]] = field(default_factory=dict)  # table -> name -> definition
    functions: dict[str, list[Function]] = field(default_factory=dict)  # name -> overloads
    types: list[str] = field(default_factory=list)
    enum: list[str] = field(default_factory=list)  # job_state's labels in sort order


def schema_normaliser(schema: str) -> Callable[[str | None], str | None]:
    """A function that writes ``schema``'s spelling in a catalog definition as SCHEMA_TOKEN."""
    spelled = quote_identifier(schema)
    if spelled != schema:
        pattern = re.compile(re.escape(spelled) + r"\.")
    else:
        # A bare name is matched as a whole word, so schema "boss" leaves "pgboss." alone.
        pattern = re.compile(r'(?<![\w$".])' + re.escape(schema) + r"\.")

    def normalise(text: str | None) -> str | None:
        if text is None:
            return None
        return pattern.sub(SCHEMA_TOKEN + ".", text)

    return normalise


def read_catalog(cursor: Any, schema: str) -> Catalog:
    """Read ``schema``'s tables, partitions, columns, indexes, constraints, functions and types.

    ``cursor`` is a DB-API cursor on the database; every query binds the schema name. A schema
    that does not exist gives an empty Catalog with ``exists`` False.
    """
    norm = schema_normaliser(schema)
    cursor.execute(plans.schema_exists(), {"nspname": schema})
    if cursor.fetchone() is None:
        return Catalog(exists=False)
    catalog = Catalog()
    cursor.execute(plans.tables(), {"nspname": schema})
    for name, relkind, parent, bound in cursor.fetchall():
        catalog.tables[name] = relkind
        if parent is not None:
            catalog.partitions[name] = (parent, norm(bound) or "")
    cursor.execute(plans.columns(), {"nspname": schema})
    for table, column, type_, not_null, default in cursor.fetchall():
        catalog.columns.setdefault(table, {})[column] = Column(norm(type_) or "", not_null, norm(default))
    cursor.execute(plans.indexes(), {"nspname": schema})
    for name, table, definition, valid, backed in cursor.fetchall():
        catalog.indexes[name] = Index(table, norm(definition) or "", valid, backed)
    cursor.execute(plans.constraints(), {"nspname": schema})
    for table, name, definition in cursor.fetchall():
        catalog.constraints.setdefault(table, {})[name] = norm(definition) or ""
    cursor.execute(plans.functions(), {"nspname": schema})
    for name, arguments, result, language, volatility, body in cursor.fetchall():
        catalog.functions.setdefault(name, []).append(
            Function(norm(arguments) or "", norm(result) or "", language, volatility, norm(body) or "")
        )
    cursor.execute(plans.types(), {"nspname": schema})
    catalog.types = [name for (name,) in cursor.fetchall()]
    cursor.execute(plans.enum_labels(), {"nspname": schema, "type_name": "job_state"})
    catalog.enum = [label for (label,) in cursor.fetchall()]
    return catalog
