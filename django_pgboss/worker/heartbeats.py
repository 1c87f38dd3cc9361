"""The worker's heartbeat thread: running jobs of heartbeat queues are touched, fenced, so the
monitor does not take them for dead workers' jobs."""

from __future__ import annotations

import time

from django.db import DatabaseError, connections

from django_pgboss.records import Job
from django_pgboss.worker.core import WorkerCore, logger


class Heartbeats(WorkerCore):
    """One thread (``pgboss-heartbeat``) for every queue's running jobs."""

    def _heartbeat_loop(self) -> None:
        """Touch running jobs of heartbeat queues every half of their heartbeat_seconds (fenced)."""
        try:
            self._touch_until_stopped()
        finally:
            connections.close_all()

    def _touch_until_stopped(self) -> None:
        failures = 0
        while not self._stopping.wait(0.5) or self._in_flight_count():
            due: dict[str, list[Job]] = {}
            now = time.monotonic()
            with self._lock:
                for name, state in self._queues.items():
                    for job_id, job in state.in_flight.items():
                        interval = job.heartbeat_seconds
                        if interval and now - state.last_touch[job_id] >= interval / 2:
                            due.setdefault(name, []).append(job)
            for name, jobs in due.items():
                try:
                    touched = self.jobs.touch(name, jobs)
                    failures = 0
                except DatabaseError as exc:
                    failures += 1
                    self._database_trouble(f"touching jobs of {name}", exc, failures)
                    continue
                with self._lock:
                    for job in jobs:
                        if job.id in self._queues[name].last_touch:
                            self._queues[name].last_touch[job.id] = now
                if touched < len(jobs):
                    logger.warning(
                        "%d running job(s) of %s are no longer held by this worker (their claim lapsed)",
                        len(jobs) - touched,
                        name,
                    )
            if self._aborting.is_set():
                return
