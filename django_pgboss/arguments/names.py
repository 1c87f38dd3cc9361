"""Names: queue names (pg-boss's rule), event names and schedule keys."""

from __future__ import annotations

from django_pgboss.arguments.scalars import text
from django_pgboss.constants import QUEUE_NAME_MAX_LENGTH, QUEUE_NAME_PATTERN
from django_pgboss.exceptions import InvalidOption, InvalidQueueName


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
