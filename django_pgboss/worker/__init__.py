"""The worker side: the ``@work`` registry, the Worker that runs handlers, and its LISTEN connection.

``from django_pgboss.worker import Worker`` is documented (docs/workers.md, docs/testing.md), so
the engine's public names are exported here.
"""

from __future__ import annotations

from django_pgboss.worker.engine import Worker, WorkerStats, queue_capacity

__all__ = ["Worker", "WorkerStats", "queue_capacity"]
