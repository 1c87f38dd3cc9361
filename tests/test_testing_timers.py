"""A TestClock drives the monitor's timers: its passes, and the timekeeper's cron cadence, run
when the test moves time, and advance() returns once the passes it made due have run."""

from __future__ import annotations

import datetime as dt
import logging
import threading

import pytest

from django_pgboss import Boss, clocks
from django_pgboss.exceptions import InvalidOption, WaitTimedOut
from django_pgboss.monitor import Monitor
from django_pgboss.monitor.loop import run_periodically
from django_pgboss.monitor.timekeeper import Timekeeper
from django_pgboss.testing import TestClock, wait_for_job
from django_pgboss.testing.timers import TimerClock
from django_pgboss.worker import Worker
from django_pgboss.worker.ports import Clock as WorkerClock
from django_pgboss.worker.registry import Registration

boss = Boss()
START = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)


def _loop_on_thread(passes, stop):
    thread = threading.Thread(
        target=run_periodically,
        args=(passes, stop),
        kwargs={"what": "test", "log": logging.getLogger("test")},
    )
    thread.start()
    return thread


def test_the_loops_passes_run_when_the_test_moves_time_and_not_before():
    timers = TimerClock(settle_seconds=10)
    clocks.install(timers)
    stop = threading.Event()
    minutes, hours = [], []
    try:
        thread = _loop_on_thread(
            [
                (lambda: minutes.append(timers.monotonic()), 60),
                (lambda: hours.append(timers.monotonic()), 3600),
            ],
            stop,
        )
        timers.wait_for_sleepers(1, timeout=10)
        assert (len(minutes), len(hours)) == (1, 1)  # each pass runs once at the start

        timers.move(59)
        assert (len(minutes), len(hours)) == (1, 1)
        timers.move(1)
        assert (len(minutes), len(hours)) == (2, 1)  # move() returned after the pass ran
        timers.move(3600)
        # A jump over many intervals runs each pass once, as a process that slept would.
        assert (len(minutes), len(hours)) == (3, 2)
    finally:
        stop.set()
        clocks.uninstall(timers)
        thread.join(10)
    assert not thread.is_alive()


def test_the_timer_clock_is_the_workers_clock_too():
    timers: WorkerClock = TimerClock(wall=1_000.0)
    condition = threading.Condition()
    with condition:
        timers.wait_on(condition, 0)  # nothing to wait for: returns at once
    assert timers.time() == 1_000.0
    assert not timers.wait(threading.Event(), 0)


def test_advance_says_so_when_a_pass_it_made_due_does_not_come_back():
    timers = TimerClock(settle_seconds=0.2)
    clocks.install(timers)
    stop, release = threading.Event(), threading.Event()
    try:
        thread = _loop_on_thread([(lambda: release.wait(10), 60)], stop)
        release.set()
        timers.wait_for_sleepers(1, timeout=10)
        release.clear()
        with pytest.raises(WaitTimedOut, match="still running on thread"):
            timers.move(60)
    finally:
        release.set()
        stop.set()
        clocks.uninstall(timers)
        thread.join(10)


@pytest.mark.django_db(transaction=True)
def test_a_monitor_on_a_thread_expires_a_job_when_the_test_moves_time():
    reports = []
    with TestClock(START) as clock:
        boss.create_queue("reports", expire_in_seconds=60, retry_limit=1)
        job_id = boss.send("reports")
        boss.fetch("reports")
        monitor = Monitor(interval_seconds=60, cron=False, on_pass=reports.append)
        thread = threading.Thread(target=monitor.run)
        thread.start()
        try:
            clock.wait_for_timers()
            assert len(reports) == 1
            assert boss.get_job_by_id("reports", job_id).state == "active"

            clock.advance(seconds=61)

            assert len(reports) == 2
            assert reports[-1].expired == 1
            assert boss.get_job_by_id("reports", job_id).state == "retry"
        finally:
            monitor.stop()
            thread.join(30)
    assert not thread.is_alive()


@pytest.mark.django_db(transaction=True)
def test_the_timekeeper_sends_a_scheduled_job_on_the_tests_cadence():
    with TestClock(START.replace(hour=12)) as clock:
        boss.create_queue("nightly")
        boss.schedule("nightly", "0 13 * * *", {"kind": "nightly"})
        timekeeper = Timekeeper(interval_seconds=30)
        thread = threading.Thread(target=timekeeper.run)
        thread.start()
        try:
            clock.wait_for_timers()
            clock.advance(minutes=59)
            assert boss.fetch("nightly") == []
            clock.advance(minutes=1, seconds=30)
            assert [job.data for job in boss.fetch("nightly")] == [{"kind": "nightly"}]
        finally:
            timekeeper.stop()
            thread.join(30)
    assert not thread.is_alive()


def _held_until_cancelled(job):
    if (job.data or {}).get("hold"):
        job.signal.wait(30)
        job.signal.raise_if_set()
    return "done"


@pytest.mark.django_db(transaction=True)
def test_a_worker_on_the_test_clock_polls_and_meets_deadlines_when_the_test_moves_time():
    with TestClock(START) as clock:
        boss.create_queue("clocked", expire_in_seconds=60, retry_limit=0)
        worker = Worker(
            [Registration("clocked", _held_until_cancelled, polling_interval_seconds=30)],
            clock=clock.timers,
            listen=False,
        )
        thread = threading.Thread(target=worker.run)
        thread.start()
        try:
            quick = boss.send("clocked")
            held = boss.send("clocked", {"hold": True})

            clock.advance(seconds=30)  # the fetch loop's next poll
            assert wait_for_job("clocked", quick, "completed", timeout=30).output == {"value": "done"}
            wait_for_job("clocked", held, "active", timeout=30)

            clock.advance(seconds=61)  # past the held job's deadline, on the worker's clock
            failed = wait_for_job("clocked", held, "failed", timeout=30)
        finally:
            worker.stop()
            thread.join(30)
    assert not thread.is_alive()
    assert failed.output["name"] == "JobDeadlineExceeded"


@pytest.mark.django_db(transaction=True)
def test_a_worker_started_inside_the_clock_polls_beats_and_keeps_deadlines_on_it_unwired():
    with TestClock(START) as clock:
        boss.create_queue("unwired", expire_in_seconds=60, retry_limit=0, heartbeat_seconds=20)
        held = boss.send("unwired", {"hold": True})
        with boss.worker(listen=False) as worker:
            # No clock= given: the worker took the timers of the clock attached when it was built.
            assert worker.clock is clock.timers
            worker.work("unwired", _held_until_cancelled, polling_interval_seconds=3600)
            claimed = wait_for_job("unwired", held, "active", timeout=30)
            assert claimed.heartbeat_on == START

            # Heartbeats every half of heartbeat_seconds, on the test's time.
            clock.advance(seconds=15)
            assert boss.get_job_by_id("unwired", held).heartbeat_on == START + dt.timedelta(seconds=15)

            # Past expire_in_seconds (60) on the worker's clock: failed at its deadline.
            clock.advance(seconds=50)
            failed = wait_for_job("unwired", held, "failed", timeout=30)
            assert failed.output["name"] == "JobDeadlineExceeded"

            # The next poll is an hour of the test's time away, and comes when the test moves it
            # (a move that reaches the fetcher before it waits again is followed by another).
            later = boss.send("unwired")
            for _ in range(3):
                clock.advance(hours=1)
                if boss.get_job_by_id("unwired", later).state == "completed":
                    break
            assert wait_for_job("unwired", later, "completed", timeout=30).output == {"value": "done"}
    # Built with no clock attached, a worker runs on the system's.
    assert boss.worker().clock is clocks.SYSTEM_CLOCK
    assert Worker([]).clock is clocks.SYSTEM_CLOCK


def test_detaching_hands_the_timers_back_to_the_system_clock(db):
    with TestClock(START) as clock:
        timers = clock.timers
        assert clocks.current() is timers
    assert clocks.current() is clocks.SYSTEM_CLOCK
    assert not timers.wait(threading.Event(), 3600)  # a stopped clock waits no more
    with pytest.raises(RuntimeError, match="drives no timers"):
        _ = clock.timers


def test_timers_false_leaves_the_timers_on_real_time(db):
    with TestClock(START, timers=False):
        assert clocks.current() is clocks.SYSTEM_CLOCK


def test_bad_timer_options_are_refused():
    with pytest.raises(InvalidOption, match="timers"):
        TestClock(timers="yes")
    with pytest.raises(InvalidOption, match="settle_seconds"):
        TestClock(settle_seconds=0)
