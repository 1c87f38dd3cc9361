"""The citus-distributed variant of schema 46: where each table lives, and what the drift check
expects of it (``PGBOSS["BACKEND"] = "citus-distributed"``, applied by ``sql/citus/distribute.sql``).

The variant is schema 46 with two differences, both declared here so that the doctor and the system
check know them and report no false drift:

- job's two foreign keys (``q_fkey``, ``dlq_fkey``) are declared on the partitioned parent, from
  where PostgreSQL clones them to every partition, instead of on each partition: Citus refuses a
  foreign key declared on a partition of a distributed table.
- the tables are placed over the cluster as :data:`PLACEMENT` says, which the catalog does not show
  and :func:`placement_problems` checks against Citus's metadata.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from django_pgboss.constants import Backend
from django_pgboss.schema.catalog import Catalog
from django_pgboss.schema.drift import COMMON_JOB_TABLE, QueueTable

#: The backend profile whose schema this module describes.
CITUS_DISTRIBUTED = Backend.CITUS_DISTRIBUTED

#: The column the job table and its partitions are distributed by.
DISTRIBUTION_COLUMN = "name"

#: Where each of pg-boss's tables lives in the variant. Job tables (job, job_common and each
#: partitioned queue's own) are distributed by name and colocated; the tables a job statement
#: joins or job's foreign keys point at are reference tables, copied to every node; the rest stay
#: plain tables on the coordinator, which is the only node that reads them.
PLACEMENT: dict[str, str] = {
    "job": "distributed",
    COMMON_JOB_TABLE: "distributed",
    "queue": "reference",
    "schedule": "reference",
    "subscription": "reference",
    "job_dependency": "reference",
    "version": "local",
    "warning": "local",
    "bam": "local",
    "instance": "local",
    "queue_stats": "local",
}

#: The foreign keys the variant declares on job rather than on each job table.
PARENT_FOREIGN_KEYS = ("q_fkey", "dlq_fkey")


@dataclasses.dataclass(frozen=True)
class Placement:
    """One table as Citus's metadata lists it: ``kind`` (distributed, reference, local), the
    distribution column of a distributed table, and its colocation group."""

    kind: str
    column: str | None = None
    colocation: int | None = None


def distributed_catalog(expected: Catalog) -> Catalog:
    """``expected`` (schema 46's manifest) as the citus-distributed variant holds it: the job
    table's foreign keys on the parent, every job table inheriting them from there."""
    common = expected.constraints.get(COMMON_JOB_TABLE, {})
    moved = {name: common[name] for name in PARENT_FOREIGN_KEYS if name in common}
    constraints = {table: dict(defs) for table, defs in expected.constraints.items()}
    constraints["job"] = {**constraints.get("job", {}), **moved}
    return dataclasses.replace(expected, constraints=constraints)


def placement_problems(
    found: dict[str, Placement], tables: Iterable[str], queues: Iterable[QueueTable]
) -> list[str]:
    """What differs between where the live tables are (``found``, from Citus's metadata; a table
    missing there is a plain table on the coordinator) and :data:`PLACEMENT`, as sentences.

    ``tables`` are the schema's live tables (a missing table is the drift check's to report) and
    ``queues`` its partitioned queues, whose own tables must be distributed like job_common.
    """
    present = set(tables)
    wanted = {table: kind for table, kind in PLACEMENT.items() if table in present}
    wanted.update({queue.table: "distributed" for queue in queues if queue.table in present})
    problems = []
    job = found.get("job")
    for table, kind in sorted(wanted.items()):
        have = found.get(table, Placement("local"))
        if have.kind != kind:
            problems.append(f"table {table} is {_where(have.kind)}, expected {_where(kind)}")
        elif kind == "distributed" and have.column != DISTRIBUTION_COLUMN:
            problems.append(
                f"table {table} is distributed by {have.column}, expected by {DISTRIBUTION_COLUMN}"
            )
        elif kind == "distributed" and job is not None and have.colocation != job.colocation:
            problems.append(f"table {table} is not colocated with job")
    return problems


def _where(kind: str) -> str:
    return {
        "distributed": "distributed over the workers",
        "reference": "a reference table (on every node)",
        "local": "a plain table on the coordinator",
    }[kind]
