"""Scalar arguments: integers against the columns that store them, numbers, booleans, text an
index can hold, and uuids. The other argument modules build on these."""

from __future__ import annotations

import math
import uuid
from typing import Any

from django_pgboss.exceptions import InvalidOption

#: Largest value of PostgreSQL's integer (int4), the type of every integer option's column.
INT4_MAX = 2**31 - 1
INT4_MIN = -(2**31)
#: Largest bigint, the type a LIMIT takes.
INT8_MAX = 2**63 - 1
#: Longest text (UTF-8 bytes) a value held by an index may have: singleton keys, group ids and
#: tiers, event names and schedule keys. A btree entry holds at most 2,704 bytes (a third of an
#: 8 kB page) for all its columns together; the widest entry (job_i10: name, singleton_key,
#: state, created_on, id and start_after) with a 255-byte queue name and a 1,024-byte key stays
#: near 1,350, so every index can always store the row and no fetch can trip on it.
MAX_KEY_BYTES = 1024


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


def uuid_text(value: Any, option: str) -> str:
    """A uuid (or its text) as PostgreSQL's canonical text, or InvalidOption."""
    try:
        return str(value if isinstance(value, uuid.UUID) else uuid.UUID(str(value)))
    except (ValueError, TypeError, AttributeError):
        raise InvalidOption(f"{option} must be a uuid, not {value!r}") from None
