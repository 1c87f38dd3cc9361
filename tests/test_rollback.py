"""manage.py pgboss_rollback: every step from 43 down to 25 has the effect of pg-boss 12.35.0's own
rollback of that version (the catalogs compared after each step), keeps every job, and migrate brings
the schema back to 43; schema 42 is what pg-boss 12.34.0 installs and 12.34.0 works on it; and what
the command refuses, before any change.

pg-boss 12.35.0 and the older releases are installed by scripts/test.sh under .venvs/
(PGBOSS_NODE_DIR, PGBOSS_LEGACY_NODE_DIRS). The releases' own round trip is in
tests/test_rollback_releases.py.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.db import connection
from django.db.migrations.recorder import MigrationRecorder
from django.test import override_settings

from django_pgboss import boss
from django_pgboss.conf import pgboss_settings
from django_pgboss.db.context import DatabaseContext
from django_pgboss.db.identifiers import quote_identifier
from django_pgboss.operations import ROLLBACK_STEPS, SQL_DIR, render_sql
from django_pgboss.schema.catalog import read_catalog
from django_pgboss.schema.manifest import DAILY_STATS_PARTITION
from tests.conftest import _node_dir, database_url, pgboss_schema_option
from tests.test_upgrade import legacy

pytestmark = [pytest.mark.node, pytest.mark.django_db(transaction=True)]

ROLLBACK_SQL_SCRIPT = Path(__file__).resolve().parent / "node" / "rollback_sql.mjs"
QUEUES = [
    {"name": "rb-dlq", "options": {}},
    {"name": "rb-shared", "options": {"deadLetter": "rb-dlq", "retryLimit": 0}},
    {"name": "rb-own", "options": {"partition": True}},
    {"name": "rb-fifo", "options": {"policy": "key_strict_fifo", "partition": True}},
    {"name": "rb-exclusive", "options": {"policy": "exclusive", "partition": True}},
]
#: The same queues as create_queue() options of ours.
OPTIONS = {
    "rb-shared": {"dead_letter": "rb-dlq", "retry_limit": 0},
    "rb-own": {"partition": True},
    "rb-fifo": {"policy": "key_strict_fifo", "partition": True},
    "rb-exclusive": {"policy": "exclusive", "partition": True},
}


def q() -> str:
    return quote_identifier(pgboss_settings.SCHEMA)


def reference_schema() -> str:
    """A second schema beside the suite's, spelled the same way (needing quotes on leg 2 or not)."""
    schema = pgboss_settings.SCHEMA
    return f"{schema}_ref" if quote_identifier(schema) == schema else f"{schema} ref"


def execute(*statements: str) -> None:
    with connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement, None)


def fetchall(sql: str, params=None) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def version_of(schema: str) -> list[tuple]:
    return fetchall(f"SELECT version FROM {quote_identifier(schema)}.version")


def comparable(schema: str):
    """The catalog of ``schema``, function bodies with their whitespace folded (the drift check's
    comparison: pg-boss indents its bodies otherwise), without queue_stats's day partitions: they
    are made by the day, by whichever monitor ran, so a catalog read after midnight holds one more
    than a catalog read before it (the manifest leaves them out for the same reason)."""
    catalog = read_catalog(DatabaseContext(schema=schema))
    for mapping in (
        catalog.tables,
        catalog.partitions,
        catalog.columns,
        catalog.indexes,
        catalog.constraints,
    ):
        for name in [name for name in mapping if DAILY_STATS_PARTITION.match(name)]:
            del mapping[name]
    catalog.functions = {
        name: sorted((replace(f, body=re.sub(r"\s+", " ", f.body).strip()) for f in overloads), key=repr)
        for name, overloads in catalog.functions.items()
    }
    return catalog


def jobs(schema: str | None = None) -> dict[str, tuple]:
    table = f"{quote_identifier(schema or pgboss_settings.SCHEMA)}.job"
    return {row[0]: row[1:] for row in fetchall(f"SELECT id::text, name, state::text, data FROM {table}")}


def pg_boss_rollback_sql(schema: str) -> dict[int, str]:
    """pg-boss 12.38.0's own rollback script of each version 46 ... 26, for ``schema``."""
    completed = subprocess.run(
        ["node", str(ROLLBACK_SQL_SCRIPT), pgboss_schema_option(schema)],
        env={**os.environ, "PGBOSS_NODE_DIR": str(_node_dir())},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    return {int(version): sql for version, sql in json.loads(completed.stdout).items()}


def rollback(*args: str) -> str:
    out = io.StringIO()
    call_command("pgboss_rollback", *args, stdout=out)
    return out.getvalue()


@pytest.fixture
def restored():
    """Whatever the test leaves, the suite's schema is back at 46 afterwards."""
    yield
    execute(
        f"DROP SCHEMA IF EXISTS {q()} CASCADE",
        f"DROP SCHEMA IF EXISTS {quote_identifier(reference_schema())} CASCADE",
    )
    MigrationRecorder(connection).migration_qs.filter(app="pgboss").delete()
    call_command("migrate", "pgboss", verbosity=0)


def test_every_rollback_step_has_its_file_and_sets_the_version_it_names():
    assert sorted(ROLLBACK_STEPS) == list(range(26, 47))
    on_disk = {p.relative_to(SQL_DIR).as_posix() for p in (SQL_DIR / "rollback").glob("*.sql")}
    assert on_disk == set(ROLLBACK_STEPS.values())
    for version, filename in ROLLBACK_STEPS.items():
        assert filename == f"rollback/v{version}_to_v{version - 1}.sql"
        text = (SQL_DIR / filename).read_text()
        assert f"SET version = {version - 1};" in text
        assert f"IF found IS DISTINCT FROM {version} THEN" in text
        assert "pg_advisory_xact_lock" in text


def populate() -> None:
    """Queues of every kind the steps touch, and jobs in several states (a dead-lettered copy, a
    flow's blocked child, an active job, a schedule)."""
    for queue in QUEUES:
        boss.create_queue(queue["name"], **OPTIONS.get(queue["name"], {}))
    boss.send("rb-own", {"n": 1, "text": "héllo"})
    boss.send("rb-fifo", {"n": 2}, singleton_key="k")
    boss.send("rb-exclusive", {"n": 3}, singleton_key="x")
    boss.send("rb-shared", {"n": 4})
    (job,) = boss.fetch("rb-shared")
    boss.fail("rb-shared", job, {"message": "for good"})  # dead-lettered: a copy in rb-dlq
    boss.send("rb-own", {"n": 5})
    boss.fetch("rb-own", batch_size=1)  # active
    boss.flow(
        [
            {"ref": "parent", "name": "rb-own", "data": {"n": 6}},
            {"ref": "child", "name": "rb-own", "data": {"n": 7}, "depends_on": ["parent"]},
        ]
    )
    boss.schedule("rb-own", "*/5 * * * *", {"n": 8})


def test_each_step_down_to_25_is_pg_boss_s_own_rollback_and_migrate_brings_it_back(restored):
    populate()
    before = jobs()
    assert {state for (_, state, _) in before.values()} >= {"created", "active", "failed"}
    # The reference: the same schema 46 with the same queues, walked down by pg-boss's own SQL.
    reference = reference_schema()
    execute(render_sql("0001_initial.sql", reference))
    for version in (44, 45, 46):
        execute(render_sql(f"upgrade/v{version - 1}_to_v{version}.sql", reference))
    for queue in QUEUES:
        options = json.dumps({"policy": "standard", **queue["options"]})  # pg-boss's createQueue default
        execute(f"SELECT {quote_identifier(reference)}.create_queue('{queue['name']}', '{options}')")
    assert comparable(pgboss_settings.SCHEMA) == comparable(reference)
    theirs = pg_boss_rollback_sql(reference)

    for version in range(46, 25, -1):
        if version == 28:
            # Schema 27 has no key_strict_fifo policy: refused while such a queue exists (not by
            # pg-boss: its upgrade back would restore the policy's index on job_common alone).
            with pytest.raises(
                CommandError, match=r"has key_strict_fifo queues \(rb-fifo\), a policy schema 27"
            ):
                call_command("pgboss_rollback")
            for schema in (pgboss_settings.SCHEMA, reference):
                execute(f"SELECT {quote_identifier(schema)}.delete_queue('rb-fifo')")
            before = {job_id: row for job_id, row in before.items() if row[0] != "rb-fifo"}
        out = rollback()  # one step: pg-boss's CLI default
        assert f"from version {version} to {version - 1}." in out
        execute(theirs[version])
        assert version_of(pgboss_settings.SCHEMA) == version_of(reference) == [(version - 1,)]
        ours, pg_boss = comparable(pgboss_settings.SCHEMA), comparable(reference)
        assert ours == pg_boss, f"after the rollback of version {version}"
        assert jobs() == before, f"after the rollback of version {version}"

    # The rollback forgot pgboss's recorded migrations: migrate upgrades the schema from 25.
    assert not MigrationRecorder(connection).migration_qs.filter(app="pgboss").exists()
    out = io.StringIO()
    call_command("migrate", "pgboss", stdout=out)
    assert "from version 25 to 43 (catalog checked)" in out.getvalue()
    assert "OK: no drift." in call_doctor()
    assert {job_id: row[:2] for job_id, row in jobs().items()} == {
        job_id: row[:2] for job_id, row in before.items()
    }
    assert boss.fetch("rb-exclusive")[0].data == {"n": 3}


def call_doctor() -> str:
    out = io.StringIO()
    call_command("pgboss_doctor", stdout=out)
    return out.getvalue()


def test_to_rolls_back_several_steps_in_one_transaction_and_sql_prints_them(restored):
    boss.create_queue("rb-own", partition=True)
    sent = boss.send("rb-own", {"n": 1})
    printed = rollback("--to", "39", "--sql")
    # Each step's own file, in order, inside one transaction, then the migration record.
    starts = [printed.index(f"this step rolls back {v} to {v - 1} only") for v in range(46, 39, -1)]
    assert starts == sorted(starts)
    assert printed.index("BEGIN;") < starts[0]
    assert printed.rstrip().endswith("DELETE FROM \"django_migrations\" WHERE app = 'pgboss';\nCOMMIT;")
    assert version_of(pgboss_settings.SCHEMA) == [(46,)]  # --sql changes nothing
    assert MigrationRecorder(connection).migration_qs.filter(app="pgboss").exists()

    assert "Forgot pgboss's 8 recorded migration(s)" in rollback()
    assert version_of(pgboss_settings.SCHEMA) == [(45,)]

    # A step that fails (here the second: a column it drops is already gone) leaves all as it was.
    execute(f"ALTER TABLE {q()}.schedule DROP COLUMN last_job_id")
    with pytest.raises(CommandError, match=r"the step from version 41 to 40 failed, so nothing was changed"):
        call_command("pgboss_rollback", "--to", "39")
    assert version_of(pgboss_settings.SCHEMA) == [(45,)]
    assert (
        "upsert_by_key" in comparable(pgboss_settings.SCHEMA).columns["job"]
    )  # the first steps are undone too
    execute(f"ALTER TABLE {q()}.schedule ADD COLUMN last_job_id uuid")

    assert "from version 45 to 39." in rollback("--to", "39")
    assert version_of(pgboss_settings.SCHEMA) == [(39,)]
    assert list(jobs()) == [sent]
    out = io.StringIO()
    call_command("migrate", "pgboss", stdout=out)
    assert "from version 39 to 43 (catalog checked)" in out.getvalue()
    assert "Applying pgboss.0007_schema_46... OK" in out.getvalue()
    assert "OK: no drift." in call_doctor()


def test_rolled_back_to_42_the_schema_is_what_pg_boss_12_34_installs_and_it_works_on_it(restored):
    for queue in QUEUES[:4]:
        boss.create_queue(queue["name"], **OPTIONS.get(queue["name"], {}))
    waiting = boss.send("rb-own", {"n": 1})
    reference = reference_schema()
    legacy("12.34.0", reference, QUEUES[:4], [])

    rollback("--to", "42")
    assert comparable(pgboss_settings.SCHEMA) == comparable(reference)
    worked = legacy(
        "12.34.0", pgboss_settings.SCHEMA, [{"name": "rb-node", "options": {"partition": True}}], [], "rb-own"
    )
    assert worked["release"] == "12.34.0" and worked["completed"] == [waiting]
    call_command("migrate", "pgboss", verbosity=0)
    assert "OK: no drift." in call_doctor()


def test_a_rollback_waits_for_pg_boss_s_migration_lock(restored):
    import threading
    import time

    import psycopg

    from django_pgboss.db.identifiers import schema_key

    key = f".pgboss.{schema_key(pgboss_settings.SCHEMA)}"
    lock = "('x' || encode(sha224((current_database() || %s)::bytea), 'hex'))::bit(64)::bigint"
    outcome: list[str] = []

    def run() -> None:
        try:
            outcome.append(rollback())
        finally:
            connection.close()

    # Another session holds the lock pg-boss takes to migrate (as a pg-boss instance starting would).
    with psycopg.connect(database_url(), autocommit=True) as holder:
        holder.execute(f"SELECT pg_advisory_lock({lock})", [key])
        thread = threading.Thread(target=run)
        thread.start()
        # The rollback's session waits for that lock (pg_locks shows its request not granted) ...
        deadline = time.monotonic() + 30
        while not holder.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
        ).fetchone()[0]:
            assert time.monotonic() < deadline and thread.is_alive(), outcome
            time.sleep(0.05)
        # ... and has changed nothing while it waits.
        assert not outcome
        assert version_of(pgboss_settings.SCHEMA) == [(46,)]
        holder.execute(f"SELECT pg_advisory_unlock({lock})", [key])
        thread.join(timeout=60)
    assert "from version 46 to 45." in outcome[0]
    assert version_of(pgboss_settings.SCHEMA) == [(45,)]


def refused(match: str, *args: str) -> None:
    with pytest.raises(CommandError, match=match):
        call_command("pgboss_rollback", *args, stdout=io.StringIO())


def test_what_the_command_refuses_before_any_change(restored):
    where = re.escape(f"pg-boss schema \"{pgboss_settings.SCHEMA}\" in database 'default'")
    refused(
        r"--to 24: there is no rollback to version 24: django_pgboss rolls back to version 25 \(pg-boss 11.0\)",
        "--to",
        "24",
    )
    refused(where + r" is at version 46: --to 46 is not below it", "--to", "46")
    refused(where + r" is at version 46: --to 47 is not below it", "--to", "47")

    # Drift at 46: the doctor's finding is named, and nothing is rolled back.
    execute(f"DROP INDEX {q()}.job_common_i12")
    refused(
        where + r" has drift from schema 46 \(run manage.py pgboss_doctor\): index job_common_i12 on "
        r"job_common is missing\. Not rolled back"
    )
    assert version_of(pgboss_settings.SCHEMA) == [(46,)]
    execute(
        f"CREATE INDEX job_common_i12 ON {q()}.job_common (source_root_id) WHERE source_root_id IS NOT NULL"
    )

    for version in (47, 24):
        execute(f"UPDATE {q()}.version SET version = {version}")
        refused(where + f" is at version {version}, which django_pgboss does not roll back")
    execute(f"UPDATE {q()}.version SET version = 25")
    refused(where + r" is at version 25: there is no rollback to version 24")
    execute(f"INSERT INTO {q()}.version (version) VALUES (46)")
    refused(where + r": the version table holds 2 rows, expected one")
    execute(f"DELETE FROM {q()}.version WHERE version = 25")

    # A job table that is not partitioned (pg-boss's noTablePartitioning layout).
    execute(f"ALTER TABLE {q()}.job DETACH PARTITION {q()}.job_common")
    refused(where + r" does not have pg-boss's partitioned job table")
    execute(f"ALTER TABLE {q()}.job ATTACH PARTITION {q()}.job_common DEFAULT")
    assert "OK: no drift." in call_doctor()

    with override_settings(PGBOSS={**settings.PGBOSS, "SCHEMA": "pgboss_absent"}):
        refused(r"the pgboss schema is not installed in database 'default': run manage.py migrate pgboss")
    assert MigrationRecorder(connection).migration_qs.filter(app="pgboss").exists()
