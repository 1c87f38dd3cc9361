"""manage.py pgboss_doctor: compare the live pg-boss schema with what schema 46 must be."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError

from django_pgboss.constants import SCHEMA_VERSION
from django_pgboss.management.schema_commands import SchemaCommand, read_installed_schema
from django_pgboss.schema.adoption import newer_schema_message
from django_pgboss.schema.manifest import expected_catalog
from django_pgboss.version import PGBOSS_VERSION


class Command(SchemaCommand):
    help = (
        f"Check the pg-boss schema against pg-boss {PGBOSS_VERSION}'s schema {SCHEMA_VERSION}, as pg-boss's "
        "own drift check does "
        "(tables, partitions, columns, defaults, indexes, constraints, functions, the job_state enum). "
        "Exits non-zero when it differs."
    )
    database_help = "the database alias whose schema to check"

    def handle(self, *args: Any, **options: Any) -> None:
        found = read_installed_schema(options["database"])
        state, where = found.state, found.where
        if found.version < SCHEMA_VERSION:
            raise CommandError(
                f"{where} is at version {state.version}, older than {SCHEMA_VERSION}: run manage.py migrate pgboss"
            )
        if found.version > SCHEMA_VERSION:
            # pg-boss runs on a schema a newer release migrated, and so do our workers: there is no
            # manifest to check it against, which is a warning, not a failure.
            self.stdout.write(self.style.WARNING(f"{newer_schema_message(state, found.alias)}."))
            return
        report = state.report
        assert report is not None  # read_state compares the schema at SCHEMA_VERSION
        expected = expected_catalog()
        self.stdout.write(
            f"{where}: version {state.version}, {len(state.queues)} queue(s) with a table of their own"
        )
        self.stdout.write(
            f"Compared with pg-boss {PGBOSS_VERSION}'s schema {SCHEMA_VERSION}: {len(expected.tables)} tables and each "
            f"queue's own, their partitions, columns, defaults, indexes and constraints, "
            f"{len(expected.functions)} functions, the job_state enum order."
        )
        for note in report.notes:
            self.stdout.write(f"  note: {note}")
        if report.ok:
            self.stdout.write(self.style.SUCCESS("OK: no drift."))
            return
        for problem in report.problems:
            self.stdout.write(f"  - {problem}")
        count = len(report.problems)
        raise CommandError(
            f"schema drift: {count} difference{'s' if count != 1 else ''} from schema {SCHEMA_VERSION}"
        )
