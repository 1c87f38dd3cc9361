"""What a schema holds, read from PostgreSQL's catalog into plain data two schemas can be compared in.

Every definition has the schema's own spelling replaced by :data:`SCHEMA_TOKEN`, so a schema
django_pgboss migrated, one pg-boss installed under another name, and the frozen manifest of
schema 43 compare equal when, and only when, they hold the same objects.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from django_pgboss.db.context import DatabaseContext
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


def read_catalog(context: DatabaseContext) -> Catalog:
    """Read the tables, partitions, columns, indexes, constraints, functions and types of
    ``context``'s schema, on its database.

    Every query binds the schema name. A schema that does not exist gives an empty Catalog with
    ``exists`` False.
    """
    schema = context.schema
    norm = schema_normaliser(schema)
    if context.one_or_none(plans.schema_exists(), {"nspname": schema}) is None:
        return Catalog(exists=False)
    catalog = Catalog()
    for name, relkind, parent, bound in context.all(plans.tables(), {"nspname": schema}):
        catalog.tables[name] = relkind
        if parent is not None:
            catalog.partitions[name] = (parent, norm(bound) or "")
    for table, column, type_, not_null, default in context.all(plans.columns(), {"nspname": schema}):
        catalog.columns.setdefault(table, {})[column] = Column(norm(type_) or "", not_null, norm(default))
    for name, table, definition, valid, backed in context.all(plans.indexes(), {"nspname": schema}):
        catalog.indexes[name] = Index(table, norm(definition) or "", valid, backed)
    for table, name, definition in context.all(plans.constraints(), {"nspname": schema}):
        catalog.constraints.setdefault(table, {})[name] = norm(definition) or ""
    for name, arguments, result, language, volatility, body in context.all(
        plans.functions(), {"nspname": schema}
    ):
        catalog.functions.setdefault(name, []).append(
            Function(norm(arguments) or "", norm(result) or "", language, volatility, norm(body) or "")
        )
    catalog.types = [name for (name,) in context.all(plans.types(), {"nspname": schema})]
    labels = context.all(plans.enum_labels(), {"nspname": schema, "type_name": "job_state"})
    catalog.enum = [label for (label,) in labels]
    return catalog
