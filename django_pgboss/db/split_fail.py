"""The second half of a split fail, on the citus-distributed backend: the dead-letter copies.

On one PostgreSQL a fail is one statement that also writes each job failed for good into its
dead-letter queue. On Citus that queue lives on another shard, maybe another node, which one
statement's modifying CTEs cannot reach, so the fail runs split, as pg-boss splits it for
distributed engines (plans.settle.fail_statement(split=True)) and this writes the copies, one
statement per dead-letter queue, in the fail's transaction: the jobs are failed and copied, or
neither is. The API's fail and the worker's and the monitor's sweeps share it.
"""

from __future__ import annotations

import json
from typing import Any

from django_pgboss.db.context import DatabaseContext
from django_pgboss.plans import settle as settle_plans


def copy_to_dead_letters(context: DatabaseContext, failed: Any) -> list[list[str]]:
    """Copy the jobs a split fail failed for good into their dead-letter queues, one statement per queue, on
    ``context``'s connection inside the fail's transaction. ``failed`` is the fail's array of job rows (JSON
    text or already decoded). Returns the copies as [source id, queue, copy id], as the unsplit
    statement reports them."""
    rows = json.loads(failed) if isinstance(failed, str) else failed or []
    copies: list[list[str]] = []
    if not rows:
        return copies
    encoded = json.dumps(rows)
    for queue in sorted({row["dead_letter"] for row in rows}):
        rows_copied = context.all(
            settle_plans.dead_letter_copies(context.quoted_schema), {"name": queue, "failed": encoded}
        )
        copies.extend([str(source), str(name), str(copy)] for source, name, copy in rows_copied)
    return copies
