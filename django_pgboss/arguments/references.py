"""Job references: what the settle methods take (a Job, an id, an ``{"id", "retry_count"}`` pair,
or a list of one kind), split into canonical ids and the attempt fence."""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from django_pgboss.arguments.scalars import INT4_MAX
from django_pgboss.exceptions import InvalidJobReference
from django_pgboss.records import Job

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
