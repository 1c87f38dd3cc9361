"""The worker: fetchers, handler threads per queue, batched settles, heartbeats, a graceful stop.

One Worker serves any number of queues from one process. Each queue has a fetcher that claims
only as many jobs as the queue has free slots: ``concurrency`` handler threads, and, when
``batch_size`` is larger, a buffer of claimed jobs up to ``batch_size`` waiting for the next free
thread, so that one fetch round trip serves many jobs. Each queue has its own ``concurrency``
handler threads, so a queue's buffer never takes another queue's threads. Results are settled by
one settler thread in batches (one statement per queue per flush, each job fenced to the attempt
it was fetched as). Queues with notify wake their fetcher through a LISTEN connection; every
fetcher also polls, which covers queues without notify and any notification lost in a reconnect.

The Worker is composed, not inherited: it builds its parts, each owning one job and its own
state, starts them, watches them and stops them. The parts: a fetcher per queue
(worker/fetching.py), the handler pool (worker/handlers.py), the async queues' slots on the
worker's event loop (worker/async_host.py, worker/async_slots.py), the settler
(worker/settler.py), the heartbeats (worker/heartbeats.py), the deadlines (worker/deadlines.py),
the listener (worker/listener.py) and the stop (worker/shutdown.py). They meet on one ``Board``
(worker/state.py) and hand each other the typed messages of worker/messages.py.

The worker knows no SQL and no concrete store: it calls the protocols of worker/ports.py, which
the API's job and queue stores (api/jobs.py, api/queues.py) implement over the database context
of the Boss it is given. Database errors are survived, not fatal: a loop that loses its
connection closes it, waits, and reconnects the Django way.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterable
from dataclasses import fields
from types import TracebackType
from typing import Any

from django.db import DatabaseError, connections

from django_pgboss import clocks, signals
from django_pgboss.api.boss import Boss
from django_pgboss.api.jobs import JobStore
from django_pgboss.api.queues import QueueStore
from django_pgboss.api.warnings import start_retry
from django_pgboss.arguments import INT8_MAX, boolean, integer, number
from django_pgboss.conf import pgboss_settings
from django_pgboss.exceptions import InvalidOption, OffWorkWaitsOnItself, QueueNotFound
from django_pgboss.observability.instruments import HandlerInstruments
from django_pgboss.worker.async_host import AsyncQueues
from django_pgboss.worker.async_slots import EventLoopSlots
from django_pgboss.worker.backoff import when_reachable
from django_pgboss.worker.banner import banner
from django_pgboss.worker.deadlines import EXIT_ABANDONED_THREADS, Deadlines
from django_pgboss.worker.fetching import QueueFetcher
from django_pgboss.worker.handlers import HandlerPool
from django_pgboss.worker.heartbeats import Heartbeats
from django_pgboss.worker.instance import registrar
from django_pgboss.worker.listener import ListenerSettings, NotifyListener
from django_pgboss.worker.overruns import HandlerOverruns
from django_pgboss.worker.ports import Clock, QueueCatalog, WorkerStore
from django_pgboss.worker.registry import Registration, validated
from django_pgboss.worker.settler import Settler
from django_pgboss.worker.shutdown import Shutdown, put_back_unstarted
from django_pgboss.worker.snapshot import WorkerSnapshot, take
from django_pgboss.worker.state import (
    RUNNING_HANDLER,
    Board,
    ClaimBudget,
    QueueState,
    WorkerStats,
    logger,
    queue_capacity,
)

__all__ = ["EXIT_ABANDONED_THREADS", "MAX_GRACE_SECONDS", "Worker", "WorkerStats", "queue_capacity"]

#: The options of the worker process itself, which ``Boss.worker()`` takes (the queues come from
#: work() there).
PROCESS_OPTIONS = frozenset(
    {
        "burst",
        "max_jobs",
        "grace_seconds",
        "listen",
        "max_abandoned_threads",
        "instruments",
        "store",
        "queue_catalog",
        "clock",
    }
)

#: The longest stop grace period a Worker takes (a day): past threading.TIMEOUT_MAX its waits would
#: raise OverflowError instead of waiting.
MAX_GRACE_SECONDS = 86_400


class Worker:
    """Runs the handlers of the given registrations until stopped (or, with burst, until idle).

    ``max_jobs`` stops fetching after that many jobs; ``grace_seconds`` is how long a stop waits
    for running handlers before failing their jobs so another worker retries them.
    ``max_abandoned_threads`` (default settings.PGBOSS["MAX_ABANDONED_THREADS"]) is how many
    handler threads that ignored their job's cancellation signal may go on running before the
    worker stops, with ``exit_status`` EXIT_ABANDONED_THREADS (worker/deadlines.py).
    ``instruments`` is told of each handler call's start and duration (the metrics' WorkerMetrics,
    see observability/instruments.py).

    ``store``, ``queue_catalog`` and ``clock`` replace the worker's PostgreSQL job store, its
    queue reads and its clock (worker/ports.py): what a test drives the engine with. Without
    ``clock`` the worker takes the clock installed when it is built (``django_pgboss.clocks``):
    the system's, or the timers of the ``TestClock`` a test attached. A
    worker given a store of its own listens for no notifications, registers no instance and
    refuses transactional queues (their transaction is PostgreSQL's).
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
        store: WorkerStore | None = None,
        queue_catalog: QueueCatalog | None = None,
        clock: Clock | None = None,
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
        self.registrations = list(registrations)
        if (store is None) != (queue_catalog is None):
            raise InvalidOption("a Worker takes a store and a queue_catalog together, or neither")
        self.boss = boss or Boss()
        # The worker's own statements go through the job store, over the Boss's context (so the
        # two share its queue-route cache), unless it is given another store.
        on_postgres = store is None
        self.jobs: WorkerStore = store if store is not None else JobStore(self.boss.context)
        self._queue_catalog: QueueCatalog = (
            queue_catalog if queue_catalog is not None else QueueStore(self.boss.context)
        )
        transactional_store = self.jobs if isinstance(self.jobs, JobStore) else None
        if transactional_store is None:
            refused = [r.queue for r in self.registrations if r.transactional]
            if refused:
                raise InvalidOption(
                    f"transactional queue(s) {', '.join(map(repr, refused))} need the PostgreSQL job "
                    "store: their handler and completion share one database transaction"
                )
        self.burst = burst
        self.max_jobs = max_jobs
        self.grace_seconds = grace_seconds
        self.listen = listen and on_postgres
        # The clock installed in django_pgboss.clocks now: the system's, or the timers of a
        # TestClock the test attached, so that a worker a test starts inside the clock polls,
        # beats and keeps its deadlines as the test moves time, unwired.
        self.clock = clock if clock is not None else clocks.current()
        self.stats = WorkerStats(started_at=self.clock.monotonic(), clock=self.clock.monotonic)
        self._created_at = self.clock.time()
        # Each queue's handler label, for the messages jobs are failed with (work() adds to it).
        self._labels = {r.queue: r.label for r in self.registrations}
        self._settler = Settler(
            self.jobs,
            self.stats,
            labels=self._labels,
            settled=self._settled,
            trouble=self._trouble,
            is_stopping=self._is_stopping,
            worker=self,
        )
        self._board = Board(
            clock=self.clock,
            stats=self.stats,
            budget=ClaimBudget(max_jobs),
            settle=self._settler.queue.put,
            owner=self,
        )
        self._overruns = HandlerOverruns(
            self.boss.context, instance_id=lambda: self._instance.id, sender=type(self)
        )
        self._pool = HandlerPool(
            self._board, instruments=instruments, transactional_store=transactional_store
        )
        self._async = AsyncQueues(
            self._board, self._pool, slots=EventLoopSlots(), overruns=self._overruns, instruments=instruments
        )
        self._deadlines = Deadlines(
            self._board,
            self._pool,
            overruns=self._overruns,
            instruments=instruments,
            max_abandoned_threads=self.max_abandoned_threads,
            abandoned_coroutines=self._async.abandoned_running,
        )
        self._heartbeats = Heartbeats(self._board, self.jobs)
        self._fetchers: dict[str, QueueFetcher] = {}
        #: The id of each queue's work() (or of its registration), by queue name.
        self.work_ids: dict[str, str] = {r.queue: str(uuid.uuid4()) for r in self.registrations}
        # Serialises work(), off_work() and the start and end of run(); _running says whether
        # run() has opened its queues (a work() then opens its queue at once).
        self._runtime = threading.RLock()
        self._running = False
        self._ran = threading.Event()
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None
        self._listener: NotifyListener | None = None
        # Read here, so that a bad NOTIFY_* setting is refused with the other arguments.
        self._listener_settings = ListenerSettings.from_settings()
        # The worker's row in the instance registry (worker/instance.py); built here so that a bad
        # INSTANCE_* setting is refused with the other arguments.
        self._instance = registrar(self)
        if not on_postgres:
            self._instance.enabled = False

    # The settler's callbacks, bound before the board exists.

    def _settled(self, name: str, units: int) -> None:
        self._board.settled(name, units)

    def _trouble(self, doing: str, exc: BaseException, failures: int) -> None:
        self._board.database_trouble(doing, exc, failures)

    def _is_stopping(self) -> bool:
        return self._board.stopping.is_set()

    def _listening(self) -> bool:
        return self._listener is not None and self._listener.connected.is_set()

    @property
    def instruments(self) -> HandlerInstruments | None:
        """What is told of each handler call's start and end (observability/instruments.py); may
        be set until the worker runs, as ``pgboss_work --metrics-port`` sets it."""
        return self._pool.instruments

    @instruments.setter
    def instruments(self, instruments: HandlerInstruments | None) -> None:
        for part in (self._pool, self._async, self._deadlines):
            part.instruments = instruments

    @property
    def exit_status(self) -> int:
        """0, or EXIT_ABANDONED_THREADS once the worker stopped for its abandoned threads."""
        return self._deadlines.exit_status

    def run(self) -> WorkerStats:
        """Work until stop() (or, bursting, until every queue is empty); returns the stats."""
        board = self._board
        names = [r.queue for r in self.registrations]
        found = when_reachable(
            lambda: self._queue_catalog.all_queues(names),
            board.stopping,
            "the worker",
            on_first_failure=lambda exc: start_retry(
                self.boss.context, exc, doing="the worker", sender=type(self)
            ),
        )
        if found is None:
            self._ran.set()
            return self.stats
        infos = {q.name: q for q in found}
        for registration in self.registrations:
            if registration.queue not in infos:
                raise QueueNotFound(
                    f"queue {registration.queue!r} does not exist; create it before working it"
                )
        self._settler.start()
        self._heartbeats.start()
        self._deadlines.start()
        with self._runtime:
            for registration in self.registrations:
                self._open_queue(registration, notify=infos[registration.queue].notify)
            self._running = True
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
            signals.send(signals.worker_started, type(self), worker=self, queues=list(board.queues))
            self._ran.set()
            while not board.stopping.is_set():
                if self.burst and self._all_drained():
                    self._log_burst_end()
                    break
                self.clock.wait(board.stopping, 0.1)
                self._pool.replace_dead()
                self._deadlines.check_abandoned()
                self._close_drained_queues()
        finally:
            with self._runtime:
                self._running = False
            Shutdown(
                board,
                pool=self._pool,
                async_queues=self._async,
                fetchers=list(self._fetchers.values()),
                settler=self._settler,
                heartbeats=self._heartbeats,
                deadlines=self._deadlines,
            ).run(self.grace_seconds, self._listener)
            # Before the registry's stop: the overrun rows name this instance (pg-boss flushes
            # them on stop, while its pool is open).
            self._overruns.stop()
            # After the drain, so a stopping worker reads as live until its handlers are done.
            self._instance.stop()
            signals.send(signals.worker_stopped, type(self), worker=self, stats=self.stats)
        return self.stats

    def _open_queue(self, registration: Registration, *, notify: bool) -> None:
        """Start working ``registration``'s queue: its slots, handler threads (or async slots),
        fetcher, and its notifications. Called with ``self._runtime`` held."""
        board = self._board
        state = QueueState(registration, notify=notify)
        with board.lock:
            board.queues[registration.queue] = state
        if registration.is_async:
            # An async def handler: slots on the worker's event loop, not threads.
            self._async.start_queue(state)
        else:
            self._pool.start_queue(state)
        if notify and self.listen:
            if self._listener is None:
                self._listener = NotifyListener(
                    self.boss.context, [registration.queue], board.wake, settings=self._listener_settings
                )
                self._listener.start()
            else:
                self._listener.queues.add(registration.queue)
        fetcher = QueueFetcher(board, state, self.jobs, burst=self.burst, listening=self._listening)
        self._fetchers[registration.queue] = fetcher
        fetcher.start()

    def _warn_connection_per_transaction(self) -> None:
        """Say so when a transactional queue will open a database connection per job.

        A handler thread closes its connection after each job as Django closes a request's, so
        under Django's default CONN_MAX_AGE = 0 every transactional job connects anew: a new
        server process, its caches and the statements prepared again. bench/README.md measured
        it at about 17 ms of server CPU per job, against about 1.2 ms with persistent connections.
        """
        using = self.boss.context.using
        if (
            not isinstance(self.jobs, JobStore)
            or connections[using].settings_dict.get("CONN_MAX_AGE", 0) != 0
        ):
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
        return take(self._board, self._pool, self._created_at)

    def stop(self, grace_seconds: float | None = None, *, graceful: bool = True) -> None:
        """Stop fetching. Running handlers get the grace period (``grace_seconds``, or the one the
        worker was built with) unless ``graceful`` is False. A worker started with start() is
        waited for; one whose run() the caller runs returns from it."""
        if grace_seconds is not None:
            number("grace_seconds", grace_seconds, minimum=0)
            if grace_seconds > MAX_GRACE_SECONDS:
                raise InvalidOption(
                    f"grace_seconds must be at most {MAX_GRACE_SECONDS} (a day), not {grace_seconds!r}"
                )
            self.grace_seconds = grace_seconds
        if not graceful:
            self._board.aborting.set()
            self._deadlines.wake.set()
        self._board.stop()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    # -- at run time: pg-boss's work(), offWork(), notifyWorker() and getWipData() ---------------

    def start(self) -> Worker:
        """Run the worker on a thread of its own (``pgboss-worker``); returns once its queues are
        worked. A queue that does not exist raises here, as run() raises it."""
        with self._runtime:
            if self._thread is not None:
                raise InvalidOption("this worker was started already; a Worker runs once")
            self._thread = threading.Thread(target=self._run_started, name="pgboss-worker", daemon=True)
            self._thread.start()
        self._ran.wait()
        if self._failure is not None:
            self._thread.join()
            raise self._failure
        return self

    def _run_started(self) -> None:
        try:
            self.run()
        except BaseException as exc:
            self._failure = exc
            if self._ran.is_set():
                # start() has returned: nobody else hears of it.
                logger.exception("the worker stopped on an error")
        finally:
            self._ran.set()

    def __enter__(self) -> Worker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def work(self, name: str, handler: Callable[..., Any], **options: Any) -> str:
        """Work queue ``name`` with ``handler`` and the ``@work`` options (``concurrency``,
        ``batch_size``, ...); returns the work id, which off_work() takes. On a running worker the
        queue starts at once (QueueNotFound if it does not exist); before start() or run(), with
        the rest. One handler per queue and worker: off_work() the queue before working it anew."""
        unknown = sorted(set(options) - ({f.name for f in fields(Registration)} - {"queue", "handler"}))
        if unknown:
            raise InvalidOption(f"work() takes no option {', '.join(map(repr, unknown))}")
        registration = validated(Registration(name, handler, **options))
        if registration.transactional and not isinstance(self.jobs, JobStore):
            raise InvalidOption(
                f"transactional queue(s) {name!r} need the PostgreSQL job store: their handler and "
                "completion share one database transaction"
            )
        with self._runtime:
            if name in self.work_ids:
                raise InvalidOption(
                    f"queue {name!r} is worked already by this worker (work id {self.work_ids[name]}); "
                    "off_work() it first"
                )
            if self._board.stopping.is_set():
                raise InvalidOption("the worker is stopping: it takes no more work")
            notify = False
            if self._running:
                found = [q for q in self._queue_catalog.all_queues([name]) if q.name == name]
                if not found:
                    raise QueueNotFound(f"queue {name!r} does not exist; create it before working it")
                notify = found[0].notify
            work_id = str(uuid.uuid4())
            self.registrations = [*self.registrations, registration]
            self.work_ids[name] = work_id
            self._labels[name] = registration.label
            if self._running:
                self._open_queue(registration, notify=notify)
        return work_id

    def off_work(self, name_or_work_id: str, *, wait: bool = True) -> None:
        """Stop working a queue (by its name or the id work() returned): its fetcher ends, its
        claimed jobs that have not started go back to the queue uncharged, and with ``wait``
        (the default) the call returns once its running handlers are done and their results
        written. Without ``wait`` they finish in the background. Unknown names raise InvalidOption.

        Called with ``wait`` from inside a handler of that very queue, it would wait for itself:
        it raises OffWorkWaitsOnItself instead, before anything changes (pg-boss's offWork()
        awaited there never returns). ``wait=False`` is the way to stop a queue from its handler.
        """
        with self._runtime:
            name = next(
                (queue for queue, work_id in self.work_ids.items() if name_or_work_id in (queue, work_id)),
                None,
            )
            if name is None:
                raise InvalidOption(f"{name_or_work_id!r} is neither a queue nor a work id this worker works")
            running_handler = RUNNING_HANDLER.get()
            if wait and running_handler is not None and running_handler is self._board.queues.get(name):
                raise OffWorkWaitsOnItself(
                    f"off_work({name_or_work_id!r}, wait=True) was called from inside a handler of queue "
                    f"{name!r}: it would wait for that handler to return, which waits for off_work(); "
                    "call off_work() with wait=False from a handler"
                )
            del self.work_ids[name]
            self.registrations = [r for r in self.registrations if r.queue != name]
            board = self._board
            state = board.queues.get(name)
            if state is None:
                return  # not started yet: it is simply not worked
            with board.lock:
                state.closing = True
            state.wake.set()
            fetcher = self._fetchers.pop(name)
        fetcher.join(timeout=30)
        put_back_unstarted(board, [state])
        # One stop marker per handler thread or async slot, behind nothing: the buffer is empty.
        for _ in range(state.registration.concurrency):
            state.work.put(None)
        if self._listener is not None:
            self._listener.queues.discard(name)
        if wait:
            with board.lock:
                # Until its last job is settled, or the worker's own stop ends them.
                while (state.in_flight or state.unsettled) and self._running:
                    self.clock.wait_on(board.lock, 0.1)
            self._close_drained_queues()

    def notify(self, name: str) -> None:
        """Wake queue ``name``'s fetcher now, as a notification would (pg-boss's notifyWorker())."""
        self._board.wake(name)

    def wip(self) -> WorkerSnapshot:
        """What the worker is running, per queue (pg-boss's getWipData()): snapshot()."""
        return self.snapshot()

    def _close_drained_queues(self) -> None:
        """Take the queues off_work() closed off the board once their last job is settled."""
        board = self._board
        with board.lock:
            done = [
                name
                for name, state in board.queues.items()
                if state.closing and not state.in_flight and not state.unsettled
            ]
            for name in done:
                del board.queues[name]
        for name in done:
            self._async.close_queue(name)

    @property
    def aborted(self) -> bool:
        """True when the worker was stopped without waiting for its handlers."""
        return self._board.aborting.is_set()

    @property
    def stopping(self) -> threading.Event:
        """Set once the worker stops fetching."""
        return self._board.stopping

    def _log_burst_end(self) -> None:
        """Say that a burst stops, and how many retries it leaves behind, still due later."""
        waiting = []
        try:
            for name in self._board.queues:
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
        board = self._board
        with board.lock:
            return (
                all(state.drained for state in board.queues.values())
                and not board.in_flight_count()
                and self._settler.queue.empty()
            )
