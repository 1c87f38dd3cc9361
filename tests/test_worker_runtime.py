"""The worker at run time (pg-boss's work(), offWork(), notifyWorker(), getWipData()): a Worker
a program or a test drives, adding and removing a queue's handler while it runs, on PostgreSQL."""

from __future__ import annotations

import asyncio
import inspect
import threading

import pytest

from django_pgboss import Boss, boss
from django_pgboss.exceptions import InvalidOption, OffWorkWaitsOnItself, QueueNotFound
from django_pgboss.worker import Worker
from django_pgboss.worker.engine import PROCESS_OPTIONS
from tests.helpers import job_row
from tests.processes import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_worker_started_as_a_context_manager_works_queues_added_while_it_runs():
    boss.create_queue("first")
    boss.create_queue("second")
    with boss.worker() as worker:
        first_id = worker.work(
            "first", lambda job: {"doubled": job.data["n"] * 2}, polling_interval_seconds=0.2
        )
        job = boss.send("first", {"n": 21})
        wait_for(lambda: job_row(job, "state") == ("completed",), timeout=30)
        worker.work("second", lambda job: "second", polling_interval_seconds=0.2)
        other = boss.send("second", {})
        wait_for(lambda: job_row(other, "state") == ("completed",), timeout=30)
        assert sorted(queue.name for queue in worker.wip().queues) == ["first", "second"]
        assert worker.work_ids["first"] == first_id
    assert job_row(job, "output") == ({"doubled": 42},)
    assert worker.stopping.is_set()


def test_off_work_waits_for_running_handlers_and_puts_claimed_jobs_back_uncharged():
    boss.create_queue("slow")
    started, release = threading.Event(), threading.Event()

    def handler(job):
        started.set()
        release.wait(30)
        return "done"

    with Worker([]) as worker:
        work_id = worker.work("slow", handler, concurrency=1, batch_size=3, polling_interval_seconds=0.2)
        ids = [boss.send("slow", {"n": n}) for n in range(3)]
        wait_for(lambda: started.is_set() and worker.wip().queues[0].claimed == 3, timeout=30)
        running = worker.wip().queues[0].running[0].id
        off = threading.Thread(target=worker.off_work, args=(work_id,), daemon=True)
        off.start()
        # The two claimed jobs that had not started are back at once, uncharged.
        wait_for(lambda: [job_row(i, "state")[0] for i in ids if i != running] == ["retry"] * 2, timeout=30)
        assert all(job_row(i, "started_on") == (None,) for i in ids if i != running)
        off.join(1)
        assert off.is_alive(), "off_work() returned while the handler was still running"
        release.set()
        off.join(30)
        assert job_row(running, "state", "output") == ("completed", {"value": "done"})
        assert worker.wip().queues == []
        # No longer worked: a new job stays where it is.
        later = boss.send("slow", {})
        worker.notify("slow")
        assert job_row(later, "state") == ("created",)


def test_notify_wakes_a_queue_that_polls_rarely():
    boss.create_queue("rare")
    with Worker([]) as worker:
        worker.work("rare", lambda job: None, polling_interval_seconds=3600)
        wait_for(lambda: worker.wip().queues[0].last_fetched_at is not None, timeout=30)
        job = boss.send("rare", {})
        worker.notify("rare")
        # The next poll is an hour away: only the notify can have woken the fetcher.
        wait_for(lambda: job_row(job, "state") == ("completed",), timeout=30)


def test_stop_with_a_grace_period_of_zero_puts_running_jobs_back():
    boss.create_queue("stuck")
    started, release = threading.Event(), threading.Event()

    def handler(job):
        started.set()
        release.wait(30)

    worker = Worker([]).start()
    try:
        worker.work("stuck", handler, polling_interval_seconds=0.2)
        job = boss.send("stuck", {})
        wait_for(started.is_set, timeout=30)
        worker.stop(grace_seconds=0)
        # stop() waited for the worker started with start(): the job is back already.
        assert job_row(job, "state") == ("retry",)
        assert worker.stats.requeued == 1
    finally:
        release.set()


def test_boss_worker_builds_the_runtime_worker_over_that_boss_with_the_process_options():
    other = Boss(schema=boss.schema)
    worker = other.worker(grace_seconds=5, burst=True)
    assert isinstance(worker, Worker)
    assert worker.boss is other
    assert (worker.grace_seconds, worker.burst, worker.registrations) == (5, True, [])
    with pytest.raises(InvalidOption, match="grace_seconds"):
        boss.worker(grace_seconds=-1)
    with pytest.raises(InvalidOption, match="worker\\(\\) takes no option 'colour'"):
        boss.worker(colour="blue")
    # Every option Worker takes but the registrations and the Boss is a process option.
    taken = set(inspect.signature(Worker).parameters) - {"registrations", "boss"}
    assert taken == PROCESS_OPTIONS


def test_boss_worker_may_be_built_on_a_running_event_loop():
    # It runs no statement, so it has no async twin and is not refused there as Boss's calls are.
    async def build() -> Worker:
        return boss.worker()

    assert isinstance(asyncio.run(build()), Worker)
    assert not hasattr(Boss, "aworker")


def test_what_the_runtime_api_refuses():
    boss.create_queue("taken")
    with Worker([]) as worker:
        with pytest.raises(QueueNotFound, match="'missing' does not exist"):
            worker.work("missing", lambda job: None)
        worker.work("taken", lambda job: None)
        with pytest.raises(InvalidOption, match="'taken' is worked already"):
            worker.work("taken", lambda job: None)
        with pytest.raises(InvalidOption, match="neither a queue nor a work id"):
            worker.off_work("nope")
        with pytest.raises(InvalidOption, match="concurrency"):
            worker.work("other", lambda job: None, concurrency=0)
        with pytest.raises(InvalidOption, match="takes no option 'colour'"):
            worker.work("other", lambda job: None, colour="blue")
    with pytest.raises(InvalidOption, match="takes no more work"):
        worker.work("fresh", lambda job: None)


@pytest.mark.parametrize("kind", ["thread", "coroutine"])
def test_off_work_waiting_from_its_own_handler_is_refused_and_without_wait_stops_the_queue(kind):
    boss.create_queue("self-stop")
    refusals: list[str] = []

    def stop_from_inside(job):
        try:
            worker.off_work("self-stop")
        except OffWorkWaitsOnItself as exc:
            refusals.append(str(exc))
        # Refused before anything changed: the queue is still worked, and stops only now.
        assert "self-stop" in worker.work_ids
        worker.off_work("self-stop", wait=False)
        return "stopped itself"

    async def stop_from_a_coroutine(job):
        from asgiref.sync import sync_to_async

        return await sync_to_async(stop_from_inside)(job)

    handler = stop_from_inside if kind == "thread" else stop_from_a_coroutine
    with Worker([]) as worker:
        worker.work("self-stop", handler, polling_interval_seconds=0.2)
        job = boss.send("self-stop", {})
        wait_for(lambda: worker.wip().queues == [], timeout=30)
        assert job_row(job, "state", "output") == ("completed", {"value": "stopped itself"})
        assert len(refusals) == 1 and "from inside a handler of queue 'self-stop'" in refusals[0]
        later = boss.send("self-stop", {})
        worker.notify("self-stop")
        assert job_row(later, "state") == ("created",)
