"""manage.py pgboss_rollback: roll the pg-boss schema back one version, as ``pg-boss rollback`` does."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connections, transaction

from django_pgboss.conf import pgboss_settings
from django_pgboss.operations import ROLLBACK_STEPS, render_sql
from django_pgboss.schema.state import read_state
from django_pgboss.version import version_text


class Command(BaseCommand):
    help = (
        "Roll the pg-boss schema back one version (43 to 42, for pg-boss 12.33 and 12.34), as pg-boss's "
        "own rollback does, in one transaction under pg-boss's advisory lock. --sql prints the SQL instead. "
        "django_pgboss itself needs schema 43: stop its workers and monitors first."
    )
    requires_system_checks: list[str] = []

    def get_version(self) -> str:
        return version_text()

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--database",
            default=None,
            help='the database alias whose schema to roll back (default PGBOSS["DATABASE"])',
        )
        parser.add_argument(
            "--sql", action="store_true", help="print the statements (for psql) instead of running them"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        alias = options["database"] or pgboss_settings.DATABASE
        schema = pgboss_settings.SCHEMA
        where = f'pg-boss schema "{schema}" in database {alias!r}'
        with connections[alias].cursor() as cursor:
            state = read_state(cursor, schema)
        if not state.catalog.exists or not state.installed or state.version is None:
            raise CommandError(f"{where}: no pg-boss schema with one version row to roll back")
        step = ROLLBACK_STEPS.get(state.version)
        if step is None:
            known = ", ".join(f"{version} to {version - 1}" for version in sorted(ROLLBACK_STEPS))
            raise CommandError(
                f"{where} is at version {state.version}: django_pgboss rolls back {known} only "
                f"(pg-boss's own `pg-boss rollback` goes further)"
            )
        sql = render_sql(step, schema)
        if options["sql"]:
            self.stdout.write(f"-- Rolls {where} back from version {state.version} to {state.version - 1}.")
            self.stdout.write("BEGIN;")
            self.stdout.write(sql.rstrip())
            self.stdout.write("COMMIT;")
            return
        with transaction.atomic(using=alias), connections[alias].cursor() as cursor:
            # params=None keeps the driver from reading the format() specifiers (%I, %L) of the
            # plpgsql body as placeholders.
            cursor.execute(sql, None)
        self.stdout.write(
            self.style.SUCCESS(f"rolled back {where} from version {state.version} to {state.version - 1}.")
        )
        self.stdout.write(
            "django_pgboss needs version 43: `manage.py migrate pgboss` does not upgrade it again (its "
            "migration stays recorded); see docs/operations.md, 'Rolling back'."
        )
