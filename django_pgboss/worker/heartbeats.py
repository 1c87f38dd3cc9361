"""The worker's heartbeat thread: running jobs of heartbeat queues are touched, fenced, so the
monitor does not take them for dead workers' jobs.

A job is touched every ``heartbeat_refresh_seconds`` (its registration's), by default every half
of its own ``heartbeat_seconds``. The touch is fenced to the attempt and returns the ids it
refreshed: a job missing from them is no longer this worker's (the monitor expired it, another
attempt holds it), and its signal is set so that the handler can stop work whose result can no
longer land, as pg-boss aborts ``job.signal`` then. The rest of a batch runs on untouched.
"""

from __future__ import annotations

import threading

from django.db import DatabaseError, connections

from django_pgboss.cancellation import CLAIM_LOST
from django_pgboss.records import Job
from django_pgboss.worker.ports import WorkerStore
from django_pgboss.worker.state import Board, job_ids, logger, start_thread

#: How often the heartbeat thread looks for jobs due a touch.
HEARTBEAT_TICK_SECONDS = 0.5


class Heartbeats:
    """One thread (``pgboss-heartbeat``) for every queue's running jobs."""

    def __init__(self, board: Board, store: WorkerStore) -> None:
        self.board = board
        self.store = store
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        self.thread = start_thread("pgboss-heartbeat", self._run)

    def join(self, timeout: float) -> None:
        if self.thread is not None:
            self.thread.join(timeout)

    def _run(self) -> None:
        """Touch running jobs of heartbeat queues on their interval (fenced)."""
        try:
            self._touch_until_stopped()
        finally:
            connections.close_all()

    def _touch_until_stopped(self) -> None:
        board, clock = self.board, self.board.clock
        failures = 0
        while not clock.wait(board.stopping, self._tick()) or board.in_flight_count():
            due: dict[str, list[Job]] = {}
            now = clock.monotonic()
            with board.lock:
                for name, state in board.queues.items():
                    refresh = state.registration.heartbeat_refresh_seconds
                    for job_id, job in state.in_flight.items():
                        interval = job.heartbeat_seconds
                        if not interval or job.signal.is_set():
                            continue
                        if now - state.last_touch[job_id] >= (refresh or interval / 2):
                            due.setdefault(name, []).append(job)
            for name, jobs in due.items():
                try:
                    touched = set(self.store.touch_attempts(name, jobs))
                    failures = 0
                except DatabaseError as exc:
                    # A heartbeat that could not run says nothing about the claim: nothing is cancelled.
                    failures += 1
                    board.database_trouble(f"touching jobs of {name}", exc, failures)
                    continue
                with board.lock:
                    touched_queue = board.queues.get(name)
                    last_touch = touched_queue.last_touch if touched_queue is not None else {}
                    for job in jobs:
                        if job.id in last_touch:
                            last_touch[job.id] = now
                lost = [job for job in jobs if job.id not in touched]
                board.cancel(
                    name,
                    lost,
                    CLAIM_LOST,
                    "the job's claim was lost: its attempt is no longer active under this worker",
                )
                if lost:
                    logger.warning(
                        "%d running job(s) of %s are no longer held by this worker (their claim lapsed): "
                        "%s; their signal is set",
                        len(lost),
                        name,
                        job_ids(lost),
                    )
            if board.aborting.is_set():
                return

    def _tick(self) -> float:
        """The tick: HEARTBEAT_TICK_SECONDS, or shorter for a queue with a shorter refresh."""
        refreshes = [
            state.registration.heartbeat_refresh_seconds
            for state in list(self.board.queues.values())
            if state.registration.heartbeat_refresh_seconds
        ]
        return min([HEARTBEAT_TICK_SECONDS, *refreshes])
