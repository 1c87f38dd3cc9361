"""The worker's part for async queues: their slots on its one event loop (worker/async_runner.py
says how they run), started with the worker and ended by its stop."""

from __future__ import annotations

import threading
import time
from contextlib import AbstractContextManager
from typing import Any

from django.db import connections

from django_pgboss import signals
from django_pgboss.cancellation import DEADLINE
from django_pgboss.observability import tracing
from django_pgboss.records import Job
from django_pgboss.worker import events
from django_pgboss.worker.async_runner import AsyncQueue, EventLoopThread
from django_pgboss.worker.core import Outcome, QueueState, close_old_connections_quietly, job_ids, logger
from django_pgboss.worker.deadlines import deadline_output
from django_pgboss.worker.handlers import HandlerThreads


class AsyncHandlers(HandlerThreads):
    """An async queue's ``concurrency`` slots in place of its handler threads. A unit's end goes
    through the handler threads' _finish_unit(), and a deadline is the deadline thread's
    (worker/deadlines.py): the same settles, fences, outputs, signals and stats."""

    # Set up by Worker.__init__: the loop is started by the first async queue.
    _loop: EventLoopThread | None
    _async_queues: dict[str, AsyncQueue]

    def _start_async(self, state: QueueState) -> None:
        if self._loop is None:
            self._loop = EventLoopThread()
            self._loop.start()
        runner = AsyncQueue(state, self._loop, _Host(self, state))
        self._async_queues[state.registration.queue] = runner
        runner.start()

    def _stop_async(self, *, cancel: bool) -> None:
        """End the slots, cancelling the units still running when ``cancel`` (the grace period is
        over: their jobs went back to the queue), then the loop."""
        if self._loop is None:
            return
        if cancel:
            for name, runner in self._async_queues.items():
                cancelled = runner.cancel_running()
                if cancelled:
                    logger.warning(
                        "stopping: cancelled %d async handler(s) of %s still running", cancelled, name
                    )
        for runner in self._async_queues.values():
            runner.join(timeout=5 if cancel else 30)
        self._loop.stop()


class _Host:
    """The worker as one async queue's slots see it (async_runner.AsyncHost)."""

    def __init__(self, worker: Any, state: QueueState) -> None:
        self.worker = worker
        self.state = state

    def finish(self, name: str, jobs: list[Job], outcome: Outcome | None) -> None:
        self.worker._finish_unit(self.state, name, jobs, outcome)

    def deadline(self, jobs: list[Job]) -> float | None:
        with self.worker._lock:
            moments = [self.state.deadlines[job.id] for job in jobs if job.id in self.state.deadlines]
        return max(moments) if moments else None

    def expired(self, name: str, jobs: list[Job]) -> None:
        # As the deadline thread fails a thread's unit: fenced, its place freed, then the signals.
        seconds = max(job.expire_in_seconds for job in jobs)
        self.worker._finish_unit(self.state, name, jobs, ("deadline", deadline_output(seconds)))
        self.worker.stats.add(deadlines=1)
        # Its coroutine is still running: pg-boss's handler_overrun (raised off the loop).
        self.worker._overruns.overrun(name, [job.id for job in jobs], seconds)
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
                args=(self.worker, name, newly, DEADLINE),
                name=f"pgboss-async-cancelled-{name}",
                daemon=True,
            ).start()

    def announces(self) -> bool:
        return signals.has_receivers(signals.job_started)

    def announce(self, name: str, jobs: list[Job]) -> None:
        if signals.has_receivers(signals.job_started):
            events.jobs_started(self.worker, name, jobs)
            # The bridge and announcer threads keep their connection: drop it when a receiver
            # left it obsolete.
            close_old_connections_quietly()

    def started(self, name: str) -> None:
        self.state.last_job_started_at = time.time()
        if self.worker.instruments is not None:
            self.worker.instruments.handler_started(name)

    def ended(self, name: str, seconds: float) -> None:
        if self.worker.instruments is not None:
            self.worker.instruments.handler_finished(name, seconds)

    def span(self, name: str, jobs: list[Job]) -> AbstractContextManager[Any]:
        return tracing.process_span(name, jobs)

    def abandoned_ended(self, name: str, jobs: list[Job]) -> None:
        with self.worker._lock:
            self.worker._abandoned_coroutines -= 1
        logger.warning("abandoned async handler of %s (job(s) %s) ended after all", name, job_ids(jobs))
        if self.worker.instruments is not None:
            self.worker.instruments.handler_abandoned(name, -1)

    def abandoned(self, name: str, jobs: list[Job]) -> None:
        with self.worker._lock:
            self.worker._abandoned_coroutines += 1
        self.worker.stats.add(abandoned=1)
        if self.worker.instruments is not None:
            self.worker.instruments.handler_abandoned(name)
        logger.error(
            "an async handler of %s ignored the cancellation of job(s) %s: abandoned it (left running)",
            name,
            job_ids(jobs),
        )


def _send_cancelled(worker: Any, name: str, jobs: list[Job], reason: str) -> None:
    """job_cancelled for ``jobs``, as WorkerCore._cancel() sends it, on a thread of its own."""
    try:
        for job in jobs:
            signals.send(
                signals.job_cancelled, type(worker), worker=worker, queue=name, job=job, reason=reason
            )
    finally:
        connections.close_all()
