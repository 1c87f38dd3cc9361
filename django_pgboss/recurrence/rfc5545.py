"""RFC 5545 text, pure: the DTSTART, RRULE, RDATE and EXDATE lines of a rule read and checked.

recurrence/expressions.py walks what this module reads (and decides whether an expression is a rule
at all); this module only turns a rule's text into a checked :class:`Rule`, refusing a part or a
value dateutil would ignore or misread, with an InvalidSchedule naming it. It reads no settings
and touches no database.
"""

from __future__ import annotations

import calendar
import datetime as dt
import re
from dataclasses import dataclass
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django_pgboss.exceptions import InvalidSchedule

_PROPERTY = re.compile(r"^([a-z][a-z0-9-]*)([;:])", re.IGNORECASE)
_PROPERTIES = ("DTSTART", "RRULE", "RDATE", "EXDATE")
_DATE = re.compile(r"^(\d{4})(\d{2})(\d{2})$")
_DATE_TIME = re.compile(r"^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})(Z?)$", re.IGNORECASE)
EPOCH = dt.datetime(1970, 1, 1)

# The recur rule parts of RFC 5545 3.3.10 that dateutil evaluates. A part outside them is refused
# rather than ignored: "BYHOURS=9" read as no BYHOUR at all is a job at midnight without a word.
# RFC 7529's RSCALE and SKIP are read too, and what dateutil cannot honour of them is refused (see
# _check_calendar): RSCALE=GREGORIAN is the calendar dateutil evaluates, SKIP=OMIT what it does with
# a day a month lacks; moving such a day (BACKWARD, FORWARD) it cannot do.
_PARTS = (
    "FREQ",
    "UNTIL",
    "COUNT",
    "INTERVAL",
    "BYSECOND",
    "BYMINUTE",
    "BYHOUR",
    "BYDAY",
    "BYMONTHDAY",
    "BYYEARDAY",
    "BYWEEKNO",
    "BYMONTH",
    "BYSETPOS",
    "WKST",
    "RSCALE",
    "SKIP",
)
# Parts read here and not handed to dateutil, which knows none of them.
_NOT_EVALUATED = ("UNTIL", "RSCALE", "SKIP")
FREQUENCIES = ("YEARLY", "MONTHLY", "WEEKLY", "DAILY", "HOURLY", "MINUTELY", "SECONDLY")
WEEKDAYS = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")
# Each numeric list part's allowed values: (lowest, highest, whether negatives count from the end).
_RANGES = {
    "BYSECOND": (0, 59, False),
    "BYMINUTE": (0, 59, False),
    "BYHOUR": (0, 23, False),
    "BYMONTHDAY": (1, 31, True),
    "BYYEARDAY": (1, 366, True),
    "BYWEEKNO": (1, 53, True),
    "BYMONTH": (1, 12, False),
    "BYSETPOS": (1, 366, True),
}
# The most days each month can have (February's in a leap year).
_MONTH_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_BYDAY = re.compile(r"^([+-]?\d{1,2})?(MO|TU|WE|TH|FR|SA|SU)$")


@dataclass(frozen=True)
class Moment:
    """A DTSTART, UNTIL, RDATE or EXDATE value: wall time, and the zone it names (None: floating)."""

    wall: dt.datetime
    zone: ZoneInfo | None
    is_date: bool


def invalid_rule(message: str) -> InvalidSchedule:
    """The error for a rule that cannot be read, reported under the expression's field."""
    return InvalidSchedule(message, field="cron")


def _parse_moment(text: str, params: dict[str, str], what: str) -> Moment:
    zone = None
    if "TZID" in params:
        try:
            zone = ZoneInfo(params["TZID"])
        except (ZoneInfoNotFoundError, ValueError):
            raise invalid_rule(f"rrule {what} names an unknown time zone: {params['TZID']!r}") from None
    value = text.strip()
    match = _DATE.match(value)
    try:
        if match:
            year, month, day = (int(group) for group in match.groups())
            return Moment(dt.datetime(year, month, day), zone, True)
        match = _DATE_TIME.match(value)
        if match:
            year, month, day, hour, minute, second = (int(group) for group in match.groups()[:6])
            wall = dt.datetime(year, month, day, hour, minute, second)
            if match.group(7):
                if zone is not None:
                    raise invalid_rule(f"rrule {what} {value!r} has both a TZID and a trailing Z")
                zone = ZoneInfo("UTC")
            return Moment(wall, zone, False)
    except ValueError:
        pass
    raise invalid_rule(f"rrule {what} {value!r} is not a date (YYYYMMDD) or a date time (YYYYMMDDTHHMMSS)")


def _parse_params(text: str) -> dict[str, str]:
    params = {}
    for param in filter(None, text.split(";")):
        name, _, value = param.partition("=")
        params[name.upper()] = value
    return params


def _check_parts(rule: str) -> tuple[dict[str, str], str]:
    """The rule's parts by name (X- parts dropped) and the text dateutil evaluates (no UNTIL:
    that one is converted to the rule's wall time by the caller)."""
    parts: dict[str, str] = {}
    kept = []
    for part in rule.split(";"):
        if not part:
            continue
        name, _, value = part.partition("=")
        name = name.strip().upper()
        value = value.strip().upper()
        if not value:
            raise invalid_rule(f'rrule part "{part}" has no value')
        if name.startswith("X-"):
            continue  # RFC 5545's extension namespace: nothing to evaluate
        if name not in _PARTS:
            raise invalid_rule(f'unsupported part "{part}" in rrule expression')
        if name in parts:
            raise invalid_rule(f"rrule expression has more than one {name} part")
        parts[name] = value
        if name not in _NOT_EVALUATED:
            kept.append(f"{name}={value}")
    if "FREQ" not in parts:
        raise invalid_rule("rrule expression has no FREQ part")
    if parts["FREQ"] not in FREQUENCIES:
        raise invalid_rule(f'unsupported value in rrule part "FREQ={parts["FREQ"]}"')
    _check_values(parts)
    return parts, ";".join(kept)


def _integer(name: str, text: str) -> int:
    if not re.fullmatch(r"[+-]?\d+", text):
        raise invalid_rule(f'unsupported value in rrule part "{name}={text}"')
    return int(text)


def _check_values(parts: dict[str, str]) -> None:
    # dateutil refuses some out-of-range values (BYHOUR=25) and evaluates others (BYMONTHDAY=32 as
    # never), so every range is judged here, where the message can name the part.
    freq = parts["FREQ"]
    for name in ("COUNT", "INTERVAL"):
        if name in parts and _integer(name, parts[name]) < 1:
            raise invalid_rule(
                f'unsupported value in rrule part "{name}={parts[name]}": it must be at least 1'
            )
    for name, (low, high, negative) in _RANGES.items():
        for item in parts.get(name, "").split(",") if name in parts else ():
            number = _integer(name, item)
            if not (low <= number <= high or (negative and -high <= number <= -low)):
                raise invalid_rule(f'unsupported value in rrule part "{name}={parts[name]}"')
    if "WKST" in parts and parts["WKST"] not in WEEKDAYS:
        raise invalid_rule(f'unsupported value in rrule part "WKST={parts["WKST"]}"')
    for item in parts.get("BYDAY", "").split(",") if "BYDAY" in parts else ():
        match = _BYDAY.match(item)
        if not match or (match.group(1) and not 1 <= abs(int(match.group(1))) <= 53):
            raise invalid_rule(f'unsupported value in rrule part "BYDAY={parts["BYDAY"]}"')
        # RFC 5545 3.3.10's combinations: an ordinal weekday only within a month or a year.
        if match.group(1) and freq not in ("MONTHLY", "YEARLY"):
            raise invalid_rule("rrule BYDAY with an ordinal (such as -1FR) needs FREQ=MONTHLY or FREQ=YEARLY")
    if "BYMONTHDAY" in parts:
        # A day no month named can hold (30 February) never comes, and dateutil would search
        # every year to 9999 for it, which no time budget can interrupt: refused here instead.
        months = [int(m) for m in parts["BYMONTH"].split(",")] if "BYMONTH" in parts else range(1, 13)
        days = [abs(int(d)) for d in parts["BYMONTHDAY"].split(",")]
        if not any(day <= _MONTH_DAYS[month - 1] for month in months for day in days):
            month_text = f' in "BYMONTH={parts["BYMONTH"]}"' if "BYMONTH" in parts else ""
            raise invalid_rule(f'rrule "BYMONTHDAY={parts["BYMONTHDAY"]}" never falls{month_text}')
    if "BYMONTHDAY" in parts and freq == "WEEKLY":
        raise invalid_rule("rrule BYMONTHDAY cannot be used with FREQ=WEEKLY")
    if "BYYEARDAY" in parts and freq in ("DAILY", "WEEKLY", "MONTHLY"):
        raise invalid_rule(f"rrule BYYEARDAY cannot be used with FREQ={freq}")
    if "BYWEEKNO" in parts and freq != "YEARLY":
        raise invalid_rule("rrule BYWEEKNO needs FREQ=YEARLY")
    _check_ordinals(parts)
    _check_setpos(parts)


def _values(parts: dict[str, str], name: str) -> list[str]:
    return parts[name].split(",") if name in parts else []


def _check_ordinals(parts: dict[str, str]) -> None:
    """Refuse ordinal weekdays that no month holds (BYDAY=6MO in a month): dateutil would search
    every period to the year 9999 for them."""
    within_month = parts["FREQ"] == "MONTHLY" or (parts["FREQ"] == "YEARLY" and "BYMONTH" in parts)
    days = [_BYDAY.match(item) for item in _values(parts, "BYDAY")]
    ordinals = [int(match.group(1)) for match in days if match and match.group(1)]
    if within_month and days and len(ordinals) == len(days) and all(abs(n) > 5 for n in ordinals):
        raise invalid_rule(
            f'rrule "BYDAY={parts["BYDAY"]}" never falls: a month holds at most 5 of each weekday'
        )


def _set_size(parts: dict[str, str]) -> int:
    """The most occurrences one FREQ period of the rule can hold, the set BYSETPOS picks from (an
    upper bound: every BY part that expands the period counts its values, and where several
    expand the same days, the period holds no more than the smallest of them)."""
    freq = parts["FREQ"]
    months = len(_values(parts, "BYMONTH"))
    plain = [item for item in _values(parts, "BYDAY") if not re.match(r"^[+-]?\d", item)]
    ordinal = len(_values(parts, "BYDAY")) - len(plain)
    candidates = []
    if freq == "YEARLY":
        if "BYYEARDAY" in parts:
            candidates.append(len(_values(parts, "BYYEARDAY")))
        if "BYMONTHDAY" in parts:
            candidates.append((months or 12) * len(_values(parts, "BYMONTHDAY")))
        if "BYWEEKNO" in parts:
            candidates.append(7 * len(_values(parts, "BYWEEKNO")))
        if "BYDAY" in parts:
            candidates.append(len(plain) * (5 * months if months else 53) + ordinal * (months or 1))
        if not candidates:
            candidates.append(months or 1)
        days = min(min(candidates), 366)
    elif freq == "MONTHLY":
        if "BYMONTHDAY" in parts:
            candidates.append(len(_values(parts, "BYMONTHDAY")))
        if "BYDAY" in parts:
            candidates.append(5 * len(plain) + ordinal)
        days = min(min(candidates or [1]), 31)
    elif freq == "WEEKLY":
        days = min(len(_values(parts, "BYDAY")) or 1, 7)
    else:
        days = 1
    level = FREQUENCIES.index(freq)
    times = 1
    # Each time part expands the periods coarser than its own unit (BYHOUR a day; in an hourly
    # rule it only filters).
    for name, unit in (("BYHOUR", 4), ("BYMINUTE", 5), ("BYSECOND", 6)):
        if level < unit:
            times *= len(_values(parts, name)) or 1
    return days * times


def _check_setpos(parts: dict[str, str]) -> None:
    """Refuse a BYSETPOS that asks for more occurrences than a period of the rule can hold: it
    never matches, and dateutil would search every period to the year 9999 for it."""
    if "BYSETPOS" not in parts:
        return
    size = _set_size(parts)
    if all(abs(int(item)) > size for item in _values(parts, "BYSETPOS")):
        raise invalid_rule(
            f'rrule "BYSETPOS={parts["BYSETPOS"]}" never matches: one {parts["FREQ"]} period of this '
            f"rule holds at most {size} occurrence(s) to pick from"
        )


def _fits(year: int, month: int, day: int) -> bool:
    length = calendar.monthrange(year, month)[1]
    return 1 <= day <= length or -length <= day <= -1


def _month_days(parts: dict[str, str], start: dt.datetime) -> list[int] | None:
    """The days of the month a monthly or yearly rule names (DTSTART's when it names none), or
    None when a weekday, year day or week number decides its days instead."""
    if any(name in parts for name in ("BYDAY", "BYYEARDAY", "BYWEEKNO")):
        return None
    return [int(day) for day in _values(parts, "BYMONTHDAY")] or [start.day]


def _check_phase(parts: dict[str, str], start: dt.datetime, anchored: bool) -> None:
    """Refuse an INTERVAL whose periods, counted from DTSTART, never land where the rule's days
    are: every 4 years from 1970 never holds 29 February, every 12 months from January never a
    BYMONTH=2. The Gregorian calendar repeats every 400 years (4,800 months), so walking one such
    cycle of the rule's periods is a proof, and costs at most 4,800 steps."""
    freq = parts["FREQ"]
    if freq not in ("YEARLY", "MONTHLY"):
        return
    days = _month_days(parts, start)
    if days is None:
        return
    interval = int(parts.get("INTERVAL", "1"))
    named = [int(month) for month in _values(parts, "BYMONTH")]
    if freq == "YEARLY":
        months = named or (list(range(1, 13)) if "BYMONTHDAY" in parts else [start.month])
        found = any(
            _fits(start.year + step * interval, month, day)
            for step in range(400)
            for month in months
            for day in days
        )
    else:
        first = start.year * 12 + start.month - 1
        found = False
        for step in range(4800):
            year, month = divmod(first + step * interval, 12)
            if (not named or month + 1 in named) and any(_fits(year, month + 1, day) for day in days):
                found = True
                break
    if not found:
        origin = f"DTSTART {start:%Y-%m-%d}" if anchored else "the rule's anchor (1 January 1970)"
        what = f'"BYMONTHDAY={parts["BYMONTHDAY"]}"' if "BYMONTHDAY" in parts else f"day {start.day}"
        if named:
            what += f' in "BYMONTH={parts["BYMONTH"]}"'
        raise invalid_rule(
            f'rrule "INTERVAL={interval}" counted from {origin} never lands on a '
            f"{'year' if freq == 'YEARLY' else 'month'} that holds {what}, so the rule never matches"
        )


def _check_calendar(parts: dict[str, str], start: dt.datetime) -> None:
    """RFC 7529's RSCALE and SKIP, as far as dateutil can honour them with pg-boss's meaning."""
    if "RSCALE" in parts and parts["RSCALE"] != "GREGORIAN":
        raise invalid_rule(
            f'rrule "RSCALE={parts["RSCALE"]}" is not supported: dateutil evaluates the Gregorian '
            "calendar only (RSCALE=GREGORIAN)"
        )
    if "SKIP" not in parts:
        return
    if "RSCALE" not in parts:
        raise invalid_rule("rrule SKIP needs an RSCALE part beside it (RFC 7529)")
    skip = parts["SKIP"]
    if skip not in ("OMIT", "BACKWARD", "FORWARD"):
        raise invalid_rule(f'unsupported value in rrule part "SKIP={skip}"')
    if skip == "OMIT":
        return  # what dateutil does with a day a month lacks: that month has no occurrence
    days = _values(parts, "BYMONTHDAY")
    if not days and parts["FREQ"] in ("YEARLY", "MONTHLY") and _month_days(parts, start) is not None:
        days = [str(start.day)]
    if any(abs(int(day)) >= 29 for day in days) or any(
        abs(int(day)) >= 366 for day in _values(parts, "BYYEARDAY")
    ):
        raise invalid_rule(
            f'rrule "SKIP={skip}" is not supported for a day some months or years lack: dateutil '
            "cannot move it to another day; use SKIP=OMIT (no occurrence that month) or a negative "
            "BYMONTHDAY (BYMONTHDAY=-1 is a month's last day)"
        )


def _period_start(item: str, params: dict[str, str]) -> Moment:
    """An RDATE period's start, which is the occurrence (RFC 5545 3.3.9; pg-boss reads it so):
    its end must be a date time after it. pg-boss cannot read a period that ends in a duration
    (PT1H), so neither form is accepted that the other side of a shared schema would refuse."""
    start_text, slash, end_text = item.partition("/")
    if not slash:
        raise invalid_rule(f'rrule RDATE period "{item}" must be a start and an end: START/END')
    if end_text.strip().upper().startswith(("P", "+P", "-P")):
        raise invalid_rule(
            f'rrule RDATE period "{item}" ends with a duration; write its end as a date time '
            "(pg-boss reads no duration there)"
        )
    start = _parse_moment(start_text, params, "RDATE period")
    end = _parse_moment(end_text, params, "RDATE period")
    if start.is_date or end.is_date:
        raise invalid_rule(f'rrule RDATE period "{item}" must be made of date times, not dates')
    if (end.zone is None) != (start.zone is None) or end.wall <= start.wall:
        raise invalid_rule(f'rrule RDATE period "{item}" must end after it starts, in the same form')
    return start


@dataclass(frozen=True)
class Rule:
    """A parsed rule: what dateutil evaluates, in wall time of ``zone``."""

    text: str
    parts: dict[str, str]
    dtstart: Moment | None
    until: Moment | None
    rdates: tuple[Moment, ...]
    exdates: tuple[Moment, ...]


def parse_rule(expression: str) -> Rule:
    # A line break followed by a space or tab is a fold (RFC 5545 3.1), as long EXDATE lists arrive.
    text = re.sub(r"\r?\n[ \t]", "", expression)
    dtstart = None
    rule = None
    dates: list[tuple[str, str, dict[str, str]]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        match = _PROPERTY.match(line)
        if match is None:
            name, params, value = "RRULE", {}, line
        else:
            name = match.group(1).upper()
            head, _, value = line.partition(":")
            params = _parse_params(head[len(match.group(1)) :])
        if name in ("BEGIN", "END"):
            raise invalid_rule(
                "rrule expression should be the DTSTART, RRULE, RDATE and EXDATE lines of a calendar "
                "entry, without the BEGIN and END lines around them"
            )
        if name not in _PROPERTIES:
            raise invalid_rule(
                f'unsupported property "{name}" in rrule expression; supported: {", ".join(_PROPERTIES)}'
            )
        if name == "DTSTART":
            if dtstart is not None:
                raise invalid_rule("rrule expression has more than one DTSTART")
            dtstart = _parse_moment(value, params, "DTSTART")
        elif name == "RRULE":
            if rule is not None:
                raise invalid_rule("rrule expression has more than one RRULE")
            rule = value
        else:
            if params.get("VALUE", "").upper() == "PERIOD" and name == "EXDATE":
                raise invalid_rule("rrule EXDATE takes dates or date times, not periods (RFC 5545 3.8.5.1)")
            dates.append((name, value, params))
    if rule is None:
        raise invalid_rule("rrule expression has no RRULE to recur on")
    parts, evaluated = _check_parts(rule)
    if dtstart is None and "COUNT" in parts:
        raise invalid_rule(
            "rrule expression uses COUNT, which counts occurrences from DTSTART, so it needs a DTSTART of its own"
        )
    if "COUNT" in parts and "UNTIL" in parts:
        raise invalid_rule("rrule expression has both COUNT and UNTIL; RFC 5545 allows one or the other")
    is_date = dtstart.is_date if dtstart is not None else False
    start = dtstart.wall if dtstart is not None else EPOCH
    _check_calendar(parts, start)
    _check_phase(parts, start, anchored=dtstart is not None)
    until = None
    if "UNTIL" in parts:
        until = _parse_moment(parts["UNTIL"], {}, "UNTIL")
        if until.is_date != is_date:
            raise invalid_rule(
                "rrule UNTIL must have the same value type as DTSTART (a date, or a date time)"
            )
    rdates: list[Moment] = []
    exdates: list[Moment] = []
    for name, value, params in dates:
        periods = params.get("VALUE", "").upper() == "PERIOD"
        for item in filter(None, value.split(",")):
            moment = _period_start(item, params) if periods else _parse_moment(item, params, name)
            if moment.is_date != is_date:
                example = (
                    f"a date such as {item[:8]}" if is_date else f"a date time such as {item[:8]}T090000"
                )
                raise invalid_rule(
                    f'rrule {name} "{item}" must have the same value type as DTSTART: {example}'
                )
            (rdates if name == "RDATE" else exdates).append(moment)
    return Rule(evaluated, parts, dtstart, until, tuple(rdates), tuple(exdates))
