"""The worker's deadlines: a job that runs past its ``expire_in_seconds`` is failed by the worker.

A Python thread cannot be killed, so the deadline is kept without the handler's help: at the
moment a running unit passes its deadline, the deadline thread (``pgboss-deadlines``) sets its
jobs' signals (``job.signal``), hands their failure to the settler (fenced to the attempt, so the
retry can be claimed at once, here or by another worker), frees the slot and starts a new handler
thread in place of the one still running, so the queue keeps its concurrency.

The thread left running is *detached*. A cooperative handler sees its signal and returns; its
late result goes through the attempt fence like any other, which refuses it (the attempt was
failed), and it is logged, never stored. A handler that ignores its signal for longer than
ABANDON_GRACE_SECONDS is *abandoned*: counted (``WorkerStats.abandoned``) and logged. A thread
leaks whatever it holds, so past ``max_abandoned_threads`` abandoned threads still running the
worker stops fetching and ends with EXIT_ABANDONED_THREADS, for the process supervisor to start a
fresh process (docs/deployment.md).

A unit's deadline counts from its claim, as the database's expiry does (started_on), and is the
longest ``expire_in_seconds`` of its jobs, as pg-boss's handler timeout is for a batch.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol

from django.db import connections

from django_pgboss.cancellation import DEADLINE
from django_pgboss.observability.instruments import HandlerInstruments
from django_pgboss.worker.messages import Fail, Unit
from django_pgboss.worker.outcomes import deadline_output
from django_pgboss.worker.ports import OverrunReports
from django_pgboss.worker.state import Board, Detached, job_ids, logger, start_thread

#: How long a detached handler may go on after its signal before it counts as abandoned.
ABANDON_GRACE_SECONDS = 1.0
#: The exit status of a worker that stopped because too many handler threads ignored their
#: signals (EX_TEMPFAIL of sysexits.h: a fresh process will do).
EXIT_ABANDONED_THREADS = 75
#: The longest the deadline thread sleeps between looks, so a new unit's deadline is never missed
#: by more than this even if no handler event wakes it.
DEADLINE_TICK_SECONDS = 0.25


class DetachingPool(Protocol):
    """What the deadlines need of the handler pool (worker/handlers.py's ``HandlerPool``): the
    units its threads run, a thread set loose from its unit with another put in its place, and
    the loose threads that ignored their signal. Each is called with the board's lock held."""

    def running_units(self) -> list[tuple[threading.Thread, Unit]]:
        """Each thread running a unit, with the unit."""
        ...

    def detach(self, thread: threading.Thread, now: float) -> Unit:
        """Let ``thread`` run on without its unit, a new thread in its place; returns the unit."""
        ...

    def abandon_overdue(self, now: float, grace: float) -> list[tuple[threading.Thread, Detached]]:
        """Mark abandoned the detached threads still running ``grace`` seconds after their unit
        was failed; returns the newly abandoned."""
        ...

    def abandoned_running(self) -> int:
        """How many abandoned threads are still running."""
        ...


class Deadlines:
    """The deadline thread (``pgboss-deadlines``), and the abandoned-thread limit.

    It fails the units of ``pool`` that pass their deadline (the pool detaches their threads),
    and counts ``abandoned_coroutines()`` (the async queues') against ``max_abandoned_threads``
    with the pool's abandoned threads. ``exit_status`` is EXIT_ABANDONED_THREADS once it stopped
    the worker for them, else 0.
    """

    def __init__(
        self,
        board: Board,
        pool: DetachingPool,
        *,
        overruns: OverrunReports,
        instruments: HandlerInstruments | None,
        max_abandoned_threads: int,
        abandoned_coroutines: Callable[[], int],
    ) -> None:
        self.board = board
        self.pool = pool
        self.overruns = overruns
        self.instruments = instruments
        self.max_abandoned_threads = max_abandoned_threads
        self.abandoned_coroutines = abandoned_coroutines
        self.exit_status = 0
        # Wakes the thread before its next tick: a stop, an abort, the end of a stop's grace.
        self.wake = threading.Event()
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        self.thread = start_thread("pgboss-deadlines", self._run)

    def join(self, timeout: float) -> None:
        if self.thread is not None:
            self.thread.join(timeout)

    def _run(self) -> None:
        try:
            self._keep_deadlines()
        finally:
            connections.close_all()

    def _keep_deadlines(self) -> None:
        board, clock = self.board, self.board.clock
        while True:
            cancelled: list[tuple[Unit, float, str]] = []
            wait = 0.0
            with board.lock:
                # Kept through a stop's grace period too: a job that passes its deadline then is failed.
                if (board.stopping.is_set() and not board.in_flight_count()) or board.aborting.is_set():
                    return
                now = clock.monotonic()
                upcoming = []
                for thread, unit in self.pool.running_units():
                    deadline = self._unit_deadline(unit)
                    if deadline is None:
                        continue
                    if deadline <= now:
                        cancelled.append(self._detach(thread, now))
                    else:
                        upcoming.append(deadline)
                if not cancelled:
                    wait = min([DEADLINE_TICK_SECONDS, *(deadline - now for deadline in upcoming)])
            if not cancelled:
                # Its own event, not the board's condition: that one is notified each time a
                # handler ends a unit, which would wake this thread to scan the running units
                # once per job (about 10 us a job at batch size 50, bench/README.md) though an
                # ended unit only takes a deadline away. A new unit's is seen within a tick, as
                # before; a stop and an abort set the event.
                clock.wait(self.wake, max(wait, 0.001))
                self.wake.clear()
                continue
            # Outside the lock: a signal runs its callbacks, which are the handler's code.
            for unit, seconds, option in cancelled:
                board.cancel(
                    unit.queue, unit.jobs, DEADLINE, f"the job passed its deadline ({option} {seconds})"
                )
                # Its handler is still running: pg-boss's handler_overrun.
                self.overruns.overrun(unit.queue, [job.id for job in unit.jobs], seconds)

    def _unit_deadline(self, unit: Unit) -> float | None:
        """The moment ``unit`` must be done by, or None once its jobs left in_flight."""
        state = self.board.queues.get(unit.queue)
        if state is None:
            return None
        deadlines = state.deadlines
        moments = [deadlines[job.id] for job in unit.jobs if job.id in deadlines]
        return max(moments) if moments else None

    def _detach(self, thread: threading.Thread, now: float) -> tuple[Unit, float, str]:
        """Fail ``thread``'s unit at its deadline and have the pool put a new handler thread in
        its place; returns the unit, whose signals the caller sets, with its deadline's seconds
        and option. Called with the lock held."""
        board = self.board
        unit = self.pool.detach(thread, now)
        name, jobs = unit.queue, unit.jobs
        state = board.queues[name]
        seconds, option = state.deadline_seconds(jobs)
        held = [job for job in jobs if state.release(job.id)]
        state.free += 1
        if held:
            state.unsettled += 1
            board.settle(Fail(name, held, deadline_output(seconds, option)))
        board.stats.add(deadlines=1)
        logger.warning(
            "job(s) %s of %s passed their deadline (%gs): failed so they retry, their signal set; "
            "%s goes on without its thread",
            job_ids(jobs),
            name,
            seconds,
            name,
        )
        board.lock.notify_all()
        state.wake.set()
        return unit, seconds, option

    def check_abandoned(self) -> None:
        """Count the detached handlers that ignored their signal; stop past the limit."""
        board = self.board
        now = board.clock.monotonic()
        with board.lock:
            for thread, detached in self.pool.abandon_overdue(now, ABANDON_GRACE_SECONDS):
                board.stats.add(abandoned=1)
                if self.instruments is not None:
                    self.instruments.handler_abandoned(detached.name)
                logger.error(
                    "handler thread %s ignored the cancellation signal of job(s) %s of %s for %.1fs: "
                    "abandoned it (%d abandoned thread(s) running, limit %d)",
                    thread.name,
                    job_ids(detached.jobs),
                    detached.name,
                    now - detached.since,
                    self.abandoned_running(),
                    self.max_abandoned_threads,
                )
            running = self.abandoned_running()
        if running > self.max_abandoned_threads and not board.stopping.is_set():
            logger.error(
                "%d abandoned handler thread(s) are still running, more than max_abandoned_threads "
                "(%d): stopping, to exit with status %d so that the process supervisor starts a "
                "fresh worker",
                running,
                self.max_abandoned_threads,
                EXIT_ABANDONED_THREADS,
            )
            self.exit_status = EXIT_ABANDONED_THREADS
            board.stop()

    def abandoned_running(self) -> int:
        """Abandoned handlers still running: the pool's threads and the async queues' coroutines."""
        return self.pool.abandoned_running() + self.abandoned_coroutines()
