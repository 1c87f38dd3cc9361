"""The monitor's retention sweep, as pg-boss 12.38 runs it: one queue at a time, a bounded batch of
keys per transaction, and the maintenance claim handed back by a pass that could not finish.

These tests commit (the monitor runs in autocommit, each batch its own transaction), and use a
batch of 10 keys, so a few dozen jobs make several batches.
"""

from __future__ import annotations

import threading
import time

import psycopg
import pytest
from django.db import connections

from django_pgboss import boss
from django_pgboss.plans import retention as retention_plans
from tests.conftest import database_url
from tests.helpers import rows, schema_sql

pytestmark = pytest.mark.django_db(transaction=True)

BATCH = 10


@pytest.fixture(autouse=True)
def _small_batches(monkeypatch):
    monkeypatch.setattr(retention_plans, "DELETION_BATCH_SIZE", BATCH)
    monkeypatch.setattr(retention_plans, "DEPENDENCY_CLEANUP_BATCH_SIZE", BATCH)


def finished(queue: str, count: int) -> list[str]:
    """``count`` jobs of ``queue`` completed now; their ids in key order."""
    ids = [boss.send(queue, {"n": n}) for n in range(count)]
    assert boss.complete(queue, boss.fetch(queue, batch_size=count)) == count
    return sorted(ids)


def age(queue: str, ids: list[str]) -> None:
    """The jobs ``ids`` of ``queue`` (delete_after_seconds 60) completed two minutes ago, past
    their retention."""
    rows(
        "UPDATE {s}.job SET completed_on = now() - interval '2 minutes' WHERE name = %s AND id = ANY(%s::uuid[])",
        [queue, ids],
    )


def finished_long_ago(queue: str, count: int) -> list[str]:
    """``count`` jobs of ``queue`` completed two minutes ago; their ids in key order."""
    ids = finished(queue, count)
    age(queue, ids)
    return ids


def remaining(queue: str) -> int:
    return rows("SELECT count(*) FROM {s}.job WHERE name = %s", [queue])[0][0]


def due_for_maintenance(*queues: str) -> None:
    """As if the maintenance interval (a day) had passed since the queues' last retention."""
    rows("UPDATE {s}.queue SET maintain_on = NULL WHERE name = ANY(%s)", [list(queues)])


def test_the_walk_commits_each_batch_so_no_transaction_covers_the_whole_queue():
    boss.create_queue("walked", delete_after_seconds=60)
    ids = finished_long_ago("walked", 3 * BATCH)
    # Another session holds the last job: the batch that covers it waits for it, and only that one.
    with psycopg.connect(database_url(), autocommit=False) as holder:
        holder.execute(
            f"SELECT 1 FROM {schema_sql()}.job WHERE name = 'walked' AND id = %s FOR UPDATE", [ids[-1]]
        )
        outcome: list = []

        def supervise() -> None:
            try:
                outcome.append(boss.supervise(["walked"]))
            except BaseException as exc:  # reported below: a thread's exception is otherwise lost
                outcome.append(exc)
            finally:
                connections.close_all()

        monitor = threading.Thread(target=supervise)
        monitor.start()
        with psycopg.connect(database_url(), autocommit=True) as observer:
            deadline = time.monotonic() + 30
            waiting = 0
            while not waiting and time.monotonic() < deadline:
                time.sleep(0.05)
                (waiting,) = observer.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                    "AND query LIKE %s AND datname = current_database()",
                    ["%walk_cursor%"],
                ).fetchone()
            # The batches before it are committed: another session sees their jobs gone, while the
            # walk waits on the third batch's one locked row.
            (left,) = observer.execute(
                f"SELECT count(*) FROM {schema_sql()}.job WHERE name = 'walked'"
            ).fetchone()
        assert waiting == 1 and left == BATCH
        holder.rollback()
    monitor.join(timeout=60)

    (report,) = outcome
    assert report.maintained == ["walked"] and report.deleted == 3 * BATCH
    assert remaining("walked") == 0


def test_the_walk_counts_what_each_queue_keeps_across_its_batches():
    boss.create_queue("kept", delete_after_seconds=60)
    finished_long_ago("kept", 2 * BATCH + 5)
    kept = [boss.send("kept") for _ in range(BATCH + 3)]
    done = boss.fetch("kept", batch_size=BATCH)
    boss.complete("kept", done[:7])
    boss.cancel("kept", [job.id for job in done[7:]])
    rows(
        "UPDATE {s}.job SET completed_on = now() - interval '30 seconds' WHERE name = 'kept' AND id = ANY(%s::uuid[])",
        [[j.id for j in done]],
    )
    due_for_maintenance("kept")

    report = boss.supervise(["kept"])

    assert report.deleted == 2 * BATCH + 5
    assert remaining("kept") == len(kept)
    info = boss.get_queue("kept")
    # Ten finished jobs kept (seven completed, three cancelled), three waiting.
    assert (info.retained_count, info.queued_count, info.total_count) == (BATCH, 3, BATCH + 3)


def test_the_flow_edges_of_deleted_jobs_go_batch_by_batch():
    boss.create_queue("flows", delete_after_seconds=60)
    refs = [{"ref": "p", "name": "flows"}] + [
        {"ref": f"c{n}", "name": "flows", "depends_on": ["p"]} for n in range(2 * BATCH + 5)
    ]
    ids = boss.flow(refs)
    rows("DELETE FROM {s}.job WHERE name = 'flows' AND id <> %s", [ids["p"]])  # a purge of the children
    assert rows("SELECT count(*) FROM {s}.job_dependency")[0][0] == 2 * BATCH + 5
    due_for_maintenance("flows")

    report = boss.supervise(["flows"])

    assert report.dependencies_deleted == 2 * BATCH + 5
    assert rows("SELECT count(*) FROM {s}.job_dependency")[0][0] == 0


@pytest.fixture
def refusing_trigger():
    """A real error from the database: a trigger that refuses to delete the job whose data says
    ``{"refuse": true}``; dropped after the test."""
    rows(
        "CREATE FUNCTION {s}.refuse_delete() RETURNS trigger LANGUAGE plpgsql AS "
        "$$BEGIN RAISE EXCEPTION 'this job refuses to go'; END$$"
    )
    rows(
        "CREATE TRIGGER refuse_delete BEFORE DELETE ON {s}.job_common FOR EACH ROW "
        "WHEN (OLD.data @> '{\"refuse\": true}') EXECUTE FUNCTION {s}.refuse_delete()"
    )
    yield lambda: rows("DROP TRIGGER IF EXISTS refuse_delete ON {s}.job_common")
    rows("DROP TRIGGER IF EXISTS refuse_delete ON {s}.job_common")
    rows("DROP FUNCTION IF EXISTS {s}.refuse_delete()")


def test_a_queue_whose_retention_fails_is_claimed_again_by_the_next_pass(refusing_trigger):
    jobs = {}
    for queue in ("broken", "healthy"):
        boss.create_queue(queue, delete_after_seconds=60)
        jobs[queue] = finished(queue, 2 * BATCH + 5)
    boss.supervise()  # counts both queues: 25 jobs each
    assert [boss.get_queue(q).total_count for q in ("broken", "healthy")] == [2 * BATCH + 5] * 2
    for queue, ids in jobs.items():
        age(queue, ids)
    # The job the third batch of broken's walk covers refuses to be deleted.
    (last,) = rows("SELECT max(id::text) FROM {s}.job WHERE name = 'broken'")[0]
    rows("UPDATE {s}.job SET data = '{\"refuse\": true}' WHERE name = 'broken' AND id = %s::uuid", [last])
    due_for_maintenance("broken", "healthy")

    report = boss.supervise()

    assert [name for name, _ in report.failed] == ["broken"]
    assert "this job refuses to go" in report.failed[0][1]
    # healthy, claimed with broken and behind it, was handed back and maintained in the same pass.
    assert "healthy" in report.maintained and remaining("healthy") == 0
    # The two batches that committed stay done and are taken off broken's count at once.
    assert remaining("broken") == 5 and boss.get_queue("broken").total_count == 5
    # broken's claim was handed back too: once the cause is gone, the very next pass maintains it,
    # instead of a day later, and leaves healthy, whose claim holds, alone.
    refusing_trigger()
    report = boss.supervise()
    assert report.maintained == ["broken"] and report.failed == []
    assert remaining("broken") == 0
    info = boss.get_queue("broken")
    assert (info.retained_count, info.total_count) == (0, 0)
