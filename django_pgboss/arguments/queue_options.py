"""Queue options: create_queue() and update_queue(), and the options queues and jobs share
(retries, expiry, retention, heartbeat, dead letter), which send() checks through here too."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django_pgboss.arguments.names import queue_name
from django_pgboss.arguments.scalars import boolean, integer
from django_pgboss.constants import QueuePolicy
from django_pgboss.exceptions import InvalidOption, InvalidPolicy
from django_pgboss.wire import QUEUE_OPTIONS

#: Longest expiry pg-boss allows (24 hours, inclusive).
MAX_EXPIRE_IN_SECONDS = 24 * 60 * 60


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
