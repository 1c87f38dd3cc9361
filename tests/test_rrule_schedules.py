"""RFC 5545 rule schedules end to end: stored as pg-boss stores them, read back, previewed, and
sent by the timekeeper on a TestClock, once per occurrence however many timekeepers race.

A bound on what a search costs is read on the process's CPU clock (time.process_time()), never
the wall clock: the budget is a wall-clock deadline, so on a loaded machine a walk gets less CPU
than the wall time it takes and never more, while one that ignored its deadline would burn
seconds of CPU and still fail the bound. (Wall time here failed under load for no fault.)
"""

from __future__ import annotations

import datetime as dt
import json
import threading
import time

import pytest
from django.db import connections

from django_pgboss import Boss, InvalidOption, InvalidSchedule, boss
from django_pgboss.monitor.timekeeper import Timekeeper, run_timekeeper
from tests.helpers import pgboss_settings_with, rows

pytestmark = [pytest.mark.django_db, pytest.mark.queue("reports")]


def at(*args: int) -> dt.datetime:
    return dt.datetime(*args, tzinfo=dt.UTC)


def sent(queue: str) -> list:
    return boss.find_jobs(queue)


def fires_at(clock, queue: str, moment: dt.datetime) -> int:
    """Run a pass 20 seconds after ``moment`` (the cron claim is free by then) and return how
    many jobs the queue holds."""
    clock.set_time(moment + dt.timedelta(seconds=20))
    rows("UPDATE {s}.version SET cron_on = NULL")
    run_timekeeper(boss)
    return len(sent(queue))


def test_a_rule_is_stored_with_kind_rrule_and_read_back_one_schedule_at_a_time(queue):
    boss.schedule(queue, "FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=17", {"report": "month"}, tz="Europe/Paris", key="m")
    boss.schedule(queue, "DTSTART:20270101T090000\nRRULE:FREQ=WEEKLY;BYDAY=MO", key="w")
    boss.schedule(queue, "0 9 * * *")
    monthly = boss.get_schedule(queue, "m")
    assert (monthly.kind, monthly.cron, monthly.timezone, monthly.data) == (
        "rrule",
        "FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=17",
        "Europe/Paris",
        {"report": "month"},
    )
    assert boss.get_schedule(queue, "w").cron == "DTSTART:20270101T090000\nRRULE:FREQ=WEEKLY;BYDAY=MO"
    assert boss.get_schedule(queue).kind == "cron"
    assert boss.get_schedule(queue, "nope") is None
    assert boss.get_schedule("ghost") is None
    assert [s.key for s in boss.get_schedules(queue, "w")] == ["w"]
    assert [s.key for s in boss.get_schedules(queue)] == ["", "m", "w"]
    assert rows("SELECT key, kind FROM {s}.schedule ORDER BY key") == [
        ("", "cron"),
        ("m", "rrule"),
        ("w", "rrule"),
    ]
    # A key without a queue name is ignored, as pg-boss's getSchedules() ignores it.
    assert [(s.name, s.key) for s in boss.get_schedules(key="m")] == [(queue, ""), (queue, "m"), (queue, "w")]


@pytest.mark.parametrize(
    ("expression", "tz", "field", "message"),
    [
        ("FREQ=DAILY;BYHOUR=25", "UTC", "cron", 'rrule part "BYHOUR=25"'),
        ("FREQ=WEEKLY;BYDAY=-1FR", "UTC", "cron", "BYDAY with an ordinal"),
        ("61 * * * *", "UTC", "cron", "not a valid cron expression"),
        ("FREQ=DAILY", "Europe/Pariss", "tz", "unknown or unsupported time zone: 'Europe/Pariss'"),
        ("FREQ=DAILY;UNTIL=20200101T000000Z", "UTC", "cron", "has no occurrence after"),
        ("DTSTART:20200101T000000\nRRULE:FREQ=DAILY;COUNT=3", "UTC", "cron", "has no occurrence after"),
    ],
)
def test_a_bad_schedule_is_refused_before_anything_is_written(queue, expression, tz, field, message):
    with pytest.raises(InvalidSchedule) as raised:
        boss.schedule(queue, expression, tz=tz)
    assert message in str(raised.value) and raised.value.field == field
    assert boss.get_schedules() == []
    boss.schedule(queue, "FREQ=DAILY")  # the caller's transaction is still usable
    assert [s.kind for s in boss.get_schedules()] == ["rrule"]


def test_no_future_occurrence_is_judged_by_the_schemas_clock(queue, clock):
    clock.set_time(at(2027, 1, 1, 10))
    boss.schedule(queue, "FREQ=HOURLY;UNTIL=20270101T120000Z")  # two left: 11:00 and 12:00
    clock.set_time(at(2027, 1, 1, 12))
    with pytest.raises(InvalidSchedule, match="no occurrence after 2027-01-01T12:00:00"):
        boss.schedule(queue, "FREQ=HOURLY;UNTIL=20270101T120000Z", key="late")


def test_preview_starts_at_the_schemas_clock_and_bounds_its_count(clock):
    clock.set_time(at(2027, 1, 1, 12, 0, 30))
    assert boss.preview_schedule("*/15 * * * *", count=2) == [at(2027, 1, 1, 12, 15), at(2027, 1, 1, 12, 30)]
    assert boss.preview_schedule("FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=17", tz="Europe/Paris", count=1) == [
        at(2027, 1, 29, 16)
    ]
    assert len(boss.preview_schedule("FREQ=MINUTELY")) == 10
    assert boss.preview_schedule("FREQ=DAILY", start=at(2030, 5, 5, 1), count=1) == [at(2030, 5, 6)]
    with pytest.raises(InvalidSchedule, match="count must be an integer from 1 to 1000"):
        boss.preview_schedule("FREQ=DAILY", count=1001)
    with pytest.raises(InvalidSchedule, match="start must be a timezone-aware datetime"):
        boss.preview_schedule("FREQ=DAILY", start=dt.datetime(2027, 1, 1))
    assert rows("SELECT count(*) FROM {s}.schedule") == [(0,)]


def test_monthly_on_the_last_friday_fires_then_and_only_then(queue, clock):
    boss.schedule(queue, "FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=17", {"m": 1}, tz="Europe/Paris")
    assert fires_at(clock, queue, at(2027, 1, 22, 16)) == 0  # a Friday, not the last
    assert fires_at(clock, queue, at(2027, 1, 29, 15)) == 0  # the last Friday, an hour early
    assert fires_at(clock, queue, at(2027, 1, 29, 16)) == 1  # 17:00 in Paris
    assert fires_at(clock, queue, at(2027, 4, 30, 15)) == 2  # 17:00 CEST
    assert boss.get_schedule(queue).last_job_id == max(sent(queue), key=lambda j: j.created_on).id


def test_weekly_with_byday_fires_on_those_days(queue, clock):
    boss.schedule(queue, "FREQ=WEEKLY;BYDAY=TU,TH;BYHOUR=8", tz="UTC")
    assert fires_at(clock, queue, at(2027, 1, 4, 8)) == 0  # Monday
    assert fires_at(clock, queue, at(2027, 1, 5, 8)) == 1  # Tuesday
    assert fires_at(clock, queue, at(2027, 1, 6, 8)) == 1  # Wednesday
    assert fires_at(clock, queue, at(2027, 1, 7, 8)) == 2  # Thursday


def test_hourly_with_count_fires_that_many_times(queue, clock):
    clock.set_time(at(2027, 1, 1))
    boss.schedule(queue, "DTSTART:20270101T090000Z\nRRULE:FREQ=HOURLY;COUNT=2")
    assert fires_at(clock, queue, at(2027, 1, 1, 9)) == 1
    assert fires_at(clock, queue, at(2027, 1, 1, 10)) == 2
    assert fires_at(clock, queue, at(2027, 1, 1, 11)) == 2


def test_hourly_until_fires_up_to_until(queue, clock):
    clock.set_time(at(2027, 1, 1))
    boss.schedule(queue, "FREQ=HOURLY;UNTIL=20270101T020000Z")
    assert fires_at(clock, queue, at(2027, 1, 1, 1)) == 1
    assert fires_at(clock, queue, at(2027, 1, 1, 2)) == 2
    assert fires_at(clock, queue, at(2027, 1, 1, 3)) == 2


def test_daylight_saving_in_paris_and_new_york(queue, clock):
    boss.create_queue("ny")
    # Paris, 28 March 2027: 02:30 does not exist, so the daily 02:30 skips that day.
    boss.schedule(queue, "FREQ=DAILY;BYHOUR=2;BYMINUTE=30", tz="Europe/Paris")
    assert fires_at(clock, queue, at(2027, 3, 27, 1, 30)) == 1
    assert fires_at(clock, queue, at(2027, 3, 28, 0, 30)) == 1  # would be 01:30 CET / 02:30 CEST
    assert fires_at(clock, queue, at(2027, 3, 28, 1, 30)) == 1
    assert fires_at(clock, queue, at(2027, 3, 29, 0, 30)) == 2  # 02:30 CEST
    # New York, 7 November 2027: 01:30 happens twice; the rule fires on the first (EDT) only.
    boss.schedule("ny", "FREQ=DAILY;BYHOUR=1;BYMINUTE=30", tz="America/New_York")
    assert fires_at(clock, "ny", at(2027, 11, 7, 5, 30)) == 1  # 01:30 EDT
    assert fires_at(clock, "ny", at(2027, 11, 7, 6, 30)) == 1  # 01:30 EST, the repeat
    assert fires_at(clock, "ny", at(2027, 11, 8, 6, 30)) == 2  # 01:30 EST the next day


@pytest.mark.django_db(transaction=True)
def test_three_timekeepers_racing_send_each_rule_occurrence_once(queue, clock):
    boss.schedule(queue, "FREQ=MINUTELY;INTERVAL=2;BYSECOND=10", {"n": 1})
    clock.set_time(at(2027, 3, 1, 10, 0, 30))

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
    assert len(sent(queue)) == 1  # 10:00:10's occurrence
    clock.advance(seconds=31)  # 10:01:01: claimed, but 10:00:10 is already sent, 10:01 has none
    assert race() == [False, False, True]
    assert len(sent(queue)) == 1
    clock.advance(seconds=31)  # 10:01:32
    assert race() == [False, False, True]
    clock.advance(seconds=31)  # 10:02:03: 10:02:10 not yet
    assert race() == [False, False, True]
    assert len(sent(queue)) == 1
    clock.advance(seconds=31)  # 10:02:34
    assert race() == [False, False, True]
    clock.advance(seconds=31)  # 10:03:05: 10:02:10 is still within the minute, already sent
    assert race() == [False, False, True]
    assert len(sent(queue)) == 2


def test_a_broken_row_warns_once_with_its_time_zone_not_every_pass(queue, clock, caplog):
    boss.schedule(queue, "* * * * *", {"ok": True})
    rows(
        "INSERT INTO {s}.schedule (name, key, kind, cron, timezone) VALUES (%s, 'broken', 'rrule', %s, 'Europe/Paris')",
        [queue, "FREQ=DAILY;BYHOUR=99"],
    )
    timekeeper = Timekeeper(boss.context)
    with pgboss_settings_with(PERSIST_WARNINGS=True):
        first = timekeeper.tick()
        clock.advance(seconds=31)
        second = timekeeper.tick()
        assert (first.claimed, second.claimed) == (True, True)
        assert (first.warnings, second.warnings) == (["invalid_schedule"], [])
        ((message, data),) = rows("SELECT message, data FROM {s}.warning WHERE type = 'invalid_schedule'")
        assert 'queue "reports" (key "broken", time zone "Europe/Paris") could not be evaluated' in message
        assert 'rrule part "BYHOUR=99"' in message
        data = json.loads(data) if isinstance(data, str) else data
        assert data == {
            "queue": queue,
            "key": "broken",
            "cron": "FREQ=DAILY;BYHOUR=99",
            "timezone": "Europe/Paris",
        }
        # Fixed, the row drops out; broken again, it warns again. A new timekeeper (a restart) warns too.
        rows("UPDATE {s}.schedule SET cron = 'FREQ=DAILY' WHERE key = 'broken'")
        clock.advance(seconds=31)
        assert timekeeper.tick().warnings == []
        rows("UPDATE {s}.schedule SET cron = 'FREQ=DAILY;BYHOUR=99' WHERE key = 'broken'")
        clock.advance(seconds=31)
        assert timekeeper.tick().warnings == ["invalid_schedule"]
        clock.advance(seconds=31)
        assert Timekeeper(boss.context).tick().warnings == ["invalid_schedule"]
    assert len(sent(queue)) >= 1  # the good schedule kept sending throughout


def test_a_row_whose_kind_disagrees_fires_and_is_relabelled(queue, clock):
    rows(
        "INSERT INTO {s}.schedule (name, key, kind, cron, timezone) VALUES (%s, '', 'cron', 'FREQ=HOURLY', 'UTC')",
        [queue],
    )
    assert fires_at(clock, queue, at(2027, 1, 1, 9)) == 1
    assert boss.get_schedule(queue).kind == "rrule"


def test_the_cron_interval_is_a_setting_in_pg_boss_range(queue, clock):
    boss.schedule(queue, "* * * * *")
    clock.set_time(at(2027, 1, 1, 9, 0, 5))
    with pgboss_settings_with(CRON_INTERVAL_SECONDS=10):
        timekeeper = Timekeeper(boss.context)
        assert timekeeper.interval_seconds == 10
        assert timekeeper.tick().claimed is True
        clock.advance(seconds=9)
        assert timekeeper.tick().claimed is False
        clock.advance(seconds=1)
        assert timekeeper.tick().claimed is True
    for bad in (0, 46, 2.5, "30"):
        with (
            pgboss_settings_with(CRON_INTERVAL_SECONDS=bad),
            pytest.raises(InvalidOption, match="cron interval must be an integer from 1 to 45"),
        ):
            Timekeeper(boss.context)


def test_a_never_matching_row_beside_a_rule_costs_its_pass_nothing_on_a_test_clock(queue, clock):
    # A row no schedule() would store (another release's, or a hand's): the fifth Monday of a
    # month is never among its first three days, which only a search can tell. The pass reads it
    # up to the end of its window, so the rule beside it fires on time and the pass stays short.
    rows(
        "INSERT INTO {s}.schedule (name, key, kind, cron, timezone) VALUES (%s, 'never', 'rrule', %s, 'UTC')",
        [queue, "FREQ=MONTHLY;BYDAY=5MO;BYMONTHDAY=1,2,3;BYHOUR=9"],
    )
    boss.schedule(queue, "FREQ=DAILY;BYHOUR=9", {"ok": True}, key="daily")
    began = time.process_time()
    assert fires_at(clock, queue, at(2027, 1, 4, 9)) == 1
    assert fires_at(clock, queue, at(2027, 1, 5, 9)) == 2
    # Searched to its next occurrence, the row would run out of its one-second budget and warn.
    clock.set_time(at(2027, 1, 6, 9, 0, 20))
    rows("UPDATE {s}.version SET cron_on = NULL")
    report = run_timekeeper(boss)
    assert (report.claimed, report.warnings) == (True, [])
    assert time.process_time() - began < 5
    assert [job.data for job in sent(queue)] == [{"ok": True}] * 3
