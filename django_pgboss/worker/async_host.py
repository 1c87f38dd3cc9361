"""The worker's async queues: their slots on its one event loop (worker/async_slots.py says how
they run), started with the worker and ended by its stop.

A unit's end goes through the handler pool's ``release_unit()`` and a deadline fails it as the
deadline thread fails a thread's unit (worker/deadlines.py): the same settles, fences, outputs,
signals and stats. The host names what it needs of those parts as the protocols below
(``ReleasesUnits``, ``SlotFactory``); the engine (worker/engine.py) hands it the pool and the
event loop's slots.
"""

from __future__ import annotations

import threading
import time
from contextlib import AbstractContextManager
from typing import Any, Protocol

from django.db import connections

from django_pgboss import signals
from django_pgboss.cancellation import DEADLINE
from django_pgboss.observability import tracing
from django_pgboss.observability.instruments import HandlerInstruments
from django_pgboss.records import Job
from django_pgboss.worker import signalling
from django_pgboss.worker.messages import (
    DeadlinePassed,
    Errored,
    Fail,
    Outcome,
    Raised,
    Returned,
    SettleRequest,
    Unit,
)
from django_pgboss.worker.outcomes import deadline_output
from django_pgboss.worker.ports import OverrunReports
from django_pgboss.worker.results import settle_items
from django_pgboss.worker.state import Board, QueueState, close_old_connections_quietly, job_ids, logger


class ReleasesUnits(Protocol):
    """What ends a unit (the handler pool's ``release_unit()``, worker/handlers.py): its settles
    handed to the settler and its slot freed, the same way for a coroutine as for a thread."""

    def release_unit(
        self,
        state: QueueState,
        unit: Unit,
        settles: list[SettleRequest],
        thread: threading.Thread | None,
    ) -> None: ...


class SlotRunner(Protocol):
    """One async queue's slots on the loop (worker/async_slots.py's ``AsyncQueue``)."""

    def start(self) -> None:
        """Start the slots, and the bridge that feeds a slot waiting on an empty buffer."""
        ...

    def join(self, timeout: float) -> None:
        """Wait (at most ``timeout`` seconds) for the slots to take their stop markers and end."""
        ...

    def cancel_running(self) -> int:
        """Cancel every unit still running; returns how many."""
        ...


class SlotFactory(Protocol):
    """What opens a queue's slots on the worker's one event loop and ends the loop
    (worker/async_slots.py's ``EventLoopSlots``)."""

    def open(self, state: QueueState, host: _Host) -> SlotRunner:
        """``state``'s queue's slots, served by ``host``, not started yet."""
        ...

    def close(self) -> None:
        """End the loop, once every queue's slots ended."""
        ...


class AsyncQueues:
    """Every async queue's ``concurrency`` slots, in place of handler threads, on one event loop
    started by the first async queue; and the coroutines abandoned at a deadline, still running."""

    def __init__(
        self,
        board: Board,
        pool: ReleasesUnits,
        *,
        slots: SlotFactory,
        overruns: OverrunReports,
        instruments: HandlerInstruments | None,
    ) -> None:
        self.board = board
        self.pool = pool
        self.slots = slots
        self.overruns = overruns
        self.instruments = instruments
        self.queues: dict[str, SlotRunner] = {}
        # Async handlers' coroutines abandoned and still running: they count against the
        # abandoned-thread limit (worker/deadlines.py), since one stuck in a sync call holds a
        # thread as well.
        self.abandoned = 0

    def start_queue(self, state: QueueState) -> None:
        runner = self.slots.open(state, _Host(self, state))
        self.queues[state.registration.queue] = runner
        runner.start()

    def abandoned_running(self) -> int:
        return self.abandoned

    def close_queue(self, name: str) -> None:
        """End queue ``name``'s slots (off_work(): its units are done, its stop markers queued)."""
        runner = self.queues.pop(name, None)
        if runner is not None:
            runner.join(timeout=30)

    def stop(self, *, cancel: bool) -> None:
        """End the slots, cancelling the units still running when ``cancel`` (the grace period is
        over: their jobs went back to the queue), then the loop."""
        if cancel:
            for name, runner in self.queues.items():
                cancelled = runner.cancel_running()
                if cancelled:
                    logger.warning(
                        "stopping: cancelled %d async handler(s) of %s still running", cancelled, name
                    )
        for runner in self.queues.values():
            runner.join(timeout=5 if cancel else 30)
        self.slots.close()

    def finish(self, state: QueueState, unit: Unit, outcome: Outcome | None) -> None:
        """An async unit ended on a slot of the event loop: its outcome is settled as a handler
        thread's would be, and its slot freed."""
        clock = self.board.clock
        state.last_job_ended_at = clock.time()
        if isinstance(outcome, Errored):
            state.last_error, state.last_error_at = outcome.error, clock.time()
        self.pool.release_unit(state, unit, _settles_for(state, unit, outcome), None)


def _settles_for(state: QueueState, unit: Unit, outcome: Outcome | None) -> list[SettleRequest]:
    """The settle requests for an async unit's outcome: a returned value as settle_items() reads it
    (worker/results.py), an error or a passed deadline fails its jobs, and None (a unit cancelled
    at a stop, or whose claim was lost) settles nothing."""
    if outcome is None:
        return []
    if isinstance(outcome, Returned):
        return settle_items(state.registration, unit.queue, unit.jobs, outcome.value)
    if isinstance(outcome, Errored):
        # Logged at ERROR by the settler, as a handler thread's exception is.
        return [Raised(unit.queue, unit.jobs, outcome.error)]
    assert isinstance(outcome, DeadlinePassed)
    return [Fail(unit.queue, unit.jobs, outcome.output)]


class _Host:
    """The worker as one async queue's slots see it (async_slots.AsyncHost)."""

    def __init__(self, queues: AsyncQueues, state: QueueState) -> None:
        self.queues = queues
        self.board = queues.board
        self.state = state

    def finish(self, name: str, jobs: list[Job], outcome: Outcome | None) -> None:
        self.queues.finish(self.state, Unit(name, jobs), outcome)

    def deadline(self, jobs: list[Job]) -> float | None:
        # Read without the board's lock: the fetcher wrote each deadline before it queued the unit,
        # and a dict's get() is atomic; a job released meanwhile (its claim lost) has none.
        deadlines = self.state.deadlines
        moments = [moment for job in jobs if (moment := deadlines.get(job.id)) is not None]
        now = self.board.clock.monotonic()
        if not moments:
            return None
        # The loop's clock is time.monotonic(); the deadline is on the worker's clock.
        return time.monotonic() + (max(moments) - now)

    def expired(self, name: str, jobs: list[Job]) -> None:
        # As the deadline thread fails a thread's unit: fenced, its place freed, then the signals.
        seconds = max(job.expire_in_seconds for job in jobs)
        self.queues.finish(self.state, Unit(name, jobs), DeadlinePassed(deadline_output(seconds)))
        self.board.stats.add(deadlines=1)
        # Its coroutine is still running: pg-boss's handler_overrun (raised off the loop).
        self.queues.overruns.overrun(name, [job.id for job in jobs], seconds)
        logger.warning(
            "job(s) %s of %s passed their deadline (%gs): failed so they retry, their coroutine cancelled",
            job_ids(jobs),
            name,
            seconds,
        )
        # The signals are set here, before the slot cancels the coroutine, so a handler that
        # catches its CancelledError finds job.signal set (their callbacks are the coroutine's
        # own). The job_cancelled receivers are other people's code, which a threaded handler's
        # deadline runs on the deadline thread, where the ORM works: here they run on a thread
        # too, never on the loop (which a blocking receiver would stall, and where the ORM
        # refuses to run).
        message = f"the job passed its deadline (expire_in_seconds {seconds})"
        newly = [job for job in jobs if job.signal.set(DEADLINE, message)]
        if newly and signals.has_receivers(signals.job_cancelled):
            threading.Thread(
                target=_send_cancelled,
                args=(self.board.owner, name, newly, DEADLINE),
                name=f"pgboss-async-cancelled-{name}",
                daemon=True,
            ).start()

    def announces(self) -> bool:
        return signals.has_receivers(signals.job_started)

    def announce(self, name: str, jobs: list[Job]) -> None:
        if signals.has_receivers(signals.job_started):
            signalling.jobs_started(self.board.owner, name, jobs)
            # The bridge and announcer threads keep their connection: drop it when a receiver
            # left it obsolete.
            close_old_connections_quietly()

    def started(self, name: str) -> None:
        self.state.last_job_started_at = self.board.clock.time()
        if self.queues.instruments is not None:
            self.queues.instruments.handler_started(name)

    def ended(self, name: str, seconds: float) -> None:
        if self.queues.instruments is not None:
            self.queues.instruments.handler_finished(name, seconds)

    def span(self, name: str, jobs: list[Job]) -> AbstractContextManager[Any]:
        # Whether spans are recorded as the fetch of these jobs read it, as a handler thread's span
        # does: tracing.active() asks OpenTelemetry's provider, which reads the environment, at
        # several microseconds a call (bench/README.md, the async drain).
        return tracing.process_span(name, jobs, traced=self.state.traced)

    def abandoned_ended(self, name: str, jobs: list[Job]) -> None:
        with self.board.lock:
            self.queues.abandoned -= 1
        logger.warning("abandoned async handler of %s (job(s) %s) ended after all", name, job_ids(jobs))
        if self.queues.instruments is not None:
            self.queues.instruments.handler_abandoned(name, -1)

    def abandoned(self, name: str, jobs: list[Job]) -> None:
        with self.board.lock:
            self.queues.abandoned += 1
        self.board.stats.add(abandoned=1)
        if self.queues.instruments is not None:
            self.queues.instruments.handler_abandoned(name)
        logger.error(
            "an async handler of %s ignored the cancellation of job(s) %s: abandoned it (left running)",
            name,
            job_ids(jobs),
        )


def _send_cancelled(worker: Any, name: str, jobs: list[Job], reason: str) -> None:
    """job_cancelled for ``jobs``, as Board.cancel() sends it, on a thread of its own."""
    try:
        for job in jobs:
            signals.send(
                signals.job_cancelled, type(worker), worker=worker, queue=name, job=job, reason=reason
            )
    finally:
        connections.close_all()
