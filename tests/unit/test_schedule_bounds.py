"""Rules that never match, RFC 7529's RSCALE and SKIP, and RDATE periods, without a database
(issue 16's remainder; what a stored rule costs a timekeeper pass is tests/test_schedule_bounds.py's).

dateutil searches period after period, up to the year 9999, for the next occurrence of a rule
whose parts never fall together, inside one call nothing could interrupt. Those the checks can
tell are refused naming the part; every other search is bounded (recurrence.search._BoundedIterinfo).

A bound on what a search costs is read on the process's CPU clock (time.process_time()), never
the wall clock: the budget is a wall-clock deadline, so on a loaded machine a walk gets less CPU
than the wall time it takes and never more, while one that ignored its deadline would burn
seconds of CPU and still fail the bound. (Wall time here failed under load for no fault.)
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from typing import Any

import pytest

from django_pgboss import InvalidSchedule
from django_pgboss.recurrence import EVALUATION_BUDGET_SECONDS, Recurrence, preview


def at(*args: int) -> dt.datetime:
    return dt.datetime(*args, tzinfo=dt.UTC)


def iso(moments: list[dt.datetime]) -> list[str]:
    return [m.strftime("%Y-%m-%d %H:%M:%S") for m in moments]


# What no static check can tell: the fifth Monday of a month is never among its first three days,
# and the 366th day of a year is never in January. dateutil would search to 9999 for either (the
# hourly one for minutes).
UNTELLABLE = ["FREQ=MONTHLY;BYDAY=5MO;BYMONTHDAY=1,2,3", "FREQ=HOURLY;BYYEARDAY=366;BYMONTH=1"]


# -- refused, naming the part -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("FREQ=MONTHLY;BYDAY=MO;BYSETPOS=40", 'rrule "BYSETPOS=40" never matches: one MONTHLY period'),
        ("FREQ=DAILY;BYHOUR=9;BYSETPOS=2", "holds at most 1 occurrence(s)"),
        ("FREQ=HOURLY;BYSETPOS=2", 'rrule "BYSETPOS=2" never matches: one HOURLY period'),
        ("FREQ=WEEKLY;BYDAY=MO,TU;BYHOUR=9,17;BYSETPOS=5,-5", "holds at most 4 occurrence(s)"),
        ("FREQ=YEARLY;BYDAY=MO;BYSETPOS=54", "holds at most 53 occurrence(s)"),
        ("FREQ=YEARLY;BYMONTH=2;BYDAY=6MO", 'rrule "BYDAY=6MO" never falls: a month holds at most 5'),
        ("FREQ=MONTHLY;BYDAY=-6FR,7MO", 'rrule "BYDAY=-6FR,7MO" never falls'),
        (
            "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29;INTERVAL=4",
            'rrule "INTERVAL=4" counted from the rule\'s anchor (1 January 1970) never lands on a year '
            'that holds "BYMONTHDAY=29" in "BYMONTH=2"',
        ),
        (
            # 1900 + 400 n is never a leap year (a century not divisible by 400).
            "DTSTART:19000228T090000\nRRULE:FREQ=YEARLY;INTERVAL=400;BYMONTH=2;BYMONTHDAY=29",
            'rrule "INTERVAL=400" counted from DTSTART 1900-02-28',
        ),
        (
            "DTSTART:20270115T090000\nRRULE:FREQ=MONTHLY;INTERVAL=12;BYMONTH=2",
            'rrule "INTERVAL=12" counted from DTSTART 2027-01-15 never lands on a month that holds day 15 '
            'in "BYMONTH=2"',
        ),
    ],
)
def test_a_rule_whose_parts_never_fall_together_is_refused_naming_the_part(expression, message):
    with pytest.raises(InvalidSchedule, match=message.replace("(", r"\(").replace(")", r"\)")) as refused:
        Recurrence.parse(expression, "UTC")
    assert refused.value.field == "cron"


def test_rules_that_only_look_impossible_are_kept():
    # A fifth Monday in February comes in a leap year that starts on a Monday (pg-boss agrees).
    assert iso(preview("FREQ=YEARLY;BYDAY=5MO;BYMONTH=2", start=at(2027, 1, 1), count=2)) == [
        "2044-02-29 00:00:00",
        "2072-02-29 00:00:00",
    ]
    assert iso(preview("FREQ=YEARLY;BYDAY=MO;BYSETPOS=53", start=at(2027, 1, 1), count=1)) == [
        "2029-12-31 00:00:00"
    ]
    every_fourth = "DTSTART:20280101T000000\nRRULE:FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29;INTERVAL=4"
    assert iso(preview(every_fourth, start=at(2027, 1, 1), count=2)) == [
        "2028-02-29 00:00:00",
        "2032-02-29 00:00:00",
    ]
    assert iso(preview("FREQ=MONTHLY;BYDAY=MO;BYSETPOS=5", start=at(2026, 1, 1), count=1)) == [
        "2026-03-30 00:00:00"
    ]
    # One impossible ordinal beside a possible one only never contributes.
    assert iso(preview("FREQ=MONTHLY;BYDAY=1MO,6MO", start=at(2027, 1, 1), count=1)) == [
        "2027-01-04 00:00:00"
    ]


# -- bounded where no check can tell ----------------------------------------------------------------


class SteppingClock:
    """A clock that moves 50 ms each time it is read, so a budget runs out after a fixed number of
    the search's deadline checks, whatever the machine's speed or load."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 0.05
        return self.now


@pytest.mark.parametrize("expression", UNTELLABLE)
def test_a_never_matching_rule_no_check_can_tell_gives_up_when_its_budget_runs_out(expression):
    rule = Recurrence.parse(expression, "UTC")
    rule._clock = SteppingClock()
    with pytest.raises(InvalidSchedule, match="gave up after 1s of searching for an occurrence"):
        rule.next_after(at(2027, 1, 1))
    with pytest.raises(InvalidSchedule, match="gave up after 1s with 0 of 10 occurrences"):
        preview(expression, start=at(2027, 1, 1), clock=SteppingClock())


@pytest.mark.parametrize("expression", UNTELLABLE)
def test_a_never_matching_rule_no_check_can_tell_costs_at_most_its_budget(expression):
    # On the real clock the outcome depends on the machine: a slow or loaded one gives up at the
    # budget, a fast one may walk the whole of dateutil's range (to the year 9999) inside it and
    # find nothing. Either way the search is bounded and finds no occurrence, which is what
    # schedule() needs to refuse the rule (test_schedule_refuses_a_rule_that_never_matches...).
    rule = Recurrence.parse(expression, "UTC")
    began = time.process_time()
    found = answer_or_refusal(lambda: rule.next_after(at(2027, 1, 1)))
    assert time.process_time() - began < EVALUATION_BUDGET_SECONDS + 2
    assert found is None or "gave up after 1s of searching for an occurrence" in found
    began = time.process_time()
    previewed = answer_or_refusal(lambda: preview(expression, start=at(2027, 1, 1)))
    assert time.process_time() - began < EVALUATION_BUDGET_SECONDS + 2
    assert previewed == [] or "gave up after 1s with 0 of 10 occurrences" in previewed


def answer_or_refusal(call: Callable[[], Any]) -> Any:
    """What ``call`` returned, or the message of the InvalidSchedule it raised."""
    try:
        return call()
    except InvalidSchedule as refused:
        return str(refused)


@pytest.mark.parametrize("expression", UNTELLABLE)
def test_a_windowed_reading_stops_at_the_end_of_its_window(expression):
    # What a timekeeper pass asks of a row: the occurrences of the last minute. The search ends at
    # the window instead of going on towards an occurrence that never comes.
    rule = Recurrence.parse(expression, "UTC")
    began = time.process_time()
    assert rule.between(at(2027, 1, 1, 9), at(2027, 1, 1, 9, 1)) == []
    assert time.process_time() - began < 0.5


def test_a_windowed_reading_still_finds_what_is_in_its_window():
    rule = Recurrence.parse("FREQ=MINUTELY;INTERVAL=20", "Europe/Paris")
    assert iso(rule.between(at(2027, 3, 28, 0, 30), at(2027, 3, 28, 1, 30))) == [
        "2027-03-28 00:40:00",
        "2027-03-28 01:00:00",
        "2027-03-28 01:20:00",
    ]
    sparse = Recurrence.parse("FREQ=YEARLY;BYDAY=5MO;BYMONTH=2;BYHOUR=9", "UTC")
    assert iso(sparse.between(at(2044, 2, 29, 8, 59), at(2044, 2, 29, 9))) == ["2044-02-29 09:00:00"]
    assert sparse.latest(at(2040, 1, 1), at(2050, 1, 1)) == at(2044, 2, 29, 9)


# -- RFC 7529 and RDATE periods --------------------------------------------------------------------


def test_rscale_gregorian_and_skip_omit_are_what_dateutil_evaluates():
    assert iso(preview("FREQ=DAILY;BYHOUR=9;RSCALE=GREGORIAN", start=at(2027, 1, 1), count=2)) == [
        "2027-01-01 09:00:00",
        "2027-01-02 09:00:00",
    ]
    # SKIP=OMIT: a month without a 31st has no occurrence, as pg-boss reads it.
    assert iso(
        preview("FREQ=MONTHLY;BYMONTHDAY=31;RSCALE=GREGORIAN;SKIP=OMIT", start=at(2027, 1, 1), count=3)
    ) == [
        "2027-01-31 00:00:00",
        "2027-03-31 00:00:00",
        "2027-05-31 00:00:00",
    ]
    # SKIP that no day of the rule can call on changes nothing, so it is kept.
    assert preview(
        "FREQ=WEEKLY;BYDAY=FR;RSCALE=GREGORIAN;SKIP=FORWARD", start=at(2027, 1, 1), count=3
    ) == preview("FREQ=WEEKLY;BYDAY=FR", start=at(2027, 1, 1), count=3)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        (
            "FREQ=MONTHLY;RSCALE=HEBREW;BYMONTHDAY=1",
            'rrule "RSCALE=HEBREW" is not supported: dateutil evaluates the Gregorian calendar only',
        ),
        ("FREQ=MONTHLY;BYMONTHDAY=31;SKIP=OMIT", "rrule SKIP needs an RSCALE part beside it"),
        (
            "FREQ=MONTHLY;BYMONTHDAY=31;RSCALE=GREGORIAN;SKIP=SIDEWAYS",
            'unsupported value in rrule part "SKIP=SIDEWAYS"',
        ),
        (
            "FREQ=MONTHLY;BYMONTHDAY=31;RSCALE=GREGORIAN;SKIP=BACKWARD",
            'rrule "SKIP=BACKWARD" is not supported for a day some months or years lack',
        ),
        (
            "DTSTART:20240229T090000\nRRULE:FREQ=YEARLY;RSCALE=GREGORIAN;SKIP=FORWARD",
            'rrule "SKIP=FORWARD" is not supported',
        ),
        (
            "DTSTART:20270101T090000Z\nRRULE:FREQ=WEEKLY\nRDATE;VALUE=PERIOD:20270105T120000Z/PT1H",
            'rrule RDATE period "20270105T120000Z/PT1H" ends with a duration',
        ),
        (
            "DTSTART:20270101T090000Z\nRRULE:FREQ=WEEKLY\nRDATE;VALUE=PERIOD:20270105T120000Z/20270105T110000Z",
            "must end after it starts",
        ),
        (
            "DTSTART:20270101T090000Z\nRRULE:FREQ=WEEKLY\nEXDATE;VALUE=PERIOD:20270105T120000Z/20270105T130000Z",
            "rrule EXDATE takes dates or date times, not periods",
        ),
    ],
)
def test_what_dateutil_cannot_honour_of_rscale_skip_and_periods_is_refused(expression, message):
    with pytest.raises(InvalidSchedule, match=message.replace("(", r"\(").replace(")", r"\)")):
        Recurrence.parse(expression, "UTC")


def test_an_rdate_period_occurs_at_its_start():
    expression = (
        "DTSTART:20270101T090000Z\nRRULE:FREQ=WEEKLY\n"
        "RDATE;VALUE=PERIOD:20270105T120000Z/20270105T130000Z,20270106T070000Z/20270106T071500Z"
    )
    assert iso(preview(expression, start=at(2027, 1, 1), count=4)) == [
        "2027-01-01 09:00:00",
        "2027-01-05 12:00:00",
        "2027-01-06 07:00:00",
        "2027-01-08 09:00:00",
    ]
