"""Bloated job indexes: which they are, and the statements that rebuild them (boss.get_reindex_commands()).

Autovacuum reclaims heap space but never gives btree pages back, so a job index keeps the size of
the largest backlog its queue ever held, and every later vacuum walks all of those pages. The
trigger is density, not age (plans/health.py has pg-boss's measure). The monitor's pass that
rebuilds them is monitor/health.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django_pgboss.db.context import DatabaseContext
from django_pgboss.db.identifiers import quote_identifier
from django_pgboss.plans import health as plans

#: pg-boss's thresholds for a bloated index: more than 128 pages (1 MB: below it the waste is
#: irrelevant and the statistics noisy), fewer than 5 entries per page (a rebuilt job index holds
#: 140 to 170), more than 4 times the pages its live entries need, and at most 2 GB for the
#: automatic rebuild (a larger one is left to an operator who chooses the moment).
REINDEX_DEFAULTS = {
    "min_pages": 128,
    "max_entries_per_page": 5,
    "min_size_ratio": 4,
    "max_index_bytes": 2**31,
}


@dataclass(frozen=True)
class IndexStats:
    """One job index as the bloat query reads it."""

    name: str
    table: str
    pages: int
    entries: float
    bytes: float
    owned: bool


def _thresholds(**overrides: float | None) -> dict[str, float]:
    values: dict[str, float] = {}
    for key in ("min_pages", "max_entries_per_page", "min_size_ratio"):
        value = overrides.get(key)
        if value is None:
            value = REINDEX_DEFAULTS[key]
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise ValueError(f"{key} must be a number >= 0, not {value!r}")
        values[key] = value
    return values


def bloated_indexes(
    context: DatabaseContext, *, force: bool = False, **thresholds: float | None
) -> list[IndexStats]:
    """The bloated job indexes (every job index with ``force``), largest first."""
    params: dict[str, Any] = {"nspname": context.schema, **_thresholds(**thresholds)}
    sql = plans.job_indexes(context.quoted_schema) if force else plans.bloated_indexes(context.quoted_schema)
    return [IndexStats(*row) for row in context.all(sql, params)]


def reindex_commands(
    context: DatabaseContext,
    *,
    force: bool = False,
    min_pages: float | None = None,
    max_entries_per_page: float | None = None,
    min_size_ratio: float | None = None,
    max_index_bytes: int | None = None,
) -> list[str]:
    """The statements that rebuild the bloated job indexes (every job index with ``force``), for an
    operator to run: the stubs an interrupted rebuild left first, then one REINDEX INDEX
    CONCURRENTLY per index. No ownership filter (the operator may run them as the owning role) and
    no size cap unless ``max_index_bytes`` is given. Empty when nothing is bloated."""
    if max_index_bytes is not None and (
        isinstance(max_index_bytes, bool) or not isinstance(max_index_bytes, int)
    ):
        raise ValueError(f"max_index_bytes must be an integer, not {max_index_bytes!r}")
    targets = bloated_indexes(
        context,
        force=force,
        min_pages=min_pages,
        max_entries_per_page=max_entries_per_page,
        min_size_ratio=min_size_ratio,
    )
    if max_index_bytes is not None:
        targets = [t for t in targets if t.bytes <= max_index_bytes]
    if not targets:
        return []
    schema = context.quoted_schema
    rows = context.all(plans.reindex_leftovers(schema, any_owner=True), {"nspname": context.schema})
    leftovers = [name for (name,) in rows]
    return [plans.drop_index_concurrently(schema, quote_identifier(n)) for n in leftovers] + [
        plans.reindex_index(schema, quote_identifier(t.name)) for t in targets
    ]
