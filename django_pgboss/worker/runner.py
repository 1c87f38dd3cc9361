"""The worker: fetch loops, handler threads per queue, batched settles, heartbeats, a graceful stop.

One Worker serves any number of queues from one process. Each queue has a fetch loop that claims
only as many jobs as the queue has free slots: ``concurrency`` handler threads, and, when
``batch_size`` is larger, a buffer of claimed jobs up to ``batch_size`` waiting for the next free
thread, so that one fetch round trip serves many jobs. Each queue has its own ``concurrency``
handler threads, so a queue's buffer never takes another queue's threads. Results are settled by
one settler thread in batches (one statement per queue per flush, each job fenced to the attempt
it was fetched as). Queues with notify wake their loop through a LISTEN connection; every loop
also polls, which covers queues without notify and any notification lost in a reconnect.

The worker knows no SQL: its hot path (fetch, complete_each, fail, touch) goes through the job
store of the API (api/jobs.py), over the database context of the Boss it is given. Database errors are survived, not fatal:
a loop that loses its connection closes it, waits, and reconnects the Django way.
"""

from __future__ import annotations

import logging
import queue as queue_module
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db import DatabaseError, close_old_connections, connections

from django_pgboss.api.boss import Boss
from django_pgboss.api.jobs import JobStore
from django_pgboss.exceptions import QueueNotFound
from django_pgboss.records import Job
from django_pgboss.wire import EncodedOutput, output_value, storable_text, to_json
from django_pgboss.worker.backoff import backoff_delay, one_line, when_reachable, worth_logging
from django_pgboss.worker.listener import NotifyListener
from django_pgboss.worker.registry import Registration
from django_pgboss.worker.settler import SettleItem, Settler

logger = logging.getLogger("django_pgboss.worker")

#: What a job still running when the worker stops is failed with, so it is retried elsewhere.
SHUTDOWN_OUTPUT = {"name": "WorkerShutdown", "message": "the worker stopped while the job was running"}
#: What a claimed job that never started is failed with, in the one case it cannot be put back
#: (a stately key with a job already waiting in each state).
UNSTARTED_OUTPUT = {"name": "WorkerShutdown", "message": "the worker stopped before the job started"}
#: What the jobs of a handler thread that died are failed with, so they are retried.
THREAD_DIED_OUTPUT = {
    "name": "HandlerThreadDied",
    "message": "the worker thread running the job died before it finished (see the worker's log)",
}
#: Longest a fetch loop waits for more free slots while a handler thread may be idle.
LOW_WATER_WAIT_SECONDS = 0.05


@dataclass
class WorkerStats:
    """What a worker has done so far; read by the command's progress line."""

    fetched: int = 0
    completed: int = 0
    failed: int = 0
    lost: int = 0
    requeued: int = 0
    started_at: float = field(default_factory=time.monotonic)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, **counts: int) -> None:
        with self.lock:
            for key, value in counts.items():
                setattr(self, key, getattr(self, key) + value)

    @property
    def rate(self) -> float:
        """Jobs settled per second since the start."""
        elapsed = max(time.monotonic() - self.started_at, 1e-9)
        return (self.completed + self.failed) / elapsed


def queue_capacity(registration: Registration) -> int:
    """How many handler units a queue may hold at once, running or claimed and waiting.

    With ``batch`` a unit is one call with up to ``batch_size`` jobs, and ``concurrency`` calls
    run at once. Without it a unit is one job: ``concurrency`` run, and a ``batch_size`` above that
    lets a fetch claim ahead, so a queue of short jobs is not fetched one round trip per handful.
    """
    if registration.batch:
        return registration.concurrency
    return max(registration.concurrency, registration.batch_size)


class _QueueState:
    """One queue's slots, its in-flight jobs, and the event that wakes its fetch loop."""

    def __init__(self, registration: Registration) -> None:
        self.registration = registration
        self.capacity = queue_capacity(registration)
        self.free = self.capacity
        self.in_flight: dict[str, Job] = {}
        self.last_touch: dict[str, float] = {}
        self.wake = threading.Event()
        # Claimed units waiting for one of this queue's own handler threads: a queue's buffer
        # never runs on another queue's threads, so each keeps to its concurrency.
        self.work: queue_module.SimpleQueue[tuple[str, list[Job]] | None] = queue_module.SimpleQueue()
        self.drained = False
        # Handler results handed to the settler but not yet written: the queue is not drained
        # while a failed job may still come back for a retry.
        self.unsettled = 0


class Worker:
    """Runs the handlers of the given registrations until stopped (or, with burst, until idle).

    ``max_jobs`` stops fetching after that many jobs; ``grace_seconds`` is how long a stop waits
    for running handlers before failing their jobs so another worker retries them.
    """

    def __init__(
        self,
        registrations: Iterable[Registration],
        *,
        boss: Boss | None = None,
        burst: bool = False,
        max_jobs: int | None = None,
        grace_seconds: float = 30.0,
        listen: bool = True,
    ) -> None:
        self.boss = boss or Boss()
        # The worker's own statements go through the job store, over the Boss's context (so the
        # two share its queue-route cache).
        self.jobs = JobStore(self.boss.context)
        self.registrations = list(registrations)
        self.burst = burst
        self.max_jobs = max_jobs
        self.grace_seconds = grace_seconds
        self.listen = listen
        self.stats = WorkerStats()
        self._queues: dict[str, _QueueState] = {}
        self._lock = threading.Condition()
        self._stopping = threading.Event()
        self._aborting = threading.Event()
        self._settler = Settler(
            self.jobs,
            self.stats,
            labels={r.queue: r.label for r in self.registrations},
            settled=self._settled,
            trouble=self._database_trouble,
            is_stopping=self._stopping.is_set,
        )
        self._settle_queue = self._settler.queue
        self._threads: list[threading.Thread] = []
        # Each handler thread with its queue, and the unit each one is running, so that the jobs
        # of a thread that died can be found and failed.
        self._handlers: dict[threading.Thread, _QueueState] = {}
        self._current: dict[threading.Thread, tuple[str, list[Job]]] = {}
        self._listener: NotifyListener | None = None
        self._claimed_total = 0

    # -- lifecycle -----------------------------------------------------------------------------

    def run(self) -> WorkerStats:
        """Work until stop() (or, bursting, until every queue is empty); returns the stats."""
        names = [r.queue for r in self.registrations]
        found = when_reachable(lambda: self.boss.get_queues(names), self._stopping, "the worker")
        if found is None:
            return self.stats
        infos = {q.name: q for q in found}
        for registration in self.registrations:
            if registration.queue not in infos:
                raise QueueNotFound(
                    f"queue {registration.queue!r} does not exist; create it before working it"
                )
            self._queues[registration.queue] = _QueueState(registration)
        for name, state in self._queues.items():
            for index in range(state.registration.concurrency):
                self._spawn_handler(state, f"pgboss-handler-{name}-{index}")
        notify_queues = [name for name, info in infos.items() if info.notify]
        if self.listen and notify_queues:
            self._listener = NotifyListener(self.boss.context, notify_queues, self._wake)
            self._listener.start()
        self._spawn("pgboss-settler", self._settler.run)
        self._spawn("pgboss-heartbeat", self._heartbeat_loop)
        for name in self._queues:
            self._spawn(f"pgboss-fetch-{name}", self._fetch_loop, name)
        logger.info(
            "worker started: %s",
            ", ".join(
                f"{r.queue} -> {r.label} (concurrency {r.concurrency}, batch size {r.batch_size})"
                for r in self.registrations
            ),
        )
        try:
            while not self._stopping.is_set():
                if self.burst and self._all_drained():
                    logger.info("burst: every queue is empty, stopping")
                    break
                self._stopping.wait(0.1)
                self._replace_dead_handlers()
        finally:
            self._shutdown()
        return self.stats

    def stop(self, *, graceful: bool = True) -> None:
        """Stop fetching. Running handlers get the grace period unless ``graceful`` is False."""
        if not graceful:
            self._aborting.set()
        self._stopping.set()
        self._wake_all()

    @property
    def aborted(self) -> bool:
        """True when the worker was stopped without waiting for its handlers."""
        return self._aborting.is_set()

    @property
    def stopping(self) -> threading.Event:
        """Set once the worker stops fetching."""
        return self._stopping

    def _spawn(self, name: str, target: Any, *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _shutdown(self) -> None:
        self._stopping.set()
        self._wake_all()
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
            leftovers = {name: list(state.in_flight.values()) for name, state in self._queues.items()}
            # They are put back below; nothing of this worker holds them any more (no heartbeat).
            for state in self._queues.values():
                state.in_flight.clear()
                state.last_touch.clear()
        for name, jobs in leftovers.items():
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
        if self._listener is not None:
            self._listener.stop()
        for thread in self._threads:
            # Handlers past the grace period are left running (daemon threads): their jobs went
            # back above, and a settle they attempt later finds no active job to settle.
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
                    state.in_flight.pop(job.id, None)
                    state.last_touch.pop(job.id, None)
                if unstarted:
                    logger.info(
                        "stopping: %d claimed job(s) of %s that had not started go back to the queue",
                        len(unstarted),
                        name,
                    )
                    self._settle_queue.put(("requeue", name, unstarted, UNSTARTED_OUTPUT))
            self._lock.notify_all()

    # -- waking --------------------------------------------------------------------------------

    def _wake(self, name: str) -> None:
        state = self._queues.get(name)
        if state is not None:
            state.wake.set()

    def _wake_all(self) -> None:
        for state in self._queues.values():
            state.wake.set()

    def _in_flight_count(self) -> int:
        return sum(len(state.in_flight) for state in self._queues.values())

    def _all_drained(self) -> bool:
        with self._lock:
            return (
                all(state.drained for state in self._queues.values())
                and not self._in_flight_count()
                and self._settle_queue.empty()
            )

    # -- fetching ------------------------------------------------------------------------------

    def _fetch_loop(self, name: str) -> None:
        try:
            self._fetch_until_stopped(name)
        finally:
            connections.close_all()

    def _fetch_until_stopped(self, name: str) -> None:
        state = self._queues[name]
        registration = state.registration
        failures = 0
        # A fetch costs a round trip whatever its size, so with jobs still running the loop waits
        # (briefly) for half the slots to free up rather than claiming one job per finished handler.
        low_water = max(1, min(state.capacity, registration.batch_size) // 2)
        while not self._stopping.is_set():
            with self._lock:
                self._wait_for_low_water(state, low_water)
                slots = state.free
                if self.max_jobs is not None:
                    slots = min(slots, self.max_jobs - self._claimed_total)
            if slots <= 0:
                if self.max_jobs is not None and self._claimed_total >= self.max_jobs:
                    state.drained = True
                    self._stop_when_idle()
                state.wake.wait(registration.polling_interval_seconds)
                state.wake.clear()
                continue
            size = registration.batch_size if registration.batch else min(slots, registration.batch_size)
            try:
                # The loop keeps its connection between fetches (close_old_connections() would
                # close it every time under the default CONN_MAX_AGE = 0); a broken one is thrown
                # away by _database_trouble() and Django opens a fresh one on the next fetch.
                jobs = self.jobs.fetch(
                    name,
                    batch_size=size,
                    include_metadata=registration.include_metadata,
                    group_concurrency=registration.group_concurrency,
                    min_priority=registration.min_priority,
                    max_priority=registration.max_priority,
                )
                if failures:
                    logger.info("fetching from %s again after %d database error(s)", name, failures)
                failures = 0
            except DatabaseError as exc:
                failures += 1
                self._database_trouble(f"fetching from {name}", exc, failures)
                continue
            if not jobs:
                with self._lock:
                    state.drained = not state.in_flight and not state.unsettled
                if self.burst and state.drained:
                    return
                state.wake.wait(registration.polling_interval_seconds if not self.burst else 0.05)
                state.wake.clear()
                continue
            self.stats.add(fetched=len(jobs))
            units = [jobs] if registration.batch else [[job] for job in jobs]
            with self._lock:
                if self._stopping.is_set():
                    # The stop began during the fetch, and _put_back_unstarted() has run (or runs
                    # next, under this lock): these never start, so they go back uncharged.
                    self._settle_queue.put(("requeue", name, jobs, UNSTARTED_OUTPUT))
                    return
                state.drained = False
                self._claimed_total += len(jobs)
                now = time.monotonic()
                for job in jobs:
                    state.in_flight[job.id] = job
                    state.last_touch[job.id] = now
                state.free -= len(units)
                # Queued under the lock, so that a stop's _put_back_unstarted() finds every unit.
                for unit in units:
                    state.work.put((name, unit))

    def _wait_for_low_water(self, state: _QueueState, low_water: int) -> None:
        """Hold the next fetch until half the slots are free, called with ``self._lock`` held.

        While claimed jobs wait in the buffer for a thread the handlers are busy, so nothing is
        lost by waiting for a fetch worth its round trip. Without a buffer a thread may be idle,
        so the wait is capped at LOW_WATER_WAIT_SECONDS.
        """
        deadline = time.monotonic() + LOW_WATER_WAIT_SECONDS
        while 0 < state.free < low_water and state.in_flight and not self._stopping.is_set():
            buffered = state.capacity - state.free > state.registration.concurrency
            remaining = deadline - time.monotonic()
            if not buffered and remaining <= 0:
                return
            self._lock.wait(LOW_WATER_WAIT_SECONDS if buffered else remaining)

    def _stop_when_idle(self) -> None:
        """With --max-jobs reached, stop once the last claimed job is settled."""
        if not self._in_flight_count():
            self._stopping.set()

    def _database_trouble(self, doing: str, exc: BaseException, failures: int) -> None:
        delay = backoff_delay(exc, failures)
        if worth_logging(failures):
            logger.warning(
                "database error while %s (%s); retrying in %.1fs%s",
                doing,
                one_line(exc),
                delay,
                f" ({failures} failures in a row)" if failures > 1 else "",
            )
        # A broken connection must be thrown away, not reused: Django reconnects on the next query.
        connections.close_all()
        self._stopping.wait(delay)

    # -- running handlers ----------------------------------------------------------------------

    def _spawn_handler(self, state: _QueueState, name: str) -> None:
        thread = threading.Thread(target=self._handler_loop, args=(state,), name=name, daemon=True)
        self._handlers[thread] = state
        thread.start()
        self._threads.append(thread)

    def _handler_loop(self, state: _QueueState) -> None:
        thread = threading.current_thread()
        try:
            while True:
                try:
                    unit = state.work.get_nowait()
                except queue_module.Empty:
                    # Django closes obsolete connections around each unit of work. After a unit
                    # the handler already did (the finally below); before one only after idling,
                    # since back to back the previous unit's "after" is this one's "before".
                    _close_old_connections()
                    unit = state.work.get()
                if unit is None:
                    return
                self._current[thread] = unit
                self._run_handler(*unit)
        except BaseException:
            # _run_handler keeps whatever a handler raises; this is a fault in the loop itself.
            # The thread ends here, and _replace_dead_handlers() fails the jobs it held and starts
            # another in its place.
            logger.exception("handler thread %s of %s died", thread.name, state.registration.queue)
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
                held = []
                if unit is not None:
                    name, jobs = unit
                    held = [job for job in jobs if state.in_flight.pop(job.id, None) is not None]
                    for job in held:
                        state.last_touch.pop(job.id, None)
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
                f" running job(s) {_ids(held)}, which were failed so they retry" if held else "",
            )
            self._spawn_handler(state, thread.name)

    def _run_handler(self, name: str, jobs: list[Job]) -> None:
        state = self._queues[name]
        registration = state.registration
        settle: SettleItem | None = None
        try:
            result = registration.handler(jobs if registration.batch else jobs[0])
        except BaseException as exc:
            # Every way a handler can end is the job's failure, SystemExit and KeyboardInterrupt
            # included: signals reach only the main thread (which the command's own handlers
            # serve), so in a handler thread these are the handler's own doing, and letting them
            # through would end the thread without a word while the queue kept claiming for it.
            logger.info("job(s) %s of %s failed: %s: %s", _ids(jobs), name, type(exc).__name__, exc)
            settle = ("fail", name, jobs, exc)
        else:
            try:
                encoded = to_json(output_value(result), "output")
            except Exception as exc:
                # JobDataNotSerializable, and RecursionError for a structure nested deeper than
                # the encoder goes: the job fails with the reason, the thread carries on.
                message = storable_text(
                    f"the handler {registration.label} returned a value that cannot be stored as JSON: {exc}"
                )
                logger.error("job(s) %s of %s: %s", _ids(jobs), name, message)
                settle = ("fail", name, jobs, {"name": type(exc).__name__, "message": message})
            else:
                output = None if encoded is None else EncodedOutput(encoded)
                settle = ("complete", name, jobs, output)
        finally:
            _close_old_connections()
            with self._lock:
                self._current.pop(threading.current_thread(), None)
                state.free += 1
                for job in jobs:
                    state.in_flight.pop(job.id, None)
                    state.last_touch.pop(job.id, None)
                # Handed to the settler only now, and under the lock: settled before it was
                # counted, the result would leave the queue undrained for ever; settled before
                # the job left in_flight, its retry could be claimed under the same id and then
                # dropped from in_flight; and a stop that finds in_flight empty must find the
                # result already queued ahead of its own stop marker.
                if settle is not None:
                    state.unsettled += 1
                    self._settle_queue.put(settle)
                self._lock.notify_all()
            state.wake.set()
            if self.max_jobs is not None and self._claimed_total >= self.max_jobs:
                self._stop_when_idle()

    # -- settling ------------------------------------------------------------------------------

    def _settled(self, name: str, units: int) -> None:
        state = self._queues.get(name)
        if state is not None:
            with self._lock:
                state.unsettled = max(state.unsettled - units, 0)
            state.wake.set()

    # -- heartbeats ----------------------------------------------------------------------------

    def _heartbeat_loop(self) -> None:
        """Touch running jobs of heartbeat queues every half of their heartbeat_seconds (fenced)."""
        try:
            self._touch_until_stopped()
        finally:
            connections.close_all()

    def _touch_until_stopped(self) -> None:
        failures = 0
        while not self._stopping.wait(0.5) or self._in_flight_count():
            due: dict[str, list[Job]] = {}
            now = time.monotonic()
            with self._lock:
                for name, state in self._queues.items():
                    for job_id, job in state.in_flight.items():
                        interval = job.heartbeat_seconds
                        if interval and now - state.last_touch[job_id] >= interval / 2:
                            due.setdefault(name, []).append(job)
            for name, jobs in due.items():
                try:
                    touched = self.jobs.touch(name, jobs)
                    failures = 0
                except DatabaseError as exc:
                    failures += 1
                    self._database_trouble(f"touching jobs of {name}", exc, failures)
                    continue
                with self._lock:
                    for job in jobs:
                        if job.id in self._queues[name].last_touch:
                            self._queues[name].last_touch[job.id] = now
                if touched < len(jobs):
                    logger.warning(
                        "%d running job(s) of %s are no longer held by this worker (their claim lapsed)",
                        len(jobs) - touched,
                        name,
                    )
            if self._aborting.is_set():
                return


def _close_old_connections() -> None:
    """close_old_connections(), whose failure (a broken connection that will not even close) must
    not end a handler thread: the next query reconnects."""
    try:
        close_old_connections()
    except Exception:
        logger.warning("closing an old database connection failed", exc_info=True)


def _ids(jobs: list[Job]) -> str:
    return ", ".join(job.id for job in jobs[:5]) + (" ..." if len(jobs) > 5 else "")
