"""The worker's handler pool: each queue's ``concurrency`` threads, and what a handler call ends as.

A thread takes the next unit its queue's fetcher claimed, calls the handler with it, and hands
the result to the settler (worker/settler.py). Whatever a handler raises is its jobs' failure; a
thread that dies anyway (a fault in the loop itself) has its jobs failed and is replaced.

The pool owns its threads' bookkeeping: which queue each thread serves, the unit each one runs
and since when, and the threads *detached* at a deadline (worker/deadlines.py decides when; the
pool puts a new thread in the old one's place and lets the old one run on). An async unit's end
(worker/async_host.py) is released through the same ``release_unit()``.
"""

from __future__ import annotations

import queue as queue_module
import threading
import time

from django.db import connections

from django_pgboss.observability import tracing
from django_pgboss.observability.instruments import HandlerInstruments
from django_pgboss.records import Job
from django_pgboss.worker import job_logs, signalling, transactional
from django_pgboss.worker.messages import Fail, Raised, SettleRequest, Unit
from django_pgboss.worker.outcomes import THREAD_DIED_OUTPUT
from django_pgboss.worker.ports import TransactionalStore
from django_pgboss.worker.results import settle_items
from django_pgboss.worker.state import (
    RUNNING_HANDLER,
    Board,
    Detached,
    QueueState,
    close_old_connections_quietly,
    job_ids,
    logger,
)


class HandlerPool:
    """Each queue's handler threads (``pgboss-handler-<queue>-<n>``) and their replacement.

    ``transactional_store`` runs the units of transactional queues (None when the worker's store
    cannot: the Worker refuses such queues then).
    """

    def __init__(
        self,
        board: Board,
        *,
        instruments: HandlerInstruments | None,
        transactional_store: TransactionalStore | None,
    ) -> None:
        self.board = board
        self.instruments = instruments
        self.transactional_store = transactional_store
        #: Every thread the pool started, in order (the stop joins them).
        self.threads: list[threading.Thread] = []
        # Each live handler thread with its queue, and the unit each one is running, so that the
        # jobs of a thread that died can be found and failed.
        self._queue_of: dict[threading.Thread, QueueState] = {}
        self.current: dict[threading.Thread, Unit] = {}
        # When (Clock.time()) each thread's current unit started, for Worker.snapshot().
        self.current_since: dict[threading.Thread, float] = {}
        # Threads left running past their unit's deadline (detach()).
        self.detached: dict[threading.Thread, Detached] = {}

    # -- threads ---------------------------------------------------------------------------------

    def start_queue(self, state: QueueState) -> None:
        """Start ``concurrency`` threads for ``state``'s queue."""
        name = state.registration.queue
        for index in range(state.registration.concurrency):
            self.spawn(state, f"pgboss-handler-{name}-{index}")

    def spawn(self, state: QueueState, name: str) -> None:
        thread = threading.Thread(target=self._handler_loop, args=(state,), name=name, daemon=True)
        self._queue_of[thread] = state
        thread.start()
        self.threads.append(thread)

    def _handler_loop(self, state: QueueState) -> None:
        thread = threading.current_thread()
        try:
            while True:
                try:
                    unit = state.work.get_nowait()
                except queue_module.Empty:
                    # Django closes obsolete connections around each unit of work. After a unit
                    # the handler already did (the finally below); before one only after idling,
                    # since back to back the previous unit's "after" is this one's "before".
                    close_old_connections_quietly()
                    unit = state.work.get()
                if unit is None:
                    # A stop marker (a stop, or the queue's off_work()): the thread ends, and is
                    # no dead thread to replace.
                    with self.board.lock:
                        self._queue_of.pop(thread, None)
                    return
                self.current[thread] = unit
                self._run_unit(state, unit)
                # Looked at without the lock first, since almost no unit is detached: a thread
                # is detached (under the lock) only while its unit runs, and release_unit()
                # took the lock since, so a detach of this unit is seen here either way.
                detached = None
                if thread in self.detached:
                    with self.board.lock:
                        detached = self.detached.pop(thread, None)
                if detached is not None:
                    # Its unit was settled at the deadline and another thread took its place.
                    if detached.abandoned:
                        logger.warning(
                            "abandoned handler thread %s of %s ended after all", thread.name, detached.name
                        )
                        if self.instruments is not None:
                            self.instruments.handler_abandoned(detached.name, -1)
                    return
        except BaseException as exc:
            # _run_unit keeps whatever a handler raises; this is a fault in the loop itself.
            # The thread ends here, and replace_dead() fails the jobs it held and starts another
            # in its place.
            logger.exception("handler thread %s of %s died", thread.name, state.registration.queue)
            signalling.error(
                self.board.owner, exc, f"running handler thread {thread.name} of {state.registration.queue}"
            )
        finally:
            connections.close_all()

    def replace_dead(self) -> None:
        """Fail the jobs of any handler thread that died and, unless stopping, start a replacement.

        Without this a queue would keep claiming jobs for a thread that no longer runs them, look
        healthy, and make a stop wait its whole grace period for jobs nobody is running.
        """
        board = self.board
        for thread, state in list(self._queue_of.items()):
            # A thread spawn() registered but has not started yet (the deadline thread may be
            # replacing one as this runs) is not alive either, and is not dead: taking it for
            # dead would start a second replacement, which no stop marker would ever end. Popped
            # here, so that a thread is found dead once, whoever else looks.
            if thread.is_alive() or thread.ident is None or self._queue_of.pop(thread, None) is None:
                continue
            with board.lock:
                unit = self.current.pop(thread, None)
                self.current_since.pop(thread, None)
                held: list[Job] = []
                if unit is not None:
                    held = [job for job in unit.jobs if state.release(job.id)]
                    state.free += 1
                    if held:
                        state.unsettled += 1
                        board.settle(Fail(unit.queue, held, THREAD_DIED_OUTPUT))
                board.lock.notify_all()
            state.wake.set()
            if board.stopping.is_set():
                # Handler threads end at a stop: one that returned after its stop marker is not
                # news, and none is replaced any more.
                continue
            logger.error(
                "handler thread %s died%s; replaced it",
                thread.name,
                f" running job(s) {job_ids(held)}, which were failed so they retry" if held else "",
            )
            self.spawn(state, thread.name)

    def detach(self, thread: threading.Thread, now: float) -> Unit:
        """Let ``thread`` run on without its unit (its deadline passed) and put a new thread in its
        place, unless stopping; returns the unit. Called with the board's lock held."""
        unit = self.current.pop(thread)
        self.current_since.pop(thread, None)
        state = self._queue_of.pop(thread)
        self.detached[thread] = Detached(unit.queue, unit.jobs, now)
        if not self.board.stopping.is_set():
            self.spawn(state, f"{thread.name}+")
        return unit

    def running_units(self) -> list[tuple[threading.Thread, Unit]]:
        """Each thread running a unit, with the unit; called with the board's lock held."""
        return list(self.current.items())

    def abandon_overdue(self, now: float, grace: float) -> list[tuple[threading.Thread, Detached]]:
        """Mark abandoned the detached threads still running ``grace`` seconds after their unit was
        failed, and forget those that ended; returns the newly abandoned. Lock held."""
        newly = []
        for thread, detached in list(self.detached.items()):
            if not thread.is_alive():
                del self.detached[thread]
                continue
            if detached.abandoned or now - detached.since < grace:
                continue
            detached.abandoned = True
            newly.append((thread, detached))
        return newly

    def abandoned_running(self) -> int:
        """How many abandoned threads are still running."""
        return sum(1 for thread, d in self.detached.items() if d.abandoned and thread.is_alive())

    def join_attached(self, timeout: float) -> None:
        """Wait (``timeout`` seconds each) for every thread the pool started, except those
        detached at a deadline, which are left running (their units were settled)."""
        for thread in self.threads:
            if thread not in self.detached:
                thread.join(timeout=timeout)

    # -- one unit --------------------------------------------------------------------------------

    def _run_unit(self, state: QueueState, unit: Unit) -> None:
        name, jobs = unit.queue, unit.jobs
        registration = state.registration
        clock = self.board.clock
        settles: list[SettleRequest] = []
        began = clock.time()
        state.last_job_started_at = began
        thread = threading.current_thread()
        self.current_since[thread] = began
        owner = self.board.owner
        signalling.jobs_started(owner, name, jobs)
        job_logs.started(name, jobs)
        instruments = self.instruments
        if instruments is not None:
            instruments.handler_started(name)
        started = time.perf_counter()
        # So that off_work() called from this handler knows whose it is (state.RUNNING_HANDLER).
        inside = RUNNING_HANDLER.set(state)
        try:
            try:
                # The span records what the handler raised, and the error status, as it passes.
                with tracing.process_span(name, jobs, traced=state.traced):
                    if registration.transactional and self.transactional_store is not None:
                        # The handler and the completion in one transaction
                        # (worker/transactional.py): nothing for the settler unless the run
                        # rolled back and its jobs must fail.
                        raised = transactional.run_unit(
                            self.transactional_store,
                            registration,
                            jobs,
                            self.board.stats,
                            is_late=lambda: thread in self.detached,
                            committed=lambda pairs, ids: signalling.jobs_completed(owner, name, pairs, ids),
                        )
                        settles = list(raised)
                        rolled_back = raised[0].error if raised else None
                        job_logs.ended(name, jobs, time.perf_counter() - started, rolled_back)
                        return
                    result = registration.handler(jobs if registration.batch else jobs[0])
            finally:
                if instruments is not None:
                    instruments.handler_finished(name, time.perf_counter() - started)
        except BaseException as exc:
            state.last_error, state.last_error_at = exc, clock.time()
            # Every way a handler can end is the job's failure, SystemExit and KeyboardInterrupt
            # included: signals reach only the main thread (which the command's own handlers
            # serve), so in a handler thread these are the handler's own doing, and letting them
            # through would end the thread without a word while the queue kept claiming for it.
            # The settler logs the exception at ERROR once it knows whether the jobs retry.
            job_logs.ended(name, jobs, time.perf_counter() - started, exc)
            settles = [Raised(name, jobs, exc)]
        else:
            job_logs.ended(name, jobs, time.perf_counter() - started, None)
            settles = settle_items(registration, name, jobs, result)
        finally:
            RUNNING_HANDLER.reset(inside)
            state.last_job_ended_at = clock.time()
            close_old_connections_quietly()
            self.release_unit(state, unit, settles, thread)

    def release_unit(
        self,
        state: QueueState,
        unit: Unit,
        settles: list[SettleRequest],
        thread: threading.Thread | None,
    ) -> None:
        """A unit ended, on handler ``thread`` or (None) on a slot of the event loop: hand its
        settles to the settler and free its slot."""
        board = self.board
        with board.lock:
            late = thread is not None and thread in self.detached
            if not late:
                if thread is not None:
                    self.current.pop(thread, None)
                    self.current_since.pop(thread, None)
                state.free += 1
                for job in unit.jobs:
                    state.release(job.id)
            # Handed to the settler only now, and under the lock: settled before it was
            # counted, the result would leave the queue undrained for ever; settled before
            # the job left in_flight, its retry could be claimed under the same id and then
            # dropped from in_flight; and a stop that finds in_flight empty must find the
            # result already queued ahead of its own stop marker. A late result (its unit
            # was failed at the deadline) goes the same way, to the attempt fence, which
            # refuses it: the attempt it names is no longer active.
            state.unsettled += len(settles)
            for settle in settles:
                board.settle(settle)
            # What waits on the condition for a unit to end: the fetcher, for its low water
            # mark of free slots (fetching.py), and a stop, for the last job in flight. Waking
            # them for every other unit only has them look and wait again, once per job.
            if state.free >= state.low_water or not state.in_flight or board.stopping.is_set():
                board.lock.notify_all()
        if late:
            logger.warning(
                "job(s) %s of %s: the handler ended after the deadline its jobs were failed at; "
                "its result goes to the attempt fence, which refuses it",
                job_ids(unit.jobs),
                unit.queue,
            )
        # Set only when it is not: each set takes the event's lock, and the fetcher clears it
        # once per wait, so in a batch only the first unit to end finds it clear.
        if not state.wake.is_set():
            state.wake.set()
        budget = board.budget
        if budget.limit is not None and budget.claimed >= budget.limit:
            board.stop_when_idle()
