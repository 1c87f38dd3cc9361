"""The worker's fetchers: one per queue, each with its own loop and thread, claiming only as many jobs as the queue has free slots.

A fetch costs a round trip whatever its size, so while jobs are still running a loop waits
(briefly) for half the slots to free up rather than claiming one job per finished handler. A loop
sleeps on its queue's wake event between polls: a notification (worker/listener.py), a finished
handler or a stop sets it. After a fetch that claimed jobs the loop fetches again as soon as
slots are free, without a polling wait, which is what pg-boss's burst_when_batch_full and
burst_when_ready_exceeds turn on (its loop otherwise waits its interval between fetches).

With ``local_group_concurrency`` the loop counts this worker's in-flight jobs per group: the
groups at their limit are passed over by the fetch (``ignore_groups``), and a job the fetch
claimed past its group's limit anyway (two of a group in one batch) goes back unclaimed, as
pg-boss restores it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from django.db import DatabaseError, connections

from django_pgboss.arguments import group_limits
from django_pgboss.observability import tracing
from django_pgboss.records import Job
from django_pgboss.worker.messages import Requeue, Unclaim, Unit
from django_pgboss.worker.outcomes import UNSTARTED_OUTPUT
from django_pgboss.worker.ports import WorkerStore
from django_pgboss.worker.state import Board, QueueState, logger, start_thread

#: Longest a fetch loop waits for more free slots while a handler thread may be idle.
LOW_WATER_WAIT_SECONDS = 0.05


class QueueFetcher:
    """One queue's fetch loop (``pgboss-fetch-<queue>``): claims jobs into its free slots.

    ``listening()`` says whether the worker's LISTEN connection is up, which lets a queue with
    notify poll at its ``notify_polling_interval_seconds``.
    """

    def __init__(
        self,
        board: Board,
        state: QueueState,
        store: WorkerStore,
        *,
        burst: bool,
        listening: Callable[[], bool],
    ) -> None:
        self.board = board
        self.state = state
        self.store = store
        self.burst = burst
        self.listening = listening
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        self.thread = start_thread(f"pgboss-fetch-{self.state.registration.queue}", self._run)

    def join(self, timeout: float) -> None:
        if self.thread is not None:
            self.thread.join(timeout)

    def _run(self) -> None:
        try:
            self._fetch_until_stopped()
        finally:
            connections.close_all()

    def _fetch_until_stopped(self) -> None:
        board, state, clock = self.board, self.state, self.board.clock
        registration = state.registration
        name = registration.queue
        budget = board.budget
        failures = 0
        while not board.stopping.is_set() and not state.closing:
            with board.lock:
                self._wait_for_low_water(state.low_water)
                slots = budget.left(state.free)
            if slots <= 0:
                if budget.spent:
                    state.drained = True
                    board.stop_when_idle()
                clock.wait(state.wake, registration.polling_interval_seconds)
                state.wake.clear()
                continue
            # Without batch a fetch claims every free slot: up to batch_size when it claims ahead,
            # and never fewer than the idle threads, so a batch_size below concurrency (the
            # default 1) fills all of them with one round trip instead of one per thread, as
            # pg-boss's localConcurrency loops would between them; no job waits for a thread.
            size = registration.batch_size if registration.batch else slots
            settles_before = state.settles
            try:
                # The loop keeps its connection between fetches (close_old_connections() would
                # close it every time under the default CONN_MAX_AGE = 0); a broken one is thrown
                # away by Board.database_trouble() and Django opens a fresh one on the next fetch.
                with board.lock:
                    ignore = self._groups_at_capacity()
                # Whether spans are recorded, read once a fetch: the fetch's span and its jobs'
                # handler spans follow it (tracing.active() says why not once a job).
                traced = tracing.active()
                fetch_started = tracing.now()
                self.store.use_generic_plans()
                jobs = self.store.fetch(
                    name,
                    batch_size=size,
                    include_metadata=registration.include_metadata,
                    group_concurrency=registration.group_concurrency,
                    min_priority=registration.min_priority,
                    max_priority=registration.max_priority,
                    ignore_groups=ignore,
                    # A traced job's process span continues the context it was sent with.
                    include_trace_context=traced,
                )
                state.last_fetched_at = clock.time()
                state.traced = traced
                if jobs and traced:
                    # Only a fetch that claimed jobs gets a span: an idle queue polls every
                    # polling_interval_seconds, and a span per empty poll would bury the rest.
                    tracing.record_fetch(name, fetch_started, len(jobs))
                if failures:
                    logger.info("fetching from %s again after %d database error(s)", name, failures)
                failures = 0
            except DatabaseError as exc:
                failures += 1
                state.last_error, state.last_error_at = exc, clock.time()
                board.database_trouble(f"fetching from {name}", exc, failures)
                continue
            if not jobs:
                with board.lock:
                    # A settle written while the fetch ran may have put a job back for a retry
                    # that the fetch's snapshot did not see: the next fetch decides.
                    state.drained = (
                        not state.in_flight and not state.unsettled and state.settles == settles_before
                    )
                if self.burst and state.drained:
                    return
                clock.wait(state.wake, self._poll_interval() if not self.burst else 0.05)
                state.wake.clear()
                continue
            board.stats.add(fetched=len(jobs))
            with board.lock:
                if board.stopping.is_set() or state.closing:
                    # The stop (or the queue's off_work()) began during the fetch, and its
                    # put_back_unstarted() has run (or runs next, under this lock): these never
                    # start, so they go back uncharged.
                    board.settle(Requeue(name, jobs, UNSTARTED_OUTPUT))
                    return
                jobs, excess = self._within_local_group_limits(jobs)
                if excess:
                    state.unsettled += 1
                    board.settle(Unclaim(name, excess, UNSTARTED_OUTPUT))
                if jobs:
                    self._hold(jobs)
            if not jobs:
                # Every job fetched was of a group at its local limit: wait for a slot to free up
                # (a finished job wakes the loop) rather than fetch them again at once.
                clock.wait(state.wake, self._poll_interval())
                state.wake.clear()

    def _hold(self, jobs: list[Job]) -> None:
        """Count fetched jobs in flight and queue their units; called with the board's lock held."""
        state = self.state
        registration = state.registration
        name = registration.queue
        units = [jobs] if registration.batch else [[job] for job in jobs]
        state.drained = False
        self.board.budget.claimed += len(jobs)
        now = self.board.clock.monotonic()
        for job in jobs:
            state.hold(job, now)
        state.free -= len(units)
        # Queued under the lock, so that a stop's put_back_unstarted() finds every unit.
        for unit in units:
            state.work.put(Unit(name, unit))

    def _wait_for_low_water(self, low_water: int) -> None:
        """Hold the next fetch until half the slots are free, called with the board's lock held.

        While claimed jobs wait in the buffer for a thread the handlers are busy, so nothing is
        lost by waiting for a fetch worth its round trip. Without a buffer a thread may be idle,
        so the wait is capped at LOW_WATER_WAIT_SECONDS.
        """
        board, state, clock = self.board, self.state, self.board.clock
        if not (0 < state.free < low_water and state.in_flight):
            return  # nearly every fetch: no clock reading
        deadline = clock.monotonic() + LOW_WATER_WAIT_SECONDS
        while (
            0 < state.free < low_water and state.in_flight and not (board.stopping.is_set() or state.closing)
        ):
            buffered = state.capacity - state.free > state.registration.concurrency
            remaining = deadline - clock.monotonic()
            if not buffered and remaining <= 0:
                return
            clock.wait_on(board.lock, LOW_WATER_WAIT_SECONDS if buffered else remaining)

    def _poll_interval(self) -> float:
        """How long an empty fetch waits: ``notify_polling_interval_seconds`` while the queue's
        notifications are arriving (the listener is connected), ``polling_interval_seconds`` else."""
        state = self.state
        registration = state.registration
        notify_interval = registration.notify_polling_interval_seconds
        if notify_interval is not None and state.notify and self.listening():
            return notify_interval
        return registration.polling_interval_seconds

    def _groups_at_capacity(self) -> list[str] | None:
        """The groups this worker holds at their local_group_concurrency limit (the largest of the
        default and the tiers' limits, as pg-boss's), for the fetch to pass over; called with
        the board's lock held."""
        state = self.state
        local = state.registration.local_group_concurrency
        if local is None:
            return None
        default, tiers = group_limits(local, "local_group_concurrency")
        ceiling = max([default, *tiers.values()])
        return [group for group, active in state.group_active.items() if active >= ceiling]

    def _within_local_group_limits(self, jobs: list[Job]) -> tuple[list[Job], list[Job]]:
        """Split fetched jobs into those within their group's local limit and the rest; called with
        the board's lock held, before the jobs are held (so that they count one by one)."""
        state = self.state
        local = state.registration.local_group_concurrency
        if local is None:
            return jobs, []
        default, tiers = group_limits(local, "local_group_concurrency")
        counted = dict(state.group_active)
        allowed: list[Job] = []
        excess: list[Job] = []
        for job in jobs:
            if job.group_id is None:
                allowed.append(job)
                continue
            limit = tiers.get(job.group_tier, default) if job.group_tier is not None else default
            if counted.get(job.group_id, 0) < limit:
                counted[job.group_id] = counted.get(job.group_id, 0) + 1
                allowed.append(job)
            else:
                excess.append(job)
        return allowed, excess
