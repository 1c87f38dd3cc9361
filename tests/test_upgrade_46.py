"""Migrations 0005 to 0007: a schema at 43 (django_pgboss 0.2's, or pg-boss 12.35's) goes to 46 and
back, keeping its jobs, and the index builds of a populated schema go through bam, built
concurrently while senders and workers keep going: pg-boss 12.35 (the release that runs on 43) all
the way through the migration and the builds, and django_pgboss once the schema is at 46.

At 43 the suite's code cannot run (its statements read and write schema 46's columns), so what a
test puts in the schema before the migration, it puts with schema 43's own SQL.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection

from django_pgboss import boss
from django_pgboss.conf import pgboss_settings
from django_pgboss.db.context import DatabaseContext
from django_pgboss.monitor import Monitor
from django_pgboss.schema.state import read_state
from tests.conftest import database_url, pgboss_schema_option
from tests.helpers import rows
from tests.test_upgrade import legacy_dir

pytestmark = pytest.mark.django_db(transaction=True)

#: The indexes schemas 45 and 46 add to every job table.
NEW_INDEXES = ("i13", "i14", "i15", "i16", "i17")
WRITER_SCRIPT = Path(__file__).resolve().parent / "node" / "writer.mjs"
FILL_SQL = """
INSERT INTO {s}.job (name, data, policy, created_on, start_after, keep_until)
SELECT %s, jsonb_build_object('n', n), 'standard', now(), now(), now() + interval '14 days'
FROM generate_series(1, %s) AS n
"""


@pytest.fixture
def at_43():
    """The suite's schema rolled back to 43 by `migrate pgboss 0004`, migrated to 46 again after
    (first, so that the clean-up runs on the schema the suite's code reads)."""
    call_command("migrate", "pgboss", "0004", verbosity=0)
    yield
    call_command("migrate", "pgboss", verbosity=0)
    Monitor(cron=False).build_indexes(gated=False)
    for queue in boss.get_queues():
        boss.delete_queue(queue.name)


def create_queue_at_43(name: str, **options) -> None:
    """A queue made by schema 43's own create_queue(), pg-boss's option names (the policy is
    pg-boss's createQueue() default)."""
    rows("SELECT {s}.create_queue(%s, %s::jsonb)", [name, json.dumps({"policy": "standard", **options})])


def table_of(name: str) -> str:
    return rows("SELECT table_name FROM {s}.queue WHERE name = %s", [name])[0][0]


def version() -> int:
    return rows("SELECT version FROM {s}.version")[0][0]


def state():
    return read_state(DatabaseContext(schema=pgboss_settings.SCHEMA))


def doctor() -> str:
    out = io.StringIO()
    call_command("pgboss_doctor", stdout=out)
    return out.getvalue()


def indexes_of(table: str) -> set[str]:
    return {
        name[len(table) + 1 :]
        for (name,) in rows(
            "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND i.indrelid = to_regclass(%s) AND i.indisvalid",
            [pgboss_settings.SCHEMA, f"{connection.ops.quote_name(pgboss_settings.SCHEMA)}.{table}"],
        )
    }


def test_migrate_back_to_0004_is_schema_43_and_forward_again_is_46_with_every_job_kept(at_43):
    assert version() == 43
    found = state()
    assert found.report is not None and found.report.ok, found.report.problems  # 43's manifest
    assert "instance" not in found.catalog.tables
    # A name no other test gives a queue: this one is created by 43's own SQL, past the process's
    # queue-route cache, which would still send a fetch to an earlier test's table of that name.
    create_queue_at_43("kept-at-43", partition=True)
    rows(FILL_SQL, ["kept-at-43", 1])
    [(sent,)] = rows("SELECT id::text FROM {s}.job WHERE name = 'kept-at-43'")

    out = io.StringIO()
    call_command("migrate", "pgboss", stdout=out)

    assert [line.strip() for line in out.getvalue().splitlines() if "schema_4" in line] == [
        "Applying pgboss.0005_schema_44... OK",
        "Applying pgboss.0006_schema_45... OK",
        "Applying pgboss.0007_schema_46... OK",
    ]
    assert version() == 46
    assert "OK: no drift." in doctor()
    # The queue's table held a job, so its new indexes were queued; job_common held none and got its
    # indexes in the migration.
    table = table_of("kept-at-43")
    pending = {(e.table, e.name) for e in boss.get_bam_entries() if e.status == "pending"}
    assert {t for t, _ in pending} == {table}
    assert set(NEW_INDEXES) <= indexes_of("job_common")
    assert not set(NEW_INDEXES) & indexes_of(table)
    Monitor(cron=False).build_indexes(gated=False)
    assert set(NEW_INDEXES) <= indexes_of(table)
    [job] = boss.fetch("kept-at-43")
    assert (job.id, job.data) == (sent, {"n": 1})


class NodeWriter:
    """pg-boss ``release`` sending and working ``queue`` (tests/node/writer.mjs) until finish()."""

    def __init__(self, release: str, queue: str) -> None:
        self.process = subprocess.Popen(
            [
                "node",
                str(WRITER_SCRIPT),
                legacy_dir(release),
                database_url(),
                pgboss_schema_option(pgboss_settings.SCHEMA),
                queue,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=os.environ.copy(),
        )
        ready = self.process.stdout.readline()
        assert json.loads(ready or "{}").get("ready"), self.process.stderr.read()

    def finish(self) -> dict:
        out, err = self.process.communicate("", timeout=120)
        assert self.process.returncode == 0, err
        return json.loads(out.strip().splitlines()[-1])


def test_upgrading_a_populated_schema_keeps_senders_and_workers_going_through_migrate_and_builds(at_43):
    create_queue_at_43("busy")
    create_queue_at_43("busy-own", partition=True)
    create_queue_at_43("idle-own", partition=True)
    own, idle = table_of("busy-own"), table_of("idle-own")
    for queue in ("busy", "busy-own"):
        rows(FILL_SQL, [queue, 20_000])
    rows("ANALYZE {s}.job")

    # pg-boss 12.35, the release of schema 43, sends and works job_common's queue throughout.
    node = NodeWriter("12.35.0", "busy")
    stop = threading.Event()
    errors: list[BaseException] = []
    sent: list[str] = []
    worked_while_building = threading.Event()
    building = threading.Event()

    def keep_working(queue: str) -> None:
        try:
            while not stop.is_set():
                sent.append(boss.send(queue, {"by": "writer"}))
                boss.complete(queue, boss.fetch(queue, batch_size=5))
                if building.is_set():
                    worked_while_building.set()
        except BaseException as exc:  # any failure of a writer fails the test
            errors.append(exc)
        finally:
            connection.close()

    writer = threading.Thread(target=keep_working, args=("busy-own",))
    try:
        time.sleep(0.5)
        migrating = time.time()
        # The migration takes the job tables before the queue table, as a send does: a send that
        # held its table while the migration held the queue table would be a deadlock.
        call_command("migrate", "pgboss", verbosity=0)
        migrated = time.time()
        queued = {(e.name, e.table) for e in boss.get_bam_entries() if e.version in (45, 46)}
        output = doctor()
        # django_pgboss's own code from here on, as a deploy starts it once the migration is done.
        writer.start()
        building.set()
        report = Monitor(cron=False).build_indexes(gated=False)
        built = time.time()
        time.sleep(0.3)
    finally:
        stop.set()
        if writer.is_alive():
            writer.join(timeout=60)
        done = node.finish()

    assert errors == [] and done["errors"] == []
    assert version() == 46
    assert {t for _, t in queued} == {"job_common", own}  # idle-own's empty table was built inline
    assert set(NEW_INDEXES) <= indexes_of(idle)
    assert "OK: no drift." in output and "still being built" in output
    assert report.failed == {}
    assert set(report.completed) == queued
    # pg-boss 12.35 went on during the migration and during the builds, and so did ours during the
    # builds: no lock stopped either for long (bench/upgrade_46.py measures how long).
    loops = [(start / 1000, end / 1000) for start, end in done["loops"]]
    assert any(migrating <= end <= migrated for _, end in loops) or migrated - migrating < 0.5
    assert any(migrated <= end <= built for _, end in loops)
    assert worked_while_building.is_set()
    assert set(NEW_INDEXES) <= indexes_of("job_common") & indexes_of(own)
    ours = {str(job_id) for (job_id,) in rows("SELECT id FROM {s}.job WHERE data->>'by' = 'writer'")}
    assert ours == set(sent)
    theirs = {str(job_id) for (job_id,) in rows("SELECT id FROM {s}.job WHERE data->>'by' = 'node'")}
    assert theirs == set(done["sent"]) and done["completed"] > 0
    output = doctor()
    assert "OK: no drift." in output and "still being built" not in output
