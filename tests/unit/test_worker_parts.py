"""The worker's own logic, over the in-memory store and a clock the test moves: no PostgreSQL.

Each test runs the real Worker (the engine ``pgboss_work`` runs) with ``store=``,
``queue_catalog=`` and ``clock=`` (worker/ports.py), and asserts what the store shows afterwards:
the states, outputs and attempts a user would find in the job table. Deadlines and grace periods
pass when the test advances the clock, never by sleeping.
"""

from __future__ import annotations

import asyncio
import math
import threading
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from django_pgboss.cancellation import CLAIM_LOST, DEADLINE, SHUTDOWN
from django_pgboss.exceptions import InvalidOption, OffWorkWaitsOnItself
from django_pgboss.worker import Worker, handlers
from django_pgboss.worker.deadlines import ABANDON_GRACE_SECONDS, EXIT_ABANDONED_THREADS
from django_pgboss.worker.registry import Registration
from django_pgboss.worker.results import JobResult
from tests.unit.conftest import PATIENCE_SECONDS, eventually
from tests.unit.fakes import ManualClock


def finish(run: Any, clock: ManualClock) -> None:
    """Let a bursting worker notice its queues are empty: its watch ticks on the test's clock."""
    for _ in range(int(PATIENCE_SECONDS / 0.01)):
        if not run.thread.is_alive():
            break
        clock.advance(0.1)
        run.thread.join(0.01)
    run.join()


# -- claim-ahead limits ---------------------------------------------------------------------------


def test_a_queue_claims_ahead_up_to_batch_size_and_never_more(store, clock, start):
    store.create_queue("q")
    store.send_many("q", 20)
    gate = threading.Event()
    run = start(
        Registration("q", lambda job: gate.wait(PATIENCE_SECONDS), concurrency=2, batch_size=6), burst=True
    )
    eventually(lambda: [len(q.running) for q in run.worker.snapshot().queues] == [2], "two jobs running")
    eventually(lambda: store.states("q").get("active") == 6, "four more claimed ahead")
    (queue,) = run.worker.snapshot().queues
    assert (queue.claimed, queue.free, len(queue.running)) == (6, 0, 2)
    gate.set()
    finish(run, clock)
    assert store.states("q") == {"completed": 20}
    # No fetch ever asked for more than the slots it had free.
    asked = [call.asked for call in store.calls_of("fetch")]
    assert asked[0] == 6 and max(asked) == 6


def test_a_batch_queue_holds_concurrency_batches_at_most(store, clock, start):
    store.create_queue("q")
    store.send_many("q", 30)
    gate = threading.Event()
    sizes: list[int] = []

    def handler(jobs: list[Any]) -> None:
        sizes.append(len(jobs))
        gate.wait(PATIENCE_SECONDS)

    run = start(Registration("q", handler, concurrency=2, batch_size=5, batch=True), burst=True)
    eventually(lambda: len(sizes) == 2, "two batches running")
    assert sizes == [5, 5]
    assert store.states("q") == {"active": 10, "created": 20}
    gate.set()
    finish(run, clock)
    assert store.states("q") == {"completed": 30}
    assert sizes == [5] * 6


def test_max_jobs_stops_claiming_at_the_budget(store, clock, start):
    store.create_queue("q")
    store.send_many("q", 10)
    run = start(Registration("q", lambda job: None, concurrency=2, batch_size=4), max_jobs=3)
    finish(run, clock)
    assert store.states("q") == {"completed": 3, "created": 7}


# -- settles: batching, and a refusal split down to its job ---------------------------------------


def test_a_refused_output_fails_its_job_alone_and_the_rest_of_the_batch_completes(store, clock, start):
    store.create_queue("q", retry_limit=0)
    ids = store.send_many("q", 16)
    bad = ids[5]
    store.refuse = lambda output: output == {"value": "unstorable"}

    def handler(jobs: list[Any]) -> list[JobResult]:
        return [JobResult.completed(job, "unstorable" if job.id == bad else job.data["n"]) for job in jobs]

    run = start(
        Registration("q", handler, batch=True, batch_size=16, per_job_results=True, concurrency=1), burst=True
    )
    finish(run, clock)
    assert store.states("q") == {"completed": 15, "failed": 1}
    assert store.jobs[bad].state == "failed"
    assert store.jobs[bad].output["name"] == "OutputNotStored"
    assert store.jobs[ids[6]].output == {"value": 6}
    completions = store.calls_of("complete_each")
    # One statement for the whole batch, then halves down to the refused job: about 2 log2(n).
    assert len(completions[0].ids) == 16
    assert len(completions) <= 1 + 2 * math.ceil(math.log2(16))
    assert [len(call.ids) for call in completions if bad in call.ids][-1] == 1


def test_database_trouble_retries_the_batch_whole(store, clock, start):
    store.create_queue("q")
    store.send_many("q", 8)
    store.trouble("complete_each", 1)

    def handler(jobs: list[Any]) -> list[JobResult]:
        return [JobResult.completed(job, "ok") for job in jobs]

    run = start(Registration("q", handler, batch=True, batch_size=8, per_job_results=True), burst=True)
    finish(run, clock)
    assert store.states("q") == {"completed": 8}
    first, second = store.calls_of("complete_each")
    assert sorted(first.ids) == sorted(second.ids) and len(first.ids) == 8
    assert run.worker.stats.completed == 8


# -- deadlines, the cancellation signal, thread replacement ---------------------------------------


def test_a_unit_past_its_deadline_is_failed_its_signal_set_and_its_thread_replaced(store, clock, start):
    store.create_queue("q", retry_limit=1, expire_in_seconds=10)
    first, second = store.send_many("q", 2)
    seen: dict[str, Any] = {}
    release = threading.Event()

    def handler(job: Any) -> str:
        if job.id == first and job.retry_count == 0:
            seen["signalled"] = job.signal.wait(PATIENCE_SECONDS)
            seen["reason"] = job.signal.reason
            release.wait(PATIENCE_SECONDS)
            return "late"
        return "on time"

    run = start(Registration("q", handler, concurrency=1))
    eventually(lambda: store.states("q") == {"active": 1, "created": 1}, "the first job running")
    clock.advance(11)
    # The first thread still runs its handler; a new thread ran the rest meanwhile.
    eventually(
        lambda: store.states("q") == {"completed": 2}, "the retry and the second job completed", ticking=clock
    )
    assert seen == {"signalled": True, "reason": DEADLINE}
    release.set()
    run.worker.stop()
    finish(run, clock)
    # The late result went to the attempt fence, which refused it: the retry's output stands.
    assert (store.jobs[first].output, store.jobs[first].retry_count) == ({"value": "on time"}, 1)
    assert store.jobs[second].output == {"value": "on time"}
    assert run.worker.stats.deadlines == 1
    (failure,) = store.calls_of("fail_reporting")
    assert failure.ids == [first]


def test_a_handler_that_ignores_its_signal_is_abandoned_and_past_the_limit_the_worker_exits(
    store, clock, start
):
    store.create_queue("q", expire_in_seconds=5)
    store.send("q")
    release = threading.Event()
    run = start(
        Registration("q", lambda job: release.wait(PATIENCE_SECONDS)),
        max_abandoned_threads=0,
        grace_seconds=1,
    )
    try:
        eventually(lambda: store.states("q") == {"active": 1}, "the job running")
        clock.advance(6)
        eventually(lambda: run.worker.stats.deadlines == 1, "the deadline passed", ticking=clock)
        clock.advance(ABANDON_GRACE_SECONDS + 0.5)
        finish(run, clock)
    finally:
        release.set()
    assert run.worker.stats.abandoned == 1
    assert run.worker.exit_status == EXIT_ABANDONED_THREADS
    assert store.states("q") == {"retry": 1}


def test_a_handler_thread_that_dies_has_its_jobs_failed_and_is_replaced(store, clock, start, monkeypatch):
    store.create_queue("q")
    job_id = store.send("q")
    fault = threading.Event()
    real = handlers.close_old_connections_quietly

    def faulty() -> None:
        # A fault in the handler loop itself, after the handler returned: the thread dies.
        if fault.is_set():
            fault.clear()
            raise RuntimeError("a fault in the loop")
        real()

    monkeypatch.setattr(handlers, "close_old_connections_quietly", faulty)

    def handler(job: Any) -> str:
        if job.retry_count == 0:
            fault.set()
        return f"attempt {job.retry_count}"

    run = start(Registration("q", handler, concurrency=1), burst=True)
    finish(run, clock)
    assert (store.jobs[job_id].state, store.jobs[job_id].output) == ("completed", {"value": "attempt 1"})
    (failure,) = store.calls_of("fail_reporting")
    assert failure.ids == [job_id]


# -- heartbeats --------------------------------------------------------------------------------------


def test_heartbeats_touch_a_running_job_and_a_lost_claim_sets_its_signal(store, clock, start):
    store.create_queue("q", heartbeat_seconds=2)
    job_id = store.send("q")
    seen: list[str | None] = []

    def handler(job: Any) -> None:
        job.signal.wait(PATIENCE_SECONDS)
        seen.append(job.signal.reason)

    run = start(Registration("q", handler))
    eventually(lambda: store.jobs[job_id].state == "active", "the job running")
    eventually(lambda: store.jobs[job_id].touches >= 2, "two heartbeats", ticking=clock)
    # The monitor took the job for a dead worker's: another attempt holds it now.
    with store.lock:
        store.jobs[job_id].state = "retry"
    eventually(lambda: seen == [CLAIM_LOST], "the handler saw its claim lost", ticking=clock)
    run.worker.stop()
    finish(run, clock)
    # Its result went to the attempt fence, which left the job as the other attempt has it.
    assert store.jobs[job_id].state == "retry"


# -- the stop: unstarted jobs back at once, the grace period, then the rest back ----------------


def test_a_stop_puts_unstarted_jobs_back_waits_out_the_grace_period_then_interrupts(store, clock, start):
    store.create_queue("q")
    ids = store.send_many("q", 3)
    reasons: list[str | None] = []
    handler_started = threading.Event()

    def handler(job: Any) -> None:
        handler_started.set()
        job.signal.wait(PATIENCE_SECONDS)
        reasons.append(job.signal.reason)

    run = start(Registration("q", handler, concurrency=1, batch_size=3), grace_seconds=30)
    # All three are claimed before the handler thread takes its first one: a stop in between
    # would find all three unstarted, so the test waits for the handler itself.
    eventually(
        lambda: handler_started.is_set() and store.states("q") == {"active": 3},
        "one job running, two claimed ahead",
    )
    run.worker.stop()
    eventually(lambda: store.states("q") == {"active": 1, "retry": 2}, "the unstarted jobs back")
    running = next(job for job in store.jobs.values() if job.state == "active")
    # Put back uncharged: their next claim is no new attempt.
    assert [store.jobs[i].started for i in ids if i != running.id] == [False, False]
    clock.advance(29)
    assert store.jobs[running.id].state == "active"  # still within the grace period
    clock.advance(2)
    run.join()
    # The handler, left running past the grace period, saw its signal set by the stop.
    eventually(lambda: reasons == [SHUTDOWN], "the handler saw its signal")
    assert store.states("q") == {"retry": 3}
    # Cut short, so its attempt does not count: the limit grew by one.
    assert store.jobs[running.id].retry_limit == 3
    assert run.worker.stats.requeued == 3


# -- per-job results -------------------------------------------------------------------------------


def test_per_job_results_complete_retry_and_dead_letter_each_job(store, clock, start):
    store.create_queue("q", retry_limit=1, dead_letter="dlq")
    store.create_queue("dlq")
    a, b, c = store.send_many("q", 3)

    def handler(jobs: list[Any]) -> list[JobResult]:
        results = []
        for job in jobs:
            if job.id == a:
                results.append(JobResult.completed(job, "A"))
            elif job.id == b:
                results.append(
                    JobResult.failed(job, {"message": "again"})
                    if job.retry_count == 0
                    else JobResult.completed(job, "B")
                )
            else:
                results.append(JobResult.dead_letter(job, {"message": "never"}))
        return results

    run = start(Registration("q", handler, batch=True, batch_size=3, per_job_results=True), burst=True)
    finish(run, clock)
    assert (store.jobs[a].state, store.jobs[a].output) == ("completed", {"value": "A"})
    assert (store.jobs[b].state, store.jobs[b].output, store.jobs[b].retry_count) == (
        "completed",
        {"value": "B"},
        1,
    )
    assert (store.jobs[c].state, store.jobs[c].output) == ("failed", {"message": "never"})
    assert store.states("dlq") == {"created": 1}


# -- async slots ------------------------------------------------------------------------------------


def test_an_async_queue_runs_concurrency_coroutines_at_once_on_one_thread(store, clock, start):
    store.create_queue("q")
    store.send_many("q", 9)
    running = {"now": 0, "most": 0}
    threads: set[int] = set()
    full: dict[str, asyncio.Event] = {}

    async def handler(job: Any) -> int:
        threads.add(threading.get_ident())
        event = full.setdefault("event", asyncio.Event())
        running["now"] += 1
        running["most"] = max(running["most"], running["now"])
        if running["now"] == 3:
            event.set()
        try:
            # Each waits until three ran at once: with fewer slots the first ones time out.
            await asyncio.wait_for(event.wait(), PATIENCE_SECONDS)
        finally:
            running["now"] -= 1
        return job.data["n"]

    run = start(Registration("q", handler, concurrency=3), burst=True)
    finish(run, clock)
    assert store.states("q") == {"completed": 9}
    assert running["most"] == 3
    assert len(threads) == 1


# -- off_work() from inside the queue's own handler ----------------------------------------------


@pytest.mark.parametrize("kind", ["thread", "coroutine"])
def test_off_work_waiting_from_its_own_handler_is_refused_and_without_wait_stops_the_queue(
    store, clock, start, kind
):
    store.create_queue("q")
    ready = threading.Event()
    refusals: list[str] = []
    workers: list[Worker] = []

    def stop_from_inside(job: Any) -> str:
        ready.wait(PATIENCE_SECONDS)
        (worker,) = workers
        try:
            worker.off_work("q")
        except OffWorkWaitsOnItself as exc:
            refusals.append(str(exc))
        # Refused before anything changed: the queue is still worked, and stops only now.
        assert "q" in worker.work_ids
        worker.off_work("q", wait=False)
        return "stopped itself"

    async def stop_from_a_coroutine(job: Any) -> str:
        # What an async handler does with a sync call: run it on its job's thread.
        return await sync_to_async(stop_from_inside)(job)

    handler = stop_from_inside if kind == "thread" else stop_from_a_coroutine
    first = store.send("q", {})
    run = start(Registration("q", handler, polling_interval_seconds=0.1))
    workers.append(run.worker)
    ready.set()
    eventually(lambda: store.jobs[first].state == "completed", "the job completed", ticking=clock)
    eventually(lambda: run.worker.snapshot().queues == [], "the queue taken off the worker", ticking=clock)
    assert store.jobs[first].output == {"value": "stopped itself"}
    assert len(refusals) == 1 and "from inside a handler of queue 'q'" in refusals[0]
    assert "wait=False" in refusals[0]
    # No longer worked: a new job stays where it is, however long the worker runs.
    later = store.send("q", {})
    clock.advance(5)
    assert store.jobs[later].state == "created"


def test_off_work_from_a_handler_of_another_queue_waits_for_the_queue_it_stops(store, clock, start):
    store.create_queue("a")
    store.create_queue("b")
    ready, release = threading.Event(), threading.Event()
    workers: list[Worker] = []
    done: list[str] = []

    def slow(job: Any) -> str:
        release.wait(PATIENCE_SECONDS)
        return "b done"

    def stop_b(job: Any) -> str:
        ready.wait(PATIENCE_SECONDS)
        workers[0].off_work("b")
        done.append("off_work returned")
        return "a done"

    b_job = store.send("b", {})
    run = start(Registration("a", stop_b, polling_interval_seconds=0.1), Registration("b", slow))
    workers.append(run.worker)
    eventually(lambda: store.jobs[b_job].state == "active", "b's job running", ticking=clock)
    a_job = store.send("a", {})
    ready.set()
    eventually(lambda: store.jobs[a_job].state == "active", "a's handler running", ticking=clock)
    # A handler of queue a may wait for queue b's handlers: it is not one of them.
    assert done == []
    release.set()
    eventually(lambda: done == ["off_work returned"], "off_work() returned", ticking=clock)
    eventually(lambda: store.jobs[a_job].state == "completed", "a's job completed", ticking=clock)
    assert store.jobs[b_job].state == "completed"


# -- what the Worker refuses -------------------------------------------------------------------------


def test_a_transactional_queue_is_refused_over_a_store_that_is_not_postgresql(store, clock):
    with pytest.raises(InvalidOption, match="transactional queue\\(s\\) 'q' need the PostgreSQL job store"):
        Worker(
            [Registration("q", lambda job: None, transactional=True)],
            store=store,
            queue_catalog=store,
            clock=clock,
        )


def test_a_store_without_a_queue_catalog_is_refused(store):
    with pytest.raises(InvalidOption, match="a store and a queue_catalog together"):
        Worker([Registration("q", lambda job: None)], store=store)
