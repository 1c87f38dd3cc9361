"""Moments: one ISO 8601 parser for every date argument (``moment()``), and ``start_after()``,
which takes seconds, datetimes, ISO strings, zoned date-times and PostgreSQL intervals, bounded so
that every column derived from it stays readable."""

from __future__ import annotations

import datetime as dt
import math
import re
import zoneinfo

from django_pgboss.exceptions import InvalidOption, InvalidStartAfter, InvalidTimestamp

#: The earliest and latest start_after accepted. Python's datetime stops at year 9999; keep_until
#: is start_after plus a retention of up to 2**31 - 1 seconds (68 years), so a start before 9900
#: always leaves every derived column readable. Moments before 1900 are refused as the mistakes
#: they are (a job due then is due now).
EARLIEST_START_AFTER = dt.datetime(1900, 1, 1, tzinfo=dt.UTC)
LATEST_START_AFTER = dt.datetime(9900, 1, 1, tzinfo=dt.UTC)
#: Longest relative start_after: 100 years, in seconds.
MAX_START_AFTER_SECONDS = 100 * 365 * 24 * 60 * 60


def moment(
    value: object, option: str, *, error: type[InvalidOption] = InvalidTimestamp
) -> dt.datetime | None:
    """A datetime, date or ISO 8601 string as an aware datetime (naive ones are taken as UTC).

    A naive value, or an ISO string without a zone, would be read in the database session's
    TimeZone and so mean different instants to different clients; it is taken as UTC, as Django
    takes naive values when USE_TZ is on.
    """
    if value is None:
        return None
    if isinstance(value, str):
        stripped = value.strip()
        try:
            value = dt.datetime.fromisoformat(
                stripped[:-1] + "+00:00" if stripped.endswith("Z") else stripped
            )
        except ValueError:
            raise error(f"{option} {value!r} is not an ISO 8601 date or datetime") from None
    if isinstance(value, dt.datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)
    if isinstance(value, dt.date):
        return dt.datetime.combine(value, dt.time(), tzinfo=dt.UTC)
    raise error(f"{option} must be a datetime, a date or an ISO 8601 string, not {value!r}")


def start_after(value: object) -> str | None:
    """start_after as the text the insert SQL reads: an absolute timestamp, or an interval from
    job_now() (the database's clock).

    Takes what pg-boss takes: seconds (an int, a float or a timedelta), a datetime or a date, an
    ISO 8601 string (with an offset, or taken as UTC), a date-time followed by a zone name
    ("2027-01-01 08:00 America/New_York", resolved here with zoneinfo), and a PostgreSQL interval
    ("1 hour", "90 minutes", "2 days 3 hours", "1 day 02:30", "P1DT2H"), which the statement adds
    to job_now(), so months and years count as the database's calendar counts them. Bounded so
    every column derived from it stays readable (see LATEST_START_AFTER and
    MAX_START_AFTER_SECONDS); anything else raises InvalidStartAfter naming the value.
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise InvalidStartAfter(f"start_after must be seconds, a datetime or a string, not {value!r}")
    if isinstance(value, dt.timedelta):
        value = value.total_seconds()
    if isinstance(value, int | float):
        _relative_bound(value, value)
        if isinstance(value, int):
            return f"{value} seconds"
        # PostgreSQL's interval input takes no exponent ("1e-07 seconds"), and keeps microseconds.
        return f"{value:.6f} seconds"
    if isinstance(value, str):
        interval = _interval_seconds(value)
        if interval is not None:
            _relative_bound(interval, value)
            return value.strip()
        when = _zoned_moment(value)
        if when is None:
            try:
                when = moment(value, "start_after", error=InvalidStartAfter)
            except InvalidStartAfter:
                raise InvalidStartAfter(
                    f"start_after {value!r} is neither an ISO 8601 date-time, a date-time with a zone "
                    'name, nor an interval such as "90 minutes"'
                ) from None
        return _absolute_bound(when)
    if isinstance(value, dt.datetime | dt.date):
        return _absolute_bound(moment(value, "start_after", error=InvalidStartAfter))
    raise InvalidStartAfter(f"start_after must be seconds, a datetime or a string, not {value!r}")


def _relative_bound(seconds: float, value: object) -> None:
    if not math.isfinite(seconds) or seconds < 0:
        raise InvalidStartAfter(f"start_after must be a finite number of seconds >= 0, not {value!r}")
    if seconds > MAX_START_AFTER_SECONDS:
        raise InvalidStartAfter(
            f"start_after {value!r} is more than {MAX_START_AFTER_SECONDS} seconds (100 years)"
        )


def _absolute_bound(when: dt.datetime | None) -> str:
    assert when is not None
    if not EARLIEST_START_AFTER <= when < LATEST_START_AFTER:
        raise InvalidStartAfter(
            f"start_after {when.isoformat()} is out of range: it must fall in "
            f"[{EARLIEST_START_AFTER.date()}, {LATEST_START_AFTER.date()}) so that the job's "
            "keep_until stays readable"
        )
    return when.isoformat()


#: Seconds in each unit PostgreSQL's interval input knows, for the bound only (the database does
#: the real arithmetic): a month is 30 days and a year 365.25, as PostgreSQL's justify_days and
#: its epoch extraction count them.
_INTERVAL_UNITS = {
    **dict.fromkeys(("microsecond", "microseconds", "us", "usec", "usecs"), 1e-6),
    **dict.fromkeys(("millisecond", "milliseconds", "ms", "msec", "msecs"), 1e-3),
    **dict.fromkeys(("second", "seconds", "sec", "secs", "s"), 1),
    **dict.fromkeys(("minute", "minutes", "min", "mins", "m"), 60),
    **dict.fromkeys(("hour", "hours", "hr", "hrs", "h"), 3600),
    **dict.fromkeys(("day", "days", "d"), 86400),
    **dict.fromkeys(("week", "weeks", "w"), 7 * 86400),
    **dict.fromkeys(("month", "months", "mon", "mons"), 30 * 86400),
    **dict.fromkeys(("year", "years", "yr", "yrs", "y"), 365.25 * 86400),
    **dict.fromkeys(("decade", "decades"), 3652.5 * 86400),
    **dict.fromkeys(("century", "centuries"), 36525 * 86400),
}
_INTERVAL_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]+)")
_INTERVAL_TIME = re.compile(r"(\d+):([0-5]?\d)(?::([0-5]?\d(?:\.\d+)?))?")
_ISO_DURATION = re.compile(
    r"P(?:(\d+)Y)?(?:(\d+)M)?(?:(\d+)W)?(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?"
)
_ISO_DURATION_SECONDS = (365.25 * 86400, 30 * 86400, 7 * 86400, 86400, 3600, 60, 1)


def _interval_seconds(text_value: str) -> float | None:
    """The length of a PostgreSQL interval string in (approximate) seconds, or None when it is not
    one: whole words of "<number> <unit>", an optional "HH:MM[:SS]", a bare number of seconds, or
    an ISO 8601 duration. Signs and "ago" are refused with the rest: a job cannot start in the past."""
    stripped = text_value.strip().lower()
    if not stripped:
        return None
    if re.fullmatch(r"\d+(?:\.\d+)?", stripped):
        return float(stripped)
    # Upper case, as PostgreSQL reads ISO 8601 durations.
    duration = _ISO_DURATION.fullmatch(text_value.strip())
    if duration and stripped != "p" and not stripped.endswith("t"):
        return sum(
            float(part or 0) * unit
            for part, unit in zip(duration.groups(), _ISO_DURATION_SECONDS, strict=True)
        )
    words = stripped.removeprefix("@").strip()
    total = 0.0
    clock = _INTERVAL_TIME.search(words)
    if clock:
        hours, minutes, seconds = clock.groups()
        total += int(hours) * 3600 + int(minutes) * 60 + float(seconds or 0)
        words = (words[: clock.start()] + " " + words[clock.end() :]).strip()
    position, found = 0, bool(clock)
    for part in _INTERVAL_PART.finditer(words):
        if words[position : part.start()].strip() or part.group(2) not in _INTERVAL_UNITS:
            return None
        total += float(part.group(1)) * _INTERVAL_UNITS[part.group(2)]
        position, found = part.end(), True
    if not found or words[position:].strip():
        return None
    return total


def _zoned_moment(text_value: str) -> dt.datetime | None:
    """A date-time followed by a zone name ("2027-01-01 08:00 America/New_York") as an aware
    datetime, or None when the string is not of that form. An unknown zone is an error."""
    head, _, zone = text_value.strip().rpartition(" ")
    if not head or not re.fullmatch(r"[A-Za-z][A-Za-z0-9_+\-]*(?:/[A-Za-z0-9_+\-]+)*", zone):
        return None
    try:
        local = dt.datetime.fromisoformat(head.strip())
    except ValueError:
        return None
    if local.tzinfo is not None:
        return None
    try:
        return local.replace(tzinfo=zoneinfo.ZoneInfo(zone))
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise InvalidStartAfter(
            f"start_after {text_value!r} names a time zone {zone!r} that does not exist"
        ) from None
