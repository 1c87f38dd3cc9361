"""Job options: a job's data and send() options (``job_payload()``), the edits of update() and
upsert(), a fetch's group concurrency, and the JSON filters of find_jobs() and redrive()."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django_pgboss.arguments.moments import start_after
from django_pgboss.arguments.queue_options import shared_options
from django_pgboss.arguments.scalars import INT4_MAX, INT4_MIN, integer, text, uuid_text
from django_pgboss.exceptions import InvalidOption
from django_pgboss.wire import EDIT_OPTIONS, SEND_OPTIONS, JsonText, to_json


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
