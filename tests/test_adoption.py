"""migrate pgboss on a database where pg-boss (Node) installed its schema first: adopted when it is
schema 46 object for object, refused with the differences named otherwise."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.recorder import MigrationRecorder

from django_pgboss import boss
from django_pgboss.conf import pgboss_settings
from django_pgboss.db.context import DatabaseContext
from django_pgboss.db.identifiers import quote_identifier
from django_pgboss.exceptions import SchemaError
from django_pgboss.schema.catalog import read_catalog
from tests.conftest import database_url

pytestmark = pytest.mark.django_db(transaction=True)

REPO = Path(__file__).resolve().parents[1]


def q() -> str:
    return quote_identifier(pgboss_settings.SCHEMA)


def execute(*statements: str) -> None:
    with connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)


def catalog():
    return read_catalog(DatabaseContext(schema=pgboss_settings.SCHEMA))


def applied() -> set[str]:
    return {name for app, name in MigrationRecorder(connection).applied_migrations() if app == "pgboss"}


def all_migrations() -> set[str]:
    """Every pgboss migration on disk: adoption records 0001, and the later ones apply on top."""
    loader = MigrationLoader(None, ignore_no_migrations=True)
    return {name for app, name in loader.disk_migrations if app == "pgboss"}


def migrate(*args: str, verbosity: int = 1) -> str:
    out = io.StringIO()
    call_command("migrate", "pgboss", *args, stdout=out, verbosity=verbosity)
    return out.getvalue()


@pytest.fixture
def empty_database():
    """No pgboss schema and no pgboss migration recorded; the suite's schema is back afterwards."""
    migrate("zero", verbosity=0)
    assert not catalog().exists
    yield
    execute(f"DROP SCHEMA IF EXISTS {q()} CASCADE")
    MigrationRecorder(connection).migration_qs.filter(app="pgboss").delete()
    migrate(verbosity=0)


@pytest.mark.node
def test_migrate_adopts_the_schema_pg_boss_installed_and_changes_nothing(empty_database, run_pgboss):
    schema = pgboss_settings.SCHEMA
    run_pgboss("install", schema)
    run_pgboss(
        "drift",
        schema,
        json.dumps(
            [{"name": "node-shared", "options": {}}, {"name": "node-own", "options": {"partition": True}}]
        ),
    )
    sent = run_pgboss("send", schema, "node-own", json.dumps([{"data": {"n": 1}}, {"data": {"n": 2}}]))["ids"]
    before = catalog()

    output = migrate()

    assert [line for line in output.splitlines() if "adopted" in line] == [
        f'  Applying pgboss.0001_initial... adopted the existing pg-boss schema "{schema}" in database '
        "'default' (version 46, catalog checked); nothing was changed. OK"
    ]
    assert catalog() == before
    assert applied() == all_migrations()
    jobs = boss.fetch("node-own", batch_size=5)
    assert sorted(job.id for job in jobs) == sorted(sent)
    assert boss.complete("node-own", jobs) == 2


@pytest.mark.node
def test_migrate_refuses_a_schema_at_46_with_drift_and_names_it(empty_database, run_pgboss):
    run_pgboss("install", pgboss_settings.SCHEMA)
    execute(
        f"DROP INDEX {q()}.job_common_i11",
        f"ALTER TABLE {q()}.queue ALTER COLUMN retry_limit TYPE bigint",
    )
    before = catalog()
    with pytest.raises(SchemaError) as refused:
        migrate()
    message = str(refused.value)
    assert message.startswith(
        f"schema \"{pgboss_settings.SCHEMA}\" in database 'default' is pg-boss schema version 46 but differs "
        "from pg-boss's schema 46, so migrate pgboss does not adopt it (2 differences):\n"
    )
    assert "  - index job_common_i11 on job_common is missing\n" in message
    assert "  - column queue.retry_limit is bigint, expected integer\n" in message
    assert message.endswith("manage.py pgboss_doctor shows the full report. Nothing was changed.")
    assert applied() == set()
    assert catalog() == before


@pytest.mark.node
def test_migrate_adopts_a_schema_newer_than_46_with_a_warning_and_runs_on_it(empty_database, run_pgboss):
    run_pgboss("install", pgboss_settings.SCHEMA)
    run_pgboss("drift", pgboss_settings.SCHEMA, json.dumps([{"name": "node-newer", "options": {}}]))
    execute(f"UPDATE {q()}.version SET version = 47")
    before = catalog()

    output = migrate()

    assert (
        "is pg-boss schema version 47, newer than the version 46 (pg-boss 12.38) this django_pgboss "
        "knows: a newer pg-boss migrated it. django_pgboss runs on it as it is"
    ) in output
    assert applied() == all_migrations()
    assert catalog() == before  # no step ran: 0005 to 0007 leave a schema past their version alone
    job_id = boss.send("node-newer", {"n": 1})
    [job] = boss.fetch("node-newer")
    assert job.id == job_id
    assert boss.complete("node-newer", [job]) == 1


def test_migrate_refuses_a_half_installed_schema(empty_database):
    execute(
        f"CREATE SCHEMA {q()}",
        f"CREATE TYPE {q()}.job_state AS ENUM ('created', 'retry')",
        f"CREATE TABLE {q()}.queue (name text PRIMARY KEY)",
    )
    with pytest.raises(SchemaError) as refused:
        migrate()
    assert str(refused.value) == (
        f"schema \"{pgboss_settings.SCHEMA}\" in database 'default' has no pg-boss version table, but holds "
        "table queue, type job_state: it is half installed, so migrate pgboss neither installs over it nor "
        "adopts it. Drop those objects (or restore the schema pg-boss installed) and run manage.py migrate "
        "pgboss again."
    )
    assert applied() == set()


def test_migrate_installs_into_a_schema_that_holds_only_the_users_objects(empty_database):
    execute(f"CREATE SCHEMA {q()}", f"CREATE TABLE {q()}.my_table (id int)")
    output = migrate()
    assert "adopted" not in output
    assert "version" in catalog().tables and "my_table" in catalog().tables
    execute(f"DROP TABLE {q()}.my_table")


@pytest.mark.node
def test_manage_py_migrate_prints_the_refusal_without_a_traceback(empty_database, run_pgboss):
    run_pgboss("install", pgboss_settings.SCHEMA)
    execute(f"DROP INDEX {q()}.job_common_i7")
    result = subprocess.run(
        [sys.executable, "-m", "django", "migrate", "pgboss"],
        cwd=REPO,
        env={
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            "PYTHONPATH": str(REPO),
            "DATABASE_URL": database_url(),
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith(f"SchemaError: schema \"{pgboss_settings.SCHEMA}\" in database 'default'")
    assert "  - index job_common_i7 on job_common is missing" in result.stderr
    assert applied() == set()
