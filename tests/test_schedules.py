"""Cron schedules: validation, storage, and the timekeeper sending each occurrence once."""

from __future__ import annotations

import datetime as dt
import threading

import pytest
from django.db import connections

from django_pgboss import Boss, InvalidOption, QueueNotFound, boss
from django_pgboss.monitor.timekeeper import SEND_IT_QUEUE, run_timekeeper
from tests.helpers import rows

pytestmark = [pytest.mark.django_db, pytest.mark.queue("reports")]


def db_now() -> dt.datetime:
    return rows("SELECT now()")[0][0]


def sent(queue: str) -> list:
    return boss.find_jobs(queue)


def new_pass() -> None:
    """As if the cron interval had passed since the last pass."""
    rows("UPDATE {s}.version SET cron_on = now() - interval '31 seconds'")


@pytest.mark.parametrize(
    ("cron", "options", "error"),
    [
        ("a b c d e", {}, "not a valid cron expression"),
        ("* * * *", {}, "5 fields"),
        ("* * * * * * *", {}, "5 fields"),
        ("61 * * * *", {}, "not a valid cron expression"),
        ("* * * * *", {"tz": "Mars/Olympus"}, "unknown or unsupported time zone"),
        ("* * * * *", {"key": "bad key"}, "key"),
        ("* * * * *", {"missed": "all"}, "missed must be one of"),
        ("* * * * *", {"priority": "high"}, "priority"),
        ("* * * * *", {"colour": "red"}, "unknown option"),
    ],
)
def test_bad_schedules_are_refused(queue, cron, options, error):
    with pytest.raises(InvalidOption, match=error):
        boss.schedule(queue, cron, {"x": 1}, **options)
    assert boss.get_schedules() == []


def test_a_schedule_on_an_unknown_queue():
    with pytest.raises(QueueNotFound):
        boss.schedule("ghost", "* * * * *")


def test_schedules_are_stored_as_pg_boss_stores_them(queue):
    boss.schedule(
        queue, "0 3 * * *", {"kind": "nightly"}, tz="Europe/Paris", key="nightly", priority=5, retry_limit=1
    )
    boss.schedule(queue, "*/5 * * * *")
    nightly, every_five = sorted(boss.get_schedules(queue), key=lambda s: s.key, reverse=True)
    assert (nightly.name, nightly.key, nightly.kind, nightly.cron, nightly.timezone) == (
        queue,
        "nightly",
        "cron",
        "0 3 * * *",
        "Europe/Paris",
    )
    assert nightly.data == {"kind": "nightly"}
    assert nightly.options == {
        "tz": "Europe/Paris",
        "key": "nightly",
        "missed": "skip",
        "priority": 5,
        "retryLimit": 1,
    }
    assert (every_five.key, every_five.timezone) == ("", "UTC")
    boss.schedule(queue, "0 4 * * *", key="nightly")
    assert [s.cron for s in boss.get_schedules(queue) if s.key == "nightly"] == ["0 4 * * *"]
    boss.unschedule(queue, "nightly")
    assert [s.key for s in boss.get_schedules()] == [""]


def test_an_occurrence_is_sent_once_with_its_data_and_options(queue):
    boss.schedule(queue, "* * * * *", {"report": "daily"}, priority=3)
    report = run_timekeeper(boss)
    assert (report.claimed, report.filed, report.sent) == (True, 1, 1)
    (job,) = sent(queue)
    assert (job.data, job.priority) == ({"report": "daily"}, 3)
    assert boss.get_schedules(queue)[0].last_job_id == job.id
    # Within the interval the pass is not claimed again; once claimed, the same minute's slot is
    # already taken, so nothing is filed twice.
    assert run_timekeeper(boss).claimed is False
    new_pass()
    assert run_timekeeper(boss).filed == 0
    assert len(sent(queue)) == 1


def test_honours_the_time_zone(queue, clock):
    boss.schedule(queue, "0 9 * * *", {"where": "new york"}, tz="America/New_York", key="ny")
    boss.schedule(queue, "0 9 * * *", {"where": "utc"}, key="utc")
    clock.set_time(dt.datetime(2027, 1, 5, 8, 59, 40, tzinfo=dt.UTC))
    run_timekeeper(boss)
    assert sent(queue) == []
    clock.advance(seconds=30)  # 09:00:10 UTC
    run_timekeeper(boss)
    assert [j.data for j in sent(queue)] == [{"where": "utc"}]
    clock.set_time(dt.datetime(2027, 1, 5, 13, 59, 40, tzinfo=dt.UTC))
    run_timekeeper(boss)
    clock.advance(seconds=30)  # 14:00:10 UTC is 09:00:10 in New York (EST, UTC-5)
    run_timekeeper(boss)
    assert sorted(j.data["where"] for j in sent(queue)) == ["new york", "utc"]


def test_six_fields_have_seconds_first(queue):
    boss.schedule(queue, "30 15 10 * * *")
    run_timekeeper(boss, now=dt.datetime(2027, 3, 1, 10, 15, 45, tzinfo=dt.UTC))
    assert len(sent(queue)) == 1
    new_pass()
    run_timekeeper(boss, now=dt.datetime(2027, 3, 1, 10, 17, 45, tzinfo=dt.UTC))
    assert len(sent(queue)) == 1


def test_missed_once_sends_one_job_for_a_gap(queue):
    boss.schedule(queue, "0 * * * *", {"hourly": True}, missed="once", key="caught-up")
    boss.schedule(queue, "0 * * * *", {"hourly": True}, key="skipped")
    rows("UPDATE {s}.schedule SET created_on = now() - interval '1 day'")
    rows("UPDATE {s}.version SET cron_on = now() - interval '5 hours'")
    later = db_now().replace(minute=30, second=0, microsecond=0) + dt.timedelta(hours=3)
    report = run_timekeeper(boss, now=later)
    assert report.sent == 1
    (job,) = sent(queue)
    assert job.data == {"hourly": True}


def test_a_bad_row_warns_and_the_others_are_still_sent(queue, caplog):
    boss.schedule(queue, "* * * * *", {"ok": True})
    rows("INSERT INTO {s}.schedule (name, key, cron) VALUES (%s, 'broken', 'every tuesday')", [queue])
    report = run_timekeeper(boss)
    assert report.warnings == ["invalid_schedule"]
    assert (
        'schedule for queue "reports" (key "broken", time zone "UTC") could not be evaluated' in caplog.text
    )
    assert [j.data for j in sent(queue)] == [{"ok": True}]


def test_a_failed_send_is_retried_not_lost(queue):
    boss.create_queue("fifo", policy="key_strict_fifo")
    boss.schedule("fifo", "* * * * *", {"x": 1})  # every job needs a singleton_key: send fails
    run_timekeeper(boss)
    (filed,) = boss.find_jobs(SEND_IT_QUEUE)
    assert filed.state == "retry"


@pytest.mark.django_db(transaction=True)
def test_three_timekeepers_racing_send_each_occurrence_once_a_minute(queue, clock):
    boss.schedule(queue, "* * * * *", {"n": 1})
    clock.set_time(dt.datetime(2027, 3, 1, 10, 0, 30, tzinfo=dt.UTC))

    def race() -> list:
        start = threading.Barrier(3)
        reports = []

        def timekeeper() -> None:
            try:
                start.wait()
                reports.append(run_timekeeper(Boss()))
            finally:
                connections.close_all()

        threads = [threading.Thread(target=timekeeper) for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        return sorted(report.claimed for report in reports)

    assert race() == [False, False, True]
    assert len(sent(queue)) == 1  # 10:00's occurrence
    clock.advance(seconds=20)  # 10:00:50: within the cron interval, nobody claims a pass
    assert race() == [False, False, False]
    clock.advance(seconds=15)  # 10:01:05
    assert race() == [False, False, True]
    clock.advance(seconds=35)  # 10:01:40: claimed again, but 10:01's occurrence is already sent
    assert race() == [False, False, True]
    assert len(sent(queue)) == 2
    clock.advance(seconds=30)  # 10:02:10
    assert race() == [False, False, True]
    assert len(sent(queue)) == 3


def test_a_cron_schedule_runs_the_repeated_autumn_hour_once(queue, clock):
    boss.schedule(queue, "30 1 * * *", tz="America/New_York")
    for moment, expected in [
        (dt.datetime(2027, 11, 7, 5, 30, 20, tzinfo=dt.UTC), 1),  # 01:30 EDT
        (dt.datetime(2027, 11, 7, 6, 30, 20, tzinfo=dt.UTC), 1),  # 01:30 EST, the repeat
        (dt.datetime(2027, 11, 8, 6, 30, 20, tzinfo=dt.UTC), 2),
    ]:
        clock.set_time(moment)
        rows("UPDATE {s}.version SET cron_on = NULL")
        run_timekeeper(boss)
        assert len(sent(queue)) == expected, moment
