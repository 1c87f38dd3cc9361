"""The worker's fetch loops: one per queue, claiming only as many jobs as the queue has free slots.

A fetch costs a round trip whatever its size, so while jobs are still running a loop waits
(briefly) for half the slots to free up rather than claiming one job per finished handler. A loop
sleeps on its queue's wake event between polls: a notification (worker/listener.py), a finished
handler or a stop sets it.
"""

from __future__ import annotations

import time

from django.db import DatabaseError, connections

from django_pgboss.worker.core import QueueState, WorkerCore, logger
from django_pgboss.worker.outcomes import UNSTARTED_OUTPUT

#: Longest a fetch loop waits for more free slots while a handler thread may be idle.
LOW_WATER_WAIT_SECONDS = 0.05


class FetchLoops(WorkerCore):
    """The fetch loop each queue runs in its own thread (``pgboss-fetch-<queue>``)."""

    def _fetch_loop(self, name: str) -> None:
        try:
            self._fetch_until_stopped(name)
        finally:
            connections.close_all()

    def _fetch_until_stopped(self, name: str) -> None:
        state = self._queues[name]
        registration = state.registration
        failures = 0
        # A fetch costs a round trip whatever its size, so with jobs still running the loop waits
        # (briefly) for half the slots to free up rather than claiming one job per finished handler.
        low_water = max(1, min(state.capacity, registration.batch_size) // 2)
        while not self._stopping.is_set():
            with self._lock:
                self._wait_for_low_water(state, low_water)
                slots = state.free
                if self.max_jobs is not None:
                    slots = min(slots, self.max_jobs - self._claimed_total)
            if slots <= 0:
                if self.max_jobs is not None and self._claimed_total >= self.max_jobs:
                    state.drained = True
                    self._stop_when_idle()
                state.wake.wait(registration.polling_interval_seconds)
                state.wake.clear()
                continue
            size = registration.batch_size if registration.batch else min(slots, registration.batch_size)
            try:
                # The loop keeps its connection between fetches (close_old_connections() would
                # close it every time under the default CONN_MAX_AGE = 0); a broken one is thrown
                # away by _database_trouble() and Django opens a fresh one on the next fetch.
                jobs = self.jobs.fetch(
                    name,
                    batch_size=size,
                    include_metadata=registration.include_metadata,
                    group_concurrency=registration.group_concurrency,
                    min_priority=registration.min_priority,
                    max_priority=registration.max_priority,
                )
                if failures:
                    logger.info("fetching from %s again after %d database error(s)", name, failures)
                failures = 0
            except DatabaseError as exc:
                failures += 1
                self._database_trouble(f"fetching from {name}", exc, failures)
                continue
            if not jobs:
                with self._lock:
                    state.drained = not state.in_flight and not state.unsettled
                if self.burst and state.drained:
                    return
                state.wake.wait(registration.polling_interval_seconds if not self.burst else 0.05)
                state.wake.clear()
                continue
            self.stats.add(fetched=len(jobs))
            units = [jobs] if registration.batch else [[job] for job in jobs]
            with self._lock:
                if self._stopping.is_set():
                    # The stop began during the fetch, and _put_back_unstarted() has run (or runs
                    # next, under this lock): these never start, so they go back uncharged.
                    self._settle_queue.put(("requeue", name, jobs, UNSTARTED_OUTPUT))
                    return
                state.drained = False
                self._claimed_total += len(jobs)
                now = time.monotonic()
                for job in jobs:
                    state.in_flight[job.id] = job
                    state.last_touch[job.id] = now
                state.free -= len(units)
                # Queued under the lock, so that a stop's _put_back_unstarted() finds every unit.
                for unit in units:
                    state.work.put((name, unit))

    def _wait_for_low_water(self, state: QueueState, low_water: int) -> None:
        """Hold the next fetch until half the slots are free, called with ``self._lock`` held.

        While claimed jobs wait in the buffer for a thread the handlers are busy, so nothing is
        lost by waiting for a fetch worth its round trip. Without a buffer a thread may be idle,
        so the wait is capped at LOW_WATER_WAIT_SECONDS.
        """
        deadline = time.monotonic() + LOW_WATER_WAIT_SECONDS
        while 0 < state.free < low_water and state.in_flight and not self._stopping.is_set():
            buffered = state.capacity - state.free > state.registration.concurrency
            remaining = deadline - time.monotonic()
            if not buffered and remaining <= 0:
                return
            self._lock.wait(LOW_WATER_WAIT_SECONDS if buffered else remaining)
