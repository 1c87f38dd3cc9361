"""Validation of queue and job options, and their translation into pg-boss's option names.

pg-boss's SQL reads options as camelCase JSON keys (``create_queue(name, options jsonb)`` and the
``json_to_recordset`` of an insert), so the Python API takes snake_case keyword arguments, checks
them here, and hands pg-boss's spelling to the plans. Every check runs before anything is written
and raises an exception naming the option.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder

from django_pgboss.constants import QUEUE_NAME_MAX_LENGTH, QUEUE_NAME_PATTERN, QueuePolicy
from django_pgboss.exceptions import (
    InvalidOption,
    InvalidPolicy,
    InvalidQueueName,
    InvalidStartAfter,
    JobDataNotSerializable,
)

#: Longest expiry pg-boss allows (24 hours, inclusive).
MAX_EXPIRE_IN_SECONDS = 24 * 60 * 60

#: Python option name -> pg-boss option name, for everything a queue and a job share.
SHARED_OPTIONS = {
    "retry_limit": "retryLimit",
    "retry_delay": "retryDelay",
    "retry_backoff": "retryBackoff",
    "retry_delay_max": "retryDelayMax",
    "expire_in_seconds": "expireInSeconds",
    "retention_seconds": "retentionSeconds",
    "delete_after_seconds": "deleteAfterSeconds",
    "heartbeat_seconds": "heartbeatSeconds",
    "dead_letter": "deadLetter",
}
#: Options only a queue has.
QUEUE_ONLY_OPTIONS = {
    "policy": "policy",
    "partition": "partition",
    "warning_queue_size": "warningQueueSize",
    "notify": "notify",
}
QUEUE_OPTIONS = {**SHARED_OPTIONS, **QUEUE_ONLY_OPTIONS}


def validate_queue_name(name: object, option: str = "name") -> str:
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


def _int(
    option: str, value: object, *, minimum: int, maximum: int | None = None, nullable: bool = False
) -> None:
    if value is None and nullable:
        return
    # bool is an int in Python; True as a retry limit is a mistake, not a 1.
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidOption(f"{option} must be an integer >= {minimum}, not {value!r}")
    if value < minimum:
        raise InvalidOption(f"{option} must be an integer >= {minimum}, not {value}")
    if maximum is not None and value > maximum:
        raise InvalidOption(f"{option} must be at most {maximum}, not {value}")


def _bool(option: str, value: object) -> None:
    if not isinstance(value, bool):
        raise InvalidOption(f"{option} must be True or False, not {value!r}")


def validate_shared_options(options: Mapping[str, Any]) -> None:
    """Check the options queues and jobs share (retry, expiry, retention, heartbeat)."""
    if "retry_limit" in options:
        _int("retry_limit", options["retry_limit"], minimum=0)
    if "retry_delay" in options:
        _int("retry_delay", options["retry_delay"], minimum=0)
    if "retry_backoff" in options:
        _bool("retry_backoff", options["retry_backoff"])
    if options.get("retry_delay_max") is not None:
        _int("retry_delay_max", options["retry_delay_max"], minimum=0)
        if options.get("retry_backoff") is not True:
            raise InvalidOption("retry_delay_max can only be set together with retry_backoff=True")
    if "expire_in_seconds" in options:
        _int("expire_in_seconds", options["expire_in_seconds"], minimum=1, maximum=MAX_EXPIRE_IN_SECONDS)
    if "retention_seconds" in options:
        _int("retention_seconds", options["retention_seconds"], minimum=1)
    if "delete_after_seconds" in options:
        _int("delete_after_seconds", options["delete_after_seconds"], minimum=0)
    if "heartbeat_seconds" in options:
        _int("heartbeat_seconds", options["heartbeat_seconds"], minimum=10, nullable=True)
    if options.get("dead_letter") is not None:
        validate_queue_name(options["dead_letter"], "dead_letter")


def validate_queue_options(name: str, options: Mapping[str, Any], *, creating: bool) -> None:
    """Check create_queue / update_queue options; ``creating`` allows policy and partition."""
    unknown = sorted(set(options) - set(QUEUE_OPTIONS))
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
        _bool("partition", options["partition"])
    if "notify" in options:
        _bool("notify", options["notify"])
    if "warning_queue_size" in options:
        _int("warning_queue_size", options["warning_queue_size"], minimum=0, nullable=True)
    validate_shared_options(options)
    if options.get("dead_letter") == name:
        raise InvalidOption(f"queue {name!r} cannot be its own dead_letter")


def to_pgboss_options(options: Mapping[str, Any], names: Mapping[str, str] = QUEUE_OPTIONS) -> dict[str, Any]:
    """Rename validated options to pg-boss's keys; a None left in place clears a nullable setting."""
    return {names[key]: value for key, value in options.items() if key in names}


# One encoder for every call: json.dumps(cls=...) builds a new one each time, a measurable part of
# a send. encode() keeps no state between calls, so threads can share it.
_JSON_ENCODER = DjangoJSONEncoder(allow_nan=False, separators=(",", ":"))


def to_json(value: Any, what: str) -> str | None:
    """Serialise job data or output for a jsonb column, or raise JobDataNotSerializable.

    Django's encoder is used so the types a Django project naturally sends (datetimes, Decimals,
    UUIDs) are stored as pg-boss would store their JSON text. NaN and Infinity are refused:
    PostgreSQL's jsonb cannot hold them.
    """
    if value is None:
        return None
    try:
        return _JSON_ENCODER.encode(value)
    except (TypeError, ValueError) as exc:
        raise JobDataNotSerializable(f"{what} cannot be stored as JSON: {exc}") from exc


def start_after_value(value: object) -> str | None:
    """Turn start_after (seconds, a timedelta, a datetime, or an ISO 8601 string) into what the insert SQL reads.

    The SQL takes a timestamp string or an interval string ("30 seconds"). A naive datetime, or an
    ISO string without a zone, would be read in the database session's TimeZone and so mean
    different instants to different clients; they are taken as UTC, as Django takes naive values
    when USE_TZ is on.
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise InvalidStartAfter(
            f"start_after must be seconds, a datetime or an ISO 8601 string, not {value!r}"
        )
    if isinstance(value, dt.timedelta):
        value = value.total_seconds()
    if isinstance(value, int | float):
        if not math.isfinite(value) or value < 0:
            raise InvalidStartAfter(f"start_after must be a finite number of seconds >= 0, not {value!r}")
        return f"{value} seconds"
    if isinstance(value, dt.datetime):
        moment = value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)
        return moment.isoformat()
    if isinstance(value, dt.date):
        return dt.datetime.combine(value, dt.time(), tzinfo=dt.UTC).isoformat()
    if isinstance(value, str):
        text = value.strip()
        try:
            parsed = dt.datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
        except ValueError:
            raise InvalidStartAfter(f"start_after {value!r} is not an ISO 8601 date or datetime") from None
        return start_after_value(parsed)
    raise InvalidStartAfter(f"start_after must be seconds, a datetime or an ISO 8601 string, not {value!r}")
