"""The worker: fetch loops, handler threads per queue, batched settles, heartbeats, a graceful stop.

One Worker serves any number of queues from one process. Each queue has a fetch loop that claims
only as many jobs as the queue has free slots: ``concurrency`` handler threads, and, when
``batch_size`` is larger, a buffer of claimed jobs up to ``batch_size`` waiting for the next free
thread, so that one fetch round trip serves many jobs. Each queue has its own ``concurrency``
handler threads, so a queue's buffer never takes another queue's threads. Results are settled by
one settler thread in batches (one statement per queue per flush, each job fenced to the attempt
it was fetched as). Queues with notify wake their loop through a LISTEN connection; every loop
also polls, which covers queues without notify and any notification lost in a reconnect.

This module is the short loop that starts and watches the parts, each in its own module: the
fetch loops (worker/fetching.py), the handler threads (worker/handlers.py), the async queues'
slots on the worker's event loop (worker/async_handlers.py, worker/async_runner.py), the heartbeats
(worker/heartbeats.py), the deadlines (worker/deadlines.py), the settler (worker/settler.py) and
the stop (worker/shutdown.py), over the state they share (worker/core.py).

The worker knows no SQL: its hot path (fetch, complete_each, fail, touch) goes through the job
store of the API (api/jobs.py), over the database context of the Boss it is given. Database errors
are survived, not fatal: a loop that loses its connection closes it, waits, and reconnects the
Django way.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable

from django.db import DatabaseError, connections

from django_pgboss import signals
from django_pgboss.api.boss import Boss
from django_pgboss.api.jobs import JobStore
from django_pgboss.api.queues import QueueStore
from django_pgboss.api.warnings import start_retry
from django_pgboss.arguments import INT8_MAX, boolean, integer, number
from django_pgboss.conf import pgboss_settings
from django_pgboss.exceptions import InvalidOption, QueueNotFound
from django_pgboss.observability.instruments import HandlerInstruments
from django_pgboss.worker.backoff import when_reachable
from django_pgboss.worker.banner import banner
from django_pgboss.worker.core import QueueState, WorkerStats, logger, queue_capacity
from django_pgboss.worker.deadlines import EXIT_ABANDONED_THREADS, Deadlines
from django_pgboss.worker.fetching import FetchLoops
from django_pgboss.worker.heartbeats import Heartbeats
from django_pgboss.worker.instance import registrar
from django_pgboss.worker.listener import ListenerSettings, NotifyListener
from django_pgboss.worker.overruns import HandlerOverruns
from django_pgboss.worker.registry import Registration
from django_pgboss.worker.settler import Settler
from django_pgboss.worker.shutdown import Shutdown
from django_pgboss.worker.snapshot import WorkerSnapshot, take

__all__ = ["EXIT_ABANDONED_THREADS", "Worker", "WorkerStats", "queue_capacity"]

#: The longest stop grace period a Worker takes (a day): past threading.TIMEOUT_MAX its waits would
#: raise OverflowError instead of waiting.
MAX_GRACE_SECONDS = 86_400


class Worker(FetchLoops, Heartbeats, Deadlines, Shutdown):
    """Runs the handlers of the given registrations until stopped (or, with burst, until idle).

    ``max_jobs`` stops fetching after that many jobs; ``grace_seconds`` is how long a stop waits
    for running handlers before failing their jobs so another worker retries them.
    ``max_abandoned_threads`` (default settings.PGBOSS["MAX_ABANDONED_THREADS"]) is how many
    handler threads that ignored their job's cancellation signal may go on running before the
    worker stops, with ``exit_status`` EXIT_ABANDONED_THREADS (worker/deadlines.py).
    ``instruments`` is told of each handler call's start and duration (the metrics' WorkerMetrics,
    see observability/instruments.py).
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
        max_abandoned_threads: int | None = None,
        instruments: HandlerInstruments | None = None,
    ) -> None:
        # Every argument is checked before anything starts (the command checks its own options
        # too, but the Worker is public API).
        boolean("burst", burst)
        boolean("listen", listen)
        integer("max_jobs", max_jobs, minimum=1, maximum=INT8_MAX, nullable=True)
        number("grace_seconds", grace_seconds, minimum=0)
        if grace_seconds > MAX_GRACE_SECONDS:
            raise InvalidOption(
                f"grace_seconds must be at most {MAX_GRACE_SECONDS} (a day), not {grace_seconds!r}"
            )
        if max_abandoned_threads is None:
            max_abandoned_threads = pgboss_settings.MAX_ABANDONED_THREADS
        checked = integer("max_abandoned_threads", max_abandoned_threads, minimum=0)
        self.max_abandoned_threads = checked if checked is not None else 0
        #: 0, or EXIT_ABANDONED_THREADS once the worker stopped for its abandoned threads.
        self.exit_status = 0
        self.boss = boss or Boss()
        self.instruments = instruments
        # The worker's own statements go through the job store, over the Boss's context (so the
        # two share its queue-route cache).
        self.jobs = JobStore(self.boss.context)
        self.registrations = list(registrations)
        self.burst = burst
        self.max_jobs = max_jobs
        self.grace_seconds = grace_seconds
        self.listen = listen
        self.stats = WorkerStats()
        self._queues = {}
        self._lock = threading.Condition()
        self._stopping = threading.Event()
        self._aborting = threading.Event()
        self._deadline_wake = threading.Event()
        self._settler = Settler(
            self.jobs,
            self.stats,
            labels={r.queue: r.label for r in self.registrations},
            settled=self._settled,
            trouble=self._database_trouble,
            is_stopping=self._stopping.is_set,
            worker=self,
        )
        self._settle_queue = self._settler.queue
        self._threads = []
        self._handlers = {}
        self._current = {}
        self._detached = {}
        self._abandoned_coroutines = 0
        self._current_since = {}
        self._created_at = time.time()
        self._listener = None
        # Read here, so that a bad NOTIFY_* setting is refused with the other arguments.
        self._listener_settings = ListenerSettings.from_settings()
        self._claimed_total = 0
        self._loop = None
        self._async_queues = {}
        # The worker's row in the instance registry (worker/instance.py); built here so that a bad
        # INSTANCE_* setting is refused with the other arguments.
        self._instance = registrar(self)
        self._overruns = HandlerOverruns(
            self.boss.context, instance_id=lambda: self._instance.id, sender=type(self)
        )

    def run(self) -> WorkerStats:
        """Work until stop() (or, bursting, until every queue is empty); returns the stats."""
        names = [r.queue for r in self.registrations]
        found = when_reachable(
            lambda: QueueStore(self.boss.context).all_queues(names),
            self._stopping,
            "the worker",
            on_first_failure=lambda exc: start_retry(
                self.boss.context, exc, doing="the worker", sender=type(self)
            ),
        )
        if found is None:
            return self.stats
        infos = {q.name: q for q in found}
        for registration in self.registrations:
            if registration.queue not in infos:
                raise QueueNotFound(
                    f"queue {registration.queue!r} does not exist; create it before working it"
                )
            self._queues[registration.queue] = QueueState(
                registration, notify=infos[registration.queue].notify
            )
        for name, state in self._queues.items():
            if state.registration.is_async:
                # An async def handler: slots on the worker's event loop, not threads.
                self._start_async(state)
                continue
            for index in range(state.registration.concurrency):
                self._spawn_handler(state, f"pgboss-handler-{name}-{index}")
        notify_queues = [name for name, info in infos.items() if info.notify]
        if self.listen and notify_queues:
            self._listener = NotifyListener(
                self.boss.context, notify_queues, self._wake, settings=self._listener_settings
            )
            self._listener.start()
        self._spawn("pgboss-settler", self._settler.run)
        self._spawn("pgboss-heartbeat", self._heartbeat_loop)
        self._spawn("pgboss-deadlines", self._deadline_loop)
        for name in self._queues:
            self._spawn(f"pgboss-fetch-{name}", self._fetch_loop, name)
        text, fields = banner(
            self.registrations,
            using=self.boss.context.using,
            schema=self.boss.schema,
            burst=self.burst,
            max_jobs=self.max_jobs,
            grace_seconds=self.grace_seconds,
        )
        logger.info("%s", text, extra=fields)
        self._warn_connection_per_transaction()
        try:
            self._instance.start()
            signals.send(signals.worker_started, type(self), worker=self, queues=list(self._queues))
            while not self._stopping.is_set():
                if self.burst and self._all_drained():
                    self._log_burst_end()
                    break
                self._stopping.wait(0.1)
                self._replace_dead_handlers()
                self._check_abandoned()
        finally:
            self._shutdown()
            # Before the registry's stop: the overrun rows name this instance (pg-boss flushes
            # them on stop, while its pool is open).
            self._overruns.stop()
            # After the drain, so a stopping worker reads as live until its handlers are done.
            self._instance.stop()
            signals.send(signals.worker_stopped, type(self), worker=self, stats=self.stats)
        return self.stats

    def _warn_connection_per_transaction(self) -> None:
        """Say so when a transactional queue will open a database connection per job.

        A handler thread closes its connection after each job as Django closes a request's, so
        under Django's default CONN_MAX_AGE = 0 every transactional job connects anew: a new
        server process, its caches and the statements prepared again. bench/README.md measured
        it at about 17 ms of server CPU per job, against about 1.2 ms with persistent connections.
        """
        using = self.boss.context.using
        if connections[using].settings_dict.get("CONN_MAX_AGE", 0) != 0:
            return
        transactional = [r.queue for r in self.registrations if r.transactional]
        if transactional:
            logger.warning(
                "transactional queue(s) %s: under CONN_MAX_AGE = 0 each job opens a new database "
                "connection; give the worker persistent connections (CONN_MAX_AGE = 60 with "
                "CONN_HEALTH_CHECKS = True, see docs/workers.md)",
                ", ".join(transactional),
            )

    def snapshot(self) -> WorkerSnapshot:
        """What the worker is running now, per queue (pg-boss's ``getWipData()``): a copy, safe
        to take from any thread; see worker/snapshot.py."""
        return take(self)

    def stop(self, *, graceful: bool = True) -> None:
        """Stop fetching. Running handlers get the grace period unless ``graceful`` is False."""
        if not graceful:
            self._aborting.set()
            self._deadline_wake.set()
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

    def _log_burst_end(self) -> None:
        """Say that a burst stops, and how many retries it leaves behind, still due later."""
        waiting = []
        try:
            for name in self._queues:
                count, first = self.jobs.retries_waiting(name)
                if count:
                    waiting.append((name, count, first))
        except DatabaseError as exc:
            logger.info("burst: every queue is empty, stopping (retries left not counted: %s)", exc)
            return
        if not waiting:
            logger.info("burst: every queue is empty, stopping")
            return
        logger.warning(
            "burst: stopping with %d retry(ies) still due later, which this run leaves behind: %s",
            sum(count for _, count, _ in waiting),
            "; ".join(
                f"{name}: {count}, the first due at {first.isoformat() if first else '?'}"
                for name, count, first in waiting
            ),
        )

    def _all_drained(self) -> bool:
        with self._lock:
            return (
                all(state.drained for state in self._queues.values())
                and not self._in_flight_count()
                and self._settle_queue.empty()
            )
