"""manage.py pgboss_rollback: roll the pg-boss schema back, one version by default, as ``pg-boss
rollback`` does, or several with ``--to``; each step is one frozen file of ``sql/rollback/``."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser
from django.db import DatabaseError, connections, transaction
from django.db.migrations.recorder import MigrationRecorder

from django_pgboss.constants import SCHEMA_VERSION
from django_pgboss.db.context import DatabaseContext
from django_pgboss.db.identifiers import quote_schema
from django_pgboss.management.schema_commands import (
    InstalledSchema,
    SchemaCommand,
    configured_schema,
    read_installed_schema,
)
from django_pgboss.operations import ROLLBACK_STEPS, render_sql
from django_pgboss.plans.catalog import (
    forget_migrations_script,
    lock_attempt,
    lock_timeout_script,
    queues_of_policy,
)
from django_pgboss.plans.queues import advisory_lock
from django_pgboss.schema.state import OLDEST_MIGRATABLE_VERSION

#: pg-boss's own rollback waits at most this long for a lock (its transaction's lock_timeout), so
#: a rollback queued behind a long statement fails instead of stalling every worker behind it.
LOCK_TIMEOUT = "30s"


class Command(SchemaCommand):
    help = (
        "Roll the pg-boss schema back one version, as pg-boss's own `pg-boss rollback` does, or down to "
        "--to N (25 at the oldest, pg-boss 11.0), step by step, all in one transaction under pg-boss's "
        "advisory lock. --sql prints the SQL instead. pgboss's recorded migrations are forgotten with it, "
        "so `manage.py migrate pgboss` upgrades the schema again. django_pgboss itself needs schema 46: "
        "stop its workers and monitors first."
    )
    database_help = "the database alias whose schema to roll back"

    def add_arguments(self, parser: CommandParser) -> None:
        super().add_arguments(parser)
        parser.add_argument(
            "--to",
            type=int,
            default=None,
            metavar="VERSION",
            help="the schema version to roll back to (default: the version before the schema's)",
        )
        parser.add_argument(
            "--sql", action="store_true", help="print the statements (for psql) instead of running them"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        target = options["to"]
        if target is not None and target < OLDEST_MIGRATABLE_VERSION:
            raise CommandError(f"--to {target}: {too_old(target)}")
        alias, schema = configured_schema(options["database"])
        quote_schema(schema)  # an invalid name is refused before any SQL
        with transaction.atomic(using=alias):
            if not options["sql"]:
                # pg-boss's migration lock before the schema is read, so that what the checks below
                # find is what the steps meet: no pg-boss instance migrates it meanwhile. The lock
                # timeout is set first, as pg-boss sets it, so it bounds the wait for this lock too.
                context = DatabaseContext(alias, schema)
                context.execute(lock_attempt(), {"timeout": LOCK_TIMEOUT})
                context.execute(advisory_lock(), {"lock_key": context.lock_key("")})
            found = read_installed_schema(alias, schema)
            target = checked_target(found, target)
            self.roll_back(found, target, print_only=options["sql"])

    def roll_back(self, found: InstalledSchema, target: int, *, print_only: bool) -> None:
        """Run (or print) the steps from ``found``'s version down to ``target``, in the caller's
        transaction, and forget pgboss's recorded migrations with them."""
        current = found.version
        steps = [render_sql(ROLLBACK_STEPS[version], found.schema) for version in range(current, target, -1)]
        connection = connections[found.alias]
        recorder = MigrationRecorder(connection)
        forget = (
            forget_migrations_script(connection.ops.quote_name(recorder.Migration._meta.db_table))
            if recorder.has_table()
            else None
        )
        span = f"from version {current} to {target}"
        if print_only:
            self.stdout.write(f"-- Rolls {found.where} back {span}, one step per version.")
            self.stdout.write("BEGIN;")
            self.stdout.write(lock_timeout_script(LOCK_TIMEOUT))
            for sql in steps:
                self.stdout.write(sql.rstrip())
            if forget:
                self.stdout.write(
                    "-- Forget pgboss's recorded migrations: migrate pgboss upgrades the schema again."
                )
                self.stdout.write(forget)
            self.stdout.write("COMMIT;")
            return
        context = DatabaseContext(found.alias, found.schema)
        for version, sql in zip(range(current, target, -1), steps, strict=True):
            try:
                # A frozen file of several statements, run as a script (unprepared, unparsed).
                context.script(sql)
            except DatabaseError as exc:
                raise CommandError(
                    f"{found.where}: the step from version {version} to {version - 1} failed, so nothing "
                    f"was changed (the whole rollback is one transaction): {exc}".rstrip()
                ) from exc
        forgotten = recorder.migration_qs.filter(app="pgboss").delete()[0] if forget else 0
        self.stdout.write(self.style.SUCCESS(f"rolled back {found.where} {span}."))
        if forgotten:
            self.stdout.write(
                f"Forgot pgboss's {forgotten} recorded migration(s): `manage.py migrate pgboss` brings the schema "
                f"back to {SCHEMA_VERSION} through django_pgboss's upgrade steps."
            )
        self.stdout.write(
            f"django_pgboss needs version {SCHEMA_VERSION}: run pg-boss's own release for version {target} "
            "on it meanwhile (see docs/operations.md, 'Rolling back')."
        )


def checked_target(found: InstalledSchema, target: int | None) -> int:
    """The version to roll back to (default: the one before the schema's), or CommandError saying
    why this schema is not rolled back there."""
    current = found.version
    if not OLDEST_MIGRATABLE_VERSION <= current <= SCHEMA_VERSION:
        raise CommandError(
            f"{found.where} is at version {current}, which django_pgboss does not roll back: it has the "
            f"steps of pg-boss 12.38 and 12.35, from {SCHEMA_VERSION} down to {OLDEST_MIGRATABLE_VERSION}"
        )
    if target is None:
        target = current - 1
    if target < OLDEST_MIGRATABLE_VERSION:
        raise CommandError(f"{found.where} is at version {current}: {too_old(target)}")
    if target >= current:
        raise CommandError(
            f"{found.where} is at version {current}: --to {target} is not below it (a rollback goes down; "
            f"`manage.py migrate pgboss` goes up)"
        )
    refuse_unsafe(found, target)
    return target


def too_old(target: int) -> str:
    return (
        f"there is no rollback to version {target}: django_pgboss rolls back to version "
        f"{OLDEST_MIGRATABLE_VERSION} (pg-boss 11.0) at the oldest, the oldest schema pg-boss 12.35 migrates"
    )


#: The version that brought the key_strict_fifo policy (pg-boss 12.10).
KEY_STRICT_FIFO_VERSION = 28


def refuse_unsafe(found: InstalledSchema, target: int) -> None:
    """Refuse a schema the frozen steps would not roll back to pg-boss's result, or would roll back
    to a schema that cannot come back.

    The steps are pg-boss's rollback of its own (partitioned) layout: a schema pg-boss installed with
    ``noTablePartitioning`` has a plain job table and none of the job-table helpers the steps call.
    At a version with a manifest (46, 43) the whole schema is checked against it, as the doctor checks
    it: a step would otherwise restore or drop objects that differ from what it expects (its result
    would then be neither version). At the others there is no manifest to compare with; a step that
    meets a missing object fails, and the one transaction leaves the schema as it was.

    One refusal is ours, not pg-boss's: below version 28 while a key_strict_fifo queue exists. Its
    rollback drops the policy's index and CHECK from every job table, so schema 27 would hold a queue
    it cannot work in order, and the upgrade back restores them on job_common only (as pg-boss's
    does), leaving a queue table of its own that migrate then refuses.
    """
    catalog = found.state.catalog
    if catalog.tables.get("job") != "p" or catalog.partitions.get("job_common", ("",))[0] != "job":
        raise CommandError(
            f"{found.where} does not have pg-boss's partitioned job table (job, with job_common its "
            f"DEFAULT partition), which the rollback steps are written for: not rolled back"
        )
    if target < KEY_STRICT_FIFO_VERSION <= found.version:
        context = DatabaseContext(found.alias, found.schema)
        rows = context.all(queues_of_policy(context.quoted_schema), {"policy": "key_strict_fifo"})
        fifo = [name for (name,) in rows]
        if fifo:
            raise CommandError(
                f"{found.where} has key_strict_fifo queues ({', '.join(fifo)}), a policy schema "
                f"{KEY_STRICT_FIFO_VERSION - 1} and older do not have: not rolled back below version "
                f"{KEY_STRICT_FIFO_VERSION}. Delete those queues first (boss.delete_queue()), or roll back "
                f"to {KEY_STRICT_FIFO_VERSION} at the oldest"
            )
    report = found.state.report  # at a version with a manifest (43, 46)
    if report is not None and not report.ok:
        problems = "; ".join(report.problems)
        raise CommandError(
            f"{found.where} has drift from schema {found.version} (run manage.py pgboss_doctor): {problems}. "
            f"Not rolled back: the steps would not give pg-boss's schema {found.version - 1}"
        )
