"""The worker's stop: claimed jobs that never started go back at once, running ones get the grace
period, and whatever is still running after it goes back to the queue for another worker.

The stop ends the other parts without knowing their classes: it names what it needs of each as
the protocols below, and the engine (worker/engine.py) hands it the parts it built.
"""

from __future__ import annotations

import queue as queue_module
import threading
from collections.abc import Collection, Sequence
from typing import Protocol

from django.db import connections

from django_pgboss.cancellation import SHUTDOWN
from django_pgboss.records import Job
from django_pgboss.worker.messages import Interrupt, Requeue, StopSettling
from django_pgboss.worker.outcomes import SHUTDOWN_OUTPUT, UNSTARTED_OUTPUT
from django_pgboss.worker.state import Board, QueueState, WorkerStats, logger


class Joinable(Protocol):
    """A part that runs on a thread of its own and ends by itself once the stop is under way (a
    fetcher, the settler after its stop marker, the heartbeats)."""

    def join(self, timeout: float) -> None:
        """Wait at most ``timeout`` seconds for the part's thread to end."""
        ...


class HandlerThreads(Protocol):
    """What the stop needs of the handler pool (worker/handlers.py's ``HandlerPool``)."""

    def replace_dead(self) -> None:
        """Fail the jobs of a handler thread that died (none is replaced while stopping)."""
        ...

    def join_attached(self, timeout: float) -> None:
        """Wait for the handler threads, except those detached at a deadline (each ``timeout``)."""
        ...


class AsyncSlotsStop(Protocol):
    """What the stop needs of the async queues (worker/async_host.py's ``AsyncQueues``)."""

    @property
    def queues(self) -> Collection[str]:
        """The async queues whose slots run."""
        ...

    def stop(self, *, cancel: bool) -> None:
        """End the slots, cancelling the units still running when ``cancel``, then the loop."""
        ...


class DeadlineThread(Joinable, Protocol):
    """The deadline thread (worker/deadlines.py's ``Deadlines``)."""

    #: Set to wake the thread before its next tick.
    wake: threading.Event


class Stoppable(Protocol):
    """A part the stop ends outright (the LISTEN connection of worker/listener.py)."""

    def stop(self) -> None: ...


class Shutdown:
    """The end of Worker.run(), over the parts it ends: a handler thread that died during the
    grace period holds jobs nobody runs, which are failed at once rather than waited for; async
    units still running past the grace period are cancelled; the settler gets every put-back
    before its stop marker."""

    def __init__(
        self,
        board: Board,
        *,
        pool: HandlerThreads,
        async_queues: AsyncSlotsStop,
        fetchers: Sequence[Joinable],
        settler: Joinable,
        heartbeats: Joinable,
        deadlines: DeadlineThread,
    ) -> None:
        self.board = board
        self.pool = pool
        self.async_queues = async_queues
        self.fetchers = fetchers
        self.settler = settler
        self.heartbeats = heartbeats
        self.deadlines = deadlines

    def run(self, grace_seconds: float, listener: Stoppable | None) -> None:
        board, clock = self.board, self.board.clock
        # The grace period counts from the start of the stop.
        deadline = clock.monotonic() + (0 if board.aborting.is_set() else grace_seconds)
        board.stop()
        self.deadlines.wake.set()
        # Claimed jobs whose handler has not started go back now, so that another worker (the
        # one a rolling deploy just started) can take them while this one finishes its own.
        self.put_back_unstarted()
        while True:
            # A thread that died holds jobs nobody runs: they are failed at once, not waited for.
            self.pool.replace_dead()
            with board.lock:
                if not board.in_flight_count() or clock.monotonic() >= deadline or board.aborting.is_set():
                    break
                clock.wait_on(board.lock, min(0.1, max(deadline - clock.monotonic(), 0)))
        with board.lock:
            # They are put back below; nothing of this worker holds them any more (no heartbeat).
            leftovers = {name: state.release_all() for name, state in board.queues.items()}
        # Nothing is in flight now: the deadline thread may end without waiting out its tick.
        self.deadlines.wake.set()
        for name, jobs in leftovers.items():
            board.cancel(name, jobs, SHUTDOWN, "the worker stopped and its grace period ended")
            if jobs:
                logger.warning(
                    "stopping: %d job(s) of %s still running go back to the queue, their attempt not "
                    "counted towards retry_limit",
                    len(jobs),
                    name,
                )
                board.settle(Interrupt(name, jobs, SHUTDOWN_OUTPUT))
        # A fetch still in flight hands its jobs to the settler (see QueueFetcher), which must get
        # them before its stop marker.
        for fetcher in self.fetchers:
            fetcher.join(timeout=30)
        board.settle(StopSettling())
        # One stop marker per handler thread or async slot, behind any unit still buffered.
        for state in list(board.queues.values()):
            for _ in range(state.registration.concurrency):
                state.work.put(None)
        self.async_queues.stop(cancel=any(leftovers.get(name) for name in self.async_queues.queues))
        if listener is not None:
            listener.stop()
        self.settler.join(timeout=30)
        self.heartbeats.join(timeout=30)
        self.deadlines.join(timeout=30)
        if not any(leftovers.values()):
            # Handlers past the grace period are left running (daemon threads): their jobs went
            # back above, and a settle they attempt later finds no active job to settle. So are
            # handlers detached at a deadline (worker/deadlines.py), whose units are settled.
            self.pool.join_attached(timeout=30)
        connections.close_all()
        stats: WorkerStats = board.stats
        logger.info(
            "worker stopped: %d completed, %d failed, %d lost to another attempt, %d put back in the queue",
            stats.completed,
            stats.failed,
            stats.lost,
            stats.requeued,
        )

    def put_back_unstarted(self) -> None:
        """Hand every claimed unit no handler has started to the settler, to go back uncharged."""
        put_back_unstarted(self.board, list(self.board.queues.values()))


def put_back_unstarted(board: Board, states: Sequence[QueueState]) -> None:
    """Hand every claimed unit of ``states`` no handler has started to the settler, to go back
    uncharged (a stop, or a queue's off_work())."""
    with board.lock:
        for state in states:
            name = state.registration.queue
            unstarted: list[Job] = []
            while True:
                try:
                    unit = state.work.get_nowait()
                except queue_module.Empty:
                    break
                if unit is None:
                    continue
                unstarted += unit.jobs
                state.free += 1
            for job in unstarted:
                state.release(job.id)
            if unstarted:
                logger.info(
                    "stopping: %d claimed job(s) of %s that had not started go back to the queue",
                    len(unstarted),
                    name,
                )
                board.settle(Requeue(name, unstarted, UNSTARTED_OUTPUT))
        board.lock.notify_all()
