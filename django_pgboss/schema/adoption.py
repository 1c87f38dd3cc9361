"""What ``migrate pgboss`` does with the schema it finds: install, adopt, upgrade, or refuse.

pg-boss decides the same way at start(): no version table means install, a version below its own
means migrate, its own version means nothing to do, and a newer one is run as it is (an instance
of an older release keeps working beside one that migrated). We check more before we adopt,
because adopting records the migration as applied for good: at a version with a manifest (43, 46)
the catalog must be that schema object for object (the drift check), or nothing is recorded and the
message names what differs. Migration 0001 brings a schema to 43 at least; migrations 0005 to 0007
take it on to 46, and the last of them checks the result.
"""

from __future__ import annotations

from dataclasses import dataclass

from django_pgboss.constants import INITIAL_SCHEMA_VERSION as INITIAL_VERSION
from django_pgboss.constants import SCHEMA_VERSION
from django_pgboss.exceptions import SchemaError
from django_pgboss.schema.state import OLDEST_MIGRATABLE_VERSION, SchemaState, describe

#: How many drift findings a refusal lists before it says how many more the doctor would show.
MAX_LISTED = 12


@dataclass(frozen=True)
class InstallPlan:
    """``action`` is "install" (create schema 43), "adopt" (change nothing) or "upgrade" (run the
    steps from ``from_version`` to 43); ``message``, when set, is what migrate prints instead of the
    usual line (an adopted schema that is not checked here, and why)."""

    action: str
    from_version: int | None = None
    message: str = ""


def plan_installation(state: SchemaState, database: str, upgradable: frozenset[int]) -> InstallPlan:
    """Decide what migration 0001 does with ``state``; raise SchemaError when it must do nothing.

    ``upgradable`` holds the versions our frozen upgrade steps start from.
    """
    if not state.catalog.exists:
        return InstallPlan("install")
    if not state.installed:
        objects = state.pgboss_objects()
        if not objects:
            # A schema the user made beforehand, or one holding only their own objects: pg-boss
            # installs into it too (CREATE SCHEMA IF NOT EXISTS).
            return InstallPlan("install")
        raise SchemaError(
            f"{describe(state, database)}: it is half installed, so migrate pgboss neither installs over "
            f"it nor adopts it. Drop those objects (or restore the schema pg-boss installed) and run "
            f"manage.py migrate pgboss again."
        )
    version = state.version
    if version is None:
        raise SchemaError(f"{describe(state, database)}: fix the version table by hand before migrating.")
    if version > SCHEMA_VERSION:
        return InstallPlan("adopt", message=newer_schema_message(state, database))
    if INITIAL_VERSION < version < SCHEMA_VERSION:
        return InstallPlan(
            "adopt",
            message=(
                f'adopted the pg-boss schema "{state.schema}" in database {database!r} at version '
                f"{version}; the migrations that follow take it to {SCHEMA_VERSION} and check it"
            ),
        )
    if version < INITIAL_VERSION:
        if version < OLDEST_MIGRATABLE_VERSION:
            raise SchemaError(
                f"{describe(state, database)}, older than version {OLDEST_MIGRATABLE_VERSION} (pg-boss 11.0), "
                f"the oldest pg-boss 12.35 migrates: upgrade it with pg-boss 10 and 11 first; nothing was changed."
            )
        if version not in upgradable:
            raise SchemaError(
                f"{describe(state, database)}: no upgrade step starts there; nothing was changed."
            )
        return InstallPlan("upgrade", version)
    assert state.report is not None  # read_state compares every schema at 43 and 46
    if not state.report.ok:
        raise SchemaError(drift_refusal(state, database))
    return InstallPlan("adopt")


def newer_schema_message(state: SchemaState, database: str) -> str:
    """What migrate, the checks and the doctor say of a schema newer than SCHEMA_VERSION."""
    return (
        f"{describe(state, database)}, newer than the version {SCHEMA_VERSION} (pg-boss 12.38) this "
        f"django_pgboss knows: a newer pg-boss migrated it. django_pgboss runs on it as it is, as an older "
        f"pg-boss does, without checking its catalog; upgrade django_pgboss to a release that knows "
        f"version {state.version}"
    )


def drift_refusal(state: SchemaState, database: str) -> str:
    """The refusal for a schema whose version row and catalog disagree."""
    assert state.report is not None
    problems = state.report.problems
    listed = "\n".join(f"  - {p}" for p in problems[:MAX_LISTED])
    more = f"\n  ... and {len(problems) - MAX_LISTED} more" if len(problems) > MAX_LISTED else ""
    return (
        f"{describe(state, database)} but differs from pg-boss's schema {state.version}, so migrate pgboss does not "
        f"adopt it ({len(problems)} difference{'s' if len(problems) != 1 else ''}):\n{listed}{more}\n"
        f"manage.py pgboss_doctor shows the full report. Nothing was changed."
    )


def adoption_message(state: SchemaState, database: str) -> str:
    """The one line migrate prints when it adopts a schema pg-boss installed."""
    return (
        f'adopted the existing pg-boss schema "{state.schema}" in database {database!r} '
        f"(version {state.version}, catalog checked); nothing was changed"
    )


def upgrade_refusal(state: SchemaState, database: str, from_version: int, to_version: int) -> SchemaError:
    """The error for an upgrade whose result is not schema ``to_version`` (the migration then
    rolls back)."""
    if state.report is None:
        found = describe(state, database)
        return SchemaError(
            f"upgrading from version {from_version} left {found}, not {to_version}; nothing was changed."
        )
    problems = state.report.problems
    listed = "\n".join(f"  - {p}" for p in problems[:MAX_LISTED])
    more = f"\n  ... and {len(problems) - MAX_LISTED} more" if len(problems) > MAX_LISTED else ""
    return SchemaError(
        f'upgrading pg-boss schema "{state.schema}" in database {database!r} from version {from_version} '
        f"to {to_version} does not give pg-boss's schema {to_version}, so it was rolled back (the schema "
        f"was not what version {from_version} should be, or pg-boss left index builds unfinished in its "
        f"bam table):\n{listed}{more}\nStart pg-boss (Node) on it once, which migrates it and finishes "
        f"its builds, then run manage.py migrate pgboss again. Nothing was changed."
    )
