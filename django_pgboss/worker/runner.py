"""Compatibility: the import path ``django_pgboss.worker.runner`` of earlier releases.

The Worker lives in worker/engine.py; import it as ``from django_pgboss.worker import Worker``.
"""

from __future__ import annotations

from django_pgboss.worker.engine import (
    EXIT_ABANDONED_THREADS,
    MAX_GRACE_SECONDS,
    Worker,
    WorkerStats,
    queue_capacity,
)

__all__ = ["EXIT_ABANDONED_THREADS", "MAX_GRACE_SECONDS", "Worker", "WorkerStats", "queue_capacity"]
