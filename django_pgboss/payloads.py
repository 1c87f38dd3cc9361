"""Shaping what callers pass in into what the statements take.

Job payloads (send options validated and renamed to pg-boss's option names), the arguments of
the settle methods (Jobs, ids or {"id", "retry_count"} pairs, and the attempt fence they carry),
and outputs (what a handler returned or raised, as the JSON stored on the job).
"""

from __future__ import annotations

import re
import traceback
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from django_pgboss.exceptions import InvalidJobReference, InvalidOption, JobDataNotSerializable
from django_pgboss.options import (
    SHARED_OPTIONS,
    start_after_value,
    to_json,
    to_pgboss_options,
    validate_shared_options,
)
from django_pgboss.records import Job

#: The send options beyond those a job shares with its queue.
SEND_OPTIONS = frozenset(
    {
        "id",
        "priority",
        "start_after",
        "singleton_key",
        "singleton_seconds",
        "singleton_next_slot",
        "group_id",
        "group_tier",
    }
) | frozenset(SHARED_OPTIONS)


def job_payload(data: Any, options: dict[str, Any], where: str = "send()") -> dict[str, Any]:
    """Validate a job's data and send() options and return its payload, with pg-boss's option names."""
    if not options:
        # The common case, a job with nothing but data: every setting comes from the queue.
        return {"data": _JsonText(to_json(data, "job data")) if data is not None else None}
    unknown = sorted(set(options) - SEND_OPTIONS)
    if unknown:
        raise InvalidOption(f"{where}: unknown option(s) {', '.join(unknown)}")
    validate_shared_options(options)
    job: dict[str, Any] = to_pgboss_options(options, SHARED_OPTIONS)
    job["data"] = _JsonText(to_json(data, "job data")) if data is not None else None
    if options.get("id") is not None:
        job["id"] = uuid_text(options["id"], "id")
    if options.get("priority") is not None:
        priority = options["priority"]
        if isinstance(priority, bool) or not isinstance(priority, int) or not -(2**31) <= priority < 2**31:
            raise InvalidOption(f"priority must be an integer, not {priority!r}")
        job["priority"] = priority
    job["startAfter"] = start_after_value(options.get("start_after"))
    key = options.get("singleton_key")
    if key is not None and not isinstance(key, str):
        raise InvalidOption(f"singleton_key must be a string, not {key!r}")
    job["singletonKey"] = key
    seconds = options.get("singleton_seconds")
    if seconds is not None:
        if isinstance(seconds, bool) or not isinstance(seconds, int) or seconds < 1:
            raise InvalidOption(f"singleton_seconds must be an integer >= 1, not {seconds!r}")
        job["singletonSeconds"] = seconds
        job["singletonOffset"] = 0
    elif options.get("singleton_next_slot"):
        raise InvalidOption("singleton_next_slot needs singleton_seconds")
    for option, key_name in (("group_id", "groupId"), ("group_tier", "groupTier")):
        value = options.get(option)
        if value is not None and (not isinstance(value, str) or not value):
            raise InvalidOption(f"{option} must be a non-empty string, not {value!r}")
        job[key_name] = value
    if job.get("groupTier") is not None and job.get("groupId") is None:
        raise InvalidOption("group_tier needs group_id")
    return job


def single_job_params(name: str, job: Mapping[str, Any]) -> dict[str, Any]:
    """insert_job()'s parameters for one validated job payload (see Boss._job_payload)."""
    options = {key: value for key, value in job.items() if key != "data" and value is not None}
    data = job.get("data")
    return {
        "name": name,
        "data": None if data is None else str(data),
        "options": payload_json(options) if options else None,
    }


class _JsonText(str):
    """Job data already serialised to JSON text, spliced into the payload as-is."""


def payload_json(job: Mapping[str, Any]) -> str:
    """One job of an insert payload as JSON, with data embedded as already-encoded JSON."""
    parts = []
    for key, value in job.items():
        if value is None:
            continue
        encoded = value if isinstance(value, _JsonText) else to_json(value, key)
        parts.append(f"{to_json(key, 'key')}:{encoded}")
    return "{" + ",".join(parts) + "}"


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
    if fenced and (isinstance(retry_count, bool) or not isinstance(retry_count, int) or retry_count < 0):
        raise InvalidJobReference(f"{verb}(): retry_count must be an integer >= 0, not {retry_count!r}")
    return canonical, retry_count


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
    is always an object whichever side wrote it; None stores NULL.
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
            "message": str(output),
            "traceback": "".join(traceback.format_exception(output)),
        }
    return {"value": output}


def _is_json(value: Any) -> bool:
    try:
        to_json(value, "value")
    except JobDataNotSerializable:
        return False
    return True


def int_option(option: str, value: object, *, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidOption(f"{option} must be an integer >= {minimum}, not {value!r}")


def group_limits(group_concurrency: int | Mapping[str, Any]) -> tuple[int, dict[str, int]]:
    """Split group_concurrency into the default per-group limit and the per-tier limits."""
    if isinstance(group_concurrency, Mapping):
        unknown = set(group_concurrency) - {"default", "tiers"}
        if unknown or "default" not in group_concurrency:
            raise InvalidOption('group_concurrency must be an int or {"default": n, "tiers": {...}}')
        default = group_concurrency["default"]
        tiers = dict(group_concurrency.get("tiers") or {})
    else:
        default, tiers = group_concurrency, {}
    int_option("group_concurrency", default, minimum=1)
    for tier, limit in tiers.items():
        if not isinstance(tier, str):
            raise InvalidOption(f"group_concurrency tier names must be strings, not {tier!r}")
        int_option(f"group_concurrency tier {tier!r}", limit, minimum=1)
    return default, tiers


def uuid_text(value: Any, option: str) -> str:
    try:
        return str(value if isinstance(value, uuid.UUID) else uuid.UUID(str(value)))
    except (ValueError, TypeError, AttributeError):
        raise InvalidOption(f"{option} must be a uuid, not {value!r}") from None
