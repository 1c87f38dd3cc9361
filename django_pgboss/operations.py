"""RunPgBossSQL: the migration operation that applies one frozen file of ``django_pgboss/sql/``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.db import router
from django.db.migrations.operations.base import Operation

from django_pgboss.conf import pgboss_settings
from django_pgboss.db.identifiers import quote_schema, schema_key

SQL_DIR = Path(__file__).resolve().parent / "sql"

#: The placeholder the SQL files use for the schema name in SQL text.
SCHEMA_TOKEN = "{{schema}}"
#: The placeholder for the schema as it enters pg-boss's advisory-lock key (see schema_key).
SCHEMA_KEY_TOKEN = "{{schema_key}}"


def render_sql(filename: str, schema: str) -> str:
    """Return the text of ``sql/<filename>`` with the schema name quoted into it.

    The schema name is validated first (see :func:`django_pgboss.identifiers.quote_schema`), so an
    invalid PGBOSS["SCHEMA"] raises ImproperlyConfiguredSchema before any SQL is produced.
    """
    quoted = quote_schema(schema)
    text = (SQL_DIR / filename).read_text(encoding="utf-8")
    return text.replace(SCHEMA_KEY_TOKEN, schema_key(schema)).replace(SCHEMA_TOKEN, quoted)


class RunPgBossSQL(Operation):
    """Apply ``sql/<filename>`` forwards and ``sql/<reverse_filename>`` backwards.

    The schema is read from settings when the operation runs, not when the migration is imported,
    so one set of migrations serves every schema name. The SQL runs only on the database alias
    PGBOSS["DATABASE"] names (and only where the router allows the app): a project with several
    databases gets one pg-boss schema, where its jobs are sent.

    Frozen SQL is the contract: released files are never edited, a change is a new file.
    """

    reduces_to_sql = True

    def __init__(self, filename: str, reverse_filename: str | None = None) -> None:
        self.filename = filename
        self.reverse_filename = reverse_filename
        self.hints: dict[str, Any] = {}
        for name in filter(None, (filename, reverse_filename)):
            if not (SQL_DIR / name).is_file():
                raise FileNotFoundError(f"RunPgBossSQL: {SQL_DIR / name} does not exist")

    # A property, as Django's RunSQL has it: an operation is reversible when it has a reverse file.
    # Operation declares ``reversible`` a class variable, hence the override ignore (django-stubs
    # carries the same one on RunSQL).
    @property
    def reversible(self) -> bool:  # type: ignore[override]
        return self.reverse_filename is not None

    def deconstruct(self) -> tuple[str, list[Any], dict[str, Any]]:
        kwargs = {"reverse_filename": self.reverse_filename} if self.reverse_filename else {}
        return (self.__class__.__name__, [self.filename], kwargs)

    def describe(self) -> str:
        return f"Apply pg-boss SQL {self.filename}"

    def state_forwards(self, app_label: str, state: Any) -> None:
        """The SQL creates tables the ORM does not manage: the model state is left as it is."""

    def _run(self, app_label: str, schema_editor: Any, filename: str) -> None:
        connection = schema_editor.connection
        if connection.alias != pgboss_settings.DATABASE:
            return
        if not router.allow_migrate(connection.alias, app_label, **self.hints):
            return
        if connection.vendor != "postgresql":
            raise RuntimeError(
                f"django_pgboss needs PostgreSQL; database {connection.alias!r} is {connection.vendor}."
            )
        # params=None keeps the driver from reading the format() specifiers (%I, %L) in the
        # plpgsql bodies as placeholders.
        schema_editor.execute(render_sql(filename, pgboss_settings.SCHEMA), params=None)

    def database_forwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        self._run(app_label, schema_editor, self.filename)

    def database_backwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        if self.reverse_filename is None:
            raise NotImplementedError(f"{self.filename} has no reverse SQL file")
        self._run(app_label, schema_editor, self.reverse_filename)
