"""Recurrences, pure: cron expressions and RFC 5545 recurrence rules, parsed and walked.

This module decides an expression's kind, reads cron, and walks both kinds; reading a rule's text
is recurrence/rfc5545.py's, bounding dateutil's search recurrence/search.py's. None of them reads
settings or touches the database, so schedule(), preview_schedule(), the timekeeper and the
admin's form all judge an expression the same way, and their tests run without PostgreSQL
(tests/unit/test_recurrence.py, tests/unit/test_cron.py).

A schedule's expression is one of two kinds, as pg-boss 12.35 stores them in ``schedule.kind``:

- ``cron``: 5 fields, or 6 with seconds first (croniter), evaluated in the schedule's time zone.
- ``rrule``: an RFC 5545 recurrence rule (python-dateutil's ``rrule``), either the RRULE value on
  its own (``FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=17``) or the DTSTART, RRULE, RDATE and EXDATE lines of
  a calendar entry. Without a DTSTART the rule recurs from midnight, 1 January 1970, in the
  schedule's zone, which is pg-boss's anchor: the phase of ``INTERVAL=2`` and the time of day of
  any part the rule does not pin are then the same in every process. A DTSTART with a TZID (or a
  trailing Z) names the zone the rule recurs in instead of the schedule's.

Rules recur in wall-clock time, as pg-boss's engine (rrule-temporal) reads them: a local time that
a daylight-saving change skips does not occur that day (RFC 5545 says to ignore it), and a local
time that occurs twice is the earlier of the two.
"""

from __future__ import annotations

import datetime as dt
import heapq
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadDateError, croniter
from dateutil import rrule as dateutil_rrule

from django_pgboss.exceptions import InvalidSchedule
from django_pgboss.recurrence.rfc5545 import (
    EPOCH,
    FREQUENCIES,
    WEEKDAYS,
    Moment,
    Rule,
    invalid_rule,
    parse_rule,
)
from django_pgboss.recurrence.search import SearchPastHorizon, SearchTimedOut, bounded, search

CRON = "cron"
RRULE = "rrule"
KINDS = (CRON, RRULE)

#: preview_schedule()'s count: its default, and pg-boss's ceiling (previewScheduleMaxCount).
PREVIEW_DEFAULT_COUNT = 10
PREVIEW_MAX_COUNT = 1000
#: The wall-clock budget of one preview. Occurrences are not equally priced: a thousand of a
#: per-minute rule cost milliseconds, a thousand of "29 February" walk four thousand years, so
#: count alone does not bound the CPU a request can spend (pg-boss bounds both, at a second).
PREVIEW_TIME_BUDGET_SECONDS = 1.0
#: The same bound on every other walk: schedule()'s check that a rule has an occurrence left,
#: a timekeeper pass's reading of one row, the admin's next run. A rule that names days that never
#: come (30 February) would otherwise be searched to the year 9999 (a minute for an hourly rule).
EVALUATION_BUDGET_SECONDS = 1.0

# What tells a rule from a cron expression (pg-boss's test): an iCalendar property at the head of
# a line, or the FREQ part every RRULE carries. No cron field contains "=", ":" or ";".
_RRULE_SHAPE = re.compile(r"^[ \t]*[a-z][a-z0-9-]*[;:]|(?:^|[\s;])FREQ=", re.IGNORECASE | re.MULTILINE)


class OutOfTime(InvalidSchedule):
    """A walk ran past its budget (EVALUATION_BUDGET_SECONDS) before it found what it looked for."""


def is_rrule(expression: str) -> bool:
    """True when ``expression`` is written as an RFC 5545 rule rather than a cron expression."""
    return bool(_RRULE_SHAPE.search(expression))


def detect_kind(expression: str) -> str:
    """The kind schedule() stores for ``expression``: "rrule" or "cron"."""
    return RRULE if is_rrule(expression) else CRON


def parse_zone(timezone: object) -> ZoneInfo:
    """The IANA zone named ``timezone``; InvalidSchedule (field "tz") when there is none."""
    if not isinstance(timezone, str) or not timezone:
        raise InvalidSchedule(f"tz must be an IANA time zone name, not {timezone!r}", field="tz")
    try:
        return ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidSchedule(f"unknown or unsupported time zone: {timezone!r}", field="tz") from None


def _check_cron(expression: object) -> str:
    if not isinstance(expression, str) or not expression.strip():
        raise InvalidSchedule(f"cron must be a cron expression, not {expression!r}", field="cron")
    fields = expression.split()
    if not expression.startswith("@") and len(fields) not in (5, 6):
        raise InvalidSchedule(
            f"cron {expression!r} must have 5 fields, or 6 with seconds first", field="cron"
        )
    if not croniter.is_valid(expression, second_at_beginning=len(fields) == 6):
        raise InvalidSchedule(f"cron {expression!r} is not a valid cron expression", field="cron")
    return expression


def parse_cron(expression: object, timezone: object) -> tuple[str, ZoneInfo]:
    """Validate a cron expression and a time zone as schedule() takes them; raise InvalidSchedule.

    The expression is judged before the zone, so a caller who got both wrong hears about the
    expression first (pg-boss's order).
    """
    return _check_cron(expression), parse_zone(timezone)


# -- recurrences ----------------------------------------------------------------------------------


def _wall(moment: dt.datetime, zone: ZoneInfo) -> dt.datetime:
    """An instant as naive wall time in ``zone`` (fold kept, for the hour that occurs twice)."""
    return moment.astimezone(zone).replace(tzinfo=None)


def _wall_start(after: dt.datetime, zone: ZoneInfo) -> dt.datetime:
    """Where a wall-clock walk for occurrences after ``after`` starts: the first wall time that
    lands after ``after`` is within a DST change of its own wall time, so that far back (usually
    not at all, since a dense rule pays for every step)."""
    offset = after.astimezone(zone).utcoffset() or dt.timedelta(0)
    change = max(
        abs(((after + day).astimezone(zone).utcoffset() or dt.timedelta(0)) - offset)
        for day in (dt.timedelta(days=-1), dt.timedelta(days=1))
    )
    return _wall(after, zone) - change - dt.timedelta(seconds=1)


def _instant(wall: dt.datetime, zone: ZoneInfo) -> dt.datetime | None:
    """Naive wall time in ``zone`` as a UTC instant; None for a time a DST change skips."""
    aware = wall.replace(tzinfo=zone)
    utc = aware.astimezone(dt.UTC)
    if utc.astimezone(zone).replace(tzinfo=None, fold=0) != wall.replace(fold=0):
        return None
    return utc


_UNIT_SECONDS = {"HOURLY": 3600, "MINUTELY": 60, "SECONDLY": 1}


@dataclass
class Recurrence:
    """A validated expression of one kind in one zone, ready to walk.

    Instants in and out are aware datetimes; what comes out is in UTC.
    """

    kind: str
    expression: str
    zone: ZoneInfo
    _rule: Rule | None = field(default=None, repr=False)
    _rule_zone: ZoneInfo | None = field(default=None, repr=False)
    _base: dateutil_rrule.rrule | None = field(default=None, repr=False)
    _count: int | None = field(default=None, repr=False)
    _clock: Callable[[], float] = field(default=time.monotonic, repr=False)

    @classmethod
    def parse(cls, expression: object, timezone: object, kind: str | None = None) -> Recurrence:
        """Validate ``expression`` (read as ``kind``; default: detected) in ``timezone``.

        Raises InvalidSchedule naming the part at fault: the expression ("cron") before the zone
        ("tz"), as pg-boss judges them.
        """
        if not isinstance(expression, str) or not expression.strip():
            raise InvalidSchedule(
                f"cron must be a cron expression or an RRULE, not {expression!r}", field="cron"
            )
        kind = kind or detect_kind(expression)
        if kind == CRON:
            _check_cron(expression)
            return cls(CRON, expression, parse_zone(timezone))
        if kind != RRULE:
            raise InvalidSchedule(f"kind must be one of: {', '.join(KINDS)}, not {kind!r}", field="cron")
        rule = parse_rule(expression)
        zone = parse_zone(timezone)
        rule_zone = (rule.dtstart.zone if rule.dtstart is not None else None) or zone
        dtstart = rule.dtstart.wall if rule.dtstart is not None else EPOCH
        try:
            # COUNT is counted by the walk itself (see _rule_walls), so the rule dateutil
            # evaluates is the one COUNT cuts short.
            text = ";".join(part for part in rule.text.split(";") if not part.startswith("COUNT="))
            parsed = dateutil_rrule.rrulestr(text, dtstart=dtstart, cache=False)
            if not isinstance(parsed, dateutil_rrule.rrule):  # one RRULE line never makes a set
                raise ValueError("not a single rule")
            base = bounded(parsed)
            until = None
            if rule.until is not None:
                # UNTIL names an instant (with Z) or wall time (floating): either way the walk
                # compares it with wall time in the rule's zone.
                until = rule.until.wall
                if rule.until.zone is not None:
                    until = _wall(rule.until.wall.replace(tzinfo=rule.until.zone), rule_zone)
                if rule.until.is_date:
                    until = until.replace(hour=23, minute=59, second=59)
                base = base.replace(until=until)
        except (ValueError, TypeError) as exc:
            raise invalid_rule(f"rrule expression could not be read: {exc}") from None
        count = int(rule.parts["COUNT"]) if "COUNT" in rule.parts else None
        return cls(RRULE, expression, zone, rule, rule_zone, base, count)

    # -- walking ------------------------------------------------------------------------------

    def walk(
        self, after: dt.datetime, deadline: float | None = None, until: dt.datetime | None = None
    ) -> Iterator[dt.datetime]:
        """The occurrences strictly after ``after``, in order (an endless iterator for most).

        ``deadline`` (on time.monotonic()'s clock; default EVALUATION_BUDGET_SECONDS from now)
        bounds the walk: a rule's search past it raises OutOfTime (an InvalidSchedule). With
        ``until`` the walk may end once it is past that instant: a rule's search for the next
        occurrence stops there instead of going on to wherever the next one is.
        """
        if deadline is None:
            deadline = self._clock() + EVALUATION_BUDGET_SECONDS
        if self.kind == CRON:
            return self._walk_cron(after)
        return self._walk_rule(after, deadline, until)

    def _walk_cron(self, after: dt.datetime) -> Iterator[dt.datetime]:
        # Across a DST change, read as pg-boss's cron-parser reads it. An expression whose hour
        # field is every hour runs on elapsed time: the repeated hour in autumn runs twice, the
        # skipped one in spring not at all. One that names its hours runs on the wall clock: a
        # time that happens twice runs the first time only, and a time that is skipped runs as
        # far past the change as it was past the hour before it (02:30 becomes 03:30). croniter
        # does the first natively; the second is croniter on naive wall time, mapped the way
        # zoneinfo maps a naive time with fold=0, which is exactly those two rules.
        # croniter bounds its own search (a date that never comes, such as 30 February, ends it
        # with CroniterBadDateError, read here as the end of the walk).
        six = not self.expression.startswith("@") and len(self.expression.split()) == 6
        try:
            if croniter(self.expression, second_at_beginning=six).expanded[1] == ["*"]:
                cursor = croniter(self.expression, after.astimezone(self.zone), second_at_beginning=six)
                while True:
                    yield cursor.get_next(dt.datetime).astimezone(dt.UTC)
            cursor = croniter(self.expression, _wall_start(after, self.zone), second_at_beginning=six)
            walls = iter(lambda: cursor.get_next(dt.datetime), None)
            yield from self._cron_instants(walls, after)
        except CroniterBadDateError:
            return

    def _cron_instants(self, walls: Iterator[dt.datetime], after: dt.datetime) -> Iterator[dt.datetime]:
        last = after
        for wall in walls:
            instant = wall.replace(tzinfo=self.zone).astimezone(dt.UTC)
            # Two wall times that a spring change maps to one instant run once, in order.
            if instant > last:
                last = instant
                yield instant

    def _walk_rule(
        self, after: dt.datetime, deadline: float, until: dt.datetime | None = None
    ) -> Iterator[dt.datetime]:
        assert self._rule is not None and self._rule_zone is not None
        zone = self._rule_zone
        start = _wall_start(after, zone).replace(microsecond=0)
        # Three hours past ``until``'s wall time in the rule's zone, so no DST change can put an
        # occurrence the caller wants beyond the horizon.
        horizon = None if until is None else _wall(until, zone).replace(fold=0) + dt.timedelta(hours=3)
        exdates = {self._wall_of(moment) for moment in self._rule.exdates}
        rdates = sorted(wall for wall in map(self._wall_of, self._rule.rdates) if wall >= start)
        walls = heapq.merge(self._rule_walls(start, deadline, horizon), rdates)
        previous = None
        for wall in walls:
            # A wall time given twice (an RDATE on an occurrence) is one occurrence.
            if wall == previous or wall in exdates:
                continue
            previous = wall
            instant = _instant(wall, zone)
            if instant is not None and instant > after:
                yield instant

    def _rule_walls(
        self, start: dt.datetime, deadline: float, horizon: dt.datetime | None = None
    ) -> Iterator[dt.datetime]:
        """The rule's own occurrences (no RDATE, no EXDATE) at or after ``start``, as wall time,
        ending past ``horizon`` (wall time) when there is one.

        A rule with COUNT is walked from its real DTSTART and counted here (dateutil's rule is
        the endless one COUNT cuts short); any other starts near ``start`` (see _fast_forward).
        The deadline is looked at every so many occurrences, which bounds a walk that has
        occurrences to skip (a large COUNT, a dense rule), and by dateutil's search itself every
        so many periods (see search._BoundedIterinfo), which bounds a rule whose parts never fall
        together. The horizon applies only once the walk has reached ``start``: a COUNT has to be
        counted from the beginning.
        """
        assert self._base is not None
        count = self._count
        rule = self._base if count is not None else self._fast_forward(start)
        occurrences = iter(rule)
        seen = 0
        search.steps = 0
        previous = getattr(search, "deadline", None), getattr(search, "horizon", None)
        reached = count is None
        while True:
            search.deadline, search.clock = deadline, self._clock
            search.horizon = horizon if reached else None
            try:
                wall = next(occurrences)
            except StopIteration:
                return
            except SearchPastHorizon:
                return
            except SearchTimedOut as timed_out:
                if seen:
                    # Occurrences were found, only too many of them (a huge COUNT from long ago).
                    raise OutOfTime(
                        f"rrule {self.expression!r}: gave up after {EVALUATION_BUDGET_SECONDS:g}s of "
                        f"walking, at {wall:%Y-%m-%d %H:%M:%S}",
                        field="cron",
                    ) from None
                raise OutOfTime(
                    f"rrule {self.expression!r}: gave up after {EVALUATION_BUDGET_SECONDS:g}s of "
                    f"searching for an occurrence (up to {timed_out.year}): its parts may never fall "
                    "together",
                    field="cron",
                ) from None
            finally:
                search.deadline, search.horizon = previous
            seen += 1
            if count is not None and seen > count:
                return
            if seen % 1024 == 0 and self._clock() > deadline:
                raise OutOfTime(
                    f"rrule {self.expression!r}: gave up after {EVALUATION_BUDGET_SECONDS:g}s of "
                    f"walking, at {wall:%Y-%m-%d %H:%M:%S}",
                    field="cron",
                )
            if wall >= start:
                reached = True
                yield wall

    def _wall_of(self, moment: Moment) -> dt.datetime:
        assert self._rule_zone is not None
        if moment.zone is None:
            return moment.wall
        return _wall(moment.wall.replace(tzinfo=moment.zone), self._rule_zone)

    def _fast_forward(self, target: dt.datetime) -> dateutil_rrule.rrule:
        """The rule restarted at a period boundary shortly before ``target``, occurrence for
        occurrence the same from there on.

        dateutil walks every occurrence from DTSTART, and a rule without one starts in 1970: half
        a century of minutes before the first one a pass wants. Restarting at a period of the
        same INTERVAL phase, with the parts DTSTART supplied made explicit, changes nothing from
        that period on (COUNT is not part of the rule here: _rule_walls counts it).
        """
        assert self._rule is not None and self._base is not None
        base, parts = self._base, self._rule.parts
        start = self._rule.dtstart.wall if self._rule.dtstart is not None else EPOCH
        freq = parts["FREQ"]
        interval = int(parts.get("INTERVAL", "1"))
        if freq in _UNIT_SECONDS:
            periods = int((target - start).total_seconds()) // _UNIT_SECONDS[freq]
        elif freq == "DAILY":
            periods = (target.date() - start.date()).days
        elif freq == "WEEKLY":
            wkst = WEEKDAYS.index(parts.get("WKST", "MO"))

            def week(moment: dt.datetime) -> dt.date:
                return moment.date() - dt.timedelta(days=(moment.weekday() - wkst) % 7)

            periods = (week(target) - week(start)).days // 7
        elif freq == "MONTHLY":
            periods = (target.year - start.year) * 12 + target.month - start.month
        else:
            periods = target.year - start.year
        # One whole INTERVAL short of the target's period, so the restarted first period (which
        # dateutil trims to what follows the new DTSTART) lies entirely before the target.
        steps = periods // interval - 1
        if steps <= 0:
            return base
        shift = steps * interval
        explicit: dict[str, Any] = {}
        day_parts = ("BYWEEKNO", "BYYEARDAY", "BYMONTHDAY", "BYDAY")
        if not any(name in parts for name in day_parts):
            if freq == "YEARLY":
                explicit["bymonthday"] = start.day
                if "BYMONTH" not in parts:
                    explicit["bymonth"] = start.month
            elif freq == "MONTHLY":
                explicit["bymonthday"] = start.day
            elif freq == "WEEKLY":
                explicit["byweekday"] = start.weekday()
        levels = FREQUENCIES.index(freq)
        for name, keyword, level, value in (
            ("BYHOUR", "byhour", 4, start.hour),
            ("BYMINUTE", "byminute", 5, start.minute),
            ("BYSECOND", "bysecond", 6, start.second),
        ):
            if name not in parts and levels < level:
                explicit[keyword] = value
        if freq in _UNIT_SECONDS:
            restart = start + dt.timedelta(seconds=shift * _UNIT_SECONDS[freq])
        elif freq == "DAILY":
            restart = start + dt.timedelta(days=shift)
        elif freq == "WEEKLY":
            restart = start + dt.timedelta(weeks=shift)
        elif freq == "MONTHLY":
            months = start.year * 12 + start.month - 1 + shift
            restart = start.replace(year=months // 12, month=months % 12 + 1, day=1)
        else:
            restart = start.replace(year=start.year + shift, month=1, day=1)
        return base.replace(dtstart=restart, **explicit)

    def next_after(self, after: dt.datetime) -> dt.datetime | None:
        """The first occurrence strictly after ``after``, or None when a finite rule has run out.
        Raises OutOfTime when none is found within EVALUATION_BUDGET_SECONDS."""
        return next(iter(self.walk(after)), None)

    def between(
        self, after: dt.datetime, until: dt.datetime, deadline: float | None = None
    ) -> list[dt.datetime]:
        """Every occurrence in (after, until], in order. For cron, only the latest one: a cron
        expression's occurrences are a minute apart at the closest, so the due window (a minute)
        holds one, and a sub-minute one shares the minute's slot (pg-boss reads it the same way)."""
        found = []
        for occurrence in self.walk(after, deadline, until):
            if occurrence > until:
                break
            found.append(occurrence)
        if self.kind == CRON:
            return found[-1:]
        return found

    def latest(self, after: dt.datetime, until: dt.datetime) -> dt.datetime | None:
        """The latest occurrence in (after, until], or None.

        Read backwards from ``until`` in steps that widen (an hour, then four times
        the last), so a catch-up after a long outage costs what the nearest occurrence is away,
        not every occurrence of a dense rule since the outage began.
        """
        deadline = self._clock() + EVALUATION_BUDGET_SECONDS
        upper, width = until, dt.timedelta(hours=1)
        while upper > after:
            lower = max(after, upper - width)
            found = self.between(lower, upper, deadline)
            if found:
                return found[-1]
            upper, width = lower, width * 4
        return None


def read_stored(expression: object, timezone: object, kind: object) -> Recurrence:
    """A stored schedule's expression, read as its stored ``kind``; or, when it cannot be read
    so and is written as the other kind, read as written.

    The kind column is a hint rather than a verdict (pg-boss's fallback): an older release's
    upsert or a schema rollback can leave a kind that disagrees with the expression beside it,
    and that row should still fire. Returns the Recurrence; its ``kind`` says which reading won.
    """
    stored = kind if kind in KINDS else CRON
    try:
        return Recurrence.parse(expression, timezone, stored)
    except InvalidSchedule:
        detected = detect_kind(expression) if isinstance(expression, str) else stored
        if detected == stored:
            raise
        return Recurrence.parse(expression, timezone, detected)


def preview(
    expression: object,
    *,
    tz: object = "UTC",
    start: dt.datetime,
    count: object = PREVIEW_DEFAULT_COUNT,
    clock: Callable[[], float] = time.monotonic,
) -> list[dt.datetime]:
    """The next ``count`` occurrences of ``expression`` strictly after ``start`` (aware, UTC).

    A finite rule answers with fewer, one that has finished with none. The expression is judged
    before the count (pg-boss's order), and a walk that outlasts PREVIEW_TIME_BUDGET_SECONDS
    gives up with InvalidSchedule (field "count") rather than hold a request or a thread.
    """
    if not isinstance(start, dt.datetime) or start.tzinfo is None:
        raise InvalidSchedule(f"start must be a timezone-aware datetime, not {start!r}", field="start")
    recurrence = Recurrence.parse(expression, tz)
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= PREVIEW_MAX_COUNT:
        raise InvalidSchedule(
            f"count must be an integer from 1 to {PREVIEW_MAX_COUNT}, not {count!r}", field="count"
        )
    recurrence._clock = clock
    deadline = clock() + PREVIEW_TIME_BUDGET_SECONDS
    occurrences: list[dt.datetime] = []
    try:
        for occurrence in recurrence.walk(start, deadline):
            occurrences.append(occurrence)
            if len(occurrences) >= count:
                break
            if clock() > deadline:
                raise OutOfTime("preview")
    except OutOfTime:
        raise InvalidSchedule(
            f"gave up after {PREVIEW_TIME_BUDGET_SECONDS:g}s with {len(occurrences)} of {count} "
            f"occurrences of {expression!r}; ask for fewer and page with start",
            field="count",
        ) from None
    return occurrences
