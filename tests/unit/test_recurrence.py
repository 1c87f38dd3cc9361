"""Recurrences on their own (django_pgboss.recurrence): no database is touched here.

The expected occurrences were read from pg-boss 12.35.0's own previewSchedule() (rrule-temporal),
so these pin the same answers the interop test checks against Node on every run.

A bound on what a search costs is read on the process's CPU clock (time.process_time()), never
the wall clock: the budget is a wall-clock deadline, so on a loaded machine a walk gets less CPU
than the wall time it takes and never more, while one that ignored its deadline would burn
seconds of CPU and still fail the bound. (Wall time here failed under load for no fault.)
"""

from __future__ import annotations

import datetime as dt
import time
from itertools import islice

import pytest
from dateutil.rrule import rrulestr

from django_pgboss import InvalidOption, InvalidSchedule
from django_pgboss.recurrence import (
    PREVIEW_MAX_COUNT,
    Recurrence,
    detect_kind,
    preview,
)


def at(*args: int) -> dt.datetime:
    return dt.datetime(*args, tzinfo=dt.UTC)


def iso(moments: list[dt.datetime]) -> list[str]:
    return [m.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S") for m in moments]


@pytest.mark.parametrize(
    ("expression", "kind"),
    [
        ("* * * * *", "cron"),
        ("0 9 * * mon-fri", "cron"),
        ("@daily", "cron"),
        ("FREQ=DAILY", "rrule"),
        ("freq=daily;byhour=9", "rrule"),
        ("BYHOUR=9;FREQ=DAILY", "rrule"),
        ("DTSTART:20270101T090000\nRRULE:FREQ=DAILY", "rrule"),
        ("RRULE:FREQ=WEEKLY", "rrule"),
        ("BEGIN:VEVENT", "rrule"),
    ],
)
def test_the_kind_is_told_from_the_expression_as_pg_boss_tells_it(expression, kind):
    assert detect_kind(expression) == kind


def test_monthly_on_the_last_friday_at_five_in_the_afternoon():
    # 17:00 in Paris: 16:00 UTC in winter, 15:00 UTC once summer time starts (28 March 2027).
    assert iso(
        preview("FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=17", tz="Europe/Paris", start=at(2027, 1, 1), count=5)
    ) == [
        "2027-01-29 16:00:00",
        "2027-02-26 16:00:00",
        "2027-03-26 16:00:00",
        "2027-04-30 15:00:00",
        "2027-05-28 15:00:00",
    ]


def test_weekly_on_the_named_days():
    expression = "FREQ=WEEKLY;BYDAY=MO,WE;BYHOUR=9;BYMINUTE=15"
    assert iso(preview(expression, tz="Europe/Paris", start=at(2026, 12, 31, 12), count=4)) == [
        "2027-01-04 08:15:00",
        "2027-01-06 08:15:00",
        "2027-01-11 08:15:00",
        "2027-01-13 08:15:00",
    ]


def test_hourly_with_a_count_stops_after_it():
    expression = "DTSTART:20270101T090000\nRRULE:FREQ=HOURLY;COUNT=3"
    found = preview(expression, tz="Europe/Paris", start=at(2026, 12, 31), count=10)
    assert iso(found) == ["2027-01-01 08:00:00", "2027-01-01 09:00:00", "2027-01-01 10:00:00"]
    assert preview(expression, tz="Europe/Paris", start=at(2027, 1, 1, 10), count=10) == []


def test_hourly_until_stops_at_until_included():
    expression = "FREQ=HOURLY;UNTIL=20270101T030000Z"
    found = preview(expression, tz="UTC", start=at(2027, 1, 1, 0, 30), count=10)
    assert iso(found) == ["2027-01-01 01:00:00", "2027-01-01 02:00:00", "2027-01-01 03:00:00"]


def test_hourly_across_the_spring_change_in_paris_skips_the_missing_hour():
    # 28 March 2027, 02:00 CET becomes 03:00 CEST: wall-clock hour 02:00 does not happen.
    found = preview("FREQ=HOURLY", tz="Europe/Paris", start=at(2027, 3, 28), count=3)
    assert iso(found) == ["2027-03-28 01:00:00", "2027-03-28 02:00:00", "2027-03-28 03:00:00"]
    # A daily 02:30 does not happen that day at all (RFC 5545: a nonexistent local time is ignored).
    found = preview("FREQ=DAILY;BYHOUR=2;BYMINUTE=30", tz="Europe/Paris", start=at(2027, 3, 26), count=3)
    assert iso(found) == ["2027-03-26 01:30:00", "2027-03-27 01:30:00", "2027-03-29 00:30:00"]


def test_hourly_across_the_autumn_change_in_new_york_runs_the_repeated_hour_once():
    # 7 November 2027, 02:00 EDT becomes 01:00 EST: 01:00 happens twice, the rule takes the first.
    found = preview("FREQ=HOURLY", tz="America/New_York", start=at(2027, 11, 7, 4), count=3)
    assert iso(found) == ["2027-11-07 05:00:00", "2027-11-07 07:00:00", "2027-11-07 08:00:00"]
    found = preview("FREQ=DAILY;BYHOUR=1;BYMINUTE=30", tz="America/New_York", start=at(2027, 11, 6), count=3)
    assert iso(found) == ["2027-11-06 05:30:00", "2027-11-07 05:30:00", "2027-11-08 06:30:00"]


def test_dtstart_sets_the_time_of_day_and_may_name_its_own_zone():
    assert iso(
        preview(
            "DTSTART:20270101T083000\nRRULE:FREQ=DAILY;BYHOUR=9",
            tz="Europe/Paris",
            start=at(2026, 12, 31),
            count=2,
        )
    ) == [
        "2027-01-01 08:30:00",
        "2027-01-02 08:30:00",
    ]
    ny = "DTSTART;TZID=America/New_York:20270101T090000\nRRULE:FREQ=DAILY"
    assert iso(preview(ny, tz="Europe/Paris", start=at(2026, 12, 31), count=2)) == [
        "2027-01-01 14:00:00",
        "2027-01-02 14:00:00",
    ]
    utc = "DTSTART:20270101T090000Z\nRRULE:FREQ=DAILY"
    assert iso(preview(utc, tz="Europe/Paris", start=at(2026, 12, 31), count=1)) == ["2027-01-01 09:00:00"]
    date = "DTSTART;VALUE=DATE:20270101\nRRULE:FREQ=DAILY"
    assert iso(preview(date, tz="Europe/Paris", start=at(2026, 12, 31, 12), count=2)) == [
        "2026-12-31 23:00:00",
        "2027-01-01 23:00:00",
    ]


def test_rdate_adds_and_exdate_removes_occurrences():
    expression = "DTSTART:20270101T090000\nRRULE:FREQ=DAILY\nEXDATE:20270102T090000\nRDATE:20270102T120000"
    assert iso(preview(expression, tz="Europe/Paris", start=at(2026, 12, 31), count=4)) == [
        "2027-01-01 08:00:00",
        "2027-01-02 11:00:00",
        "2027-01-03 08:00:00",
        "2027-01-04 08:00:00",
    ]


def test_a_rule_without_dtstart_keeps_the_phase_of_its_interval_wherever_the_walk_starts():
    # Anchored on 1 January 1970: every other day from then, whatever "now" is.
    first = preview("FREQ=DAILY;INTERVAL=2", tz="UTC", start=at(2027, 1, 1), count=3)
    later = preview("FREQ=DAILY;INTERVAL=2", tz="UTC", start=at(2027, 1, 2), count=2)
    assert first[1:] == later
    assert all((moment.date() - dt.date(1970, 1, 1)).days % 2 == 0 for moment in first)


@pytest.mark.parametrize(
    "rule",
    [
        "FREQ=MINUTELY;INTERVAL=7",
        "FREQ=HOURLY;INTERVAL=5;BYMINUTE=10,40",
        "FREQ=HOURLY;INTERVAL=10;BYHOUR=4,9,14",
        "FREQ=DAILY;INTERVAL=3;BYHOUR=6,18",
        "FREQ=WEEKLY;INTERVAL=3",
        "FREQ=WEEKLY;INTERVAL=2;BYDAY=TU,SA;WKST=SU",
        "FREQ=MONTHLY;INTERVAL=5",
        "FREQ=MONTHLY;BYMONTHDAY=31",
        "FREQ=MONTHLY;INTERVAL=2;BYDAY=2WE;BYSETPOS=1",
        "FREQ=YEARLY;INTERVAL=2",
        "FREQ=YEARLY;BYWEEKNO=20;BYDAY=MO",
        "FREQ=SECONDLY;INTERVAL=17",
    ],
)
def test_restarting_a_rule_near_the_walk_gives_what_walking_it_from_dtstart_gives(rule):
    # The walk restarts a rule near where it is asked to start (dateutil would otherwise walk every
    # occurrence since DTSTART): compare with dateutil walking the whole way, from a DTSTART recent
    # enough for that to be cheap.
    start = at(2027, 6, 3, 10, 11, 12)
    # Years back, or (for the rules that recur within the hour) days back, which is still
    # thousands of periods to skip and cheap to walk without skipping.
    dense = rule.startswith(("FREQ=SECONDLY", "FREQ=MINUTELY"))
    dtstart = dt.datetime(2027, 5, 28, 7, 23, 11) if dense else dt.datetime(2019, 1, 31, 7, 23, 11)
    expected = [
        moment.replace(tzinfo=dt.UTC)
        for moment in islice(rrulestr(rule, dtstart=dtstart).xafter(start.replace(tzinfo=None)), 25)
    ]
    expression = f"DTSTART:{dtstart:%Y%m%dT%H%M%S}\nRRULE:{rule}"
    assert preview(expression, tz="UTC", start=start, count=25) == expected


def test_a_catch_up_after_a_long_outage_finds_the_latest_occurrence_quickly():
    every_second = Recurrence.parse("FREQ=SECONDLY", "UTC")
    began = time.process_time()
    assert every_second.latest(at(2027, 1, 1), at(2027, 3, 1, 12, 0, 0)) == at(2027, 3, 1, 12, 0, 0)
    monthly = Recurrence.parse("FREQ=MONTHLY;BYMONTHDAY=1;BYHOUR=6", "UTC")
    assert monthly.latest(at(2026, 1, 1), at(2027, 3, 1, 5)) == at(2027, 2, 1, 6)
    assert monthly.latest(at(2027, 2, 1, 6), at(2027, 3, 1, 5)) is None
    assert time.process_time() - began < 2


def test_a_window_can_hold_two_occurrences_of_a_rule():
    rule = Recurrence.parse("FREQ=SECONDLY;BYSECOND=0,30", "UTC")
    assert rule.between(at(2027, 1, 1, 10, 0, 0), at(2027, 1, 1, 10, 1, 0)) == [
        at(2027, 1, 1, 10, 0, 30),
        at(2027, 1, 1, 10, 1, 0),
    ]


@pytest.mark.parametrize(
    ("expression", "tz", "field", "message"),
    [
        ("FREQ=DAILY;BYHOUR=25", "UTC", "cron", 'unsupported value in rrule part "BYHOUR=25"'),
        ("FREQ=DAILY;BYHOURS=9", "UTC", "cron", 'unsupported part "BYHOURS=9"'),
        ("FREQ=DAILY;BYHOUR=9;BYHOUR=10", "UTC", "cron", "more than one BYHOUR part"),
        ("FREQ=DAILY;BYHOUR=", "UTC", "cron", 'rrule part "BYHOUR=" has no value'),
        ("FREQ=FORTNIGHTLY", "UTC", "cron", 'unsupported value in rrule part "FREQ=FORTNIGHTLY"'),
        ("FREQ=DAILY;INTERVAL=0", "UTC", "cron", '"INTERVAL=0": it must be at least 1'),
        ("FREQ=DAILY;BYDAY=XX", "UTC", "cron", 'unsupported value in rrule part "BYDAY=XX"'),
        ("FREQ=WEEKLY;BYDAY=-1FR", "UTC", "cron", "needs FREQ=MONTHLY or FREQ=YEARLY"),
        ("FREQ=WEEKLY;BYMONTHDAY=3", "UTC", "cron", "BYMONTHDAY cannot be used with FREQ=WEEKLY"),
        ("FREQ=MONTHLY;BYMONTHDAY=32", "UTC", "cron", '"BYMONTHDAY=32"'),
        ("FREQ=HOURLY;COUNT=3", "UTC", "cron", "needs a DTSTART of its own"),
        (
            "DTSTART:20270101T090000\nRRULE:FREQ=DAILY;COUNT=3;UNTIL=20270105T000000",
            "UTC",
            "cron",
            "both COUNT and UNTIL",
        ),
        ("FREQ=DAILY;UNTIL=20270102", "UTC", "cron", "UNTIL must have the same value type as DTSTART"),
        ("DTSRAT:20270101T090000\nRRULE:FREQ=DAILY", "UTC", "cron", 'unsupported property "DTSRAT"'),
        (
            "DTSTART:20270101T090000\nDTSTART:20270102T090000\nRRULE:FREQ=DAILY",
            "UTC",
            "cron",
            "more than one DTSTART",
        ),
        ("DTSTART:2027-01-01\nRRULE:FREQ=DAILY", "UTC", "cron", "rrule DTSTART '2027-01-01' is not a date"),
        (
            "DTSTART;TZID=Mars/Olympus:20270101T090000\nRRULE:FREQ=DAILY",
            "UTC",
            "cron",
            "unknown time zone: 'Mars/Olympus'",
        ),
        (
            "DTSTART:20270101T090000\nRDATE:20270102\nRRULE:FREQ=DAILY",
            "UTC",
            "cron",
            'RDATE "20270102" must have the same value type',
        ),
        ("DTSTART:20270101T090000", "UTC", "cron", "no RRULE to recur on"),
        ("BEGIN:VEVENT\nRRULE:FREQ=DAILY\nEND:VEVENT", "UTC", "cron", "without the BEGIN and END lines"),
        ("every tuesday", "UTC", "cron", "cron 'every tuesday' must have 5 fields"),
        ("61 * * * *", "UTC", "cron", "is not a valid cron expression"),
        ("FREQ=DAILY", "Mars/Olympus", "tz", "unknown or unsupported time zone: 'Mars/Olympus'"),
        ("* * * * *", "Mars/Olympus", "tz", "unknown or unsupported time zone: 'Mars/Olympus'"),
        # The expression is judged first, so both wrong reports the expression.
        ("FREQ=DAILY;BYHOUR=25", "Mars/Olympus", "cron", "BYHOUR=25"),
    ],
)
def test_a_bad_expression_or_zone_is_refused_naming_the_part(expression, tz, field, message):
    with pytest.raises(InvalidSchedule) as raised:
        preview(expression, tz=tz, start=at(2027, 1, 1))
    assert message in str(raised.value)
    assert raised.value.field == field
    assert isinstance(raised.value, InvalidOption)  # what cron errors always raised


@pytest.mark.parametrize("count", [0, -1, PREVIEW_MAX_COUNT + 1, 2.5, "10", True])
def test_a_count_outside_1_to_1000_is_refused(count):
    with pytest.raises(InvalidSchedule, match="count must be an integer from 1 to 1000") as raised:
        preview("* * * * *", start=at(2027, 1, 1), count=count)
    assert raised.value.field == "count"


def test_a_thousand_occurrences_are_allowed():
    # A clock that never moves leaves only the count's limit: on a loaded machine the wall-clock
    # budget may run out first, which the tests below cover on their own.
    stopped = lambda: 0.0  # noqa: E731
    assert (
        len(preview("* * * * *", start=at(2027, 1, 1), count=PREVIEW_MAX_COUNT, clock=stopped))
        == PREVIEW_MAX_COUNT
    )


def test_a_naive_start_is_refused():
    with pytest.raises(InvalidSchedule, match="start must be a timezone-aware datetime") as raised:
        preview("* * * * *", start=dt.datetime(2027, 1, 1))
    assert raised.value.field == "start"


def test_a_walk_past_its_time_budget_gives_up_saying_how_far_it_got():
    ticks = iter(range(1000))

    def clock() -> float:
        return float(next(ticks))  # a second passes between occurrences

    with pytest.raises(InvalidSchedule, match=r"gave up after 1s with 2 of 10 occurrences") as raised:
        preview("* * * * *", start=at(2027, 1, 1), count=10, clock=clock)
    assert raised.value.field == "count"


def test_a_finished_rule_previews_as_nothing():
    assert preview("FREQ=DAILY;UNTIL=20200101T000000Z", start=at(2027, 1, 1)) == []
    assert preview("DTSTART:20200101T000000\nRRULE:FREQ=DAILY;COUNT=3", start=at(2027, 1, 1)) == []


def test_cron_previews_in_the_schedules_zone():
    assert iso(preview("0 3 * * *", tz="Europe/Paris", start=at(2026, 10, 24), count=2)) == [
        "2026-10-24 01:00:00",
        "2026-10-25 02:00:00",
    ]


def test_cron_across_daylight_saving_reads_as_pg_boss_cron_parser_does():
    # Named hours run on the wall clock: the repeated 01:30 runs once (the first, EDT), a skipped
    # 02:30 runs as 03:30.
    ny = "America/New_York"
    assert iso(preview("30 1 * * *", tz=ny, start=at(2027, 11, 6, 12), count=2)) == [
        "2027-11-07 05:30:00",
        "2027-11-08 06:30:00",
    ]
    assert iso(preview("30 2 * * *", tz=ny, start=at(2027, 3, 13, 12), count=2)) == [
        "2027-03-14 07:30:00",
        "2027-03-15 06:30:00",
    ]
    assert iso(preview("0 2 * * *", tz="Europe/Paris", start=at(2027, 10, 30, 12), count=2)) == [
        "2027-10-31 00:00:00",
        "2027-11-01 01:00:00",
    ]
    # Every hour runs on elapsed time: the repeated hour runs twice.
    assert iso(preview("*/30 * * * *", tz=ny, start=at(2027, 11, 7, 5), count=4)) == [
        "2027-11-07 05:30:00",
        "2027-11-07 06:00:00",
        "2027-11-07 06:30:00",
        "2027-11-07 07:00:00",
    ]


def test_a_day_that_no_month_named_can_hold_is_refused():
    # dateutil would search every year to 9999 for 30 February, beyond any time budget's reach.
    for expression, message in [
        ("FREQ=HOURLY;BYMONTH=2;BYMONTHDAY=30", 'rrule "BYMONTHDAY=30" never falls in "BYMONTH=2"'),
        ("FREQ=YEARLY;BYMONTH=4,6;BYMONTHDAY=-31", 'rrule "BYMONTHDAY=-31" never falls in "BYMONTH=4,6"'),
    ]:
        with pytest.raises(InvalidSchedule, match=message):
            Recurrence.parse(expression, "UTC")
    assert Recurrence.parse("FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29", "UTC").next_after(at(2027, 1, 1)) == at(
        2028, 2, 29
    )


def test_a_walk_through_a_huge_count_gives_up_within_its_budget():
    # COUNT counts from DTSTART, so the seven years of seconds before 2027 are walked, not skipped.
    rule = Recurrence.parse("DTSTART:20200101T000000\nRRULE:FREQ=SECONDLY;COUNT=500000000", "UTC")
    began = time.process_time()
    with pytest.raises(InvalidSchedule, match="gave up after 1s of walking, at 2020-"):
        rule.next_after(at(2027, 1, 1))
    assert time.process_time() - began < 3
    with pytest.raises(InvalidSchedule, match="gave up after 1s with 0 of 10 occurrences"):
        preview(rule.expression, start=at(2027, 1, 1))


def test_a_croniter_date_that_never_comes_ends_the_walk():
    assert preview("0 0 30 2 *", start=at(2027, 1, 1)) == []
