"""What pg-boss schema 43 must hold: the frozen manifest ``schema43.json`` and how it is made.

The manifest is a catalog capture (pg_get_indexdef, pg_get_constraintdef, format_type, prosrc ...)
of the schema ``sql/0001_initial.sql`` creates, with no queue in it, taken once and frozen like the
SQL file it describes: tests/test_doctor.py proves it equals both the schema our migration creates
and the one pg-boss 12.35.0 installs itself. Per-queue tables are not in it; the drift check
derives what each must hold from ``job_common``'s entries, as pg-boss does.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

from django_pgboss.schema.catalog import SCHEMA_TOKEN, Catalog, Column, Function, Index

MANIFEST_PATH = Path(__file__).resolve().parent / "schema43.json"

#: Each day's queue_stats partition (queue_stats_YYYYMMDD) comes and goes with the monitor's
#: retention, so neither the tables nor the indexes PostgreSQL names after them are in the manifest.
DAILY_STATS_PARTITION = re.compile(r"^queue_stats_\d{8}(_|$)")


@functools.lru_cache(maxsize=1)
def expected_catalog() -> Catalog:
    """Schema 43 as the manifest describes it, as a :class:`Catalog` (read once per process)."""
    return catalog_from_manifest(json.loads(MANIFEST_PATH.read_text(encoding="utf-8")))


def expected_version() -> int:
    """The schema version the manifest describes (43)."""
    return int(json.loads(MANIFEST_PATH.read_text(encoding="utf-8"))["version"])


def catalog_from_manifest(data: dict[str, Any]) -> Catalog:
    """The Catalog a manifest document describes."""
    return Catalog(
        tables=dict(data["tables"]),
        partitions={name: (parent, bound) for name, (parent, bound) in data["partitions"].items()},
        columns={
            table: {name: Column(c["type"], c["notNull"], c["default"]) for name, c in columns.items()}
            for table, columns in data["columns"].items()
        },
        indexes={
            name: Index(i["table"], i["definition"], True, i["constraintBacked"])
            for name, i in data["indexes"].items()
        },
        constraints={table: dict(defs) for table, defs in data["constraints"].items()},
        functions={
            name: [
                Function(f["arguments"], f["result"], f["language"], f["volatility"], f["body"])
                for f in overloads
            ]
            for name, overloads in data["functions"].items()
        },
        types=list(data["types"]),
        enum=list(data["enum"]),
    )


def manifest_from_catalog(catalog: Catalog, version: int) -> dict[str, Any]:
    """The manifest document of a freshly installed schema's catalog (no queues in it).

    Used once to write schema43.json, and by the test that proves the frozen file still describes
    what the migration creates.
    """
    tables = {name: kind for name, kind in catalog.tables.items() if not DAILY_STATS_PARTITION.match(name)}
    return {
        "_comment": "Frozen: pg-boss schema 43 as sql/0001_initial.sql creates it (django_pgboss.schema.manifest).",
        "version": version,
        "schemaToken": SCHEMA_TOKEN,
        "tables": tables,
        "partitions": {name: list(p) for name, p in catalog.partitions.items() if name in tables},
        "columns": {
            table: {
                name: {"type": c.type, "notNull": c.not_null, "default": c.default}
                for name, c in columns.items()
            }
            for table, columns in catalog.columns.items()
            if table in tables
        },
        "indexes": {
            name: {"table": i.table, "definition": i.definition, "constraintBacked": i.constraint_backed}
            for name, i in catalog.indexes.items()
            if i.table in tables
        },
        "constraints": {table: defs for table, defs in catalog.constraints.items() if table in tables},
        "functions": {
            name: [
                {
                    "arguments": f.arguments,
                    "result": f.result,
                    "language": f.language,
                    "volatility": f.volatility,
                    "body": f.body,
                }
                for f in overloads
            ]
            for name, overloads in catalog.functions.items()
        },
        "types": catalog.types,
        "enum": catalog.enum,
    }
