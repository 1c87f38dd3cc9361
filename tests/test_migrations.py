"""Migrations apply and reverse cleanly, under the default schema and under one that needs quotes."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.loader import MigrationLoader
from django.test import override_settings

from django_pgboss.conf import pgboss_settings
from django_pgboss.db.identifiers import quote_identifier
from django_pgboss.exceptions import ImproperlyConfiguredSchema
from django_pgboss.operations import SQL_DIR, RunPgBossSQL, render_sql
from tests.catalog import read_catalog, schema_exists

QUOTED_SCHEMA = "Job Queue-2"


def migrate(target: str | None = None, **options) -> None:
    args = ["pgboss", target] if target else ["pgboss"]
    call_command("migrate", *args, verbosity=0, **options)


@pytest.fixture
def restore_schema():
    """Whatever a test does to the pgboss migrations, the suite's schema is migrated afterwards."""
    yield
    migrate()


def pgboss_operations():
    loader = MigrationLoader(None, ignore_no_migrations=True)
    for (app_label, _), migration in sorted(loader.disk_migrations.items()):
        if app_label == "pgboss":
            for operation in migration.operations:
                if isinstance(operation, RunPgBossSQL):
                    yield operation


def test_every_sql_file_has_its_migration_and_every_migration_its_file():
    referenced = set()
    for operation in pgboss_operations():
        referenced.add(operation.filename)
        if operation.reverse_filename:
            referenced.add(operation.reverse_filename)
    on_disk = {path.name for path in SQL_DIR.glob("*.sql")}
    # The top-level files are migrations' own; migrations 0005 to 0007 run the version steps of
    # upgrade/ and rollback/, which the older-schema upgrade and pgboss_rollback share, and
    # migration 0008 the citus-distributed variant's files of citus/.
    assert {name for name in referenced if "/" not in name} == on_disk
    assert all(re.fullmatch(r"\d{4}_[a-z0-9_]+(\.down)?\.sql", name) for name in on_disk)
    steps = {name for name in referenced if "/" in name}
    assert steps == {
        *(f"upgrade/v{v - 1}_to_v{v}.sql" for v in (44, 45, 46)),
        *(f"rollback/v{v}_to_v{v - 1}.sql" for v in (44, 45, 46)),
        "citus/distribute.sql",
        "citus/undistribute.sql",
    }
    assert {path.relative_to(SQL_DIR).as_posix() for path in SQL_DIR.glob("citus/*.sql")} == {
        "citus/distribute.sql",
        "citus/undistribute.sql",
    }
    assert all((SQL_DIR / name).is_file() for name in steps)


@pytest.mark.django_db
def test_models_and_migrations_agree():
    out = io.StringIO()
    call_command("makemigrations", "pgboss", "--check", "--dry-run", stdout=out)
    assert "No changes detected" in out.getvalue()


def test_sql_renders_only_the_schema_token():
    rendered = render_sql("0001_initial.sql", QUOTED_SCHEMA)
    assert "{{" not in rendered
    assert f'"{QUOTED_SCHEMA}".job_common' in rendered
    assert "CREATE SCHEMA IF NOT EXISTS pgboss;" in render_sql("0001_initial.sql", "pgboss")
    # The advisory-lock key hashes the schema as pg-boss spells it in its own keys.
    assert "'.pgboss.order'" in render_sql("0001_initial.sql", "order")
    assert 'CREATE SCHEMA IF NOT EXISTS "order";' in render_sql("0001_initial.sql", "order")
    assert f"'.pgboss.\"{QUOTED_SCHEMA}\"'" in render_sql("0001_initial.sql", QUOTED_SCHEMA)


@pytest.mark.parametrize(
    "bad", ['x"; DROP TABLE users; --', "it's", "a.b", "100%", "$$", "", "x" * 51, "pg_jobs"]
)
def test_invalid_schema_is_refused_before_any_sql(bad):
    with pytest.raises(ImproperlyConfiguredSchema, match=r'settings\.PGBOSS\["SCHEMA"\]'):
        render_sql("0001_initial.sql", bad)


@pytest.mark.django_db(transaction=True)
def test_migrate_with_invalid_schema_fails_on_the_check_and_creates_nothing(restore_schema):
    from django.core.management.base import SystemCheckError

    migrate("zero")
    with override_settings(PGBOSS={"SCHEMA": 'bad"name'}):
        # manage.py migrate runs the system checks first ...
        with pytest.raises(SystemCheckError, match=r"pgboss\.E002"):
            migrate(skip_checks=False)
        # ... and the operation refuses the name itself when checks are skipped.
        with pytest.raises(ImproperlyConfiguredSchema, match="must not contain a double quote"):
            migrate()
    assert not schema_exists('bad"name')
    assert not schema_exists(pgboss_settings.SCHEMA)


@pytest.mark.django_db(transaction=True)
def test_migrate_backwards_drops_the_schema_and_forwards_recreates_it(restore_schema):
    schema = pgboss_settings.SCHEMA
    before = read_catalog(schema)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {quote_identifier(schema)}.create_queue('partitioned', %s::jsonb)",
            [json.dumps({"policy": "standard", "partition": True})],
        )
    migrate("zero")
    assert not schema_exists(schema)
    migrate()
    assert schema_exists(schema)
    after = read_catalog(schema)
    assert after == before


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("other_schema", [QUOTED_SCHEMA, "order"], ids=["spaces-and-case", "keyword"])
def test_migrations_under_a_schema_that_needs_quotes(restore_schema, other_schema):
    default = read_catalog(pgboss_settings.SCHEMA)
    migrate("zero")
    with override_settings(PGBOSS={"SCHEMA": other_schema}):
        migrate()
        assert schema_exists(other_schema)
        assert read_catalog(other_schema) == default
        with connection.cursor() as cursor:
            cursor.execute(
                f'SELECT "{other_schema}".create_queue(%s, %s::jsonb)',
                ["Mixed Case/queue", json.dumps({"policy": "stately", "partition": True})],
            )
            cursor.execute(f'SELECT count(*) FROM "{other_schema}".queue')
            assert cursor.fetchone() == (1,)
        migrate("zero")
        assert not schema_exists(other_schema)


@pytest.mark.django_db(transaction=True)
def test_reverse_keeps_a_schema_that_holds_other_objects(restore_schema):
    schema = pgboss_settings.SCHEMA
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TABLE {quote_identifier(schema)}.users_own_table (id int)")
    migrate("zero")
    assert schema_exists(schema)
    assert set(read_catalog(schema).tables) == {"users_own_table"}
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE {quote_identifier(schema)}.users_own_table")


def test_sql_files_are_tracked_as_package_data():
    # The wheel must carry the SQL the migrations read.
    pyproject = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    assert '"sql/*.sql"' in pyproject
