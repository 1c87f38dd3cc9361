"""manage.py pgboss_doctor: compare the live pg-boss schema with what schema 43 must be."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connections

from django_pgboss.conf import pgboss_settings
from django_pgboss.constants import SCHEMA_VERSION
from django_pgboss.schema.manifest import expected_catalog
from django_pgboss.schema.state import read_state
from django_pgboss.version import version_text


class Command(BaseCommand):
    help = (
        "Check the pg-boss schema against pg-boss 12.35's schema 43, as pg-boss's own drift check does "
        "(tables, partitions, columns, defaults, indexes, constraints, functions, the job_state enum). "
        "Exits non-zero when it differs."
    )
    requires_system_checks: list[str] = []

    def get_version(self) -> str:
        """What --version prints: django_pgboss's version and the pg-boss release it ports."""
        return version_text()

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--database",
            default=None,
            help='the database alias whose schema to check (default PGBOSS["DATABASE"])',
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            alias = options["database"] or pgboss_settings.DATABASE
            schema = pgboss_settings.SCHEMA
        except ImproperlyConfigured as exc:
            # The doctor runs without the system checks (it must work on a broken deployment), so
            # it says itself what pgboss.E004 would: one line, not a traceback.
            raise CommandError(f"{exc} (pgboss.E004)") from None
        with connections[alias].cursor() as cursor:
            state = read_state(cursor, schema)
        where = f'pg-boss schema "{schema}" in database {alias!r}'
        if not state.catalog.exists or not state.installed:
            objects = state.pgboss_objects() if state.catalog.exists else []
            detail = f" (it holds {', '.join(objects)} but no version table)" if objects else ""
            raise CommandError(
                f"the pgboss schema is not installed in database {alias!r}{detail}: run manage.py migrate pgboss"
            )
        if state.version is None:
            raise CommandError(
                f"{where}: the version table holds {len(state.versions)} rows, expected one (version {SCHEMA_VERSION})"
            )
        if state.version < SCHEMA_VERSION:
            raise CommandError(
                f"{where} is at version {state.version}, older than {SCHEMA_VERSION}: run manage.py migrate pgboss"
            )
        if state.version > SCHEMA_VERSION:
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
