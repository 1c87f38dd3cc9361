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
import time

from django.db import connections

from django_pgboss.cancellation import DEADLINE
from django_pgboss.records import Job
from django_pgboss.worker.core import Detached, Unit, job_ids, logger
from django_pgboss.worker.handlers import HandlerThreads

#: How long a detached handler may go on after its signal before it counts as abandoned.
ABANDON_GRACE_SECONDS = 1.0
#: The exit status of a worker that stopped because too many handler threads ignored their
#: signals (EX_TEMPFAIL of sysexits.h: a fresh process will do).
EXIT_ABANDONED_THREADS = 75
#: The longest the deadline thread sleeps between looks, so a new unit's deadline is never missed
#: by more than this even if no handler event wakes it.
DEADLINE_TICK_SECONDS = 0.25


def deadline_output(seconds: float, option: str = "expire_in_seconds") -> dict[str, str]:
    """What a job failed at its deadline stores (pg-boss's message, with the reason named)."""
    return {
        "name": "JobDeadlineExceeded",
        "message": f"handler execution exceeded {seconds:g}s ({option}); the worker failed "
        "the attempt and cancelled its signal",
    }


class Deadlines(HandlerThreads):
    """The deadline thread, the detached handlers, and the abandoned-thread limit."""

    def _deadline_loop(self) -> None:
        try:
            self._keep_deadlines()
        finally:
            connections.close_all()

    def _keep_deadlines(self) -> None:
        while True:
            cancelled: list[tuple[str, list[Job]]] = []
            wait = 0.0
            with self._lock:
                # Kept through a stop's grace period too: a job that passes its deadline then is failed.
                if (self._stopping.is_set() and not self._in_flight_count()) or self._aborting.is_set():
                    return
                now = time.monotonic()
                upcoming = []
                for thread, unit in list(self._current.items()):
                    deadline = self._unit_deadline(unit)
                    if deadline is None:
                        continue
                    if deadline <= now:
                        cancelled.append((unit[0], self._detach(thread, unit, now)))
                    else:
                        upcoming.append(deadline)
                if not cancelled:
                    wait = min([DEADLINE_TICK_SECONDS, *(deadline - now for deadline in upcoming)])
            if not cancelled:
                # Its own event, not the worker's condition: that one is notified each time a
                # handler ends a unit, which would wake this thread to scan the running units
                # once per job (about 10 us a job at batch size 50, bench/README.md) though an
                # ended unit only takes a deadline away. A new unit's is seen within a tick, as
                # before; a stop and an abort set the event.
                self._deadline_wake.wait(max(wait, 0.001))
                self._deadline_wake.clear()
                continue
            # Outside the lock: a signal runs its callbacks, which are the handler's code.
            for name, jobs in cancelled:
                seconds, option = self._queues[name].deadline_seconds(jobs)
                self._cancel(name, jobs, DEADLINE, f"the job passed its deadline ({option} {seconds})")
                # Its handler is still running: pg-boss's handler_overrun.
                self._overruns.overrun(name, [job.id for job in jobs], seconds)

    def _unit_deadline(self, unit: Unit) -> float | None:
        """The moment ``unit`` must be done by, or None once its jobs left in_flight."""
        name, jobs = unit
        deadlines = self._queues[name].deadlines
        moments = [deadlines[job.id] for job in jobs if job.id in deadlines]
        return max(moments) if moments else None

    def _detach(self, thread: threading.Thread, unit: Unit, now: float) -> list[Job]:
        """Fail ``unit`` at its deadline and put a new handler thread in ``thread``'s place;
        returns the jobs whose signal the caller sets. Called with ``self._lock`` held."""
        name, jobs = unit
        state = self._queues[name]
        seconds, option = state.deadline_seconds(jobs)
        held = [job for job in jobs if state.release(job.id)]
        del self._current[thread]
        self._current_since.pop(thread, None)
        self._handlers.pop(thread, None)
        self._detached[thread] = Detached(name, jobs, now)
        state.free += 1
        if held:
            state.unsettled += 1
            self._settle_queue.put(("fail", name, held, deadline_output(seconds, option)))
        self.stats.add(deadlines=1)
        logger.warning(
            "job(s) %s of %s passed their deadline (%gs): failed so they retry, their signal set; "
            "%s goes on without its thread",
            job_ids(jobs),
            name,
            seconds,
            name,
        )
        self._lock.notify_all()
        state.wake.set()
        if not self._stopping.is_set():
            self._spawn_handler(state, f"{thread.name}+")
        return jobs

    def _check_abandoned(self) -> None:
        """Count the detached handlers that ignored their signal; stop past the limit."""
        now = time.monotonic()
        with self._lock:
            for thread, detached in list(self._detached.items()):
                if not thread.is_alive():
                    del self._detached[thread]
                    continue
                if detached.abandoned or now - detached.since < ABANDON_GRACE_SECONDS:
                    continue
                detached.abandoned = True
                self.stats.add(abandoned=1)
                if self.instruments is not None:
                    self.instruments.handler_abandoned(detached.name)
                logger.error(
                    "handler thread %s ignored the cancellation signal of job(s) %s of %s for %.1fs: "
                    "abandoned it (%d abandoned thread(s) running, limit %d)",
                    thread.name,
                    job_ids(detached.jobs),
                    detached.name,
                    now - detached.since,
                    self._abandoned_running(),
                    self.max_abandoned_threads,
                )
            running = self._abandoned_running()
        if running > self.max_abandoned_threads and not self._stopping.is_set():
            logger.error(
                "%d abandoned handler thread(s) are still running, more than max_abandoned_threads "
                "(%d): stopping, to exit with status %d so that the process supervisor starts a "
                "fresh worker",
                running,
                self.max_abandoned_threads,
                EXIT_ABANDONED_THREADS,
            )
            self.exit_status = EXIT_ABANDONED_THREADS
            self._stopping.set()
            self._wake_all()

    def _abandoned_running(self) -> int:
        threads = sum(1 for thread, d in self._detached.items() if d.abandoned and thread.is_alive())
        return threads + self._abandoned_coroutines
