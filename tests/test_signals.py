"""django_pgboss.signals: pg-boss's events as Django signals, sent by real monitor passes and real
workers, with the documented arguments; a receiver that raises is logged and changes nothing."""

from __future__ import annotations

import logging
from contextlib import contextmanager

import pytest

from django_pgboss import boss, signals
from django_pgboss.api.boss import Boss
from django_pgboss.monitor import Monitor
from tests.helpers import pgboss_settings_with, rows

pytestmark = [pytest.mark.django_db, pytest.mark.queue(retry_limit=0)]


@contextmanager
def received(signal):
    """Connect a receiver that records each sending (sender and arguments) for the block."""
    calls: list[dict] = []

    def receiver(sender, **kwargs):
        calls.append({"sender": sender, **kwargs})

    signal.connect(receiver, weak=False)
    try:
        yield calls
    finally:
        signal.disconnect(receiver)


@contextmanager
def raising(signal):
    def broken(sender, **kwargs):
        raise RuntimeError("a broken receiver")

    signal.connect(broken, weak=False)
    try:
        yield
    finally:
        signal.disconnect(broken)


def test_a_backlog_warning_is_sent_after_it_is_stored_with_the_documented_arguments(queue):
    boss.update_queue(queue, warning_queue_size=2)
    boss.insert(queue, [{"data": n} for n in range(3)])
    seen_rows: list[list[tuple]] = []

    def reads_the_table(sender, type, **kwargs):
        if type == "queue_backlog":
            seen_rows.append(rows("SELECT type FROM {s}.warning WHERE type = 'queue_backlog'"))

    signals.warning_raised.connect(reads_the_table, weak=False)
    try:
        with pgboss_settings_with(PERSIST_WARNINGS=True), received(signals.warning_raised) as calls:
            report, _ = Monitor(cron=False).run_once()
    finally:
        signals.warning_raised.disconnect(reads_the_table)
    # The monitor's health checks read the whole schema, which earlier tests may have left with a
    # bloated index: only the backlog is this test's.
    assert report.warnings.count("queue_backlog") == 1
    (call,) = [c for c in calls if c["type"] == "queue_backlog"]
    assert len(calls) == len(report.warnings)
    assert call["sender"] is Monitor
    assert call["type"] == "queue_backlog"
    assert call["message"].startswith('Warning: large queue backlog: queue "q" has 3 jobs')
    assert call["data"] == {"name": "q", "queuedCount": 3, "warningQueueSize": 2}
    assert (call["using"], call["schema"]) == ("default", boss.schema)
    # The receiver ran after the row was written.
    assert seen_rows == [[("queue_backlog",)]]


def test_boss_supervise_sends_its_warnings_from_boss(queue):
    boss.update_queue(queue, warning_queue_size=1)
    boss.insert(queue, [{"data": n} for n in range(2)])
    with received(signals.warning_raised) as calls:
        boss.supervise()
    assert [(c["sender"], c["type"]) for c in calls] == [(Boss, "queue_backlog")]


def test_a_receiver_that_raises_is_logged_and_the_pass_and_other_receivers_go_on(queue, caplog):
    boss.update_queue(queue, warning_queue_size=1)
    boss.insert(queue, [{"data": n} for n in range(2)])
    with (
        pgboss_settings_with(PERSIST_WARNINGS=True),
        raising(signals.warning_raised),
        received(signals.warning_raised) as calls,
        caplog.at_level(logging.ERROR, logger="django_pgboss.signals"),
    ):
        report = boss.supervise()
    assert report.warnings == ["queue_backlog"]
    assert [c["type"] for c in calls] == ["queue_backlog"]
    assert rows("SELECT type FROM {s}.warning") == [("queue_backlog",)]
    (record,) = [r for r in caplog.records if r.name == "django_pgboss.signals"]
    assert "broken" in record.getMessage() and "warning_raised" in record.getMessage()
    assert "RuntimeError: a broken receiver" in record.getMessage()
    assert record.exc_info is not None


def test_nothing_is_sent_and_nothing_breaks_without_receivers(queue):
    assert not signals.has_receivers(signals.warning_raised)
    boss.update_queue(queue, warning_queue_size=1)
    boss.insert(queue, [{"data": n} for n in range(2)])
    assert boss.supervise().warnings == ["queue_backlog"]


def test_a_monitor_statement_slower_than_the_threshold_is_a_slow_query_warning(queue):
    """A statement held up for real: another session holds the expiry sweep's advisory lock while it
    sleeps (pg_sleep), so the monitor's sweep waits past the one-second threshold."""
    import threading

    import psycopg

    from django_pgboss.plans.queues import advisory_lock
    from tests.conftest import database_url

    boss.send(queue, {"n": 1}, expire_in_seconds=1)
    boss.fetch(queue)
    rows("UPDATE {s}.job SET started_on = started_on - interval '1 hour'")
    table = boss.context.route(queue).table
    locked = threading.Event()

    def hold_the_sweep_lock() -> None:
        with psycopg.connect(database_url()) as holder:
            holder.execute(advisory_lock(), {"lock_key": boss.context.lock_key(f"{table}failJobsByTimeout")})
            locked.set()
            holder.execute("SELECT pg_sleep(1.5)")

    thread = threading.Thread(target=hold_the_sweep_lock)
    thread.start()
    assert locked.wait(10)
    with (
        pgboss_settings_with(PERSIST_WARNINGS=True, WARNING_SLOW_QUERY_SECONDS=1),
        received(signals.warning_raised) as calls,
    ):
        report = boss.supervise()
    thread.join()
    assert report.expired == 1
    assert report.warnings == ["slow_query"]
    (call,) = calls
    assert call["sender"] is Boss
    assert call["message"] == "Warning: slow query. Your queues and/or database server should be reviewed"
    assert "pg_advisory_xact_lock" in call["data"]["sql"]
    assert call["data"]["values"] == {"lock_key": boss.context.lock_key(f"{table}failJobsByTimeout")}
    assert 1 < call["data"]["elapsed"] < 10
    ((kind, message),) = rows("SELECT type, message FROM {s}.warning")
    assert (kind, message) == ("slow_query", call["message"])


def test_statements_under_the_threshold_raise_nothing(queue):
    boss.send(queue, {"n": 1})
    with received(signals.warning_raised) as calls:
        assert boss.supervise().warnings == []
    assert calls == []
