"""manage.py pgboss_rollback: schema 43 rolled back to 42 is what pg-boss 12.34.0 installs, object for
object, keeps every job, and pg-boss 12.34.0 works on it; migrate brings it back to 43.

pg-boss 12.34.0 is installed by scripts/test.sh under .venvs/ (PGBOSS_LEGACY_NODE_DIRS).
"""

from __future__ import annotations

import io
import re
from dataclasses import replace

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.db.migrations.recorder import MigrationRecorder

from django_pgboss import boss
from django_pgboss.conf import pgboss_settings
from django_pgboss.db.identifiers import quote_identifier
from django_pgboss.schema.catalog import read_catalog
from tests.conftest import database_url
from tests.test_upgrade import legacy_dir

pytestmark = [pytest.mark.node, pytest.mark.django_db(transaction=True)]

REFERENCE = "pgboss_ref42"
QUEUES = [
    {"name": "rb-dlq", "options": {}},
    {"name": "rb-shared", "options": {"deadLetter": "rb-dlq", "retryLimit": 0}},
    {"name": "rb-own", "options": {"partition": True}},
    {"name": "rb-fifo", "options": {"policy": "key_strict_fifo", "partition": True}},
]


def q() -> str:
    return quote_identifier(pgboss_settings.SCHEMA)


def execute(*statements: str) -> None:
    with connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)


def fetchall(sql: str, params=None) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def legacy(schema: str, queues: list, jobs: list) -> dict:
    import json
    import subprocess

    from tests.test_upgrade import LEGACY_SCRIPT

    completed = subprocess.run(
        [
            "node",
            str(LEGACY_SCRIPT),
            legacy_dir("12.34.0"),
            database_url(),
            quote_identifier(schema),
            json.dumps(queues),
            json.dumps(jobs),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout.strip().splitlines()[-1])


def comparable(schema: str):
    """The catalog of ``schema``, function bodies with their whitespace folded (the drift check's
    comparison: pg-boss indents its bodies otherwise)."""
    with connection.cursor() as cursor:
        catalog = read_catalog(cursor, schema)
    catalog.functions = {
        name: sorted((replace(f, body=re.sub(r"\s+", " ", f.body).strip()) for f in overloads), key=repr)
        for name, overloads in catalog.functions.items()
    }
    return catalog


@pytest.fixture
def restored():
    """Whatever the test leaves, the suite's schema is back at 43 afterwards."""
    yield
    execute(f"DROP SCHEMA IF EXISTS {q()} CASCADE", f"DROP SCHEMA IF EXISTS {REFERENCE} CASCADE")
    MigrationRecorder(connection).migration_qs.filter(app="pgboss").delete()
    call_command("migrate", "pgboss", verbosity=0)


def test_every_rollback_step_has_its_file_and_sets_the_version_it_names():
    from django_pgboss.operations import ROLLBACK_STEPS, SQL_DIR

    on_disk = {p.relative_to(SQL_DIR).as_posix() for p in (SQL_DIR / "rollback").glob("*.sql")}
    assert on_disk == set(ROLLBACK_STEPS.values())
    for version, filename in ROLLBACK_STEPS.items():
        assert filename == f"rollback/v{version}_to_v{version - 1}.sql"
        assert f"SET version = {version - 1};" in (SQL_DIR / filename).read_text()


def test_rolled_back_to_42_the_schema_is_pg_boss_12_34s_keeps_its_jobs_and_migrate_restores_43(restored):
    for queue in QUEUES:
        options = {"rb-shared": {"dead_letter": "rb-dlq", "retry_limit": 0}, "rb-own": {"partition": True}}
        options["rb-fifo"] = {"policy": "key_strict_fifo", "partition": True}
        boss.create_queue(queue["name"], **options.get(queue["name"], {}))
    waiting = boss.send("rb-own", {"n": 1, "text": "héllo"})
    fifo = boss.send("rb-fifo", {"n": 2}, singleton_key="k")
    failed = boss.send("rb-shared", {"n": 3})
    (job,) = boss.fetch("rb-shared")
    boss.fail("rb-shared", job, {"message": "for good"})  # dead-lettered: a copy with source_root_id
    before = dict(fetchall(f"SELECT id::text, state::text FROM {q()}.job"))
    assert len(before) == 4

    legacy(REFERENCE, QUEUES, [])
    # The comparison sees the difference between the two versions ...
    assert comparable(pgboss_settings.SCHEMA) != comparable(REFERENCE)

    out = io.StringIO()
    call_command("pgboss_rollback", "--sql", stdout=out)
    assert "DROP COLUMN source_root_id" in out.getvalue() and out.getvalue().rstrip().endswith("COMMIT;")
    assert fetchall(f"SELECT version FROM {q()}.version") == [(43,)]  # --sql changes nothing

    out = io.StringIO()
    call_command("pgboss_rollback", stdout=out)
    assert "from version 43 to 42" in out.getvalue()
    assert fetchall(f"SELECT version FROM {q()}.version") == [(42,)]
    assert dict(fetchall(f"SELECT id::text, state::text FROM {q()}.job")) == before

    # ... and after the rollback none: object for object what pg-boss 12.34.0 installs.
    assert comparable(pgboss_settings.SCHEMA) == comparable(REFERENCE)

    # pg-boss 12.34.0 starts on it (its version) and creates a partitioned queue and sends jobs.
    sent = legacy(
        pgboss_settings.SCHEMA,
        [{"name": "rb-node", "options": {"partition": True}}],
        [{"name": "rb-node", "data": {"n": 4}}, {"name": "rb-own", "data": {"n": 5}}],
    )
    assert sent["release"] == "12.34.0" and len(sent["ids"]) == 2

    # A second rollback has no step to take.
    with pytest.raises(CommandError, match="is at version 42: django_pgboss rolls back 43 to 42 only"):
        call_command("pgboss_rollback")

    # Back to 43: forget the recorded migration, and migrate upgrades what it finds.
    call_command("migrate", "pgboss", "zero", "--fake", verbosity=0)
    out = io.StringIO()
    call_command("migrate", "pgboss", stdout=out)
    assert "from version 42 to 43 (catalog checked)" in out.getvalue()
    call_command("pgboss_doctor", stdout=io.StringIO())
    assert {row[0] for row in fetchall(f"SELECT id::text FROM {q()}.job")} >= {
        waiting,
        fifo,
        failed,
        *sent["ids"],
    }
    assert boss.fetch("rb-own", batch_size=5)
