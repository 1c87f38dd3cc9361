"""The split count of the citus-distributed backend: the monitor's count of a table's queues.

On one PostgreSQL the count is one statement (plans.stats.cache_queue_stats()). On Citus it joins
the job table's shards to queue_stats, a table of the coordinator, and calls job_now() beside the
queue's columns in its update, which Citus refuses, so it runs split, as pg-boss splits such
statements for distributed engines (plans.stats' split statements say how), in one transaction:
the queues are counted and their rows written, or neither.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
from typing import Any

from django_pgboss.db.context import DatabaseContext
from django_pgboss.plans import stats as stats_plans


def split_count(
    context: DatabaseContext, table: str, params: dict[str, Any], *, throughput: bool, history: bool = True
) -> list[tuple[Any, ...]]:
    """Count the queues ``params["names"]`` of job table ``table`` as cache_queue_stats() does,
    with its parameters (names, lock_key, reset_max), and return its rows: none when another
    count holds the try-lock. The caller holds the transaction."""
    schema = context.quoted_schema
    (got,) = context.one(stats_plans.stats_try_lock(), {"lock_key": params["lock_key"]})
    if not got:
        return []
    windows = context.all(
        stats_plans.window_inputs(schema, split=True),
        {"names": params["names"], "reset_max": params["reset_max"]},
    )
    if not windows:
        return []
    columns = [name for name, _kind in stats_plans.split_count_columns(throughput=throughput)]
    counts = []
    now = windows[0][7]
    # Queues in name order, the order the one statement's aggregate reads them in.
    for name, h, top, settled, w_start, w_end, retained_on, _now in sorted(windows, key=lambda row: row[0]):
        values = {
            "name": name,
            "now": now,
            "retained_on": retained_on,
            "w_start": w_start,
            "w_end": w_end,
            "h": h,
            "top": top,
            "settled": settled,
        }
        row = context.one(stats_plans.count_one_queue(schema, table, throughput=throughput), values)
        counts.append(dict(zip(columns, (*row, w_start, w_end), strict=True)))
    context.execute(stats_plans.lock_counted_queues(schema), {"names": params["names"]})
    (pinned,) = context.one(stats_plans.pinned_seconds())
    return context.all(
        stats_plans.write_counts(schema, throughput=throughput, history=history),
        {"counts": json.dumps(counts, default=_json_value), "now": now, "pinned": pinned},
    )


def _json_value(value: Any) -> Any:
    """The JSON of a count's values that JSON has no type for: times in ISO 8601 with their
    offset, which timestamptz reads back exactly, and numeric sums as integers."""
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return int(value)
    raise TypeError(f"{type(value).__name__} is not a count's value")
