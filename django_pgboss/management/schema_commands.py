"""What the schema commands (pgboss_doctor, pgboss_rollback) share: their base class (no system
checks, --version, --database), which database and schema they act on, and what is installed there,
with the refusals they make alike."""

from __future__ import annotations

from dataclasses import dataclass

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser

from django_pgboss.conf import pgboss_settings
from django_pgboss.db.context import DatabaseContext
from django_pgboss.schema.state import SchemaState, read_state
from django_pgboss.version import version_text


class SchemaCommand(BaseCommand):
    """The base of the commands that act on the pg-boss schema itself.

    They run without the system checks, since they must work on a deployment the checks reject (a
    schema not installed, older, drifted), and take ``--database``; ``database_help`` says what the
    subclass does to that database's schema.
    """

    requires_system_checks: list[str] = []
    database_help = "the database alias whose schema to use"

    def get_version(self) -> str:
        """What --version prints: django_pgboss's version and the pg-boss release it ports."""
        return version_text()

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--database", default=None, help=f'{self.database_help} (default PGBOSS["DATABASE"])'
        )


@dataclass(frozen=True)
class InstalledSchema:
    """The database alias and pg-boss schema a command acts on, and what was found there."""

    alias: str
    schema: str
    state: SchemaState

    @property
    def where(self) -> str:
        """The schema and database as every message of the commands names them."""
        return f'pg-boss schema "{self.schema}" in database {self.alias!r}'

    @property
    def version(self) -> int:
        """The one version row's value (read_installed_schema refuses any other version table)."""
        assert self.state.version is not None
        return self.state.version


def configured_schema(database: str | None) -> tuple[str, str]:
    """The database alias (``database``, default PGBOSS["DATABASE"]) and PGBOSS["SCHEMA"].

    Raises CommandError when the settings are invalid: the schema commands run without the system
    checks (they must work on a broken deployment), so they say themselves what pgboss.E004 would,
    in one line, not a traceback.
    """
    try:
        return database or pgboss_settings.DATABASE, pgboss_settings.SCHEMA
    except ImproperlyConfigured as exc:
        raise CommandError(f"{exc} (pgboss.E004)") from None


def read_installed_schema(database: str | None, schema: str | None = None) -> InstalledSchema:
    """Read the pg-boss schema on ``database`` (an alias, default PGBOSS["DATABASE"]; ``schema``
    default PGBOSS["SCHEMA"]).

    Raises CommandError, before any change, when the settings are invalid, when no pg-boss schema is
    installed there (no version table), or when its version table does not hold exactly one row.
    """
    if schema is None:
        alias, schema = configured_schema(database)
    else:
        alias = database or pgboss_settings.DATABASE
    state = read_state(DatabaseContext(alias, schema))
    found = InstalledSchema(alias, schema, state)
    if not state.catalog.exists or not state.installed:
        objects = state.pgboss_objects() if state.catalog.exists else []
        detail = f" (it holds {', '.join(objects)} but no version table)" if objects else ""
        raise CommandError(
            f"the pgboss schema is not installed in database {alias!r}{detail}: run manage.py migrate pgboss"
        )
    if state.version is None:
        raise CommandError(f"{found.where}: the version table holds {len(state.versions)} rows, expected one")
    return found
