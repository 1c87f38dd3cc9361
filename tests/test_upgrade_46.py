"""Migrations 0005 to 0007: a schema at 43 (django_pgboss 0.2's, or pg-boss 12.35's) goes to 46 and
back, keeping its jobs, and the index builds of a populated schema go through bam, built
concurrently while senders and workers keep going."""

from __future__ import annotations

import io
import threading
import time

import pytest
from django.core.management import call_command
from django.db import connection

from django_pgboss import boss
from django_pgboss.conf import pgboss_settings
from django_pgboss.monitor import Monitor
from django_pgboss.schema.state import read_state
from tests.helpers import rows

pytestmark = pytest.mark.django_db(transaction=True)

#: The indexes schemas 45 and 46 add to every job table.
NEW_INDEXES = ("i13", "i14", "i15", "i16", "i17")


@pytest.fixture
def at_43():
    """The suite's schema rolled back to 43 by `migrate pgboss 0004`, migrated to 46 again after."""
    call_command("migrate", "pgboss", "0004", verbosity=0)
    yield
    for queue in boss.get_queues():
        boss.delete_queue(queue.name)
    call_command("migrate", "pgboss", verbosity=0)


def version() -> int:
    return rows("SELECT version FROM {s}.version")[0][0]


def state():
    with connection.cursor() as cursor:
        return read_state(cursor, pgboss_settings.SCHEMA)


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
    boss.create_queue("kept", partition=True)
    sent = boss.send("kept", {"n": 1, "text": "héllo"})

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
    table = boss.get_queue("kept").table_name
    pending = {(e.table, e.name) for e in boss.get_bam_entries() if e.status == "pending"}
    assert {t for t, _ in pending} == {table}
    assert set(NEW_INDEXES) <= indexes_of("job_common")
    assert not set(NEW_INDEXES) & indexes_of(table)
    Monitor(cron=False).build_indexes(gated=False)
    assert set(NEW_INDEXES) <= indexes_of(table)
    [job] = boss.fetch("kept")
    assert (job.id, job.data) == (sent, {"n": 1, "text": "héllo"})


def test_upgrading_a_populated_schema_keeps_senders_and_workers_going_through_migrate_and_builds(at_43):
    boss.create_queue("busy")
    boss.create_queue("busy-own", partition=True)
    boss.create_queue("idle-own", partition=True)
    own = boss.get_queue("busy-own").table_name
    idle = boss.get_queue("idle-own").table_name
    for queue in ("busy", "busy-own"):
        boss.insert(queue, [{"data": {"n": n}} for n in range(20_000)])

    stop = threading.Event()
    errors: list[BaseException] = []
    sent: list[str] = []
    phase = {"now": "43"}
    worked_in: list[tuple[str, str]] = []

    def keep_working(queue: str) -> None:
        try:
            while not stop.is_set():
                sent.append(boss.send(queue, {"by": "writer"}))
                boss.complete(queue, boss.fetch(queue, batch_size=5))
                worked_in.append((phase["now"], queue))
        except BaseException as exc:  # any failure of a writer fails the test
            errors.append(exc)
        finally:
            connection.close()

    writers = [threading.Thread(target=keep_working, args=(q,)) for q in ("busy", "busy-own")]
    for writer in writers:
        writer.start()
    try:
        time.sleep(0.2)
        # The migration takes the job tables before the queue table, as a send does: a send that
        # held its table while the migration held the queue table would be a deadlock.
        phase["now"] = "migrate"
        call_command("migrate", "pgboss", verbosity=0)
        phase["now"] = "46, building"
        queued = {(e.name, e.table) for e in boss.get_bam_entries() if e.version in (45, 46)}
        output = doctor()
        report = Monitor(cron=False).build_indexes(gated=False)
        phase["now"] = "built"
        time.sleep(0.2)
    finally:
        stop.set()
        for writer in writers:
            writer.join(timeout=60)

    assert errors == []
    assert version() == 46
    assert {t for _, t in queued} == {"job_common", own}  # idle-own's empty table was built inline
    assert set(NEW_INDEXES) <= indexes_of(idle)
    assert "OK: no drift." in output and "still being built" in output
    assert report.failed == {}
    assert set(report.completed) == queued
    # Both writers sent, fetched and completed while the indexes were being built: no build held a
    # lock that stopped them.
    assert {("46, building", "busy"), ("46, building", "busy-own")} <= set(worked_in)
    assert set(NEW_INDEXES) <= indexes_of("job_common") & indexes_of(own)
    ids = {str(job_id) for (job_id,) in rows("SELECT id FROM {s}.job WHERE data->>'by' = 'writer'")}
    assert ids == set(sent)
    output = doctor()
    assert "OK: no drift." in output and "still being built" not in output
