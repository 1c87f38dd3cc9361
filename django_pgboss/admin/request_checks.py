"""Query-string values a changelist would hand to PostgreSQL only to have them refused.

Django's changelist turns ``?field=value`` into an ORM filter and checks only what the ORM checks
while building it; a value the column's type refuses fails when the query runs, as a server
error. Three kinds reach PostgreSQL that way: a NUL character (no text column can hold one), a
``state`` that is not one of the job_state enum's values, and a malformed uuid in an id lookup
(caught by Django, but then with a bare "?e=1" and no word of why). This module finds them before
the query, so the page can drop them and say why in an admin message.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from urllib.parse import urlencode

from django.http import QueryDict

from django_pgboss.constants import JobState

#: Job columns of type uuid, which PostgreSQL refuses a malformed value for.
UUID_FIELDS = frozenset({"id", "source_id", "source_root_id"})
#: The enum column: its values are JobState's.
STATE_FIELD = "state"
STATES = tuple(state.value for state in JobState)


def _values(lookup: str, value: str) -> Iterable[str]:
    # An __in lookup takes a comma-separated list, as Django's changelist splits it.
    return value.split(",") if lookup.endswith("__in") else [value]


def problems(query: QueryDict, *, job_fields: bool) -> list[str]:
    """Why each refused parameter of ``query`` was refused, one sentence per parameter.

    ``job_fields``: also check the job table's uuid and state columns (the job list).
    """
    found = []
    for key, values in query.lists():
        field, _, lookup = key.partition("__")
        for value in values:
            if "\x00" in key or "\x00" in value:
                found.append(
                    f"The filter {key.replace(chr(0), '')!r} was dropped: it holds a NUL character, "
                    "which no queue name, key or job column can hold."
                )
                break
            if not job_fields or lookup not in ("", "exact", "in"):
                continue
            if field == STATE_FIELD:
                bad = [v for v in _values(key, value) if v not in STATES]
                if bad:
                    found.append(
                        f"The filter {key}={value!r} was dropped: {bad[0]!r} is not a job state "
                        f"(one of {', '.join(STATES)})."
                    )
                    break
            elif field in UUID_FIELDS:
                try:
                    for v in _values(key, value):
                        uuid.UUID(v)
                except ValueError:
                    found.append(f"The filter {key}={value!r} was dropped: a job id is a UUID.")
                    break
    return found


def without(query: QueryDict, *, job_fields: bool) -> str:
    """``query`` as a query string without the parameters problems() refuses."""
    kept = []
    for key, values in query.lists():
        single = QueryDict(mutable=True)
        single.setlist(key, values)
        if not problems(single, job_fields=job_fields):
            kept += [(key, value) for value in values]
    return urlencode(kept)
