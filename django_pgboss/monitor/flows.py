"""The monitor's flow pass (pg-boss 12.35's navigator): unblock the children of completed parents.

Completing a job does no dependency work (plans/flows.py says why), so without this pass a flow's
children would wait for ever. Every PGBOSS["FLOW_INTERVAL_SECONDS"] a Monitor claims the
cluster-wide cadence gate (version.flow_on, the column pg-boss's navigator stamps) and, when it wins
it, resolves every queue's completed blocking parents (api/flows.py's FlowStore.resolve(), batches
of FLOW_BATCH_SIZE parents, SKIP LOCKED). Monitors of either side share the gate, so one pass per
interval runs across every Python and Node instance on the schema.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django_pgboss.api.flows import FlowStore
from django_pgboss.db.context import DatabaseContext
from django_pgboss.plans import flows as flow_plans

logger = logging.getLogger("django_pgboss.monitor")


@dataclass
class FlowReport:
    """What one flow pass did: whether this monitor won the gate, and how many completed parents
    it resolved (each unblocking its children whose other parents had completed)."""

    claimed: bool = False
    resolved: int = 0


class FlowResolver:
    """The flow pass over one database context, for ``queues`` (default every queue). Each batch
    that resolved parents sends signals.flow_resolved from ``sender`` with ``instance`` (the
    Monitor's class and the Monitor)."""

    def __init__(
        self,
        context: DatabaseContext,
        queues: Sequence[str] | None,
        interval_seconds: float,
        *,
        sender: Any = None,
        instance: Any = None,
    ) -> None:
        self.context = context
        self.queues = None if queues is None else list(queues)
        self.interval_seconds = interval_seconds
        self.store = FlowStore(context)
        self.sender = sender
        self.instance = instance

    def run_pass(self, *, gated: bool = True) -> FlowReport:
        """One flow pass; ``gated`` (the loop's) only when no monitor ran one within the interval."""
        report = FlowReport()
        if gated:
            gate = self.context.one_or_none(
                flow_plans.try_set_flow_time(self.context.quoted_schema), {"seconds": self.interval_seconds}
            )
            if gate is None:
                return report
        report.claimed = True
        report.resolved = self.store.resolve(self.queues, sender=self.sender, instance=self.instance)
        if report.resolved:
            logger.debug("flow pass: %d completed parent(s) resolved", report.resolved)
        return report
