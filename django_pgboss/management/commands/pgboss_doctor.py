"""manage.py pgboss_doctor: compare the live pg-boss schema with what schema 43 must be."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError

from django_pgboss.constants import SCHEMA_VERSION
from django_pgboss.management.schema_commands import SchemaCommand, read_installed_schema
from django_pgboss.schema.manifest import expected_catalog


class Command(SchemaCommand):
    help = (
        "Check the pg-boss schema against pg-boss 12.35's schema 43, as pg-boss's own drift check does "
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
            raise CommandError(
                f"{where} is at version {state.version}, newer than the {SCHEMA_VERSION} this django_pgboss "
                f"supports (pg-boss 12.35): upgrade django_pgboss"
            )
        report = state.report
        assert report is not None  # read_state compares every schema at version 43
        expected = expected_catalog()
        self.stdout.write(
            f"{where}: version {state.version}, {len(state.queues)} queue(s) with a table of their own"
        )
        self.stdout.write(
            f"Compared with pg-boss 12.35's schema {SCHEMA_VERSION}: {len(expected.tables)} tables and each "
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
