"""What a database's pg-boss schema is (absent, ours at 43, older, newer, half there) and whether it
is drift-free: the one reading the doctor, the system check and ``migrate pgboss`` all start from."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django_pgboss.constants import SCHEMA_VERSION
from django_pgboss.db.identifiers import quote_schema
from django_pgboss.plans import catalog as plans
from django_pgboss.schema.catalog import Catalog, read_catalog
from django_pgboss.schema.drift import DriftReport, QueueTable, compare
from django_pgboss.schema.manifest import expected_catalog

#: The oldest schema pg-boss 12.35 migrates (pg-boss 11.0 wrote version 25).
OLDEST_MIGRATABLE_VERSION = 25


@dataclass
class SchemaState:
    """A schema as found: its catalog, its version row(s), and, at version 43, its drift report."""

    schema: str
    catalog: Catalog
    versions: list[int] = field(default_factory=list)
    queues: list[QueueTable] = field(default_factory=list)  # the partitioned ones
    report: DriftReport | None = None

    @property
    def installed(self) -> bool:
        """True when pg-boss's version table exists (the mark pg-boss itself goes by)."""
        return "version" in self.catalog.tables

    @property
    def version(self) -> int | None:
        """The schema's version when the version table holds exactly one row, else None."""
        return self.versions[0] if len(self.versions) == 1 else None

    def pgboss_objects(self) -> list[str]:
        """The objects of schema 43 this schema holds (by name), for a schema without a version row."""
        expected = expected_catalog()
        found = [f"table {t}" for t in expected.tables if t in self.catalog.tables]
        found += [f"function {f}" for f in expected.functions if f in self.catalog.functions]
        found += [f"type {t}" for t in expected.types if t in self.catalog.types]
        return found


def read_state(cursor: Any, schema: str) -> SchemaState:
    """Read ``schema``'s catalog and version; at version 43, compare it with the manifest."""
    catalog = read_catalog(cursor, schema)
    state = SchemaState(schema, catalog)
    if not state.installed:
        return state
    quoted = quote_schema(schema)
    cursor.execute(plans.versions(quoted))
    state.versions = [int(v) for (v,) in cursor.fetchall()]
    if state.version == SCHEMA_VERSION:
        state.queues = read_partitioned_queues(cursor, schema, catalog)
        state.report = compare(expected_catalog(), catalog, state.queues)
    return state


def read_partitioned_queues(cursor: Any, schema: str, catalog: Catalog) -> list[QueueTable]:
    """The queues that have a table of their own, when the queue table can say (else none)."""
    queue_columns = catalog.columns.get("queue", {})
    if not {"name", "table_name", "policy", "partition"} <= set(queue_columns):
        return []
    cursor.execute(plans.partitioned_queues(quote_schema(schema)))
    return [QueueTable(name, table, policy) for name, table, policy in cursor.fetchall()]


def describe(state: SchemaState, database: str) -> str:
    """One paragraph saying what the schema is, for the doctor's first line and for refusals."""
    where = f'schema "{state.schema}" in database {database!r}'
    if not state.catalog.exists:
        return f"{where} does not exist"
    if not state.installed:
        objects = state.pgboss_objects()
        if objects:
            return f"{where} has no pg-boss version table, but holds {', '.join(objects)}"
        return f"{where} exists but holds no pg-boss schema"
    if state.version is None:
        rows = ", ".join(map(str, state.versions)) or "none"
        return f"{where} has a pg-boss version table with {len(state.versions)} rows (versions: {rows}), expected one"
    return f"{where} is pg-boss schema version {state.version}"
