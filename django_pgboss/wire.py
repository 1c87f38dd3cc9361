"""The wire format: how values cross into pg-boss's schema, and the one table of its option names.

Python code reasons on snake_case names (``singleton_key``, ``dead_letter``); pg-boss's SQL and
its stored documents (a queue's ``create_queue(name, options jsonb)``, the recordset of an insert,
a schedule's ``options``) use camelCase keys. :data:`WIRE_NAMES` is the only place that maps one
to the other, and the translation happens here, when a payload is encoded, never in the logic that
decides what to write.

:func:`to_json` is the project's JSON codec for every jsonb value it writes (job data, outputs,
filters, options). It refuses, with :class:`~django_pgboss.exceptions.JobDataNotSerializable`
naming the value, everything PostgreSQL's jsonb cannot hold or would hand back changed, before any
SQL runs, so a refused value never aborts the caller's transaction.
"""

from __future__ import annotations

import decimal
import json
import os
import re
import traceback
from collections.abc import Mapping, Sequence
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder

from django_pgboss.exceptions import JobDataNotSerializable

#: snake_case option -> the key pg-boss stores and its SQL reads. Every option either side writes
#: is here; "singleton_slot" is the cron pass's internal throttle slot, pg-boss's "__singletonSlot".
WIRE_NAMES: dict[str, str] = {
    # Options queues and jobs share.
    "retry_limit": "retryLimit",
    "retry_delay": "retryDelay",
    "retry_backoff": "retryBackoff",
    "retry_delay_max": "retryDelayMax",
    "expire_in_seconds": "expireInSeconds",
    "retention_seconds": "retentionSeconds",
    "delete_after_seconds": "deleteAfterSeconds",
    "heartbeat_seconds": "heartbeatSeconds",
    "dead_letter": "deadLetter",
    # Queue-only options.
    "policy": "policy",
    "partition": "partition",
    "warning_queue_size": "warningQueueSize",
    "notify": "notify",
    # Job-only options.
    "id": "id",
    "priority": "priority",
    "start_after": "startAfter",
    "singleton_key": "singletonKey",
    "singleton_seconds": "singletonSeconds",
    "singleton_offset": "singletonOffset",
    "singleton_next_slot": "singletonNextSlot",
    "singleton_slot": "__singletonSlot",
    "group_id": "groupId",
    "group_tier": "groupTier",
    # A flow job's columns (flow() only).
    "blocked": "blocked",
    "blocking": "blocking",
    "pending_dependencies": "pendingDependencies",
}
#: pg-boss's key -> snake_case option, for reading stored documents back.
PYTHON_NAMES: dict[str, str] = {wire: python for python, wire in WIRE_NAMES.items()}

#: The options a queue and a job share (validated alike for both).
SHARED_OPTIONS = frozenset(
    {
        "retry_limit",
        "retry_delay",
        "retry_backoff",
        "retry_delay_max",
        "expire_in_seconds",
        "retention_seconds",
        "delete_after_seconds",
        "heartbeat_seconds",
        "dead_letter",
    }
)
#: Every option create_queue() takes.
QUEUE_OPTIONS = SHARED_OPTIONS | {"policy", "partition", "warning_queue_size", "notify"}
#: Every option send() takes.
SEND_OPTIONS = SHARED_OPTIONS | {
    "id",
    "priority",
    "start_after",
    "singleton_key",
    "singleton_seconds",
    "singleton_next_slot",
    "group_id",
    "group_tier",
}

#: The options update() and upsert() change: send()'s, without the throttle options (a job's
#: throttle slot is kept, as pg-boss keeps it), the id and the key (they find the jobs).
EDIT_OPTIONS = SEND_OPTIONS - {"id", "singleton_key", "singleton_seconds", "singleton_next_slot"}


def to_wire(options: Mapping[str, Any]) -> dict[str, Any]:
    """Rename snake_case options to pg-boss's keys (values unchanged; None clears a setting)."""
    return {WIRE_NAMES[key]: value for key, value in options.items()}


def from_wire(options: Mapping[str, Any]) -> dict[str, Any]:
    """Rename pg-boss's keys back to snake_case, dropping keys this package does not know."""
    return {PYTHON_NAMES[key]: value for key, value in options.items() if key in PYTHON_NAMES}


def schedule_options_to_wire(options: Mapping[str, Any]) -> dict[str, Any]:
    """A schedule's send options as pg-boss stores them: group_id and group_tier nest as
    ``{"group": {"id", "tier"}}``; None values are left out."""
    stored: dict[str, Any] = {}
    for option, value in options.items():
        if option in ("group_id", "group_tier"):
            stored.setdefault("group", {})["id" if option == "group_id" else "tier"] = value
        elif value is not None:
            stored[WIRE_NAMES.get(option, option)] = value
    return stored


def schedule_options_from_wire(stored: Mapping[str, Any]) -> dict[str, Any]:
    """A schedule's stored options (pg-boss's names) as send() options."""
    result = {
        PYTHON_NAMES[key]: value
        for key, value in stored.items()
        if key in PYTHON_NAMES and PYTHON_NAMES[key] in SEND_OPTIONS - {"group_id", "group_tier"}
    }
    group = stored.get("group")
    if isinstance(group, Mapping):
        result["group_id"] = group.get("id")
        result["group_tier"] = group.get("tier")
    return result


# -- the JSON codec ---------------------------------------------------------------------------------

#: Longest JSON text (UTF-8 bytes) to_json() accepts. jsonb refuses values over 268,435,455 bytes
#: of its own binary form, and the densest JSON ("[0,0,...]") is 6 times the text there: 32 MiB
#: of it is 201 MB as jsonb (measured with pg_column_size on PostgreSQL 15), and 60 MB of it
#: already fails in the parser ("invalid memory alloc request size"). 32 MiB of any JSON fits.
MAX_JSON_BYTES = 32 * 1024 * 1024
#: Deepest nesting to_json() accepts. Python's decoder reads a value back by recursion, within the
#: interpreter's recursion limit (1,000 frames by default, shared with the caller's own stack), and
#: PostgreSQL's parser within max_stack_depth; 500 levels leaves both ample room.
MAX_JSON_DEPTH = 500

# One encoder for every call: json.dumps(cls=...) builds a new one each time, a measurable part of
# a send. encode() keeps no state between calls, so threads can share it. ensure_ascii=False keeps
# characters as they are, so a lone surrogate (which UTF-8 cannot encode) shows in the check below
# instead of hiding behind an escape that PostgreSQL would refuse.
_JSON_ENCODER = DjangoJSONEncoder(allow_nan=False, separators=(",", ":"), ensure_ascii=False)


def _direct_encoder() -> Any:
    """The C encoder behind _JSON_ENCODER, to be called directly, or None to call encode().

    encode() wraps it in two Python calls and a new encoder object with a table of the containers
    it is inside (to detect a circular reference), 1.5 of a send's Python microseconds. Made
    without that table, circular data recurses until RecursionError, and to_json() then asks
    encode() to say which error it is. None where json has no C accelerator, or where this one
    does not encode as encode() does (another Python's signature).
    """
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return None
    try:
        encoder = make(
            None, _JSON_ENCODER.default, json.encoder.encode_basestring, None, ":", ",", False, False, False
        )
        probe = {"a": [1, 2.5, "\u00e9", None, True, decimal.Decimal("1.5")]}
        if "".join(encoder(probe, 0)) != _JSON_ENCODER.encode(probe):
            return None
    except Exception:
        return None
    return encoder


_DIRECT_ENCODER = _direct_encoder()

# A \u0000 escape that is not itself an escaped backslash followed by "u0000".
_NUL_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")
# A JSON string (to strip strings before looking at numbers and brackets).
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
# A number with a positive exponent, as Python writes large floats ("1e+16").
_EXPONENT_NUMBER = re.compile(r"-?[0-9]+(?:\.[0-9]+)?e\+[0-9]+")
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def to_json(value: Any, what: str) -> str | None:
    """Serialise a value for a jsonb column, or raise JobDataNotSerializable naming ``what``.

    Django's encoder is used so the types a Django project naturally sends (datetimes, Decimals,
    UUIDs) are stored as pg-boss would store their JSON text. Refused, because jsonb cannot hold
    them or would hand back something else: NaN and Infinity, NUL characters (``\\u0000``), lone
    surrogates, floats that jsonb's exact decimal cannot give back as the same float (1e308 would
    read back as a different integer), nesting deeper than MAX_JSON_DEPTH, and text over
    MAX_JSON_BYTES. The checks cost one substring search each on ordinary data.
    """
    if value is None:
        return None
    try:
        if _DIRECT_ENCODER is None:
            text = _JSON_ENCODER.encode(value)
        else:
            try:
                text = "".join(_DIRECT_ENCODER(value, 0))
            except RecursionError:
                # Circular, or nested too deep to encode: encode() says which.
                text = _JSON_ENCODER.encode(value)
    except RecursionError:
        raise JobDataNotSerializable(
            f"{what} cannot be stored as JSON: it is nested deeper than {MAX_JSON_DEPTH} levels"
        ) from None
    except (TypeError, ValueError) as exc:
        raise JobDataNotSerializable(f"{what} cannot be stored as JSON: {exc}") from exc
    # The usual job's data passes every check at a glance: ASCII text too short to be too large or
    # too deep, with neither a NUL escape nor an exponent in it.
    if not (text.isascii() and len(text) <= MAX_JSON_DEPTH and "\\u0000" not in text and "e+" not in text):
        check_json_text(text, what)
    return text


def check_json_text(text: str, what: str) -> None:
    """Refuse JSON text that jsonb cannot store or would not give back equal (see to_json)."""
    if text.isascii():
        size = len(text)
    else:
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError:
            raise JobDataNotSerializable(
                f"{what} cannot be stored as JSON: it contains a lone surrogate, which is not valid Unicode"
            ) from None
    if size > MAX_JSON_BYTES:
        raise JobDataNotSerializable(
            f"{what} cannot be stored as JSON: {size} bytes is more than the {MAX_JSON_BYTES} allowed"
        )
    if "\\u0000" in text and _NUL_ESCAPE.search(text):
        raise JobDataNotSerializable(
            f"{what} cannot be stored as JSON: it contains a NUL character (\\u0000), which jsonb cannot hold"
        )
    scan_numbers = "e+" in text
    scan_depth = text.count("[") + text.count("{") > MAX_JSON_DEPTH
    if not (scan_numbers or scan_depth):
        return
    # The rare slow path: look at the structure outside strings.
    bare = _JSON_STRING.sub('""', text)
    if scan_numbers:
        for number in _EXPONENT_NUMBER.findall(bare):
            # jsonb keeps the decimal as written and prints it in full ("1e+308" as 309 digits),
            # which reads back as an int: equal to the float only if the float is that integer.
            if decimal.Decimal(number) != decimal.Decimal(float(number)):
                raise JobDataNotSerializable(
                    f"{what} cannot be stored as JSON: the float {number} would read back as a different "
                    "number (jsonb stores decimals exactly); send it as a string or an integer"
                )
    if scan_depth:
        depth = deepest = 0
        for bracket in _NOT_BRACKET.sub("", bare):
            depth += 1 if bracket in "[{" else -1
            deepest = max(deepest, depth)
        if deepest > MAX_JSON_DEPTH:
            raise JobDataNotSerializable(
                f"{what} cannot be stored as JSON: it is nested deeper than {MAX_JSON_DEPTH} levels"
            )


class JsonText(str):
    """A value already encoded by to_json(), spliced into a payload as it is."""

    __slots__ = ()


def encode_job(job: Mapping[str, Any]) -> str:
    """One job of an insert payload (snake_case keys) as the JSON object pg-boss's recordset reads.

    None values are left out (the column then takes the queue's setting); ``data`` is JsonText,
    embedded without a second encoding. The other values are already validated scalars.
    """
    parts = []
    for key, value in job.items():
        if value is None:
            continue
        encoded = value if isinstance(value, JsonText) else to_json(value, key)
        parts.append(f'"{WIRE_NAMES[key] if key != "data" else "data"}":{encoded}')
    return "{" + ",".join(parts) + "}"


def encode_jobs(jobs: Sequence[Mapping[str, Any]]) -> str:
    """A batch of jobs as the JSON array an insert reads (see encode_job)."""
    return "[" + ",".join(encode_job(job) for job in jobs) + "]"


def encode_data_array(data: Sequence[Any]) -> str | None:
    """The data of jobs that carry nothing else, as one JSON array (null for a job without data),
    in one encoder call: plans.jobs.insert_data_jobs()'s parameter.

    The common insert() (a list of {"data": ...}) encoded value by value cost about 18 us a job,
    most of it the encoder's per-call set-up and the checks on each text; here it is one encoder
    call and one check of the whole array, about 2.4 us a job. Returns None when the array fails
    a check (or cannot be encoded): the caller then encodes job by job, which names the job at
    fault. Accepting the whole is sound: a NUL, a lone surrogate or an inexact float in any value
    is in the whole too, the whole is at least as large as any value, and nested one level less
    in each, every value is within the depth limit if the whole is.
    """
    try:
        text = _JSON_ENCODER.encode(data)
        check_json_text(text, "jobs")
    except (RecursionError, TypeError, ValueError, JobDataNotSerializable):
        return None
    return text


def random_uuid_text() -> str:
    """A random (version 4, RFC 9562 variant) uuid in its canonical text form.

    The same 122 random bits from the operating system's source that ``str(uuid.uuid4())``
    and PostgreSQL's gen_random_uuid() draw, without building a UUID object: every send draws
    one. The version and variant are set in the text itself: the version digit replaces the
    13th hex digit, and the 17th keeps its two low random bits under the variant's 0b10.
    """
    digits = os.urandom(16).hex()
    return f"{digits[:8]}-{digits[8:12]}-4{digits[13:16]}-{_VARIANT_DIGIT[digits[16]]}{digits[17:20]}-{digits[20:]}"


#: A random hex digit's two low bits under the RFC 9562 variant's 0b10: 8, 9, a or b.
_VARIANT_DIGIT = {digit: "89ab"[int(digit, 16) & 0b11] for digit in "0123456789abcdef"}


def single_job_params(name: str, job: Mapping[str, Any]) -> dict[str, Any]:
    """insert_job()'s parameters for one validated job payload: name, id, data and options JSON.

    The id is the job's own, or a random (version 4) uuid drawn here (random_uuid_text()), as
    PostgreSQL's gen_random_uuid() would draw one: the statement then needs no RETURNING.
    """
    options = {key: value for key, value in job.items() if key not in ("data", "id") and value is not None}
    data = job.get("data")
    return {
        "name": name,
        "id": job.get("id") or random_uuid_text(),
        "data": None if data is None else str(data),
        "options": encode_job(options) if options else None,
    }


# -- outputs -----------------------------------------------------------------------------------------


class EncodedOutput(str):
    """A job output already turned into JSON text by ``to_json(output_value(...))``.

    The worker encodes a handler's return value once, to find out whether it can be stored at
    all; handing the text on as an EncodedOutput spares the settle from encoding it again.
    """

    __slots__ = ()


def output_value(output: Any) -> Any:
    """The JSON a settle stores as a job's output.

    A dict is stored as it is; an exception as {"name", "message", "traceback"}; any other value
    (a list, a string, a number) wrapped as {"value": ...} as pg-boss wraps it, so a job's output
    is always an object whichever side wrote it; None stores NULL. An exception's text is made
    storable (a NUL or a lone surrogate in its message is escaped), so a failure is never lost
    because of what its message holds.
    """
    if output is None or isinstance(output, Mapping):
        return output
    if isinstance(output, BaseException):
        # The exception's own attributes come along (an HTTP status, an error code), as far as
        # they are JSON; the rest would make the whole output unstorable.
        details = {key: value for key, value in vars(output).items() if _is_json(value)}
        return {
            **details,
            "name": type(output).__name__,
            "message": storable_text(str(output)),
            "traceback": storable_text("".join(traceback.format_exception(output))),
        }
    return {"value": output}


# The code points jsonb and text refuse: NUL and the surrogates.
_UNSTORABLE_TEXT = re.compile("[\x00\ud800-\udfff]")


def storable_text(text: str) -> str:
    """``text`` with each code point PostgreSQL cannot store (NUL, a surrogate) spelled out as its
    escape (``\\u0000``, ``\\udc80``): for messages, which must reach the job whatever they hold."""
    if "\x00" not in text and text.isascii():
        return text
    return _UNSTORABLE_TEXT.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def _is_json(value: Any) -> bool:
    try:
        to_json(value, "value")
    except JobDataNotSerializable:
        return False
    return True


# -- the instance registry ---------------------------------------------------------------------------

#: An instance row's ``workers`` entry: snake_case field -> the key pg-boss 12.38 writes.
INSTANCE_WORKER_KEYS: dict[str, str] = {
    "id": "id",
    "queue": "queue",
    "local_concurrency": "localConcurrency",
    "batch_size": "batchSize",
    "polling_interval_seconds": "pollingIntervalSeconds",
    "active": "active",
    "last_fetched_on": "lastFetchedOn",
    "last_job_ended_on": "lastJobEndedOn",
    "last_error_on": "lastErrorOn",
    "options": "options",
}
#: An instance row's ``metrics``: snake_case field -> pg-boss's key.
INSTANCE_METRICS_KEYS: dict[str, str] = {
    "cgroup": "cgroup",
    "cpu": "cpu",
    "cpu_limit": "cpuLimit",
    "cpu_throttled": "cpuThrottled",
    "rss": "rss",
    "heap_used": "heapUsed",
    "heap_limit": "heapLimit",
    "memory_used": "memoryUsed",
    "memory_limit": "memoryLimit",
    "loop_delay": "loopDelay",
    "loop_delay_max": "loopDelayMax",
    "loop_utilization": "loopUtilization",
}
#: The worker options a ``workers`` entry records, besides its own fields: a registration's
#: option -> pg-boss's work() option (its registrar's allowlist; nothing here carries job data).
RECORDED_WORK_OPTIONS: dict[str, str] = {
    "include_metadata": "includeMetadata",
    "min_priority": "minPriority",
    "max_priority": "maxPriority",
    "local_group_concurrency": "localGroupConcurrency",
    "group_concurrency": "groupConcurrency",
    "heartbeat_refresh_seconds": "heartbeatRefreshSeconds",
    "per_job_results": "perJobResults",
    "transactional": "transactional",
    "transaction_timeout_seconds": "transactionTimeoutSeconds",
    "notify_polling_interval_seconds": "notifyPollingIntervalSeconds",
}
#: The settings an instance row's ``config`` records, under the pg-boss option each one ports
#: (an allowlist, as pg-boss's: the table is readable by anything that can read the schema).
RECORDED_SETTINGS: dict[str, str] = {
    "INSTANCE_HEARTBEAT_SECONDS": "instanceHeartbeatSeconds",
    "MONITOR_INTERVAL_SECONDS": "monitorIntervalSeconds",
    "MAINTENANCE_INTERVAL_SECONDS": "maintenanceIntervalSeconds",
    "BAM_INTERVAL_SECONDS": "bamIntervalSeconds",
    "FLOW_INTERVAL_SECONDS": "flowIntervalSeconds",
    "REINDEX": "reindex",
    "REINDEX_INTERVAL_SECONDS": "reindexIntervalSeconds",
    "MONITOR_VACUUM": "monitorVacuum",
    "CRON_INTERVAL_SECONDS": "cronMonitorIntervalSeconds",
    "PERSIST_WARNINGS": "persistWarnings",
    "WARNING_RETENTION_DAYS": "warningRetentionDays",
    "PERSIST_QUEUE_STATS": "persistQueueStats",
    "QUEUE_STATS_RETENTION_DAYS": "queueStatRetentionDays",
    "WARNING_SLOW_QUERY_SECONDS": "warningSlowQuerySeconds",
    "WARNING_QUEUE_SIZE": "warningQueueSize",
}


def renamed(values: Mapping[str, Any], keys: Mapping[str, str]) -> dict[str, Any]:
    """``values`` under the names ``keys`` gives them (snake_case to pg-boss's keys, or back with
    the reversed table); a key the table does not name is left out."""
    return {keys[key]: value for key, value in values.items() if key in keys}


def reversed_keys(keys: Mapping[str, str]) -> dict[str, str]:
    """The table read the other way: pg-boss's key -> snake_case."""
    return {wire: python for python, wire in keys.items()}
