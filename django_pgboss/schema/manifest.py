"""What a pg-boss schema version must hold: the frozen manifests ``schemaNN.json`` and how they are made.

A manifest is a catalog capture (pg_get_indexdef, pg_get_constraintdef, format_type, prosrc ...)
of a schema with no queue in it, taken once and frozen like the SQL files it describes:
``schema43.json`` of what ``sql/0001_initial.sql`` creates, ``schema46.json`` of what migrations
0001 to 0007 create (tests/test_doctor.py proves each equals both the schema our migrations create
and the one pg-boss installs itself: 12.35.0 for 43, 12.38.0 for 46). Versions 44 and 45 have no
manifest: no pg-boss release on npm installs them, and migration 0007 checks the schema they lead
to. Per-queue tables are not in a manifest; the drift check derives what each must hold from
``job_common``'s entries, as pg-boss does.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

from django_pgboss.constants import SCHEMA_VERSION
from django_pgboss.schema.catalog import SCHEMA_TOKEN, Catalog, Column, Function, Index

MANIFEST_DIR = Path(__file__).resolve().parent
#: The versions that have a manifest, each in ``schema<version>.json``.
MANIFEST_VERSIONS = (43, 46)
#: The manifest of the schema these migrations create.
MANIFEST_PATH = MANIFEST_DIR / f"schema{MANIFEST_VERSIONS[-1]}.json"

#: Each day's queue_stats partition (queue_stats_YYYYMMDD) comes and goes with the monitor's
#: retention, so neither the tables nor the indexes PostgreSQL names after them are in the manifest.
DAILY_STATS_PARTITION = re.compile(r"^queue_stats_\d{8}(_|$)")


def manifest_path(version: int) -> Path:
    """Where the manifest of ``version`` is kept (whether or not it has one)."""
    return MANIFEST_DIR / f"schema{version}.json"


@functools.lru_cache(maxsize=len(MANIFEST_VERSIONS))
def expected_catalog(version: int = SCHEMA_VERSION) -> Catalog:
    """Schema ``version`` as its manifest describes it, as a :class:`Catalog` (read once per process)."""
    if version not in MANIFEST_VERSIONS:
        raise ValueError(f"pg-boss schema {version} has no manifest (those kept: {MANIFEST_VERSIONS})")
    return catalog_from_manifest(json.loads(manifest_path(version).read_text(encoding="utf-8")))


def expected_version() -> int:
    """The schema version the newest manifest describes (SCHEMA_VERSION)."""
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

    Used once to write each schemaNN.json, and by the test that proves the frozen file still
    describes what the migrations create.
    """
    tables = {name: kind for name, kind in catalog.tables.items() if not DAILY_STATS_PARTITION.match(name)}
    return {
        "_comment": f"Frozen: pg-boss schema {version} as django_pgboss's migrations create it (django_pgboss.schema.manifest).",
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
