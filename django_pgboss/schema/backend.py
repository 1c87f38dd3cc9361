"""Whether a database fits PGBOSS["BACKEND"]: what it offers, read once, and the problem if any.

The system check pgboss.E009 and ``migrate``'s refusal (``operations.refuse_unfit_backend``) both
start from here, so the check and the refusal say the same sentence.
"""

from __future__ import annotations

from dataclasses import dataclass

from django_pgboss.constants import Backend
from django_pgboss.db.context import DatabaseContext
from django_pgboss.plans import citus as citus_plans


@dataclass(frozen=True)
class CitusFacts:
    """What a database offers for Citus: the extension's version (None without it), whether it is
    a coordinator, and how many active worker nodes it knows."""

    extension: str | None
    coordinator: bool
    workers: int


def read_citus_facts(context: DatabaseContext) -> CitusFacts:
    """Read the facts on ``context``'s database: two catalog reads, no writes, no error on a
    database without Citus (the node read runs only where the extension is)."""
    row = context.one_or_none(citus_plans.citus_extension())
    if row is None:
        return CitusFacts(extension=None, coordinator=False, workers=0)
    coordinator, workers = context.one(citus_plans.citus_nodes())
    return CitusFacts(extension=row[0], coordinator=bool(coordinator), workers=int(workers))


def backend_problem(backend: str, facts: CitusFacts, alias: str) -> str | None:
    """Why database ``alias`` cannot serve PGBOSS["BACKEND"] = ``backend``, as one sentence without
    its full stop, or None when it can (always on "postgres": pg-boss's default runs on a Citus
    coordinator as on any PostgreSQL)."""
    if backend == Backend.POSTGRES:
        return None
    if facts.extension is None:
        return (
            f'settings.PGBOSS["BACKEND"] is {backend!r}, but database {alias!r} has no citus extension '
            "(it is plain PostgreSQL, or CREATE EXTENSION citus was not run in that database)"
        )
    if backend != Backend.CITUS_DISTRIBUTED:
        return None
    if facts.workers == 0:
        return (
            f"settings.PGBOSS[\"BACKEND\"] is 'citus-distributed', but database {alias!r} knows no active "
            "Citus worker node to distribute the job table over (on the coordinator, register it with "
            "citus_set_coordinator_host() and the workers with citus_add_node())"
        )
    if not facts.coordinator:
        return (
            f"settings.PGBOSS[\"BACKEND\"] is 'citus-distributed', but database {alias!r} is on a Citus "
            "worker node, not the coordinator (point the database at the coordinator)"
        )
    return None
