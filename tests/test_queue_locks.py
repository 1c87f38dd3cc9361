"""Lock order between dropping a partitioned queue and the statements that write a dead letter.

Dropping a partition locks the parent table ``job`` first, then the partition, then the default
partition ``job_common`` (PostgreSQL changes the default partition's implied constraint). A
fail() or a redrive() that read its own queue's table before the parent would hold ``job_common``
and wait for ``job`` while the drop holds ``job`` and waits for ``job_common``: a deadlock. Each
test here forces that interleaving with a third connection that holds ``job`` until both are
queued on it, so the old order failed every run, not once in a while.

A send racing a delete_queue() is here too: on one PostgreSQL the send's foreign-key check holds
the queue's row, so the delete waits for the send and then refuses. (In the citus-distributed
mode the check runs on the shard at the send's commit, after the delete: the send fails instead.)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from django.db import connection, connections, transaction

from django_pgboss import QueueInUse, boss
from tests.helpers import count_jobs, rows, schema_sql

pytestmark = pytest.mark.django_db(transaction=True)


def backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def wait_until_blocked(pid: int, timeout: float = 20) -> None:
    """Wait until backend ``pid`` waits on a heavyweight lock."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        (state,) = rows("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [pid])[0]
        if state == "Lock":
            return
        time.sleep(0.01)
    raise AssertionError(f"backend {pid} never waited on a lock")


def race_against_partition_drop(second: Callable[[], object], *, warm_up: Callable[[], object]) -> object:
    """delete_queue("part") queued on ``job`` first, then ``second`` queued behind it; returns
    what ``second`` returned, and raises what either raised (a deadlock above all)."""
    pids: dict[str, int] = {}
    ready = {name: threading.Event() for name in ("warmed", "blocker", "delete")}
    go, release = threading.Event(), threading.Event()
    errors: list[BaseException] = []
    result: dict[str, object] = {}

    def blocker() -> None:
        # SHARE conflicts with the drop's ACCESS EXCLUSIVE and the writers' ROW EXCLUSIVE, and
        # with nothing a plain read takes, so both contenders queue on ``job`` in a known order.
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(f"LOCK TABLE ONLY {schema_sql()}.job IN SHARE MODE")
            ready["blocker"].set()
            assert release.wait(timeout=30)

    def deleter() -> None:
        pids["delete"] = backend_pid()
        ready["delete"].set()
        boss.delete_queue("part")

    def other() -> None:
        # The same statement run before on this connection, so the race meets a prepared one.
        warm_up()
        pids["second"] = backend_pid()
        ready["warmed"].set()
        assert go.wait(timeout=30)
        result["second"] = second()

    def guarded(target: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                target()
            except BaseException as exc:  # reported to the test thread
                errors.append(exc)
            finally:
                connections.close_all()

        return run

    threads = {
        name: threading.Thread(target=guarded(target))
        for name, target in (("second", other), ("blocker", blocker), ("delete", deleter))
    }
    for name in ("second", "blocker", "delete"):
        threads[name].start()
        assert ready["warmed" if name == "second" else name].wait(timeout=20), errors
    wait_until_blocked(pids["delete"])
    go.set()
    wait_until_blocked(pids["second"])
    release.set()
    for thread in threads.values():
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads.values()), "a contender hung"
    if errors:
        raise errors[0]
    return result["second"]


def queues_with_a_dead_letter() -> None:
    boss.create_queue("part", partition=True)
    boss.send("part", {"n": 0})
    boss.create_queue("dlq")
    boss.create_queue("src", retry_limit=0, dead_letter="dlq")


@pytest.mark.parametrize("plan_cache_mode", ["auto", "force_generic_plan"])
def test_fail_into_a_dead_letter_queue_while_a_partitioned_queue_is_dropped(plan_cache_mode):
    queues_with_a_dead_letter()
    warm, doomed = boss.send("src", {"n": 1}), boss.send("src", {"n": 2})

    def warm_up() -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT set_config('plan_cache_mode', %s, false)", [plan_cache_mode])
        assert boss.fail("src", warm, {"error": "first"}) == 1
        assert boss.fail("src", warm, {"error": "again"}) == 0  # now prepared (and generic, if forced)

    assert (
        race_against_partition_drop(lambda: boss.fail("src", doomed, {"error": "boom"}), warm_up=warm_up) == 1
    )
    assert boss.get_queue("part") is None
    assert rows("SELECT source_id::text FROM {s}.job WHERE name = 'dlq' ORDER BY source_id") == sorted(
        [(warm,), (doomed,)]
    )


def test_fail_from_a_partitioned_queue_into_a_common_dead_letter_queue_while_another_is_dropped():
    queues_with_a_dead_letter()
    boss.create_queue("src-part", partition=True, retry_limit=0, dead_letter="dlq")
    warm, doomed = boss.send("src-part", {"n": 1}), boss.send("src-part", {"n": 2})

    def warm_up() -> None:
        assert boss.fail("src-part", warm, {"error": "first"}) == 1

    assert race_against_partition_drop(lambda: boss.fail("src-part", doomed), warm_up=warm_up) == 1
    assert boss.get_queue("part") is None
    assert count_jobs("dlq") == 2


def test_redrive_out_of_a_common_dead_letter_queue_while_a_partitioned_queue_is_dropped():
    queues_with_a_dead_letter()
    first, second = boss.send("src", {"n": 1}), boss.send("src", {"n": 2})
    assert boss.fail("src", [first, second]) == 2
    copies = [row[0] for row in rows("SELECT id::text FROM {s}.job WHERE name = 'dlq' ORDER BY data->>'n'")]

    def warm_up() -> None:
        assert boss.redrive("dlq", ids=[copies[0]]).moved == 1

    moved = race_against_partition_drop(lambda: boss.redrive("dlq", ids=[copies[1]]).moved, warm_up=warm_up)
    assert moved == 1
    assert boss.get_queue("part") is None
    assert count_jobs("dlq") == 0
    assert sorted(job.data["n"] for job in boss.find_jobs("src", queued=True)) == [1, 2]


def test_the_monitor_dead_letters_an_expired_job_while_a_partitioned_queue_is_dropped():
    queues_with_a_dead_letter()
    boss.update_queue("src", expire_in_seconds=1)
    boss.send("src", {"n": 1})
    (job,) = boss.fetch("src")
    rows("UPDATE {s}.job SET started_on = started_on - interval '1 hour' WHERE id = %s", [job.id])

    def sweep() -> int:
        return boss.supervise(["src"]).expired

    assert race_against_partition_drop(sweep, warm_up=lambda: None) == 1
    assert boss.get_queue("part") is None
    assert rows("SELECT source_id::text FROM {s}.job WHERE name = 'dlq'") == [(job.id,)]


def test_a_delete_queue_that_waited_for_a_send_refuses_and_deletes_nothing():
    # A send whose foreign-key check ran (at its commit, here forced early) holds the queue's row:
    # the delete waits for it, and then finds the job the send committed.
    boss.create_queue("q")
    checked, release = threading.Event(), threading.Event()
    pids: dict[str, int] = {}
    outcome: list[BaseException] = []

    def sender() -> None:
        try:
            with transaction.atomic():
                boss.send("q", {"n": 1})
                with connection.cursor() as cursor:
                    cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
                checked.set()
                assert release.wait(30)
        finally:
            connection.close()

    def deleter() -> None:
        try:
            pids["delete"] = backend_pid()
            boss.delete_queue("q")
        except BaseException as exc:  # handed to the test's thread
            outcome.append(exc)
        finally:
            connection.close()

    sending, deleting = threading.Thread(target=sender), threading.Thread(target=deleter)
    sending.start()
    try:
        assert checked.wait(30)
        deleting.start()
        while "delete" not in pids:
            time.sleep(0.01)
        wait_until_blocked(pids["delete"])
    finally:
        release.set()
        sending.join(30)
    deleting.join(30)
    assert len(outcome) == 1 and isinstance(outcome[0], QueueInUse), outcome
    assert "'q' received jobs while it was being deleted; nothing was deleted" in str(outcome[0])
    assert boss.get_queue("q") is not None and count_jobs("q") == 1
