"""How an async queue's claimed units reach its slots (worker/async_slots.py): a free slot takes
the next buffered unit itself, on the loop; a slot that finds the buffer empty waits for the
queue's bridge thread. Either way job_started is sent once per job, on a plain thread, before the
job's coroutine starts, and a unit leaves the buffer only for a slot that starts it."""

from __future__ import annotations

import asyncio
import threading

import pytest

from django_pgboss import boss, signals
from django_pgboss.worker import Worker
from django_pgboss.worker.registry import Registration
from tests.processes import in_process, wait_for
from tests.test_worker import states

pytestmark = pytest.mark.django_db(transaction=True)


def loop_running_here() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


@pytest.fixture
def announced():
    """Each job_started: (job id, thread name, whether that thread runs an event loop)."""
    seen: list[tuple[str, str, bool]] = []

    def receiver(*, job, **kwargs):
        seen.append((job.id, threading.current_thread().name, loop_running_here()))

    signals.job_started.connect(receiver, weak=False)
    try:
        yield seen
    finally:
        signals.job_started.disconnect(receiver)


def test_buffered_units_are_announced_once_each_off_the_loop_before_their_coroutine(announced):
    boss.create_queue("a")
    ids = boss.insert("a", [{"data": {"n": n}} for n in range(60)], return_ids=True)
    order: list[tuple[str, bool]] = []

    async def handler(job):
        # job_started was sent before the coroutine began.
        order.append((job.id, any(seen[0] == job.id for seen in announced)))
        await asyncio.sleep(0)

    # A fetch of 20 for 2 slots: most units wait in the buffer and are taken there by a slot.
    Worker([Registration("a", handler, concurrency=2, batch_size=20)], burst=True).run()
    assert states() == {"completed": 60}
    assert sorted(job_id for job_id, _thread, _loop in announced) == sorted(ids)
    assert all(before for _job_id, before in order) and len(order) == 60
    # Never on the loop, where a receiver could not query: the announcer or the bridge thread.
    assert not any(loop for _job_id, _thread, loop in announced)
    assert {thread for _job_id, thread, _loop in announced} <= {
        "pgboss-async-a",
        "pgboss-async-a-announce_0",
    }


def test_idle_slots_are_fed_by_the_bridge_and_a_stop_ends_them(announced):
    boss.create_queue("a")
    done: list[str] = []

    async def handler(job):
        done.append(job.id)

    worker, thread = in_process(Registration("a", handler, concurrency=3, polling_interval_seconds=0.1))
    try:
        # Every slot finds the buffer empty and waits for the bridge; jobs sent now reach them.
        for round_ in range(3):
            ids = [boss.send("a", {"round": round_}) for _ in range(4)]
            wait_for(lambda ids=ids: set(ids) <= set(done))
    finally:
        worker.stop()
        thread.join(30)
    assert not thread.is_alive()
    assert states() == {"completed": 12}
    assert len(announced) == 12 and len(set(done)) == 12
    assert not any(loop for _job_id, _thread, loop in announced)
