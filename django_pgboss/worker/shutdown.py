"""The worker's stop: claimed jobs that never started go back at once, running ones get the grace
period, and whatever is still running after it goes back to the queue for another worker."""

from __future__ import annotations

import queue as queue_module
import time

from django.db import connections

from django_pgboss.cancellation import SHUTDOWN
from django_pgboss.records import Job
from django_pgboss.worker.async_handlers import AsyncHandlers
from django_pgboss.worker.core import logger
from django_pgboss.worker.outcomes import SHUTDOWN_OUTPUT, UNSTARTED_OUTPUT


class Shutdown(AsyncHandlers):
    """The end of Worker.run(). It builds on the handler threads: a thread that died during the
    grace period holds jobs nobody runs, which are failed at once rather than waited for; and on
    the async queues' slots, whose units still running past the grace period it cancels."""

    def _shutdown(self) -> None:
        self._stopping.set()
        self._wake_all()
        self._deadline_wake.set()
        # Claimed jobs whose handler has not started go back now, so that another worker (the
        # one a rolling deploy just started) can take them while this one finishes its own.
        self._put_back_unstarted()
        deadline = time.monotonic() + (0 if self._aborting.is_set() else self.grace_seconds)
        while True:
            # A thread that died holds jobs nobody runs: they are failed at once, not waited for.
            self._replace_dead_handlers()
            with self._lock:
                if not self._in_flight_count() or time.monotonic() >= deadline or self._aborting.is_set():
                    break
                self._lock.wait(min(0.1, max(deadline - time.monotonic(), 0)))
        with self._lock:
            # They are put back below; nothing of this worker holds them any more (no heartbeat).
            leftovers = {name: state.release_all() for name, state in self._queues.items()}
        # Nothing is in flight now: the deadline thread may end without waiting out its tick.
        self._deadline_wake.set()
        for name, jobs in leftovers.items():
            self._cancel(name, jobs, SHUTDOWN, "the worker stopped and its grace period ended")
            if jobs:
                logger.warning(
                    "stopping: %d job(s) of %s still running go back to the queue, their attempt not "
                    "counted towards retry_limit",
                    len(jobs),
                    name,
                )
                self._settle_queue.put(("interrupt", name, jobs, SHUTDOWN_OUTPUT))
        # A fetch still in flight hands its jobs to the settler (see _fetch_until_stopped), which
        # must get them before its stop marker.
        for thread in self._threads:
            if thread.name.startswith("pgboss-fetch"):
                thread.join(timeout=30)
        self._settle_queue.put(("stop", "", [], None))
        for state in self._queues.values():
            for _ in range(state.registration.concurrency):
                state.work.put(None)
        self._stop_async(cancel=any(leftovers.get(name) for name in self._async_queues))
        if self._listener is not None:
            self._listener.stop()
        for thread in self._threads:
            # Handlers past the grace period are left running (daemon threads): their jobs went
            # back above, and a settle they attempt later finds no active job to settle. So are
            # handlers detached at a deadline (worker/deadlines.py), whose units are settled.
            if thread in self._detached:
                continue
            if not thread.name.startswith("pgboss-handler") or not any(leftovers.values()):
                thread.join(timeout=30)
        connections.close_all()
        logger.info(
            "worker stopped: %d completed, %d failed, %d lost to another attempt, %d put back in the queue",
            self.stats.completed,
            self.stats.failed,
            self.stats.lost,
            self.stats.requeued,
        )

    def _put_back_unstarted(self) -> None:
        """Hand every claimed unit no handler has started to the settler, to go back uncharged."""
        with self._lock:
            for name, state in self._queues.items():
                unstarted: list[Job] = []
                while True:
                    try:
                        unit = state.work.get_nowait()
                    except queue_module.Empty:
                        break
                    if unit is None:
                        continue
                    unstarted += unit[1]
                    state.free += 1
                for job in unstarted:
                    state.release(job.id)
                if unstarted:
                    logger.info(
                        "stopping: %d claimed job(s) of %s that had not started go back to the queue",
                        len(unstarted),
                        name,
                    )
                    self._settle_queue.put(("requeue", name, unstarted, UNSTARTED_OUTPUT))
            self._lock.notify_all()
