"""What a database's pg-boss schema is (absent, ours at 46, older, newer, half there) and whether it
is drift-free: the one reading the doctor, the system check and ``migrate pgboss`` all start from."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from django_pgboss.conf import pgboss_settings
from django_pgboss.db.context import DatabaseContext
from django_pgboss.plans import catalog as plans
from django_pgboss.plans import citus as citus_plans
from django_pgboss.schema.catalog import Catalog, read_catalog
from django_pgboss.schema.citus import CITUS_DISTRIBUTED, Placement, distributed_catalog, placement_problems
from django_pgboss.schema.drift import DriftReport, QueueTable, compare
from django_pgboss.schema.manifest import MANIFEST_VERSIONS, expected_catalog

#: The oldest schema pg-boss 12.35 migrates (pg-boss 11.0 wrote version 25).
OLDEST_MIGRATABLE_VERSION = 25

#: The index name of a bam command that builds one (``CREATE [UNIQUE] INDEX [CONCURRENTLY]
#: [IF NOT EXISTS] name``), which is how pg-boss tells which missing index is still being built.
INDEX_BUILD = re.compile(
    r'\s*CREATE\s+(?:UNIQUE\s+)?INDEX\s+(?:CONCURRENTLY\s+)?(?:IF\s+NOT\s+EXISTS\s+)?"?([\w$]+)"?',
    re.IGNORECASE,
)


@dataclass
class SchemaState:
    """A schema as found: its catalog, its version row(s), and, at a version with a manifest (43,
    46), its drift report."""

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
        """The objects of a pg-boss schema this schema holds (by name), for a schema without a version row."""
        expected = expected_catalog()
        found = [f"table {t}" for t in expected.tables if t in self.catalog.tables]
        found += [f"function {f}" for f in expected.functions if f in self.catalog.functions]
        found += [f"type {t}" for t in expected.types if t in self.catalog.types]
        return found


def read_state(context: DatabaseContext, *, check_placement: bool = True) -> SchemaState:
    """Read the catalog and version of ``context``'s schema; at a version with a manifest, compare
    it with that.

    A schema whose job table Citus distributes is compared with the citus-distributed variant
    (:mod:`django_pgboss.schema.citus`). With ``check_placement``, the report also says where the
    tables' placement over a Citus cluster differs from what ``PGBOSS["BACKEND"]`` asks for; the
    migrations leave it out, since the schema is distributed only by their last step.
    """
    catalog = read_catalog(context)
    state = SchemaState(context.schema, catalog)
    if not state.installed:
        return state
    state.versions = [int(v) for (v,) in context.all(plans.versions(context.quoted_schema))]
    if state.version in MANIFEST_VERSIONS:
        state.queues = read_partitioned_queues(context, catalog)
        building = read_unfinished_builds(context, catalog)
        placement = read_placement(context)
        distributed = placement is not None and placement.get("job", Placement("local")).kind == "distributed"
        expected = expected_catalog(state.version)
        if distributed:
            expected = distributed_catalog(expected)
        state.report = compare(expected, catalog, state.queues, building)
        if check_placement:
            state.report.problems.extend(_placement_problems(placement, distributed, catalog, state.queues))
    return state


def read_placement(context: DatabaseContext) -> dict[str, Placement] | None:
    """Where Citus places each of the schema's tables it knows, or None without the citus extension."""
    if context.one_or_none(citus_plans.citus_extension()) is None:
        return None
    rows = context.all(citus_plans.placement(), {"nspname": context.schema})
    return {table: Placement(kind, column, colocation) for table, kind, column, colocation in rows}


def _placement_problems(
    placement: dict[str, Placement] | None, distributed: bool, catalog: Catalog, queues: list[QueueTable]
) -> list[str]:
    backend = pgboss_settings.BACKEND
    if backend == CITUS_DISTRIBUTED and placement is None:
        return [
            'PGBOSS["BACKEND"] is "citus-distributed", but this database has no citus extension: '
            "create it (and register the worker nodes), then run manage.py migrate pgboss"
        ]
    if backend == CITUS_DISTRIBUTED and not distributed:
        return [
            'PGBOSS["BACKEND"] is "citus-distributed", but the job table is not distributed: run manage.py migrate pgboss'
        ]
    if backend == CITUS_DISTRIBUTED:
        assert placement is not None
        return placement_problems(placement, catalog.tables, queues)
    if distributed:
        return [
            f'the job table is distributed over a Citus cluster, but PGBOSS["BACKEND"] is "{backend}": '
            'set it to "citus-distributed"'
        ]
    return []


def read_version(context: DatabaseContext) -> int | None:
    """The version of ``context``'s schema, or None when it has no version table or not exactly
    one row in it."""
    quoted = context.quoted_schema
    (table,) = context.one(plans.version_table(), {"relation": f"{quoted}.version"})
    if table is None:
        return None
    rows = context.all(plans.versions(quoted))
    return int(rows[0][0]) if len(rows) == 1 else None


def read_unfinished_builds(context: DatabaseContext, catalog: Catalog) -> frozenset[str]:
    """The indexes a bam command not yet completed will build: pg-boss's drift check counts a
    missing one among those as still building, not as drift."""
    if "bam" not in catalog.tables:
        return frozenset()
    rows = context.all(plans.unfinished_index_builds(context.quoted_schema))
    return frozenset(name for (command,) in rows if (name := built_index(command)))


def built_index(command: str) -> str | None:
    """The index a bam command builds, as pg-boss's bamCommandIndexName reads it, or None."""
    match = INDEX_BUILD.match(command)
    return match.group(1) if match else None


def read_partitioned_queues(context: DatabaseContext, catalog: Catalog) -> list[QueueTable]:
    """The queues that have a table of their own, when the queue table can say (else none)."""
    queue_columns = catalog.columns.get("queue", {})
    if not {"name", "table_name", "policy", "partition"} <= set(queue_columns):
        return []
    rows = context.all(plans.partitioned_queues(context.quoted_schema))
    return [QueueTable(name, table, policy) for name, table, policy in rows]


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
