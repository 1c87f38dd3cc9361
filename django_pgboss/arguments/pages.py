"""List reads: a page's ``limit`` and the ``after`` it continues from (get_queues(), find_jobs(),
get_schedules(), get_instances(), ...)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from django_pgboss.arguments.scalars import limit, text, uuid_text
from django_pgboss.exceptions import InvalidOption
from django_pgboss.records import Instance, Job

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
