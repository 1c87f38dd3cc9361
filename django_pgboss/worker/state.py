"""What the worker's parts share: the stats, each queue's slots, and the board they meet on.

The Worker (worker/engine.py) is composed of parts that each own one job and their own state: a
fetcher per queue (worker/fetching.py), the handler pool (worker/handlers.py), the async queues
(worker/async_host.py), the settler (worker/settler.py), the heartbeats (worker/heartbeats.py),
the deadlines (worker/deadlines.py), the listener (worker/listener.py) and the stop
(worker/shutdown.py). No part inherits another. What they must agree on is here: each queue's
``QueueState`` (its free slots, in-flight jobs, buffer and wake event), the claim budget of
``--max-jobs``, the stop events, and the one condition (``Board.lock``) they change it under.
"""

from __future__ import annotations

import contextvars
import logging
import queue as queue_module
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import connections

from django_pgboss import signals
from django_pgboss.records import Job
from django_pgboss.worker import signalling
from django_pgboss.worker.backoff import backoff_delay, one_line, worth_logging
from django_pgboss.worker.messages import SettleRequest, Unit
from django_pgboss.worker.ports import Clock
from django_pgboss.worker.registry import Registration

logger = logging.getLogger("django_pgboss.worker")


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
    #: What ``rate`` reads the time from (the worker's clock).
    clock: Callable[[], float] = field(default=time.monotonic, repr=False)

    def add(self, **counts: int) -> None:
        """Add to some of the counters at once, under the stats' own lock."""
        with self.lock:
            for key, value in counts.items():
                setattr(self, key, getattr(self, key) + value)

    @property
    def rate(self) -> float:
        """Jobs settled per second since the start."""
        elapsed = max(self.clock() - self.started_at, 1e-9)
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
        # Set (under the board's lock) by Worker.off_work(): the queue's fetcher ends, and the
        # queue leaves the board once its last job is settled.
        self.closing = False
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


#: The queue (its ``QueueState``) whose handler the calling code runs inside: set around each
#: handler call, a thread's (worker/handlers.py) and a coroutine's (worker/async_slots.py), so that
#: what the handler calls can tell. A context variable rather than a thread's name: it follows the
#: coroutine onto the threads its ``sync_to_async`` calls run on, and a state is one queue of one
#: worker, so another worker's handler of the same queue name is not taken for this one's.
RUNNING_HANDLER: contextvars.ContextVar[QueueState | None] = contextvars.ContextVar(
    "pgboss_running_handler", default=None
)


@dataclass
class Detached:
    """A handler thread whose unit the worker settled without it (its deadline passed): what it
    was running, since when (monotonic), and whether it has been counted as abandoned."""

    name: str
    jobs: list[Job]
    since: float
    abandoned: bool = False


@dataclass
class ClaimBudget:
    """``max_jobs``: how many jobs the worker may claim in all (None: no limit), and how many it
    has; read and changed under the board's lock."""

    limit: int | None
    claimed: int = 0

    def left(self, slots: int) -> int:
        """``slots``, or fewer when the budget has fewer jobs left."""
        return slots if self.limit is None else min(slots, self.limit - self.claimed)

    @property
    def spent(self) -> bool:
        return self.limit is not None and self.claimed >= self.limit


class Board:
    """The state the worker's parts meet on, and the few things any of them does to it.

    ``queues`` holds each queue's slots and buffer; ``lock`` is the one condition every change to
    them is made under (waited on by a fetcher for free slots and by a stop for the last job);
    ``stopping`` is set once the worker stops fetching, ``aborting`` when it stops without a grace
    period. ``settle`` hands a request to the settler; ``owner`` is the Worker the signals name.
    """

    def __init__(
        self,
        *,
        clock: Clock,
        stats: WorkerStats,
        budget: ClaimBudget,
        settle: Callable[[SettleRequest], None],
        owner: Any,
    ) -> None:
        self.clock = clock
        self.stats = stats
        self.budget = budget
        self.settle = settle
        self.owner = owner
        self.queues: dict[str, QueueState] = {}
        self.lock = threading.Condition()
        self.stopping = threading.Event()
        self.aborting = threading.Event()

    def wake(self, name: str) -> None:
        """Wake the fetcher of queue ``name`` (a notification, a finished unit)."""
        state = self.queues.get(name)
        if state is not None:
            state.wake.set()

    def wake_all(self) -> None:
        # A copy: Worker.work() may add a queue meanwhile.
        for state in list(self.queues.values()):
            state.wake.set()

    def in_flight_count(self) -> int:
        return sum(len(state.in_flight) for state in list(self.queues.values()))

    def stop(self) -> None:
        """Stop fetching: every fetcher is woken to see it."""
        self.stopping.set()
        self.wake_all()

    def stop_when_idle(self) -> None:
        """With --max-jobs reached, stop once the last claimed job is settled."""
        if not self.in_flight_count():
            self.stopping.set()

    def settled(self, name: str, units: int) -> None:
        """The settler's report that ``units`` handler results of ``name`` are written."""
        state = self.queues.get(name)
        if state is not None:
            with self.lock:
                state.unsettled = max(state.unsettled - units, 0)
                state.settles += 1
            state.wake.set()

    def cancel(self, name: str, jobs: list[Job], reason: str, message: str) -> None:
        """Set the cancellation signal of each of ``jobs`` (of queue ``name``) and send
        ``job_cancelled`` for each one this call set. Never called with ``lock`` held: the
        signal's callbacks and the receivers are other people's code."""
        for job in jobs:
            if job.signal.set(reason, message):
                signals.send(
                    signals.job_cancelled,
                    type(self.owner),
                    worker=self.owner,
                    queue=name,
                    job=job,
                    reason=reason,
                )

    def database_trouble(self, doing: str, exc: BaseException, failures: int) -> None:
        """Wait out database trouble: log it (not every time), throw the connections away, back off."""
        signalling.error(self.owner, exc, doing)
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
        self.clock.wait(self.stopping, delay)


def start_thread(name: str, target: Callable[..., None], *args: Any) -> threading.Thread:
    """A daemon thread running ``target(*args)``, started."""
    thread = threading.Thread(target=target, args=args, name=name, daemon=True)
    thread.start()
    return thread


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
