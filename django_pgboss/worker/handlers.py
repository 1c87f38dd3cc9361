"""The worker's handler threads: each queue's ``concurrency`` threads, and what a handler call ends as.

A thread takes the next unit its queue's fetch loop claimed, calls the handler with it, and hands
the result to the settler (worker/settler.py). Whatever a handler raises is its jobs' failure; a
thread that dies anyway (a fault in the loop itself) has its jobs failed and is replaced.
"""

from __future__ import annotations

import queue as queue_module
import threading
import time

from django.db import connections

from django_pgboss.observability import tracing
from django_pgboss.records import Job
from django_pgboss.worker import events, job_logs, transactional
from django_pgboss.worker.core import (
    Outcome,
    QueueState,
    WorkerCore,
    close_old_connections_quietly,
    job_ids,
    logger,
)
from django_pgboss.worker.outcomes import THREAD_DIED_OUTPUT
from django_pgboss.worker.results import settle_items
from django_pgboss.worker.settler import SettleItem


class HandlerThreads(WorkerCore):
    """Each queue's handler threads (``pgboss-handler-<queue>-<n>``) and their replacement."""

    def _spawn_handler(self, state: QueueState, name: str) -> None:
        thread = threading.Thread(target=self._handler_loop, args=(state,), name=name, daemon=True)
        self._handlers[thread] = state
        thread.start()
        self._threads.append(thread)

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
                    return
                self._current[thread] = unit
                self._run_handler(*unit)
                # Looked at without the lock first, since almost no unit is detached: a thread
                # is detached (under the lock) only while its unit runs, and _release_unit()
                # took the lock since, so a detach of this unit is seen here either way.
                detached = None
                if thread in self._detached:
                    with self._lock:
                        detached = self._detached.pop(thread, None)
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
            # _run_handler keeps whatever a handler raises; this is a fault in the loop itself.
            # The thread ends here, and _replace_dead_handlers() fails the jobs it held and starts
            # another in its place.
            logger.exception("handler thread %s of %s died", thread.name, state.registration.queue)
            events.error(self, exc, f"running handler thread {thread.name} of {state.registration.queue}")
        finally:
            connections.close_all()

    def _replace_dead_handlers(self) -> None:
        """Fail the jobs of any handler thread that died and, unless stopping, start a replacement.

        Without this a queue would keep claiming jobs for a thread that no longer runs them, look
        healthy, and make a stop wait its whole grace period for jobs nobody is running.
        """
        for thread, state in list(self._handlers.items()):
            if thread.is_alive():
                continue
            del self._handlers[thread]
            with self._lock:
                unit = self._current.pop(thread, None)
                self._current_since.pop(thread, None)
                held = []
                if unit is not None:
                    name, jobs = unit
                    held = [job for job in jobs if state.release(job.id)]
                    state.free += 1
                if held:
                    state.unsettled += 1
                    self._settle_queue.put(("fail", name, held, THREAD_DIED_OUTPUT))
                self._lock.notify_all()
            state.wake.set()
            if self._stopping.is_set():
                # Handler threads end at a stop: one that returned after its stop marker is not
                # news, and none is replaced any more.
                continue
            logger.error(
                "handler thread %s died%s; replaced it",
                thread.name,
                f" running job(s) {job_ids(held)}, which were failed so they retry" if held else "",
            )
            self._spawn_handler(state, thread.name)

    def _run_handler(self, name: str, jobs: list[Job]) -> None:
        state = self._queues[name]
        registration = state.registration
        settles: list[SettleItem] = []
        began = time.time()
        state.last_job_started_at = began
        self._current_since[threading.current_thread()] = began
        events.jobs_started(self, name, jobs)
        job_logs.started(name, jobs)
        instruments = self.instruments
        if instruments is not None:
            instruments.handler_started(name)
        started = time.perf_counter()
        try:
            try:
                # The span records what the handler raised, and the error status, as it passes.
                with tracing.process_span(name, jobs, traced=state.traced):
                    if registration.transactional:
                        # The handler and the completion in one transaction
                        # (worker/transactional.py): nothing for the settler unless the run
                        # rolled back and its jobs must fail.
                        thread = threading.current_thread()
                        settles = transactional.run_unit(
                            self.jobs,
                            registration,
                            jobs,
                            self.stats,
                            is_late=lambda: thread in self._detached,
                            committed=lambda pairs, ids: events.jobs_completed(self, name, pairs, ids),
                        )
                        rolled_back = settles[0][3] if settles else None
                        job_logs.ended(name, jobs, time.perf_counter() - started, rolled_back)
                        return
                    result = registration.handler(jobs if registration.batch else jobs[0])
            finally:
                if instruments is not None:
                    instruments.handler_finished(name, time.perf_counter() - started)
        except BaseException as exc:
            state.last_error, state.last_error_at = exc, time.time()
            # Every way a handler can end is the job's failure, SystemExit and KeyboardInterrupt
            # included: signals reach only the main thread (which the command's own handlers
            # serve), so in a handler thread these are the handler's own doing, and letting them
            # through would end the thread without a word while the queue kept claiming for it.
            # The settler logs the exception at ERROR once it knows whether the jobs retry.
            job_logs.ended(name, jobs, time.perf_counter() - started, exc)
            settles = [("raised", name, jobs, exc)]
        else:
            job_logs.ended(name, jobs, time.perf_counter() - started, None)
            settles = settle_items(registration, name, jobs, result)
        finally:
            state.last_job_ended_at = time.time()
            close_old_connections_quietly()
            self._release_unit(state, name, jobs, settles, threading.current_thread())

    def _finish_unit(self, state: QueueState, name: str, jobs: list[Job], outcome: Outcome | None) -> None:
        """An async unit ended on a slot of the event loop (worker/async_runner.py): its outcome is
        settled as a handler thread's would be, and its slot freed."""
        state.last_job_ended_at = time.time()
        if outcome is not None and outcome[0] == "error":
            state.last_error, state.last_error_at = outcome[1], time.time()
        self._release_unit(state, name, jobs, self._settles_for(name, jobs, outcome), None)

    def _settles_for(self, name: str, jobs: list[Job], outcome: Outcome | None) -> list[SettleItem]:
        """The settle requests for an async unit's outcome: ("result", value) as settle_items()
        reads it (worker/results.py), ("error", exception) and ("deadline", output) fail its jobs,
        and None (a unit cancelled at a stop, or whose claim was lost) settles nothing."""
        if outcome is None:
            return []
        kind, value = outcome
        if kind == "result":
            return settle_items(self._queues[name].registration, name, jobs, value)
        if kind == "error":
            # Logged at ERROR by the settler, as a handler thread's exception is.
            return [("raised", name, jobs, value)]
        return [("fail", name, jobs, value)]

    def _release_unit(
        self,
        state: QueueState,
        name: str,
        jobs: list[Job],
        settles: list[SettleItem],
        thread: threading.Thread | None,
    ) -> None:
        """A unit ended, on handler ``thread`` or (None) on a slot of the event loop: hand its
        settles to the settler and free its slot."""
        with self._lock:
            late = thread is not None and thread in self._detached
            if not late:
                if thread is not None:
                    self._current.pop(thread, None)
                    self._current_since.pop(thread, None)
                state.free += 1
                for job in jobs:
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
                self._settle_queue.put(settle)
            # What waits on the condition for a unit to end: the fetch loop, for its low water
            # mark of free slots (fetching.py), and a stop, for the last job in flight. Waking
            # them for every other unit only has them look and wait again, once per job.
            if state.free >= state.low_water or not state.in_flight or self._stopping.is_set():
                self._lock.notify_all()
        if late:
            logger.warning(
                "job(s) %s of %s: the handler ended after the deadline its jobs were failed at; "
                "its result goes to the attempt fence, which refuses it",
                job_ids(jobs),
                name,
            )
        # Set only when it is not: each set takes the event's lock, and the fetch loop clears it
        # once per wait, so in a batch only the first unit to end finds it clear.
        if not state.wake.is_set():
            state.wake.set()
        if self.max_jobs is not None and self._claimed_total >= self.max_jobs:
            self._stop_when_idle()

    def _settled(self, name: str, units: int) -> None:
        """The settler's report that ``units`` handler results of ``name`` are written."""
        state = self._queues.get(name)
        if state is not None:
            with self._lock:
                state.unsettled = max(state.unsettled - units, 0)
                state.settles += 1
            state.wake.set()
