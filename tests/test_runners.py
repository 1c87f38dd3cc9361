"""The database context Boss is a façade over, and the Monitor and Timekeeper objects with run().

The run() loops are what ``manage.py pgboss_monitor`` calls (its own tests run it as a process);
here they run in a thread of the test, against the real database, and are stopped from outside.
"""

from __future__ import annotations

import inspect
import logging
import threading
import time

import pytest
from django.db import connections

from django_pgboss import Boss, InvalidOption, InvalidQueueName, QueueNotFound, boss
from django_pgboss.api.jobs import JobStore
from django_pgboss.db.context import DatabaseContext
from django_pgboss.monitor import Monitor, Timekeeper
from django_pgboss.worker import Worker
from django_pgboss.worker.registry import Registration
from tests.helpers import job_row, rows

#: The plumbing Boss used to lend the monitor, the worker and the timekeeper; it lives on the
#: DatabaseContext and the API's job objects now.
PLUMBING = (
    "cursor",
    "_cursor",
    "quoted_schema",
    "_q",
    "lock_key",
    "notify_channel",
    "insert_slotted",
    "complete_each",
)


def wait_for(predicate, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s")


def in_thread(target, *args) -> threading.Thread:
    def run() -> None:
        try:
            target(*args)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


# -- the context and the façade ------------------------------------------------------------------


def test_boss_keeps_only_user_facing_members():
    for name in PLUMBING:
        assert not hasattr(Boss, name), name
    undocumented = [
        name
        for name, member in inspect.getmembers(Boss)
        if not name.startswith("_")
        and (callable(member) or isinstance(member, property))
        and not member.__doc__
    ]
    assert undocumented == []


def test_a_boss_runs_on_its_context_and_reads_settings_at_each_call(settings):
    assert DatabaseContext.of(boss) is boss.context
    context = DatabaseContext()
    assert DatabaseContext.of(context) is context
    assert Boss(context=context).context is context
    settings.PGBOSS = {**getattr(settings, "PGBOSS", {}), "SCHEMA": "elsewhere"}
    assert (boss.schema, boss.context.schema, context.schema) == ("elsewhere", "elsewhere", "elsewhere")
    assert Boss(schema="mine").context.schema == "mine"


def test_a_boss_takes_a_context_or_an_alias_and_schema_not_both():
    with pytest.raises(TypeError, match="not both"):
        Boss(schema="other", context=DatabaseContext())
    with pytest.raises(TypeError, match="Boss or a DatabaseContext"):
        DatabaseContext.of("default")


@pytest.mark.django_db
def test_the_worker_settles_through_a_job_store_over_its_boss_s_context(queue):
    own = Boss()
    worker = Worker([Registration(queue=queue, handler=lambda job: None)], boss=own, listen=False)
    assert worker.jobs.context is own.context
    own.send(queue, {"n": 1})
    (job,) = worker.jobs.fetch(queue)
    assert JobStore(own.context).complete_each(queue, [(job, {"done": True})]) == [job.id]
    assert job_row(job.id, "state", "output") == ("completed", {"done": True})


# -- the Monitor ---------------------------------------------------------------------------------


def test_a_monitor_refuses_an_interval_under_a_second_and_a_bad_queue_name_before_any_sql():
    with pytest.raises(InvalidOption, match="at least 1 second"):
        Monitor(interval_seconds=0.5)
    with pytest.raises(InvalidQueueName):
        Monitor(queues=["bad name"])


@pytest.mark.django_db
def test_a_monitor_names_the_queues_that_do_not_exist(queue):
    Monitor(queues=[queue]).check_queues()
    with pytest.raises(QueueNotFound, match="'ghost'"):
        Monitor(queues=[queue, "ghost"]).check_queues()


@pytest.mark.django_db(transaction=True)
@pytest.mark.queue("slow", expire_in_seconds=1, retry_limit=1)
def test_monitor_run_passes_on_its_interval_with_cron_until_stopped(queue):
    boss.create_queue("echo")
    boss.schedule("echo", "* * * * *", {"from": "cron"})
    boss.send(queue, {})
    (job,) = boss.fetch(queue)
    rows("UPDATE {s}.job SET started_on = started_on - interval '1 minute' WHERE id = %s", [job.id])
    passes, crons = [], []
    monitor = Monitor(boss.context, interval_seconds=1, on_pass=passes.append, on_cron=crons.append)
    thread = in_thread(monitor.run)
    try:
        wait_for(lambda: len(passes) >= 2)
    finally:
        monitor.stop()
        thread.join(10)
    assert not thread.is_alive()
    assert sum(report.expired for report in passes) == 1
    assert job_row(job.id, "state") == ("retry",)
    assert crons[0].claimed and crons[0].sent == 1
    assert [j.data for j in boss.find_jobs("echo")] == [{"from": "cron"}]


@pytest.mark.django_db(transaction=True)
def test_monitor_run_survives_database_errors_and_still_stops(caplog):
    # A schema that does not exist: every pass fails with a database error, as while the
    # server is down; the loop logs it, backs off, and still returns promptly on stop().
    monitor = Monitor(DatabaseContext(schema="no_such_schema"), interval_seconds=1, cron=False)
    with caplog.at_level(logging.WARNING, logger="django_pgboss.monitor"):
        thread = in_thread(monitor.run)
        try:
            wait_for(lambda: "monitor pass failed" in caplog.text)
        finally:
            started = time.monotonic()
            monitor.stop()
            thread.join(10)
    assert not thread.is_alive()
    assert time.monotonic() - started < 5


@pytest.mark.django_db(transaction=True)
def test_a_monitor_stopped_before_it_runs_returns_at_once_without_a_pass():
    # A signal can arrive between installing the handler and calling run(): it must not be lost.
    passes = []
    monitor = Monitor(boss.context, interval_seconds=1, on_pass=passes.append)
    monitor.stop()
    thread = in_thread(monitor.run)
    thread.join(10)
    assert not thread.is_alive()
    assert passes == []


# -- the Timekeeper ------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_timekeeper_run_sends_due_occurrences_until_stopped(queue):
    boss.schedule(queue, "* * * * *", {"from": "cron"})
    reports = []
    timekeeper = Timekeeper(boss.context)
    thread = in_thread(timekeeper.run, reports.append)
    try:
        wait_for(lambda: reports)
    finally:
        timekeeper.stop()
        thread.join(10)
    assert not thread.is_alive()
    assert reports[0].claimed and reports[0].sent == 1
    assert [j.data for j in boss.find_jobs(queue)] == [{"from": "cron"}]
