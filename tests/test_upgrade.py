"""migrate pgboss brings a schema an older pg-boss release installed to version 46: the result is
pg-boss 12.38's schema (our doctor and pg-boss's own drift check say so, before and after the
monitor builds the indexes the upgrade queued in bam), every job survives with its state and data,
and pg-boss 12.35, pg-boss 12.38 and django_pgboss all work those jobs afterwards.

The releases are installed by scripts/test.sh under .venvs/ (PGBOSS_LEGACY_NODE_DIRS).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connection
from django.db.migrations.recorder import MigrationRecorder
from django.test import override_settings

from django_pgboss import boss
from django_pgboss.conf import pgboss_settings
from django_pgboss.db.identifiers import quote_identifier
from django_pgboss.exceptions import SchemaError
from django_pgboss.monitor import Monitor
from django_pgboss.monitor.bam import BamRunner
from django_pgboss.operations import BAM_BUILD_STEPS, SQL_DIR, UPGRADE_STEPS
from tests.conftest import database_url, pgboss_schema_option

pytestmark = [pytest.mark.node, pytest.mark.django_db(transaction=True)]

LEGACY_SCRIPT = Path(__file__).resolve().parent / "node" / "legacy.mjs"
#: Releases before these refuse a schema name that needs quotes (pg-boss's own name check), so no
#: user of theirs can have one: they install into a bare-named schema of their own instead.
QUOTED_NAME_RELEASES = {"12.30.0", "12.34.0", "12.35.0"}
BARE_SCHEMA = "pgboss_legacy"
#: The release each folder holds and the schema version it installs.
RELEASES = {
    "11.0.7": 25,
    "11.1.2": 26,
    "12.0.0": 26,
    "12.20.0": 31,
    "12.30.0": 40,
    "12.34.0": 42,
    "12.35.0": 43,
}

QUEUES = [
    {"name": "legacy-dlq", "options": {}},
    {"name": "legacy-shared", "options": {"deadLetter": "legacy-dlq", "retryLimit": 3}},
    {"name": "legacy-own", "options": {"partition": True}},
    {"name": "legacy-fifo", "options": {"policy": "key_strict_fifo", "partition": True}},
]
JOBS = [
    {"name": "legacy-shared", "data": {"n": 1}, "options": {"priority": 2}},
    {"name": "legacy-shared", "data": {"n": 2}},
    {"name": "legacy-own", "data": {"n": 3, "text": "héllo"}},
    {"name": "legacy-own", "data": {"n": 4}, "options": {"startAfter": 3600}},
    {"name": "legacy-fifo", "data": {"n": 5}, "options": {"singletonKey": "k"}},
]


def q() -> str:
    return quote_identifier(pgboss_settings.SCHEMA)


def execute(*statements: str) -> None:
    with connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)


def legacy_dir(release: str) -> str:
    for folder in os.environ.get("PGBOSS_LEGACY_NODE_DIRS", "").split(":"):
        if folder.endswith(f"node-pgboss-{release}") and (Path(folder) / "node_modules" / "pg-boss").is_dir():
            return folder
    pytest.fail(f"pg-boss {release} is not installed: scripts/test.sh installs it (PGBOSS_LEGACY_NODE_DIRS)")


def queues_and_jobs(release: str) -> tuple[list, list]:
    """The queues and jobs a release can make: key_strict_fifo came with schema 28 (pg-boss 12.10)."""
    if RELEASES[release] >= 28:
        return QUEUES, JOBS
    return (
        [q for q in QUEUES if q["name"] != "legacy-fifo"],
        [j for j in JOBS if j["name"] != "legacy-fifo"],
    )


def legacy(release: str, schema: str, queues: list, jobs: list, work: str | None = None) -> dict:
    """Run pg-boss ``release`` on ``schema`` (tests/node/legacy.mjs): it installs or migrates the
    schema, creates ``queues`` and sends ``jobs``, then does ``work`` if named; returns its report."""
    completed = subprocess.run(
        [
            "node",
            str(LEGACY_SCRIPT),
            legacy_dir(release),
            database_url(),
            pgboss_schema_option(schema),
            json.dumps(queues),
            json.dumps(jobs),
            *([work] if work else []),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout.strip().splitlines()[-1])


def run_legacy(release: str) -> dict:
    """pg-boss ``release`` installed on our schema with this module's queues and jobs."""
    queues, jobs = queues_and_jobs(release)
    return legacy(release, pgboss_settings.SCHEMA, queues, jobs)


def jobs_by_id() -> dict[str, tuple]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT id::text, name, state::text, data, priority, singleton_key FROM {q()}.job")
        return {row[0]: row[1:] for row in cursor.fetchall()}


@contextmanager
def schema_for(release: str):
    """The configured schema, or BARE_SCHEMA for a release that cannot spell it (dropped after)."""
    if release in QUOTED_NAME_RELEASES or quote_identifier(pgboss_settings.SCHEMA) == pgboss_settings.SCHEMA:
        yield
        return
    try:
        with override_settings(PGBOSS={**settings.PGBOSS, "SCHEMA": BARE_SCHEMA}):
            yield
    finally:
        execute(f"DROP SCHEMA IF EXISTS {BARE_SCHEMA} CASCADE")
        MigrationRecorder(connection).migration_qs.filter(app="pgboss").delete()


@pytest.fixture
def empty_database():
    """No pgboss schema and no pgboss migration recorded; the suite's schema is back afterwards."""
    call_command("migrate", "pgboss", "zero", verbosity=0)
    yield
    execute(f"DROP SCHEMA IF EXISTS {q()} CASCADE")
    MigrationRecorder(connection).migration_qs.filter(app="pgboss").delete()
    call_command("migrate", "pgboss", verbosity=0)


def test_every_upgrade_step_has_its_file_and_the_chain_reaches_46():
    assert sorted(UPGRADE_STEPS) == list(range(25, 43))
    on_disk = {p.relative_to(SQL_DIR).as_posix() for p in (SQL_DIR / "upgrade").glob("v*.sql")}
    # Migration 0001 runs the steps to 43, migrations 0005 to 0007 the three after it. The released
    # steps that built their indexes in the migration stay on disk, frozen, out of the chain: each
    # has its successor, which queues them in bam.
    replaced = {f"upgrade/v{v}_to_v{v + 1}.sql" for v in BAM_BUILD_STEPS}
    assert (
        on_disk
        == set(UPGRADE_STEPS.values()) | {f"upgrade/v{v}_to_v{v + 1}.sql" for v in (43, 44, 45)} | replaced
    )
    assert {UPGRADE_STEPS[v] for v in BAM_BUILD_STEPS} == {
        f"upgrade/v{v}_to_v{v + 1}.bam.sql" for v in BAM_BUILD_STEPS
    }
    chain = [*UPGRADE_STEPS.values(), *(f"upgrade/v{v}_to_v{v + 1}.sql" for v in (43, 44, 45))]
    for version, step in zip(range(25, 46), chain, strict=True):
        text = (SQL_DIR / step).read_text()
        assert f"SET version = {version + 1};" in text
        # No step of the chain builds a job table's index in the migration's transaction, save on a
        # table that holds no row (and job_i6, built before bam exists, as pg-boss builds it).
        assert "job_table_run($cmd$CREATE" not in text


@pytest.mark.parametrize("release", list(RELEASES))
def test_migrate_upgrades_an_older_pg_boss_schema_and_every_job_survives(empty_database, run_pgboss, release):
    with schema_for(release):
        check_upgrade(release, run_pgboss)


def check_upgrade(release: str, run_pgboss) -> None:
    installed = run_legacy(release)
    assert installed["release"] == release
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT version FROM {q()}.version")
        assert cursor.fetchone() == (RELEASES[release],)
    before = jobs_by_id()
    assert set(before) == set(installed["ids"])

    out = io.StringIO()
    call_command("migrate", "pgboss", stdout=out)

    schema = pgboss_settings.SCHEMA
    if RELEASES[release] == 43:
        expected = f"adopted the existing pg-boss schema \"{schema}\" in database 'default' (version 43, catalog checked)"
    else:
        expected = (
            f"upgraded the pg-boss schema \"{schema}\" in database 'default' from version "
            f"{RELEASES[release]} to 43 (catalog checked)."
        )
    assert expected in out.getvalue()
    assert "Applying pgboss.0007_schema_46... OK" in out.getvalue()
    assert jobs_by_id() == before
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT version FROM {q()}.version")
        assert cursor.fetchone() == (46,)
    # The job tables that hold jobs get schema 46's indexes in the background, through bam: until the
    # monitor builds them, both drift checks count them as still building, not as drift.
    pending = {(e.name, e.table) for e in boss.get_bam_entries() if e.version in (45, 46)}
    assert ("live_index_build", "job_common") in pending
    doctor = io.StringIO()
    call_command("pgboss_doctor", stdout=doctor)
    assert "OK: no drift." in doctor.getvalue()
    assert "index job_common_i14 on job_common is still being built" in doctor.getvalue()
    report = run_pgboss("drift", schema)["drift"]
    assert report["ok"], json.dumps(report, indent=2)
    assert "job_common_i14" in {i["name"] for i in report["building"]}
    built = BamRunner(boss.context, 0).run_pass(gated=False)
    assert not built.failed and {c for c in built.completed if c[0] == "live_index_build"}
    doctor = io.StringIO()
    call_command("pgboss_doctor", stdout=doctor)
    assert "OK: no drift." in doctor.getvalue() and "still being built" not in doctor.getvalue()
    report = run_pgboss("drift", schema)["drift"]
    assert report["ok"] and not report["building"], json.dumps(report, indent=2)

    # django_pgboss works the shared queue's jobs, pg-boss 12.35 (which runs on a schema a newer
    # release migrated) the partitioned queue's.
    fetched = boss.fetch("legacy-shared", batch_size=5)
    assert [job.data for job in fetched] == [{"n": 1}, {"n": 2}]
    assert boss.complete("legacy-shared", fetched) == 2
    worked = legacy("12.35.0", schema, [], [], work="legacy-own")["completed"]
    assert worked == [before_id(before, {"n": 3, "text": "héllo"})]  # the other starts in an hour
    if RELEASES[release] >= 28:
        (fifo,) = boss.fetch("legacy-fifo")
        assert (fifo.data, boss.fail("legacy-fifo", fifo, {"why": "test"})) == ({"n": 5}, 1)
    # And new jobs flow through the upgraded schema both ways.
    new_id = boss.send("legacy-own", {"n": 6})
    assert [j["id"] for j in run_pgboss("work", pgboss_settings.SCHEMA, "legacy-own", "{}")["jobs"]] == [
        new_id
    ]


def before_id(jobs: dict[str, tuple], data: dict) -> str:
    """The id of the one job of ``jobs`` (jobs_by_id()) holding ``data``."""
    (found,) = [job_id for job_id, row in jobs.items() if json.loads(row[2]) == data]
    return found


def test_a_failed_upgrade_changes_nothing_and_names_the_difference(empty_database):
    run_legacy("12.34.0")
    # A schema that is not what version 42 should be: the upgrade's check finds it and rolls back.
    execute(f"ALTER TABLE {q()}.warning ALTER COLUMN message DROP NOT NULL")
    with pytest.raises(SchemaError) as refused:
        call_command("migrate", "pgboss", verbosity=0)
    assert "from version 42 to 43 does not give pg-boss's schema 43, so it was rolled back" in str(
        refused.value
    )
    assert "  - column warning.message is nullable, expected NOT NULL" in str(refused.value)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT version FROM {q()}.version")
        assert cursor.fetchone() == (42,)
        cursor.execute(
            "SELECT count(*) FROM pg_attribute WHERE attrelid = to_regclass(%s) AND attname = 'created_delta'",
            [f"{q()}.queue"],
        )
        assert cursor.fetchone() == (0,)
    assert not MigrationRecorder(connection).migration_qs.filter(app="pgboss").exists()


def test_a_schema_older_than_the_steps_is_refused_saying_what_to_do(empty_database):
    with schema_for("11.0.7"):
        refuse_older_than_25()


def refuse_older_than_25() -> None:
    run_legacy("11.0.7")
    execute(f"UPDATE {q()}.version SET version = 24")
    with pytest.raises(
        SchemaError,
        match=r"is pg-boss schema version 24, older than version 25 \(pg-boss 11.0\), the oldest pg-boss 12.35 "
        r"migrates: upgrade it with pg-boss 10 and 11 first; nothing was changed.",
    ):
        call_command("migrate", "pgboss", verbosity=0)


#: Jobs of schema 31's own shape, in bulk: enough for each index build to take a moment.
FILL_SQL = """
INSERT INTO {s}.job (name, data, policy, created_on, start_after, keep_until)
SELECT %s, jsonb_build_object('n', n), 'standard', now(), now(), now() + interval '14 days'
FROM generate_series(1, %s) AS n
"""


def valid_indexes_of(table: str) -> set[str]:
    """The suffixes (``i4``, ``pkey`` ...) of ``table``'s valid indexes."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE i.indrelid = to_regclass(%s) AND i.indisvalid",
            [f"{q()}.{quote_identifier(table)}"],
        )
        return {name[len(table) + 1 :] for (name,) in cursor.fetchall()}


def test_an_old_populated_schema_is_upgraded_without_a_build_and_jobs_flow_while_bam_builds(
    empty_database, run_pgboss
):
    """From schema 31 (pg-boss 12.20), whose job tables hold jobs: migrate builds none of the
    indexes of versions 33 to 46 (each would hold its table's writes for the whole build), bam
    holds them, and the monitor builds them while django_pgboss sends and works both tables."""
    with schema_for("12.20.0"):
        run_legacy("12.20.0")
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT table_name FROM {q()}.queue WHERE name = 'legacy-own'")
            (own,) = cursor.fetchone()
            for queue in ("legacy-shared", "legacy-own"):
                cursor.execute(FILL_SQL.replace("{s}", q()), [queue, 5_000])
        before = {table: valid_indexes_of(table) for table in ("job_common", own)}
        assert "i5" in before["job_common"] and "i9" not in before["job_common"]

        call_command("migrate", "pgboss", verbosity=0)

        # Nothing was built (nor job_i5 dropped) in the migration: bam holds every build, from
        # version 33's on.
        assert {table: valid_indexes_of(table) for table in ("job_common", own)} == before
        queued = {(e.version, e.name, e.table) for e in boss.get_bam_entries()}
        assert {v for v, _, _ in queued} == {33, 38, 40, 43, 45, 46}
        assert {t for _, _, t in queued} == {"job_common", own, job_table_of("legacy-fifo")}

        stop = threading.Event()
        building = threading.Event()
        errors: list[BaseException] = []
        worked: list[int] = []

        def keep_working() -> None:
            try:
                while not stop.is_set():
                    for queue in ("legacy-shared", "legacy-own"):
                        boss.send(queue, {"by": "writer"})
                        done = boss.complete(queue, boss.fetch(queue, batch_size=5))
                        if building.is_set():
                            worked.append(done)
            except BaseException as exc:  # any failure of the writer fails the test
                errors.append(exc)
            finally:
                connection.close()

        writer = threading.Thread(target=keep_working)
        writer.start()
        try:
            building.set()
            report = Monitor(cron=False).build_indexes(gated=False)
            building.clear()
        finally:
            stop.set()
            writer.join(timeout=60)

        assert errors == [] and worked and sum(worked) > 0
        assert report.failed == {} and set(report.completed) == {(n, t) for _, n, t in queued}
        for table in ("job_common", own):
            assert {"i9", "i11", "i12", "i13", "i14", "i15", "i16", "i17"} <= valid_indexes_of(table)
            assert "i5" not in valid_indexes_of(table)
        drift = run_pgboss("drift", pgboss_settings.SCHEMA)["drift"]
        assert drift["ok"] and not drift["building"], json.dumps(drift, indent=2)
        doctor = io.StringIO()
        call_command("pgboss_doctor", stdout=doctor)
        assert "OK: no drift." in doctor.getvalue() and "still being built" not in doctor.getvalue()


def job_table_of(queue: str) -> str:
    """The job table of ``queue``."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT table_name FROM {q()}.queue WHERE name = %s", [queue])
        return cursor.fetchone()[0]


def test_an_upgrade_from_an_old_schema_never_deadlocks_with_a_send(empty_database):
    """A send holds its job table, then locks its queue's row (the foreign key): migration 0001's
    steps from an older schema alter the queue table, then the job table, so had they taken the
    locks one statement at a time, the send and the migration would each wait for the other until
    PostgreSQL failed one. The migration takes the tables at once, retried, so the send goes first."""
    import psycopg

    from tests.conftest import database_url

    with schema_for("12.20.0"):
        run_legacy("12.20.0")
        schema = q()
        outcome: list = []

        def migrate() -> None:
            try:
                call_command("migrate", "pgboss", verbosity=0)
                outcome.append("migrated")
            except BaseException as exc:  # reported below: a thread's exception is otherwise lost
                outcome.append(exc)
            finally:
                connection.close()

        with (
            psycopg.connect(database_url()) as sender,
            psycopg.connect(database_url(), autocommit=True) as observer,
        ):
            # The send's first lock: its job table, as its INSERT takes it.
            sender.execute(f"LOCK TABLE {schema}.job_common IN ROW EXCLUSIVE MODE")
            migration = threading.Thread(target=migrate)
            migration.start()
            deadline = time.monotonic() + 30
            waiting = 0
            while not waiting and time.monotonic() < deadline:
                time.sleep(0.02)
                (waiting,) = observer.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND wait_event_type = 'Lock' AND pid <> %s",
                    [sender.info.backend_pid],
                ).fetchone()
            assert waiting, "the migration never waited for the send's table"
            # Then the rest of the send: the row, whose foreign key locks the queue's row.
            sender.execute(
                f"INSERT INTO {schema}.job_common (name, data, policy, start_after, keep_until) "
                "VALUES ('legacy-shared', '{\"n\": 99}', 'standard', now(), now() + interval '1 day')"
            )
            sender.commit()
        migration.join(timeout=120)

        assert outcome == ["migrated"]
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT version FROM {q()}.version")
            assert cursor.fetchone() == (46,)
            cursor.execute(f"SELECT count(*) FROM {q()}.job WHERE data->>'n' = '99'")
            assert cursor.fetchone() == (1,)
