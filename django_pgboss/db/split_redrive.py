"""The split redrive of the citus-distributed backend.

On one PostgreSQL a redrive is one statement (plans.redrive.redrive()). On Citus its parts write
the dead-letter queue's shard and each destination's, which one statement's modifying CTEs cannot
reach, so it runs split, as pg-boss splits such statements for distributed engines: the candidates
taken and locked, each destination's jobs inserted by a statement of its own, the moved jobs
deleted and the refused ones failed in place, all in one transaction, so every job taken is moved,
failed in place or left waiting, as the one statement leaves it.
"""

from __future__ import annotations

import json
from typing import Any

from django_pgboss.db.context import DatabaseContext
from django_pgboss.plans import redrive as redrive_plans


def split_redrive(
    context: DatabaseContext, table: str, params: dict[str, Any]
) -> list[tuple[Any, Any, bool]]:
    """Redrive the jobs of the dead-letter queue ``params["name"]`` (in job table ``table``) with
    the filter and limit of ``params``, as plans.redrive.redrive() does. Returns its rows: per job
    taken, oldest first, (id, new id or None, whether it was failed in place)."""
    schema = context.quoted_schema
    with context.atomic():
        candidates = context.all(redrive_plans.redrive_candidates(schema, table), params)
        by_destination: dict[str, list[Any]] = {}
        for _id, destination, _policy, _key, _output, job in candidates:
            by_destination.setdefault(destination, []).append(json.loads(job))
        written: set[str] = set()
        # Destinations in name order, so that two redrives lock the destinations' shards alike.
        for destination in sorted(by_destination):
            rows = context.all(
                redrive_plans.redrive_insert(schema),
                {"name": destination, "jobs": json.dumps(by_destination[destination])},
            )
            written.update(str(row[0]) for row in rows)
        new_ids = {str(row[0]): json.loads(row[5])["new_id"] for row in candidates}
        moved = [row[0] for row in candidates if new_ids[str(row[0])] in written]
        refused = _refused(candidates, written, new_ids)
        if moved:
            context.execute(
                redrive_plans.redrive_remove(schema, table), {"name": params["name"], "ids": moved}
            )
        failed: set[str] = set()
        if refused:
            outputs = {str(row[0]): json.loads(row[4]) for row in refused}
            failed = {
                str(row[0])
                for row in context.all(
                    redrive_plans.redrive_refuse(schema, table),
                    {
                        "name": params["name"],
                        "ids": [row[0] for row in refused],
                        "outputs": json.dumps(outputs),
                    },
                )
            }
    return [
        (
            row[0],
            new_ids[str(row[0])] if new_ids[str(row[0])] in written else None,
            str(row[0]) in failed,
        )
        for row in candidates
    ]


def _refused(candidates: list[Any], written: set[str], new_ids: dict[str, str]) -> list[Any]:
    """The candidates a redrive fails in place: every one not written, except that of several
    refused key_strict_fifo jobs with one key only the oldest is (job_i8 allows one failed job per
    key); the rest wait behind it. ``candidates`` are oldest first."""
    refused = []
    keys: set[Any] = set()
    for row in candidates:
        if new_ids[str(row[0])] in written:
            continue
        policy, key = row[2], row[3]
        if policy == "key_strict_fifo":
            if key in keys:
                continue
            keys.add(key)
        refused.append(row)
    return refused
