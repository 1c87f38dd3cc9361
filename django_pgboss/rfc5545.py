"""RFC 5545 text, pure: the DTSTART, RRULE, RDATE and EXDATE lines of a rule read and checked.

django_pgboss.recurrence walks what this module reads (and decides whether an expression is a rule
at all); this module only turns a rule's text into a checked :class:`Rule`, refusing a part or a
value dateutil would ignore or misread, with an InvalidSchedule naming it. It reads no settings
and touches no database.
"""

from __future__ import annotations

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
# RFC 7529's RSCALE and SKIP are refused too: dateutil cannot honour them, and a rule evaluated
# without them runs on other days than its author meant.
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
)
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
        if name != "UNTIL":
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
            if params.get("VALUE", "").upper() == "PERIOD":
                raise invalid_rule(f"rrule {name} periods are not supported; list dates or date times")
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
        for item in filter(None, value.split(",")):
            moment = _parse_moment(item, params, name)
            if moment.is_date != is_date:
                example = (
                    f"a date such as {item[:8]}" if is_date else f"a date time such as {item[:8]}T090000"
                )
                raise invalid_rule(
                    f'rrule {name} "{item}" must have the same value type as DTSTART: {example}'
                )
            (rdates if name == "RDATE" else exdates).append(moment)
    return Rule(evaluated, parts, dtstart, until, tuple(rdates), tuple(exdates))
