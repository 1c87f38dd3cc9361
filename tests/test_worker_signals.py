"""The worker's and the monitor's signals (django_pgboss.signals), from real workers and monitors on
the real database: each sent with its documented arguments, after what it reports is stored; a
receiver that raises changes nothing; Worker.snapshot() shows what runs."""

from __future__ import annotations

import json
import logging
import os
import threading

import pytest

from django_pgboss import boss, signals
from django_pgboss.monitor import Monitor
from django_pgboss.worker import Worker
from django_pgboss.worker.handlers import HandlerPool
from django_pgboss.worker.registry import Registration
from tests.helpers import HANDLER_KINDS, handler_of, job_row, rows
from tests.processes import run_worker, wait_for
from tests.test_signals import raising, received

pytestmark = pytest.mark.django_db(transaction=True)


def burst(*registrations: Registration) -> Worker:
    worker = Worker(list(registrations), burst=True)
    worker.run()
    return worker


@pytest.mark.parametrize("kind", HANDLER_KINDS)
def test_a_worker_sends_started_completed_failed_dead_lettered_and_its_own_start_and_stop(kind):
    boss.create_queue("dead")
    boss.create_queue("work", retry_limit=1, dead_letter="dead")
    good = boss.send("work", {"n": 2})
    bad = boss.send("work", {"n": -1})
    seen: dict[str, list[dict]] = {}

    def handler(job):
        if job.data["n"] < 0:
            raise ValueError("negative")
        return {"double": job.data["n"] * 2}

    def record(name):
        def receiver(sender, **kwargs):
            entry = {"sender": sender, **kwargs}
            if "job" in kwargs:
                # What a receiver reading the database finds when the signal comes.
                entry["state"] = job_row(kwargs["job"].id, "state")[0]
            seen.setdefault(name, []).append(entry)

        return receiver

    receivers = {
        name: record(name)
        for name in (
            "job_started",
            "job_completed",
            "job_failed",
            "job_dead_lettered",
            "worker_started",
            "worker_stopped",
        )
    }
    for name, receiver in receivers.items():
        getattr(signals, name).connect(receiver, weak=False)
    try:
        worker = burst(Registration("work", handler_of(kind, handler), polling_interval_seconds=0.1))
    finally:
        for name, receiver in receivers.items():
            getattr(signals, name).disconnect(receiver)

    (started,) = seen["worker_started"]
    assert (started["sender"], started["worker"], started["queues"]) == (Worker, worker, ["work"])
    (stopped,) = seen["worker_stopped"]
    assert stopped["worker"] is worker and stopped["stats"].completed == 1 and stopped["stats"].failed == 2

    # The bad job ran twice (retry_limit=1): started three times in all, good once.
    assert sorted((e["job"].id, e["job"].retry_count) for e in seen["job_started"]) == sorted(
        [(good, 0), (bad, 0), (bad, 1)]
    )
    assert all(
        e["sender"] is Worker and e["queue"] == "work" and e["state"] == "active" for e in seen["job_started"]
    )

    (completed,) = seen["job_completed"]
    assert completed["job"].id == good
    assert completed["output"] == {"double": 4}
    assert completed["state"] == "completed"  # sent after the completion committed

    first, last = sorted(seen["job_failed"], key=lambda e: e["job"].retry_count)
    assert all(e["job"].id == bad for e in (first, last))
    assert (first["will_retry"], first["state"]) == (True, "retry")
    assert (last["will_retry"], last["state"]) == (False, "failed")
    assert isinstance(first["exception"], ValueError) and str(first["exception"]) == "negative"
    assert first["output"]["name"] == "ValueError" and first["output"]["message"] == "negative"

    (dead,) = seen["job_dead_lettered"]
    (copy,) = rows("SELECT id::text FROM {s}.job WHERE name = 'dead'")
    assert (dead["job"].id, dead["dead_letter"], dead["dead_letter_id"]) == (bad, "dead", copy[0])


@pytest.mark.parametrize("kind", HANDLER_KINDS)
def test_a_receiver_that_raises_never_breaks_the_worker(caplog, kind):
    boss.create_queue("work")
    ids = [boss.send("work", {"n": n}) for n in range(5)]
    with (
        raising(signals.job_started),
        raising(signals.job_completed),
        raising(signals.worker_started),
        caplog.at_level(logging.ERROR, logger="django_pgboss.signals"),
    ):
        worker = burst(
            Registration("work", handler_of(kind, lambda job: job.data), polling_interval_seconds=0.1)
        )
    assert worker.stats.completed == 5
    assert {job_row(i, "state")[0] for i in ids} == {"completed"}
    messages = [r.getMessage() for r in caplog.records if r.name == "django_pgboss.signals"]
    assert len([m for m in messages if "job_started" in m]) == 5
    assert len([m for m in messages if "job_completed" in m]) == 5
    assert len([m for m in messages if "worker_started" in m]) == 1


def test_a_database_error_in_the_worker_is_error_raised_and_the_worker_carries_on():
    boss.create_queue("work")
    worker = Worker([Registration("work", lambda job: job.data, polling_interval_seconds=0.1)])
    with received(signals.error_raised) as errors:
        thread = threading.Thread(target=worker.run, daemon=True)
        thread.start()
        try:
            wait_for(lambda: (q := worker.snapshot().queues) and q[0].last_fetched_at is not None)
            # Every connection of the worker is cut, as a server restart or a proxy would.
            wait_for(
                lambda: (
                    rows(
                        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                        "WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
                    )[0][0]
                    and errors
                ),
                timeout=20,
            )
            later = boss.send("work", {"n": 1})
            wait_for(lambda: job_row(later, "state") == ("completed",), timeout=30)
        finally:
            worker.stop()
            thread.join(30)
    error = errors[0]
    assert error["sender"] is Worker and error["instance"] is worker
    assert error["doing"].startswith(("fetching from work", "touching", "completing"))
    assert "terminat" in str(error["error"]).lower() or "connection" in str(error["error"]).lower()


def test_a_handler_thread_that_dies_is_error_raised(monkeypatch):
    boss.create_queue("mortal", retry_limit=1)
    first = boss.send("mortal", {"n": 0})
    original = HandlerPool._run_unit
    died: list[str] = []

    def dying(self, state, unit):
        if not died:
            died.append(unit.jobs[0].id)
            raise SystemExit("the loop itself broke")
        return original(self, state, unit)

    monkeypatch.setattr(HandlerPool, "_run_unit", dying)
    worker = Worker([Registration("mortal", lambda job: job.data, polling_interval_seconds=0.1)])
    with received(signals.error_raised) as errors:
        thread = threading.Thread(target=worker.run, daemon=True)
        thread.start()
        try:
            wait_for(lambda: job_row(first, "state") == ("completed",), timeout=15)
        finally:
            worker.stop()
            thread.join(30)
    (error,) = errors
    assert isinstance(error["error"], SystemExit)
    assert error["doing"] == "running handler thread pgboss-handler-mortal-0 of mortal"


def test_snapshot_shows_the_running_jobs_and_pg_boss_wip_readings():
    boss.create_queue("slow")
    release = threading.Event()
    entered = threading.Event()

    def handler(job):
        entered.set()
        release.wait(20)
        return None

    job_id = boss.send("slow", {"n": 1})
    worker = Worker([Registration("slow", handler, concurrency=2, polling_interval_seconds=0.1)])
    before = worker.snapshot()
    assert before.queues == [] and before.running == [] and not before.stopping
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        assert entered.wait(20)
        snapshot = worker.snapshot()
        (queue,) = snapshot.queues
        assert (queue.name, queue.concurrency, queue.state, queue.claimed, queue.free) == (
            "slow",
            2,
            "active",
            1,
            1,
        )
        assert queue.handler.endswith("handler")
        (running,) = snapshot.running
        assert (running.id, running.queue, running.retry_count) == (job_id, "slow", 0)
        assert running.thread.startswith("pgboss-handler-slow-")
        assert running.started_at is not None and queue.last_job_started_at == running.started_at
        assert queue.last_fetched_at is not None and queue.last_job_ended_at is None
        assert snapshot.created_at <= running.started_at
    finally:
        release.set()
        wait_for(lambda: job_row(job_id, "state") == ("completed",))
        after = worker.snapshot()
        worker.stop()
        thread.join(30)
    (queue,) = after.queues
    assert after.running == [] and queue.claimed == 0 and queue.last_job_ended_at is not None
    assert after.stats["completed"] == 1
    assert worker.snapshot().stopping and worker.snapshot().queues[0].state == "stopping"


def test_a_monitor_that_loses_its_database_sends_error_raised_and_goes_on():
    monitor = Monitor(interval_seconds=1, cron=False)
    passes: list[object] = []
    monitor.on_pass = passes.append
    with received(signals.error_raised) as errors:
        thread = threading.Thread(target=monitor.run, daemon=True)
        thread.start()
        try:
            wait_for(lambda: passes)
            wait_for(
                lambda: (
                    rows(
                        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                        "WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
                    )[0][0]
                    and errors
                ),
                timeout=20,
            )
            count = len(passes)
            wait_for(lambda: len(passes) > count, timeout=20)  # it went on after a back-off
        finally:
            monitor.stop()
            thread.join(30)
    (error, *_) = errors
    assert (error["sender"], error["instance"], error["doing"]) == (Monitor, monitor, "a monitor pass")


@pytest.mark.parametrize("queue", ["echo", "aecho"])
def test_a_worker_process_sends_its_signals_to_receivers_connected_in_an_app(tmp_path, queue):
    # "aecho" is echo's async def twin (tests/workapp/jobs.py): its receivers, which query, run
    # off the worker's event loop.
    log = tmp_path / "signals.jsonl"
    boss.create_queue(queue)
    ids = [boss.send(queue, {"n": n}) for n in range(3)]
    result = run_worker(
        "--queue",
        queue,
        "--burst",
        PGBOSS_TEST_EXTRA_APPS="tests.signalapp",
        PGBOSS_TEST_SIGNAL_LOG=str(log),
    )
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in log.read_text().splitlines()]
    names = [e["signal"] for e in events]
    assert names[0] == "worker_started" and names[-1] == "worker_stopped"
    assert sorted(e["job"] for e in events if e["signal"] == "job_completed") == sorted(ids)
    assert sorted(e["job"] for e in events if e["signal"] == "job_started") == sorted(ids)
    assert {e["pid"] for e in events} == {events[0]["pid"]} != {os.getpid()}
    # Each completion was sent after it committed: the receiver read the job as completed.
    assert {e["state"] for e in events if e["signal"] == "job_completed"} == {"completed"}


def test_a_transactional_handler_sends_job_completed_once_its_transaction_committed():
    boss.create_queue("tx")
    job_id = boss.send("tx", {"n": 1})
    seen = []

    def reads_the_state(sender, job, output, **kwargs):
        seen.append((job.id, output, job_row(job.id, "state")[0]))

    signals.job_completed.connect(reads_the_state, weak=False)
    try:
        burst(
            Registration(
                "tx", lambda job: {"n": job.data["n"]}, transactional=True, polling_interval_seconds=0.1
            )
        )
    finally:
        signals.job_completed.disconnect(reads_the_state)
    assert seen == [(job_id, {"n": 1}, "completed")]


@pytest.mark.parametrize("kind", HANDLER_KINDS)
def test_a_deadline_sends_job_cancelled_then_job_failed_to_receivers_that_query(kind):
    import asyncio

    boss.create_queue("slow", expire_in_seconds=1, retry_limit=0)
    job_id = boss.send("slow", {})
    seen: list[tuple] = []

    def receiver(name, sender, **kwargs):
        # A receiver that reads the database, as a receiver of a threaded handler may: for an
        # async handler too it runs where the ORM works (off the worker's event loop).
        row = str(job_row(job_id, "id")[0])
        seen.append((name, sender, kwargs["worker"], kwargs["queue"], kwargs["job"].id, row))
        if name == "job_cancelled":
            seen.append(("reason", kwargs["reason"]))
        else:
            seen.append(("failed", kwargs["output"]["name"], kwargs["exception"], kwargs["will_retry"]))

    def sync_handler(job):
        job.signal.wait(30)

    async def async_handler(job):
        await asyncio.sleep(30)

    on_cancelled = lambda sender, **kwargs: receiver("job_cancelled", sender, **kwargs)  # noqa: E731
    on_failed = lambda sender, **kwargs: receiver("job_failed", sender, **kwargs)  # noqa: E731
    signals.job_cancelled.connect(on_cancelled, weak=False)
    signals.job_failed.connect(on_failed, weak=False)
    handler = sync_handler if kind == "sync" else async_handler
    worker = Worker([Registration("slow", handler, polling_interval_seconds=0.1)])
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: len(seen) == 4, timeout=30)
    finally:
        worker.stop()
        thread.join(30)
        signals.job_cancelled.disconnect(on_cancelled)
        signals.job_failed.disconnect(on_failed)
    by_signal = {entry[0]: entry for entry in seen if entry[0] in ("job_cancelled", "job_failed")}
    for name in ("job_cancelled", "job_failed"):
        assert by_signal[name][1:] == (Worker, worker, "slow", job_id, job_id)
    assert ("reason", "deadline") in seen
    assert ("failed", "JobDeadlineExceeded", None, False) in seen
