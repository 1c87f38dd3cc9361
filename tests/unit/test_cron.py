"""Cron parsing and occurrence evaluation, tested on their own: no database is touched here.

parse_cron() is what schedule() checks an expression and a time zone with; _due_slots() is the
timekeeper's pure core, which turns a schedule and the pass's moment into the throttle slots it
files. pytest-django refuses database access to a test without a django_db marker, so a test in
this module that reached PostgreSQL would fail rather than quietly depend on it.
"""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import pytest

from django_pgboss.exceptions import InvalidOption
from django_pgboss.monitor.timekeeper import _due_slots, _previous
from django_pgboss.schedules import parse_cron

UTC = ZoneInfo("UTC")
PARIS = ZoneInfo("Europe/Paris")


def at(*args: int) -> dt.datetime:
    return dt.datetime(*args, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    "expression", ["* * * * *", "0 3 * * 1-5", "*/15 9-17 * * mon,fri", "30 * * * * *", "@daily", "@hourly"]
)
def test_a_valid_expression_and_zone_are_returned_ready_to_evaluate(expression):
    assert parse_cron(expression, "Europe/Paris") == (expression, PARIS)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("* * * *", "must have 5 fields, or 6 with seconds first"),
        ("* * * * * * *", "must have 5 fields, or 6 with seconds first"),
        ("61 * * * *", "is not a valid cron expression"),
        ("a b c d e", "is not a valid cron expression"),
        ("@every", "is not a valid cron expression"),
        ("@reboot", "is not a valid cron expression"),
        ("", "cron must be a cron expression, not ''"),
        ("   ", "cron must be a cron expression, not '   '"),
        (None, "cron must be a cron expression, not None"),
        (5, "cron must be a cron expression, not 5"),
    ],
)
def test_a_bad_expression_is_refused_saying_why(expression, message):
    with pytest.raises(InvalidOption, match="cron") as raised:
        parse_cron(expression, "UTC")
    assert message in str(raised.value)


@pytest.mark.parametrize(
    ("zone", "message"),
    [
        ("", "tz must be an IANA time zone name, not ''"),
        (None, "tz must be an IANA time zone name, not None"),
        (5, "tz must be an IANA time zone name, not 5"),
        ("Mars/Olympus", "unknown or unsupported time zone: 'Mars/Olympus'"),
        ("../etc/passwd", "unknown or unsupported time zone: '../etc/passwd'"),
    ],
)
def test_a_bad_time_zone_is_refused_saying_why(zone, message):
    with pytest.raises(InvalidOption) as raised:
        parse_cron("* * * * *", zone)
    assert str(raised.value) == message


def test_an_occurrence_is_read_in_the_schedules_time_zone_across_daylight_saving():
    # 03:00 in Paris is 02:00 UTC in winter (CET) and 01:00 UTC in summer (CEST).
    assert _previous("0 3 * * *", PARIS, at(2026, 1, 15, 12)) == at(2026, 1, 15, 2)
    assert _previous("0 3 * * *", PARIS, at(2026, 7, 15, 12)) == at(2026, 7, 15, 1)
    # The day clocks go back (25 October 2026): 03:00 comes once, after the change.
    assert _previous("0 3 * * *", PARIS, at(2026, 10, 25, 12)) == at(2026, 10, 25, 2)


def test_the_previous_occurrence_includes_the_moment_itself():
    assert _previous("0 12 * * *", UTC, at(2026, 1, 1, 12)) == at(2026, 1, 1, 12)
    assert _previous("0 12 * * *", UTC, at(2026, 1, 1, 12) - dt.timedelta(microseconds=1)) == at(
        2025, 12, 31, 12
    )


def test_six_fields_put_seconds_first():
    assert _previous("15 * * * * *", UTC, at(2026, 1, 1, 12, 0, 20)) == at(2026, 1, 1, 12, 0, 15)


def test_day_of_month_and_day_of_week_match_either_as_pg_boss_reads_them():
    # "the 1st, or a Monday": Sunday 1 February, then Monday 2 February both match.
    assert _previous("0 0 1 * 1", UTC, at(2026, 2, 1, 12)) == at(2026, 2, 1)
    assert _previous("0 0 1 * 1", UTC, at(2026, 2, 4)) == at(2026, 2, 2)


def schedule(cron: str = "*/5 * * * *", *, tz: str = "UTC", kind: str = "cron", **options):
    from django_pgboss.schedules import Schedule

    created = at(2026, 1, 1)
    return Schedule(
        name="reports",
        key="",
        kind=kind,
        cron=cron,
        timezone=tz,
        data=None,
        options=options,
        created_on=created,
        updated_on=created,
        last_job_id=None,
    )


def test_an_occurrence_in_the_last_minute_is_due_in_a_slot_named_by_its_minute():
    assert _due_slots(schedule(), at(2026, 3, 1, 10, 5, 30), None) == ["2026-03-01 10:05:00"]
    assert _due_slots(schedule(), at(2026, 3, 1, 10, 5, 59), None) == ["2026-03-01 10:05:00"]


def test_an_occurrence_a_minute_old_or_older_is_not_due():
    # The window is the minute up to the pass, exclusive of its start: the previous pass saw that.
    assert _due_slots(schedule(), at(2026, 3, 1, 10, 6, 0), None) == []
    assert _due_slots(schedule(), at(2026, 3, 1, 10, 9, 0), None) == []


def test_seconds_occurrences_in_one_minute_share_the_minutes_slot():
    assert _due_slots(schedule("*/20 * * * * *"), at(2026, 3, 1, 10, 5, 50), None) == ["2026-03-01 10:05:00"]


def test_a_slot_is_named_in_utc_whatever_the_schedules_zone():
    assert _due_slots(schedule("0 3 * * *", tz="Europe/Paris"), at(2026, 7, 15, 1, 0, 10), None) == [
        "2026-07-15 01:00:00"
    ]


def test_missed_skip_files_nothing_for_an_occurrence_between_passes():
    # The monitor was down from 10:01 to 10:09: the 10:05 occurrence is gone for good.
    assert _due_slots(schedule(), at(2026, 3, 1, 10, 9), at(2026, 3, 1, 10, 1)) == []


def test_missed_once_files_the_latest_missed_occurrence_before_the_due_one():
    item = schedule(missed="once")
    # Down from 10:01 to 10:20:30: 10:05, 10:10 and 10:15 were missed; only 10:15 is caught up.
    assert _due_slots(item, at(2026, 3, 1, 10, 20, 30), at(2026, 3, 1, 10, 1)) == [
        "2026-03-01 10:15:00",
        "2026-03-01 10:20:00",
    ]
    # Nothing is caught up from before the schedule existed, nor on the first pass.
    assert _due_slots(item, at(2026, 1, 1, 0, 3), at(2025, 12, 31)) == []
    assert _due_slots(item, at(2026, 3, 1, 10, 20, 30), None) == ["2026-03-01 10:20:00"]


def test_an_rfc_5545_rule_is_evaluated_as_a_rule():
    # Every day at midnight in Paris: 23:00 UTC in winter.
    assert _due_slots(
        schedule("FREQ=DAILY", kind="rrule", tz="Europe/Paris"), at(2026, 2, 28, 23, 0, 20), None
    ) == ["2026-02-28 23:00:00"]


def test_a_row_whose_kind_disagrees_with_its_expression_is_read_as_written():
    # As an older release's upsert can leave it: the expression changed, the kind did not.
    assert _due_slots(schedule("FREQ=HOURLY", kind="cron"), at(2026, 3, 1, 10, 0, 30), None) == [
        "2026-03-01 10:00:00"
    ]
    assert _due_slots(schedule("0 * * * *", kind="rrule"), at(2026, 3, 1, 10, 0, 30), None) == [
        "2026-03-01 10:00:00"
    ]


def test_a_stored_schedule_with_a_broken_expression_is_refused_when_evaluated():
    with pytest.raises(InvalidOption, match="cron 'every tuesday' must have 5 fields"):
        _due_slots(schedule("every tuesday"), at(2026, 3, 1), None)
