"""The split flow resolve of the citus-distributed backend.

On one PostgreSQL a resolver batch is one statement over a job table's queues
(plans.flows.resolve_flow_jobs()). On Citus it locks and updates children on whichever shards
their queues live, which one statement cannot, so it runs split, one queue at a time
(plans.flows' split statements say how), in one transaction: the parents are resolved and their
children released, or neither.
"""

from __future__ import annotations

import json
from typing import Any

from django_pgboss.db.context import DatabaseContext
from django_pgboss.plans import flows as flow_plans
from django_pgboss.plans import schedules as schedule_plans


def split_resolve(context: DatabaseContext, table: str, name: str) -> int:
    """One resolver batch of queue ``name`` (in job table ``table``), as resolve_flow_jobs() runs
    one; the caller holds the transaction. Returns how many parents were resolved."""
    schema = context.quoted_schema
    parents = [row[0] for row in context.all(flow_plans.resolve_parents(schema, table), {"name": name})]
    if not parents:
        return 0
    children: dict[str, dict[str, int]] = {}
    for child_name, child_id, count in context.all(
        flow_plans.resolve_children(schema), {"name": name, "ids": parents}
    ):
        children.setdefault(child_name, {})[str(child_id)] = count
    if children:
        # The database's clock (job_now(), the test clock in a test), read once on the
        # coordinator: Citus refuses job_now() beside a column in an UPDATE.
        (now,) = context.one(schedule_plans.database_now(schema))
        # Child queues in name order and each one's children in id order, the order the one
        # statement locks them in, so two resolvers never lock them in opposite orders.
        for child_name in sorted(children):
            counts = children[child_name]
            ids = sorted(counts)
            context.execute(flow_plans.lock_children(schema), {"name": child_name, "ids": ids})
            params: dict[str, Any] = {
                "name": child_name,
                "ids": ids,
                "counts": json.dumps(counts),
                "now": now,
            }
            context.execute(flow_plans.release_children(schema), params)
    context.execute(flow_plans.clear_parents(schema, table), {"name": name, "ids": parents})
    return len(parents)
