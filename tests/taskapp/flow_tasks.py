"""Tasks the task-flow tests chain (tests/test_task_flows.py)."""

from __future__ import annotations

from django_pgboss.tasks.compat import task
from django_pgboss.tasks.flows import parent_results


@task(takes_context=True)
def total(context, own):
    """Its own number plus its parents' totals."""
    return own + sum(parent_results(context).values())
