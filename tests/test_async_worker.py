"""Async handlers: ``@work`` on an ``async def`` runs on the worker's event loop, ``concurrency``
coroutines at once, with heartbeats, deadlines (the coroutine is cancelled), batched settles and
the threaded handlers' stop, in process and as a real ``manage.py pgboss_work`` process."""

from __future__ import annotations

import asyncio
import json
import signal
import threading
import time

import pytest
from django.conf import settings
from django.contrib.auth.models import User

from django_pgboss import boss
from django_pgboss.exceptions import InvalidOption
from django_pgboss.worker import Worker, registry
from django_pgboss.worker.registry import Registration, work
from tests.helpers import job_row, rows
from tests.processes import in_process, start_worker, wait_for
from tests.test_worker import marker_lines, states
from tests.workapp import jobs as workapp_jobs

pytestmark = pytest.mark.django_db(transaction=True)


def test_async_handlers_run_concurrency_coroutines_at_once_on_one_loop_thread():
    boss.create_queue("a")
    ids = boss.insert("a", [{"data": {"n": n}} for n in range(40)], return_ids=True)
    running, peak, threads = 0, 0, set()

    async def handler(job):
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        threads.add(threading.current_thread().name)
        await asyncio.sleep(0.05)
        running -= 1
        return {"n": job.data["n"], "loop": asyncio.get_running_loop().is_running()}

    Worker([Registration("a", handler, concurrency=10, batch_size=10)], burst=True).run()
    assert states() == {"completed": 40}
    assert peak == 10
    assert threads == {"pgboss-asyncio"}
    assert job_row(ids[7], "output") == ({"n": 7, "loop": True},)


def test_an_async_handler_uses_the_async_orm_and_boss_twins():
    boss.create_queue("aorm")
    boss.create_queue("echo")
    boss.insert("aorm", [{"data": {"username": f"async-{n}"}} for n in range(6)])
    Worker([Registration("aorm", workapp_jobs.aorm, concurrency=4)], burst=True).run()
    assert User.objects.filter(username__startswith="async-").count() == 6
    outputs = [json.loads(output) for (output,) in rows("SELECT output FROM {s}.job WHERE name = 'aorm'")]
    assert len(outputs) == 6 and all(o["sent"] for o in outputs)
    assert {o["users"] for o in outputs} <= set(range(1, 7))
    assert rows("SELECT count(*) FROM {s}.job WHERE name = 'echo'") == [(6,)]


def test_each_async_job_runs_its_orm_queries_on_one_connection_of_its_own():
    boss.create_queue("a")
    boss.insert("a", [{"data": {"n": n}} for n in range(8)])

    async def handler(job):
        from asgiref.sync import sync_to_async
        from django.db import connection

        def backend_pid():
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                return cursor.fetchone()[0]

        first = await sync_to_async(backend_pid)()
        await asyncio.sleep(0.05)  # another job's queries run meanwhile
        return {"same": first == await sync_to_async(backend_pid)(), "pid": first}

    Worker([Registration("a", handler, concurrency=4)], burst=True).run()
    outputs = [json.loads(output) for (output,) in rows("SELECT output FROM {s}.job")]
    assert all(o["same"] for o in outputs)
    # Four slots at once, each on a connection of its own.
    assert len({o["pid"] for o in outputs}) >= 2


def test_a_slots_jobs_run_their_orm_queries_one_after_another_on_the_slots_one_thread():
    boss.create_queue("a")
    boss.insert("a", [{"data": {"n": n}} for n in range(5)])

    async def handler(job):
        from asgiref.sync import sync_to_async
        from django.db import connection

        def where():
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                return cursor.fetchone()[0], threading.current_thread().name

        pid, thread = await sync_to_async(where)()
        return {"pid": pid, "thread": thread}

    Worker([Registration("a", handler, concurrency=1)], burst=True).run()
    outputs = [json.loads(output) for (output,) in rows("SELECT output FROM {s}.job")]
    assert len(outputs) == 5
    # One slot: its jobs run on its one thread, one job at a time, never on the event loop's. Each
    # job's connection is closed after it when obsolete, as Django closes a request's: under
    # CONN_MAX_AGE = 0 (the suite's default) every time, so each job has a connection of its own;
    # a persistent one is the slot's for all of its jobs.
    assert len({o["thread"] for o in outputs}) == 1 and outputs[0]["thread"] != "pgboss-asyncio"
    persistent = settings.DATABASES["default"].get("CONN_MAX_AGE", 0) != 0
    assert len({o["pid"] for o in outputs}) == (1 if persistent else 5)


def test_an_async_handler_that_raises_fails_the_job_with_its_error():
    boss.create_queue("a", retry_limit=0)
    job_id = boss.send("a", {})

    async def handler(job):
        await asyncio.sleep(0)
        raise ValueError("async trouble")

    Worker([Registration("a", handler)], burst=True).run()
    state, output = job_row(job_id, "state", "output")
    assert state == "failed" and output["name"] == "ValueError" and "async trouble" in output["message"]


def test_an_async_batch_handler_gets_lists_and_settles_them_together():
    boss.create_queue("a")
    boss.insert("a", [{"data": {"n": n}} for n in range(10)])
    sizes = []

    async def handler(jobs):
        sizes.append(len(jobs))
        await asyncio.sleep(0.01)
        return {"batch": sorted(job.data["n"] for job in jobs)}

    Worker([Registration("a", handler, batch=True, batch_size=5)], burst=True).run()
    assert states() == {"completed": 10}
    assert sizes == [5, 5]


def test_an_async_batch_handler_can_settle_each_job_on_its_own():
    from django_pgboss.worker.results import JobResult

    boss.create_queue("a", retry_limit=0)
    ids = boss.insert("a", [{"data": {"n": n}} for n in range(4)], return_ids=True)

    async def handler(jobs):
        return [
            JobResult.completed(job, {"n": job.data["n"]})
            if job.data["n"] % 2
            else JobResult.failed(job, "odd one out")
            for job in jobs
        ]

    Worker([Registration("a", handler, batch=True, batch_size=4, per_job_results=True)], burst=True).run()
    assert [job_row(job_id, "state")[0] for job_id in ids] == ["failed", "completed", "failed", "completed"]


def test_a_sync_boss_call_in_an_async_handler_fails_the_job_naming_the_twin():
    boss.create_queue("a", retry_limit=0)
    job_id = boss.send("a", {})

    async def handler(job):
        boss.send("a", {"nested": True})

    Worker([Registration("a", handler)], burst=True).run()
    state, output = job_row(job_id, "state", "output")
    assert state == "failed" and output["name"] == "SynchronousOnlyOperation"
    assert "await boss.asend(...)" in output["message"]


def test_the_coroutine_is_cancelled_at_the_jobs_deadline_and_the_job_retries():
    boss.create_queue("a", expire_in_seconds=1, retry_limit=1, retry_delay=60)
    job_id = boss.send("a", {})
    cancelled = threading.Event()

    async def handler(job):
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    worker, thread = in_process(Registration("a", handler, polling_interval_seconds=0.1))
    started = time.monotonic()
    try:
        wait_for(lambda: job_row(job_id, "state")[0] == "retry", timeout=15)
    finally:
        worker.stop()
        thread.join(30)
    assert cancelled.is_set() and time.monotonic() - started < 10
    state, output = job_row(job_id, "state", "output")
    assert (
        state == "retry"
        and output["name"] == "JobDeadlineExceeded"
        and "expire_in_seconds" in output["message"]
    )


def test_a_handlers_own_timeout_is_its_error_not_the_deadline():
    boss.create_queue("a", expire_in_seconds=60, retry_limit=0)
    job_id = boss.send("a", {})

    async def handler(job):
        async with asyncio.timeout(0.05):
            await asyncio.sleep(5)

    Worker([Registration("a", handler)], burst=True).run()
    assert job_row(job_id, "output")[0]["name"] == "TimeoutError"


def test_a_slot_runs_each_next_job_uncancelled_whatever_cancelled_the_one_before():
    # One slot runs these one after another in its own task: the worker's cancellation at a
    # deadline, a handler's asyncio.timeout(), and a handler cancelling its own task (caught or
    # not) must each stay with their job.
    boss.create_queue("a", expire_in_seconds=1, retry_limit=0)
    kinds = ["deadline", "timeout", "cancel-and-return", "cancel-and-await", "task-group", "plain"]
    ids = {kind: boss.send("a", {"kind": kind}) for kind in kinds}

    async def handler(job):
        kind = job.data["kind"]
        if kind == "deadline":
            await asyncio.sleep(30)
        elif kind == "timeout":
            async with asyncio.timeout(0.05):
                await asyncio.sleep(5)
        elif kind == "cancel-and-return":
            asyncio.current_task().cancel()
            return {"returned": True}
        elif kind == "cancel-and-await":
            asyncio.current_task().cancel()
            await asyncio.sleep(5)
        elif kind == "task-group":
            async with asyncio.TaskGroup() as group:
                naps = [group.create_task(asyncio.sleep(0.05, result=n)) for n in range(3)]
            return {"naps": [nap.result() for nap in naps]}
        await asyncio.sleep(0.2)
        return {"slept": True}

    worker, thread = in_process(Registration("a", handler, concurrency=1, polling_interval_seconds=0.1))
    try:
        wait_for(lambda: job_row(ids["plain"], "state")[0] in ("completed", "failed"), timeout=20)
    finally:
        worker.stop()
        thread.join(30)
    outcome = {kind: job_row(job_id, "state", "output") for kind, job_id in ids.items()}
    assert outcome["deadline"][0] == "failed" and outcome["deadline"][1]["name"] == "JobDeadlineExceeded"
    assert outcome["timeout"][0] == "failed" and outcome["timeout"][1]["name"] == "TimeoutError"
    assert outcome["cancel-and-return"] == ("completed", {"returned": True})
    # A cancellation the handler asked of its own task and let through is its own failure.
    assert outcome["cancel-and-await"][0] == "failed"
    assert outcome["cancel-and-await"][1]["name"] == "CancelledError"
    assert outcome["task-group"] == ("completed", {"naps": [0, 1, 2]})
    assert outcome["plain"] == ("completed", {"slept": True})


def test_heartbeats_keep_a_long_async_job_alive():
    boss.create_queue("a", heartbeat_seconds=10)
    job_id = boss.send("a", {})
    release = threading.Event()

    async def handler(job):
        while not release.is_set():
            await asyncio.sleep(0.05)
        return {"done": True}

    worker, thread = in_process(Registration("a", handler, polling_interval_seconds=0.1))
    try:
        wait_for(lambda: job_row(job_id, "state") == ("active",))
        (first_beat,) = job_row(job_id, "heartbeat_on")
        wait_for(lambda: job_row(job_id, "heartbeat_on")[0] > first_beat, timeout=10, interval=0.2)
    finally:
        release.set()
        worker.stop()
        thread.join(30)
    assert job_row(job_id, "state") == ("completed",)


def test_a_stop_lets_running_coroutines_finish_and_puts_unstarted_jobs_back():
    boss.create_queue("a")
    ids = boss.insert("a", [{"data": {"n": n}} for n in range(6)], return_ids=True)
    started = []

    async def handler(job):
        started.append(job.id)
        await asyncio.sleep(0.5)
        return {"n": job.data["n"]}

    worker, thread = in_process(Registration("a", handler, concurrency=2, batch_size=6))
    wait_for(lambda: len(started) == 2)
    worker.stop()
    thread.join(30)
    assert not thread.is_alive()
    # The two running finished; the four claimed ahead that never started went back uncharged.
    for job_id in ids:
        if job_id in started:
            assert job_row(job_id, "state") == ("completed",)
        else:
            assert job_row(job_id, "state", "started_on", "output") == ("retry", None, None), job_id
    assert len(started) == 2 and worker.stats.requeued == 4


def test_past_the_grace_period_running_coroutines_are_cancelled_and_their_jobs_retry():
    boss.create_queue("a", retry_limit=2)
    job_id = boss.send("a", {})
    running, cancelled = threading.Event(), threading.Event()

    async def handler(job):
        running.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    worker, thread = in_process(Registration("a", handler), grace_seconds=0.3)
    # Running, not only claimed: a stop puts a claimed job whose coroutine has not started yet
    # back in the queue uncharged, which is another test's case.
    assert running.wait(30)
    stopped = time.monotonic()
    worker.stop()
    thread.join(30)
    assert time.monotonic() - stopped < 10
    assert cancelled.is_set()
    state, output = job_row(job_id, "state", "output")
    assert state == "retry" and output["name"] == "WorkerShutdown"


def test_sync_and_async_queues_run_side_by_side_in_one_worker():
    boss.create_queue("s")
    boss.create_queue("a")
    boss.insert("s", [{"data": {"n": n}} for n in range(5)])
    boss.insert("a", [{"data": {"n": n}} for n in range(5)])

    def sync_handler(job):
        return {"kind": "sync", "thread": threading.current_thread().name}

    async def async_handler(job):
        return {"kind": "async", "thread": threading.current_thread().name}

    Worker([Registration("s", sync_handler), Registration("a", async_handler)], burst=True).run()
    outputs = dict(rows("SELECT name, array_agg(DISTINCT output->>'thread') FROM {s}.job GROUP BY name"))
    assert outputs["a"] == ["pgboss-asyncio"]
    assert all(name.startswith("pgboss-handler-s") for name in outputs["s"])


def test_a_queue_cannot_take_a_sync_and_an_async_handler():
    saved = dict(registry._registry)
    try:

        @work("mixed-q")
        def sync_handler(job):
            return None

        with pytest.raises(InvalidOption, match=r"all sync or all async"):

            @work("mixed-q")
            async def async_handler(job):
                return None

    finally:
        registry._registry.clear()
        registry._registry.update(saved)


def test_sigterm_with_async_handlers_in_flight_loses_nothing(tmp_path):
    marker = tmp_path / "marker"
    boss.create_queue("aslow")
    ids = boss.insert(
        "aslow", [{"data": {"sleep": 1.5, "marker": str(marker)}} for _ in range(8)], return_ids=True
    )
    worker = start_worker("--queue", "aslow")
    wait_for(lambda: len(marker_lines(marker, "start")) == 3)
    worker.send_signal(signal.SIGTERM)
    _, stderr = worker.communicate(timeout=60)
    assert worker.returncode == 0, stderr
    started = {line[1] for line in marker_lines(marker, "start")}
    finished = {line[1] for line in marker_lines(marker, "end")}
    assert started == finished and len(started) == 3
    for job_id in ids:
        expected = "completed" if job_id in started else "created"
        assert job_row(job_id, "state") == (expected,)
    assert states() == {"completed": 3, "created": 5}


def test_a_coroutine_that_swallows_its_cancellation_is_abandoned_and_its_slot_goes_on():
    boss.create_queue("a", expire_in_seconds=1, retry_limit=0)
    stubborn = boss.send("a", {"stubborn": True})
    release = threading.Event()

    async def handler(job):
        if not job.data.get("stubborn"):
            return {"ok": True}
        while not release.is_set():
            try:
                await asyncio.sleep(0.05)
            except asyncio.CancelledError:
                continue  # ignores its cancellation: the slot must not wait for it
        return {"late": True}

    worker, thread = in_process(Registration("a", handler, concurrency=1, polling_interval_seconds=0.1))
    try:
        wait_for(lambda: job_row(stubborn, "state") == ("failed",), timeout=15)
        after = boss.send("a", {})
        wait_for(lambda: job_row(after, "state") == ("completed",), timeout=15)
        assert worker.stats.abandoned == 1 and worker.stats.deadlines == 1
        release.set()
        # The abandoned coroutine ends: its place was freed at the deadline, and is not freed
        # again (the queue would then claim two jobs at once for its one slot).
        wait_for(lambda: worker._async.abandoned == 0, timeout=15)
        time.sleep(0.3)
        queue_state = worker._board.queues["a"]
        assert queue_state.free == queue_state.capacity == 1
    finally:
        release.set()
        worker.stop()
        thread.join(30)
    state, output = job_row(stubborn, "state", "output")
    # Its late return changed nothing: the attempt was failed at the deadline.
    assert state == "failed" and output["name"] == "JobDeadlineExceeded"


def test_a_lost_claim_cancels_the_coroutine_and_settles_nothing():
    boss.create_queue("a", heartbeat_seconds=10, retry_limit=3)
    job_id = boss.send("a", {})
    started, cancelled = threading.Event(), threading.Event()

    async def handler(job):
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    registration = Registration("a", handler, heartbeat_refresh_seconds=0.2, polling_interval_seconds=5)
    worker, thread = in_process(registration)
    try:
        assert started.wait(30)
        # Another party settles the attempt (an operator, the monitor): the claim is gone.
        assert boss.fail("a", job_id, {"by": "someone else"}) == 1
        assert cancelled.wait(10), "the heartbeat's lost claim did not cancel the coroutine"
    finally:
        worker.stop()
        thread.join(30)
    assert job_row(job_id, "output")[0] == {"by": "someone else"}


def test_an_async_handler_cannot_be_transactional():
    async def handler(job):
        return None

    with pytest.raises(InvalidOption, match=r"async handler cannot be transactional=True.*sync def handler"):
        work("atx", transactional=True)(handler)
    assert "atx" not in registry.registrations()
