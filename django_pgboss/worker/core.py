"""What the worker's parts share: its stats, each queue's slots, and the base the parts build on.

The Worker (worker/runner.py) is assembled from one class per responsibility: the fetch loops
(worker/fetching.py), the handler threads (worker/handlers.py), the heartbeats
(worker/heartbeats.py), the deadlines (worker/deadlines.py) and the stop (worker/shutdown.py).
Each part reads and writes the state declared on WorkerCore below, always under its one lock
(``_lock``), and calls the few helpers it defines. Only the stop and the deadlines build on another part (the handler threads: the stop
replaces dead ones while it waits, the deadlines start a thread in place of one left running past
its deadline); the others import none of their siblings.
"""

from __future__ import annotations

import logging
import queue as queue_module
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from django.db import connections

from django_pgboss import signals
from django_pgboss.api.boss import Boss
from django_pgboss.api.jobs import JobStore
from django_pgboss.observability.instruments import HandlerInstruments
from django_pgboss.records import Job
from django_pgboss.worker import events
from django_pgboss.worker.backoff import backoff_delay, one_line, worth_logging
from django_pgboss.worker.listener import ListenerSettings, NotifyListener
from django_pgboss.worker.overruns import HandlerOverruns
from django_pgboss.worker.registry import Registration
from django_pgboss.worker.settler import SettleItem

logger = logging.getLogger("django_pgboss.worker")

#: How a handler call ended: ("result", its return value), ("error", what it raised), or
#: ("deadline", the output its job fails with: an async handler cancelled at the job's deadline).
Outcome = tuple[str, Any]


@dataclass
class WorkerStats:
    """What a worker has done so far; read by the command's progress line."""

    fetched: int = 0
    completed: int = 0
    failed: int = 0
    lost: int = 0
    requeued: int = 0
    #: Units failed by the worker at their deadline, and handler threads that then ignored their
    #: job's signal (worker/deadlines.py).
    deadlines: int = 0
    abandoned: int = 0
    started_at: float = field(default_factory=time.monotonic)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, **counts: int) -> None:
        """Add to some of the counters at once, under the stats' own lock."""
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


#: A unit of work for a handler thread: the queue's name and the jobs of one handler call.
Unit = tuple[str, list[Job]]


class QueueState:
    """One queue's slots, its in-flight jobs, and the event that wakes its fetch loop."""

    def __init__(self, registration: Registration, *, notify: bool = False) -> None:
        self.registration = registration
        # Whether the queue sends notifications (its loop may then poll less: see poll_interval).
        self.notify = notify
        self.capacity = queue_capacity(registration)
        self.free = self.capacity
        # A fetch costs a round trip whatever its size, so with jobs still running the fetch loop
        # waits (briefly) for this many free slots, half of them, rather than claiming one job
        # per finished handler (worker/fetching.py).
        self.low_water = max(1, min(self.capacity, registration.batch_size) // 2)
        self.in_flight: dict[str, Job] = {}
        self.last_touch: dict[str, float] = {}
        # When each in-flight job must be done by (its claim plus expire_in_seconds, monotonic).
        self.deadlines: dict[str, float] = {}
        # In-flight jobs per group_id, for local_group_concurrency.
        self.group_active: dict[str, int] = {}
        self.wake = threading.Event()
        # Claimed units waiting for one of this queue's own handler threads: a queue's buffer
        # never runs on another queue's threads, so each keeps to its concurrency.
        self.work: queue_module.SimpleQueue[Unit | None] = queue_module.SimpleQueue()
        self.drained = False
        # Handler results handed to the settler but not yet written: the queue is not drained
        # while a failed job may still come back for a retry.
        self.unsettled = 0
        # Settles written so far: an empty fetch that overlapped one (its snapshot taken before a
        # failed job went back for a retry) proves nothing about the queue being empty.
        self.settles = 0
        # pg-boss's wip readings (Worker.snapshot()), as time.time() moments: one attribute write
        # each, on the path they time.
        self.last_fetched_at: float | None = None
        # Whether spans were recorded when the queue last fetched (tracing.active()): its jobs'
        # handler spans follow it.
        self.traced = False
        self.last_job_started_at: float | None = None
        self.last_job_ended_at: float | None = None
        self.last_error: BaseException | None = None
        self.last_error_at: float | None = None

    def hold(self, job: Job, now: float) -> None:
        """Count ``job`` in flight from ``now``, its claim."""
        self.in_flight[job.id] = job
        self.last_touch[job.id] = now
        self.deadlines[job.id] = now + self.deadline_seconds([job])[0]
        if job.group_id is not None:
            self.group_active[job.group_id] = self.group_active.get(job.group_id, 0) + 1

    def deadline_seconds(self, jobs: list[Job]) -> tuple[float, str]:
        """How long after their claim ``jobs`` must be done by, and the option that says so.

        A transactional handler's deadline is its transaction's bound when that comes first: past
        it PostgreSQL has ended the transaction, and nothing the handler does can commit.
        """
        seconds = max(job.expire_in_seconds for job in jobs)
        bound = self.registration.transaction_timeout_seconds
        if self.registration.transactional and bound is not None and bound < seconds:
            return bound, "transaction_timeout_seconds"
        return seconds, "expire_in_seconds"

    def release(self, job_id: str) -> bool:
        """Forget an in-flight job; True if it was still in flight (this call released it)."""
        self.last_touch.pop(job_id, None)
        self.deadlines.pop(job_id, None)
        job = self.in_flight.pop(job_id, None)
        if job is None:
            return False
        if job.group_id is not None:
            left = self.group_active.get(job.group_id, 0) - 1
            if left > 0:
                self.group_active[job.group_id] = left
            else:
                self.group_active.pop(job.group_id, None)
        return True

    def release_all(self) -> list[Job]:
        """Forget every in-flight job; returns them."""
        jobs = list(self.in_flight.values())
        self.in_flight.clear()
        self.last_touch.clear()
        self.deadlines.clear()
        self.group_active.clear()
        return jobs


@dataclass
class Detached:
    """A handler thread whose unit the worker settled without it (its deadline passed): what it
    was running, since when (monotonic), and whether it has been counted as abandoned."""

    name: str
    jobs: list[Job]
    since: float
    abandoned: bool = False


class WorkerCore:
    """The state every part of the worker shares, and the helpers they all call.

    Everything here is set up by Worker.__init__ (worker/runner.py); the annotations say what
    each part may rely on.
    """

    boss: Boss
    jobs: JobStore
    #: Told of each handler call's start and end (observability/instruments.py), or None.
    instruments: HandlerInstruments | None
    registrations: list[Registration]
    burst: bool
    max_jobs: int | None
    grace_seconds: float
    listen: bool
    stats: WorkerStats
    _queues: dict[str, QueueState]
    _lock: threading.Condition
    _stopping: threading.Event
    _aborting: threading.Event
    # Wakes the deadline thread (worker/deadlines.py) before its next tick: a stop, an abort.
    _deadline_wake: threading.Event
    _settle_queue: queue_module.SimpleQueue[SettleItem]
    _threads: list[threading.Thread]
    # Each handler thread with its queue, and the unit each one is running, so that the jobs of a
    # thread that died can be found and failed.
    _handlers: dict[threading.Thread, QueueState]
    _current: dict[threading.Thread, Unit]
    # When (time.time()) each handler thread's current unit started, for Worker.snapshot().
    _current_since: dict[threading.Thread, float]
    _created_at: float
    _listener: NotifyListener | None
    _listener_settings: ListenerSettings
    _claimed_total: int
    # Handler threads left running past their unit's deadline (worker/deadlines.py), and the limit
    # of abandoned ones past which the worker stops with exit_status set.
    _detached: dict[threading.Thread, Detached]
    # Async handlers' coroutines abandoned and still running (worker/async_handlers.py): they
    # count against the same limit, since one stuck in a sync call holds a thread as well.
    _abandoned_coroutines: int
    # The handler_overrun warnings of the units the deadlines fail (worker/overruns.py).
    _overruns: HandlerOverruns
    max_abandoned_threads: int
    exit_status: int

    def _spawn(self, name: str, target: Any, *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _wake(self, name: str) -> None:
        state = self._queues.get(name)
        if state is not None:
            state.wake.set()

    def _wake_all(self) -> None:
        for state in self._queues.values():
            state.wake.set()

    def _in_flight_count(self) -> int:
        return sum(len(state.in_flight) for state in self._queues.values())

    def _cancel(self, name: str, jobs: list[Job], reason: str, message: str) -> None:
        """Set the cancellation signal of each of ``jobs`` (of queue ``name``) and send
        ``job_cancelled`` for each one this call set. Never called with ``self._lock`` held: the
        signal's callbacks and the receivers are other people's code."""
        for job in jobs:
            if job.signal.set(reason, message):
                signals.send(
                    signals.job_cancelled, type(self), worker=self, queue=name, job=job, reason=reason
                )

    def _stop_when_idle(self) -> None:
        """With --max-jobs reached, stop once the last claimed job is settled."""
        if not self._in_flight_count():
            self._stopping.set()

    def _database_trouble(self, doing: str, exc: BaseException, failures: int) -> None:
        events.error(self, exc, doing)
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


#: Each thread's Django connection objects, one per alias, for close_old_connections_quietly().
_thread = threading.local()


def close_old_connections_quietly() -> None:
    """What Django's close_old_connections() does, for this thread: close each of its connections
    that is unusable or past CONN_MAX_AGE. A failure (a broken connection that will not even
    close) must not end a handler thread: the next query reconnects.

    Django's function finds the thread's connections through its connection handler, two
    thread-local lookups per alias (about 4 us with one alias, bench/worker_overheads.py), and a handler
    thread calls it after every job. A thread's connection object of an alias is made once and
    kept for the thread's life (closing a connection keeps the object), so they are looked up
    here once per thread; an object that never connected has nothing to close.
    """
    wrappers = _thread.__dict__.get("connections")
    if wrappers is None:
        wrappers = _thread.connections = []
        for alias in connections:
            try:
                wrappers.append(connections[alias])
            except Exception:
                # An alias whose backend cannot even be loaded never has a connection to close.
                logger.debug("database alias %r has no usable backend", alias, exc_info=True)
    try:
        for wrapper in wrappers:
            wrapper.close_if_unusable_or_obsolete()
    except Exception:
        logger.warning("closing an old database connection failed", exc_info=True)


def job_ids(jobs: list[Job]) -> str:
    """The first few ids of ``jobs``, for a log line."""
    return ", ".join(job.id for job in jobs[:5]) + (" ..." if len(jobs) > 5 else "")
