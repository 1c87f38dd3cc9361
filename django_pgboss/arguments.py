"""The argument layer: every check of what callers pass in, and the defaults (pg-boss's attorney).

Each public call validates its arguments here before any SQL runs, and each refusal is a
:mod:`django_pgboss.exceptions` error (a ValueError or TypeError subclass) whose message names the
argument, so the caller's transaction stays usable. The bounds are the storage's own: integer
options are int4 columns, limits are bigint, text that an index holds must fit a btree entry, and
every moment must leave each derived column (keep_until) inside what Python's datetime can read.

Values come out validated and in the shape the statements take; their names stay snake_case until
:mod:`django_pgboss.wire` encodes them.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import uuid
import zoneinfo
from collections.abc import Mapping, Sequence
from typing import Any

from django_pgboss.constants import QUEUE_NAME_MAX_LENGTH, QUEUE_NAME_PATTERN, QueuePolicy
from django_pgboss.exceptions import (
    InvalidJobReference,
    InvalidOption,
    InvalidPolicy,
    InvalidQueueName,
    InvalidStartAfter,
    InvalidTimestamp,
)
from django_pgboss.records import Instance, Job
from django_pgboss.wire import EDIT_OPTIONS, QUEUE_OPTIONS, SEND_OPTIONS, JsonText, to_json

#: Largest value of PostgreSQL's integer (int4), the type of every integer option's column.
INT4_MAX = 2**31 - 1
INT4_MIN = -(2**31)
#: Largest bigint, the type a LIMIT takes.
INT8_MAX = 2**63 - 1
#: Longest expiry pg-boss allows (24 hours, inclusive).
MAX_EXPIRE_IN_SECONDS = 24 * 60 * 60
#: Longest text (UTF-8 bytes) a value held by an index may have: singleton keys, group ids and
#: tiers, event names and schedule keys. A btree entry holds at most 2,704 bytes (a third of an
#: 8 kB page) for all its columns together; the widest entry (job_i10: name, singleton_key,
#: state, created_on, id and start_after) with a 255-byte queue name and a 1,024-byte key stays
#: near 1,350, so every index can always store the row and no fetch can trip on it.
MAX_KEY_BYTES = 1024
#: The earliest and latest start_after accepted. Python's datetime stops at year 9999; keep_until
#: is start_after plus a retention of up to 2**31 - 1 seconds (68 years), so a start before 9900
#: always leaves every derived column readable. Moments before 1900 are refused as the mistakes
#: they are (a job due then is due now).
EARLIEST_START_AFTER = dt.datetime(1900, 1, 1, tzinfo=dt.UTC)
LATEST_START_AFTER = dt.datetime(9900, 1, 1, tzinfo=dt.UTC)
#: Longest relative start_after: 100 years, in seconds.
MAX_START_AFTER_SECONDS = 100 * 365 * 24 * 60 * 60


# -- scalars -------------------------------------------------------------------------------------


def integer(
    option: str,
    value: object,
    *,
    minimum: int,
    maximum: int = INT4_MAX,
    nullable: bool = False,
) -> int | None:
    """Return ``value`` if it is an int in [minimum, maximum] (None too when ``nullable``).

    ``maximum`` defaults to the int4 bound of the columns integer options are stored in.
    """
    if value is None and nullable:
        return None
    # bool is an int in Python; True as a retry limit is a mistake, not a 1.
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidOption(f"{option} must be an integer >= {minimum}, not {value!r}")
    if value > maximum:
        raise InvalidOption(f"{option} must be at most {maximum}, not {value}")
    return value


def limit(option: str, value: object, *, maximum: int = INT8_MAX) -> int:
    """A row limit: an int >= 1, at most a bigint (what LIMIT takes)."""
    result = integer(option, value, minimum=1, maximum=maximum)
    assert result is not None
    return result


#: The page of a list read (get_queues(), find_jobs(), ...) when ``limit`` is None, and the largest
#: one asked for: pg-boss 12.38's LIST_LIMIT_DEFAULT and LIST_LIMIT_MAX.
PAGE_LIMIT_DEFAULT = 1000
PAGE_LIMIT_MAX = 100_000


def page_limit(method: str, value: object) -> int:
    """A list read's ``limit``: PAGE_LIMIT_DEFAULT for None, else an int from 1 to PAGE_LIMIT_MAX."""
    if value is None:
        return PAGE_LIMIT_DEFAULT
    return limit(f"{method}: limit", value, maximum=PAGE_LIMIT_MAX)


def page_after(method: str, value: object, *, uuid_cursor: bool = False) -> str | None:
    """A list read's ``after`` that is one value, the previous page's last (a queue name, a key, or
    with ``uuid_cursor`` a job id, given as text, a UUID or the Job itself): None for the first page."""
    if value is None:
        return None
    if uuid_cursor:
        return uuid_text(value.id if isinstance(value, Job) else value, f"{method}: after")
    return text(f"{method}: after", value, allow_empty=False)


def page_after_row(
    method: str, value: object, fields: Sequence[str], uuid_field: str | None = None
) -> tuple[str, ...]:
    """A list read's ``after`` that is the previous page's last record (a DependencyRef, a
    Schedule): the text of its ``fields`` (``uuid_field`` a uuid), or () for the first page."""
    if value is None:
        return ()
    values = [getattr(value, field, None) for field in fields]
    if not all(isinstance(item, str) for item in values):
        raise InvalidOption(
            f"{method}: after must be the last record of the previous page (with text "
            f"{' and '.join(fields)}), not {value!r}"
        )
    return tuple(
        uuid_text(item, f"{method}: after.{field}")
        if field == uuid_field
        else text(f"{method}: after.{field}", item)
        for field, item in zip(fields, values, strict=True)
    )


def number(option: str, value: object, *, minimum: float, unit: str | None = None) -> float:
    """Return ``value`` if it is a finite int or float >= minimum (an interval in seconds); the
    message names ``unit`` when given ("at least 1 second")."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < minimum
    ):
        if unit is not None:
            raise InvalidOption(f"{option} must be at least {minimum:g} {unit}, not {value!r}")
        raise InvalidOption(f"{option} must be a number >= {minimum}, not {value!r}")
    return value


def percentiles(value: object) -> list[float]:
    """A non-empty list of percents from 1 to 100 (get_queue_stats()), each once, in the order
    first asked for: pg-boss refuses the same values."""
    items = list(value) if isinstance(value, (list, tuple)) else None
    if not items or any(isinstance(p, bool) or not isinstance(p, (int, float)) for p in items):
        raise InvalidOption(
            f"percentiles must be a non-empty list of numbers, such as [50, 95], not {value!r}"
        )
    if any(not 1 <= p <= 100 for p in items):
        raise InvalidOption(f"percentiles must be percents from 1 to 100, not {value!r}")
    return list(dict.fromkeys(items))


def boolean(option: str, value: object) -> bool:
    """Return ``value`` if it is True or False."""
    if not isinstance(value, bool):
        raise InvalidOption(f"{option} must be True or False, not {value!r}")
    return value


def text(
    option: str,
    value: object,
    *,
    max_bytes: int | None = MAX_KEY_BYTES,
    allow_empty: bool = True,
    error: type[Exception] = InvalidOption,
) -> str:
    """Return ``value`` if it is a str PostgreSQL can store (no NUL, no lone surrogate) and, with
    ``max_bytes``, no longer than that in UTF-8 (see MAX_KEY_BYTES)."""
    if not isinstance(value, str) or (not value and not allow_empty):
        kind = "a non-empty string" if not allow_empty else "a string"
        raise error(f"{option} must be {kind}, not {value!r}")
    if "\x00" in value:
        raise error(f"{option} cannot contain a NUL character, which PostgreSQL's text cannot hold")
    if value.isascii():
        size = len(value)
    else:
        try:
            size = len(value.encode("utf-8"))
        except UnicodeEncodeError:
            raise error(f"{option} is not valid Unicode: it contains a lone surrogate") from None
    if max_bytes is not None and size > max_bytes:
        raise error(f"{option} {value[:40]!r}... is longer than {max_bytes} bytes in UTF-8 ({size})")
    return value


def queue_name(name: object, option: str = "name") -> str:
    """Return ``name`` if it follows pg-boss's rule for queue names, else raise InvalidQueueName."""
    if not isinstance(name, str) or not name:
        raise InvalidQueueName(f"{option} must be a non-empty string, not {name!r}")
    if len(name) > QUEUE_NAME_MAX_LENGTH:
        raise InvalidQueueName(f"{option} {name[:40]!r}... is longer than {QUEUE_NAME_MAX_LENGTH} characters")
    if not QUEUE_NAME_PATTERN.match(name):
        raise InvalidQueueName(
            f"{option} {name!r} can only contain letters, digits, underscores, hyphens, periods or forward slashes"
        )
    return name


def event_name(event: object) -> str:
    """An event name: a non-empty string an index can hold (see MAX_KEY_BYTES)."""
    return text("event", event, allow_empty=False)


def schedule_key(key: object) -> str:
    """A schedule's key: "" or a queue-name-like word, at most MAX_KEY_BYTES long."""
    if key == "" or key is None:
        return ""
    if not isinstance(key, str) or not QUEUE_NAME_PATTERN.match(key):
        raise InvalidOption(
            f"key {key!r} can only contain letters, digits, underscores, hyphens, periods or slashes"
        )
    return text("key", key)


def uuid_text(value: Any, option: str) -> str:
    """A uuid (or its text) as PostgreSQL's canonical text, or InvalidOption."""
    try:
        return str(value if isinstance(value, uuid.UUID) else uuid.UUID(str(value)))
    except (ValueError, TypeError, AttributeError):
        raise InvalidOption(f"{option} must be a uuid, not {value!r}") from None


# -- moments -------------------------------------------------------------------------------------


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


# -- queue and job options -----------------------------------------------------------------------


def shared_options(options: Mapping[str, Any]) -> None:
    """Check the options queues and jobs share (retry, expiry, retention, heartbeat, dead letter)."""
    if "retry_limit" in options:
        integer("retry_limit", options["retry_limit"], minimum=0)
    if "retry_delay" in options:
        integer("retry_delay", options["retry_delay"], minimum=0)
    if "retry_backoff" in options:
        boolean("retry_backoff", options["retry_backoff"])
    if options.get("retry_delay_max") is not None:
        integer("retry_delay_max", options["retry_delay_max"], minimum=0)
        if options.get("retry_backoff") is not True:
            raise InvalidOption("retry_delay_max can only be set together with retry_backoff=True")
    if "expire_in_seconds" in options:
        integer("expire_in_seconds", options["expire_in_seconds"], minimum=1, maximum=MAX_EXPIRE_IN_SECONDS)
    if "retention_seconds" in options:
        integer("retention_seconds", options["retention_seconds"], minimum=1)
    if "delete_after_seconds" in options:
        integer("delete_after_seconds", options["delete_after_seconds"], minimum=0)
    if "heartbeat_seconds" in options:
        integer("heartbeat_seconds", options["heartbeat_seconds"], minimum=10, nullable=True)
    if options.get("dead_letter") is not None:
        queue_name(options["dead_letter"], "dead_letter")


def queue_options(name: str, options: Mapping[str, Any], *, creating: bool) -> None:
    """Check create_queue / update_queue options; ``creating`` allows policy and partition."""
    unknown = sorted(set(options) - QUEUE_OPTIONS)
    if unknown:
        raise InvalidOption(f"unknown queue option(s): {', '.join(unknown)}")
    if not creating:
        if not options:
            raise InvalidOption("update_queue needs at least one option to change")
        for fixed in ("policy", "partition"):
            if fixed in options:
                raise InvalidOption(f"a queue's {fixed} cannot be changed after it is created")
    if "policy" in options and options["policy"] not in QueuePolicy.values:
        raise InvalidPolicy(
            f"{options['policy']!r} is not a queue policy; use one of {', '.join(QueuePolicy.values)}"
        )
    if "partition" in options:
        boolean("partition", options["partition"])
    if "notify" in options:
        boolean("notify", options["notify"])
    if "warning_queue_size" in options:
        integer("warning_queue_size", options["warning_queue_size"], minimum=0, nullable=True)
    shared_options(options)
    if options.get("dead_letter") == name:
        raise InvalidOption(f"queue {name!r} cannot be its own dead_letter")


def job_payload(data: Any, options: Mapping[str, Any], where: str = "send()") -> dict[str, Any]:
    """Validate a job's data and send() options; return its payload with snake_case keys.

    ``data`` is encoded once here (JsonText); ``start_after`` becomes the text the insert reads;
    options not given are left out, so the job takes its queue's settings.
    """
    encoded = JsonText(to_json(data, "job data")) if data is not None else None
    if not options:
        # The common case, a job with nothing but data: every setting comes from the queue.
        return {"data": encoded}
    unknown = sorted(set(options) - SEND_OPTIONS)
    if unknown:
        raise InvalidOption(f"{where}: unknown option(s) {', '.join(unknown)}")
    shared_options(options)
    job: dict[str, Any] = {key: options[key] for key in options if key not in _SEND_ONLY}
    job["data"] = encoded
    if options.get("id") is not None:
        job["id"] = uuid_text(options["id"], "id")
    priority = options.get("priority")
    if priority is not None:
        if (
            isinstance(priority, bool)
            or not isinstance(priority, int)
            or not INT4_MIN <= priority <= INT4_MAX
        ):
            raise InvalidOption(f"priority must be an integer, not {priority!r}")
        job["priority"] = priority
    job["start_after"] = start_after(options.get("start_after"))
    key = options.get("singleton_key")
    if key is not None:
        text("singleton_key", key)
    job["singleton_key"] = key
    seconds = options.get("singleton_seconds")
    if seconds is not None:
        if isinstance(seconds, bool) or not isinstance(seconds, int) or seconds < 1:
            raise InvalidOption(f"singleton_seconds must be an integer >= 1, not {seconds!r}")
        integer("singleton_seconds", seconds, minimum=1)
        job["singleton_seconds"] = seconds
        job["singleton_offset"] = 0
    elif options.get("singleton_next_slot"):
        raise InvalidOption("singleton_next_slot needs singleton_seconds")
    for option in ("group_id", "group_tier"):
        value = options.get(option)
        if value is not None:
            text(option, value, allow_empty=False)
        job[option] = value
    if job["group_tier"] is not None and job["group_id"] is None:
        raise InvalidOption("group_tier needs group_id")
    return job


# The send options job_payload() checks one by one (the rest are shared_options()'s).
_SEND_ONLY = frozenset(
    {"id", "priority", "start_after", "singleton_key", "singleton_seconds", "singleton_next_slot"}
    | {"group_id", "group_tier"}
)


#: The edits None may be given to: it clears the job's own setting.
CLEARABLE_EDITS = frozenset({"retry_delay_max", "dead_letter", "heartbeat_seconds", "group_id", "group_tier"})
#: How update() and upsert() pick among several waiting jobs of one key.
EDIT_MATCHES = ("newest", "oldest", "all")


def edit_options(verb: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """Check update()/upsert() options; return them with start_after as the text SQL reads.

    Unknown options, None where it clears nothing, and any value send() would refuse raise an
    InvalidOption naming the option. group_id=None clears the group, its tier included. Unlike
    send(), start_after=0 is kept: an edit may pull a deferred job forward to now.
    """
    unknown = sorted(set(options) - EDIT_OPTIONS)
    if unknown:
        raise InvalidOption(f"{verb}: unknown option(s) {', '.join(unknown)}")
    for option, value in options.items():
        if value is None and option not in CLEARABLE_EDITS:
            raise InvalidOption(
                f"{verb}: {option} cannot be None (only {', '.join(sorted(CLEARABLE_EDITS))} can be cleared)"
            )
    job_payload(None, options, where=verb)  # send()'s check of each value
    values = dict(options)
    if "start_after" in options:
        values["start_after"] = start_after(options["start_after"])
    if "group_id" in values and values["group_id"] is None:
        values["group_tier"] = None
    return values


def edit_target(verb: str, id: Any, singleton_key: Any, match: Any) -> tuple[str, str]:
    """Which jobs an edit addresses: ("id", canonical id) or ("singleton_key", key); exactly one
    of the two, and ``match`` only with a key."""
    if (id is None) == (singleton_key is None):
        raise InvalidOption(f"{verb} needs exactly one of id or singleton_key")
    if match not in EDIT_MATCHES:
        raise InvalidOption(f"{verb}: match must be one of {', '.join(EDIT_MATCHES)}, not {match!r}")
    if id is not None:
        if match != "newest":
            raise InvalidOption(f"{verb}: match is only for jobs addressed by singleton_key, not by id")
        return "id", uuid_text(id, "id")
    return "singleton_key", text("singleton_key", singleton_key)


def group_limits(
    group_concurrency: int | Mapping[str, Any], option: str = "group_concurrency"
) -> tuple[int, dict[str, int]]:
    """Split group_concurrency (or local_group_concurrency, named by ``option``) into the default
    per-group limit and the per-tier limits."""
    if isinstance(group_concurrency, Mapping):
        unknown = set(group_concurrency) - {"default", "tiers"}
        if unknown or "default" not in group_concurrency:
            raise InvalidOption(f'{option} must be an int or {{"default": n, "tiers": {{...}}}}')
        default = group_concurrency["default"]
        tiers = dict(group_concurrency.get("tiers") or {})
    else:
        default, tiers = group_concurrency, {}
    integer(option, default, minimum=1)
    for tier, tier_limit in tiers.items():
        if not isinstance(tier, str):
            raise InvalidOption(f"{option} tier names must be strings, not {tier!r}")
        text(f"{option} tier name", tier)
        integer(f"{option} tier {tier!r}", tier_limit, minimum=1)
    return default, tiers


def data_filter(value: Any, option: str = "data filter") -> str | None:
    """A JSON containment filter (find_jobs, redrive) as JSON text, or None."""
    return to_json(value, option)


# -- job references --------------------------------------------------------------------------------

#: What the settle methods take: a Job, an id, an {"id", "retry_count"} pair, or a list of one kind.
JobReference = Job | str | uuid.UUID | Mapping[str, Any] | Sequence[Job | str | uuid.UUID | Mapping[str, Any]]


def attempt_references(jobs: Any, verb: str) -> tuple[list[str], list[str] | None]:
    """Split a settle argument into canonical ids and, for Jobs and pairs, their attempt fence.

    Returns (ids, None) for bare ids and (ids, ["id:retry_count", ...]) for jobs. The id in a pair
    is canonicalised (lower case, hyphenated) because the fence compares it with id::text, which
    PostgreSQL always renders that way: an id kept in another spelling would otherwise pass the
    lookup and silently miss the fence.
    """
    items = list(jobs) if isinstance(jobs, list | tuple) else [jobs]
    if not items or any(item is None for item in items):
        raise InvalidJobReference(f"{verb}() needs a Job, an id, or a list of them")
    fenced = [isinstance(item, Job | Mapping) for item in items]
    if any(fenced) and not all(fenced):
        raise InvalidJobReference(f"{verb}() takes either ids or jobs, not a mix of both")
    ids: list[str] = []
    attempts: list[str] = []
    for item in items:
        canonical, retry_count = job_attempt(item, verb)
        ids.append(canonical)
        if retry_count is not None:
            attempts.append(f"{canonical}:{retry_count}")
    return ids, (attempts if all(fenced) else None)


# How PostgreSQL renders a uuid as text; an id already spelled so needs no parsing.
_CANONICAL_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def job_attempt(item: Any, verb: str) -> tuple[str, int | None]:
    """One settle reference as (canonical id, retry_count), retry_count None for a bare id."""
    if isinstance(item, Job):
        job_id, retry_count = item.id, item.retry_count
    elif isinstance(item, Mapping):
        if "id" not in item or "retry_count" not in item:
            raise InvalidJobReference(
                f"{verb}() needs pairs with both 'id' and 'retry_count', not {dict(item)!r}"
            )
        job_id, retry_count = item["id"], item["retry_count"]
    else:
        job_id, retry_count = item, None
    if isinstance(job_id, str) and _CANONICAL_UUID.fullmatch(job_id):
        canonical = job_id
    else:
        try:
            canonical = str(job_id if isinstance(job_id, uuid.UUID) else uuid.UUID(str(job_id)))
        except ValueError:
            raise InvalidJobReference(f"{verb}(): {job_id!r} is not a job id (a uuid)") from None
    fenced = retry_count is not None or isinstance(item, Job | Mapping)
    if fenced and (
        isinstance(retry_count, bool) or not isinstance(retry_count, int) or not 0 <= retry_count <= INT4_MAX
    ):
        raise InvalidJobReference(f"{verb}(): retry_count must be an integer >= 0, not {retry_count!r}")
    return canonical, retry_count


# -- list reads ----------------------------------------------------------------------------------

#: A list read's page when no limit is given, and the most one may ask for (pg-boss 12.38's).
LIST_LIMIT_DEFAULT = 1000
LIST_LIMIT_MAX = 100_000


def list_limit(method: str, value: object) -> int:
    """A list read's ``limit``: None for LIST_LIMIT_DEFAULT, else an int from 1 to LIST_LIMIT_MAX."""
    if value is None:
        return LIST_LIMIT_DEFAULT
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= LIST_LIMIT_MAX:
        raise InvalidOption(f"{method}: limit must be an integer from 1 to {LIST_LIMIT_MAX}, not {value!r}")
    return value


def instance_after(value: object) -> str | None:
    """get_instances()' ``after``: the previous page's last Instance, or its id (a uuid)."""
    if value is None:
        return None
    if isinstance(value, Instance):
        value = value.id
    if not isinstance(value, str | uuid.UUID) or (isinstance(value, str) and not value):
        raise InvalidOption(f"get_instances: after must be an Instance or its id (a uuid), not {value!r}")
    return uuid_text(value, "get_instances: after")
