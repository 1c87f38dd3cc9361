"""run_jobs(): the registered handlers of the waiting jobs, run on the test's own thread until idle.

A test that sends jobs wants to see them handled without starting a worker's threads, and often
inside its own rolled-back transaction (pytest-django's ``db``, Django's ``TestCase``), which a
worker's connections cannot see. ``run_jobs()`` claims the waiting jobs of the ``@work``-registered
queues and of the tasks backends' queues, calls each handler on the calling thread and connection,
and writes what each call ends as through the worker's own parts: ``worker/results.py`` reads the
return value (a batch's output, per-job results), ``worker/transactional.py`` runs a transactional
handler, and the worker's ``Settler`` completes, fails (so retries and dead letters apply), and
isolates an output the database refuses. It sends the worker's signals as it goes, so receivers,
a ``JobSpy`` and a tasks backend's results see what they see under a worker.

Inside the test's transaction each handler call and each settle runs in a savepoint: a handler
whose statement fails, or an output the database refuses, rolls back only that, and the test's
transaction stays usable. A handler that raises without breaking the transaction keeps its writes,
as it does under a worker, where it runs in autocommit.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import async_to_sync
from django.conf import settings
from django.db import connections, transaction

from django_pgboss import arguments
from django_pgboss.api.boss import Boss
from django_pgboss.api.jobs import JobStore
from django_pgboss.api.queues import QueueStore
from django_pgboss.db.context import DatabaseContext
from django_pgboss.exceptions import InvalidOption
from django_pgboss.plans import testing as plans
from django_pgboss.records import Job
from django_pgboss.worker import job_logs, signalling, transactional
from django_pgboss.worker.messages import Raised, SettleRequest
from django_pgboss.worker.registry import Registration, autodiscover, registrations
from django_pgboss.worker.results import settle_items
from django_pgboss.worker.settler import Settler
from django_pgboss.worker.state import WorkerStats

__all__ = ["JobRun", "RanJob", "run_jobs"]

#: How many jobs run_jobs() runs at most, unless told otherwise.
DEFAULT_MAX_JOBS = 1000

# libpq's (and psycopg's) transaction status of a transaction an error aborted: PQTRANS_INERROR.
_IN_ERROR = 3


@dataclass(frozen=True)
class RanJob:
    """One job run_jobs() ran, as it stood once its handler call was settled.

    ``state`` is the state the job is in now (``"completed"``; ``"retry"`` when a failure left it
    retries; ``"failed"`` for good, copied to its dead letter queue if it has one; or whatever the
    handler itself made it; None when the handler deleted it). ``output`` is what the job stores.
    ``error`` is the exception the handler raised (None when it returned), ``attempt`` the
    attempt this was (1 for the first run).
    """

    queue: str
    id: str
    data: Any
    attempt: int
    state: str | None
    output: Any
    error: BaseException | None = field(default=None, compare=False)


@dataclass(frozen=True)
class JobRun:
    """What run_jobs() ran, in the order it ran them, and whether the queues were left idle.

    ``idle`` is False when run_jobs() stopped at ``max_jobs`` with jobs still waiting (a handler
    that keeps sending jobs, a failure retried without a delay). Iterating gives the RanJob
    entries; ``completed``, ``retried`` and ``failed`` pick them by the state they ended in.
    """

    jobs: tuple[RanJob, ...]
    idle: bool

    def __iter__(self) -> Iterator[RanJob]:
        return iter(self.jobs)

    def __len__(self) -> int:
        return len(self.jobs)

    def in_state(self, state: str | None) -> list[RanJob]:
        """The jobs that ended their run in ``state``."""
        return [job for job in self.jobs if job.state == state]

    @property
    def completed(self) -> list[RanJob]:
        """The jobs completed."""
        return self.in_state("completed")

    @property
    def retried(self) -> list[RanJob]:
        """The jobs that failed with retries left: waiting for their next attempt."""
        return self.in_state("retry")

    @property
    def failed(self) -> list[RanJob]:
        """The jobs failed for good (and copied to their dead letter queue, if they have one)."""
        return self.in_state("failed")


def run_jobs(
    queues: str | Sequence[str] | None = None,
    *,
    max_jobs: int = DEFAULT_MAX_JOBS,
    using: str | None = None,
    schema: str | None = None,
    ignore_start_after: bool = False,
) -> JobRun:
    """Run the handlers of the waiting jobs on the calling thread, until no queue has one left.

    ``queues`` (a name or a list) narrows the run to those queues, each of which must have an
    ``@work`` handler or be a tasks backend's queue (InvalidOption otherwise); by default every
    registered queue that exists runs. Jobs are claimed as the worker claims them (the
    registration's batch_size with ``batch=True``, else one at a time, with its priority and group
    options), and each handler call ends as it would under ``manage.py pgboss_work``: completed
    with its output, failed (retried while its retry_limit allows, after its retry delay, then
    dead-lettered), per-job results, transactional handlers in their own transaction (a savepoint
    inside the test's), ``async def`` handlers awaited. The worker's signals are sent, with this
    run's runner as ``worker``.

    A retry waits out its delay on the database's clock: move a TestClock past it and call
    run_jobs() again, or pass ``ignore_start_after=True`` to run every waiting job now, deferred
    sends and delayed retries included. ``max_jobs`` bounds the run (a handler that fails for ever
    with no delay, one that sends a job per job). ``using`` and ``schema`` default to
    settings.PGBOSS, as for Boss.

    A handler's exception does not propagate: it is the job's failure, kept as ``RanJob.error``.
    What does propagate (a queue that does not exist, database trouble) leaves the caller's
    transaction usable. Jobs are not run past their deadline or signalled: a handler runs to its
    end.
    """
    names = _queue_names(queues)
    arguments.integer("max_jobs", max_jobs, minimum=1)
    arguments.boolean("ignore_start_after", ignore_start_after)
    if using is not None and using not in settings.DATABASES:
        raise InvalidOption(f"using names no database in settings.DATABASES: {using!r}")
    boss = Boss(using, schema)
    runner = JobRunner(_registrations(names, boss), boss, ignore_start_after=ignore_start_after)
    return runner.run(max_jobs)


def _queue_names(queues: str | Sequence[str] | None) -> list[str] | None:
    if queues is None:
        return None
    if isinstance(queues, str):
        queues = [queues]
    elif not isinstance(queues, Sequence):
        raise InvalidOption(f"queues must be a queue name or a list of them, not {type(queues).__name__}")
    names = [arguments.queue_name(name, "queues") for name in queues]
    if not names:
        raise InvalidOption("queues is empty: name the queues to run, or pass None to run them all")
    return names


def _registrations(names: list[str] | None, boss: Boss) -> list[Registration]:
    """The registrations to run: @work's and the tasks backends' on ``boss``'s database, those of
    ``names`` only when given (each must have one), else those whose queue exists."""
    autodiscover()
    handlers = registrations()
    # Imported here, as manage.py pgboss_work's task source is: without settings.TASKS nothing
    # of Django's task framework is needed.
    from django_pgboss.tasks.registrations import task_registrations

    tasks = task_registrations(boss)
    clash = sorted(set(tasks) & set(handlers))
    if clash:
        raise InvalidOption(
            f"queue(s) {', '.join(map(repr, clash))} have both an @work handler and a tasks backend "
            f"({tasks[clash[0]].label}); a queue is worked by one of them"
        )
    handlers.update(tasks)
    if names is not None:
        unknown = [name for name in names if name not in handlers]
        if unknown:
            raise InvalidOption(
                f"no @work handler for queue(s) {', '.join(map(repr, unknown))} (nor a tasks backend); "
                f"registered: {', '.join(sorted(handlers)) or 'none'}"
            )
        selected = [handlers[name] for name in dict.fromkeys(names)]
    else:
        existing = {queue.name for queue in QueueStore(boss.context).all_queues(list(handlers))}
        selected = [registration for name, registration in sorted(handlers.items()) if name in existing]
    # A tasks backend with CREATE_QUEUES creates its queues on first use, as for a worker.
    for handler in {registration.handler for registration in selected if registration.queue in tasks}:
        prepare = getattr(handler, "prepare", None)
        if prepare is not None:
            prepare()
    return selected


class JobRunner:
    """What run_jobs() runs on: the registrations, the store, and the worker's settler, driven on
    the calling thread. It is the ``worker`` of the signals it sends (its ``registrations``, as a
    Worker's, tell a tasks backend's runner that the queue is its own)."""

    def __init__(self, registrations: list[Registration], boss: Boss, *, ignore_start_after: bool) -> None:
        self.registrations = registrations
        self.boss = boss
        self.jobs = JobStore(boss.context)
        self.stats = WorkerStats()
        self.ignore_start_after = ignore_start_after
        self.settler = Settler(
            _SavepointStore(self.jobs),
            self.stats,
            labels={registration.queue: registration.label for registration in registrations},
            settled=lambda name, units: None,
            trouble=_raise_trouble,
            is_stopping=lambda: False,
            worker=self,
        )

    def run(self, max_jobs: int) -> JobRun:
        ran: list[RanJob] = []
        while True:
            claimed_any = False
            for registration in self.registrations:
                left = max_jobs - len(ran)
                if left <= 0:
                    return JobRun(tuple(ran), idle=not self._any_waiting())
                size = min(registration.batch_size, left) if registration.batch else 1
                jobs = self.jobs.fetch(
                    registration.queue,
                    batch_size=size,
                    include_metadata=registration.include_metadata,
                    group_concurrency=registration.group_concurrency,
                    min_priority=registration.min_priority,
                    max_priority=registration.max_priority,
                    ignore_start_after=self.ignore_start_after,
                )
                if jobs:
                    claimed_any = True
                    self.stats.add(fetched=len(jobs))
                    ran.extend(self._run_unit(registration, jobs))
            if not claimed_any:
                return JobRun(tuple(ran), idle=True)

    def _any_waiting(self) -> bool:
        """Whether a fetch would claim anything now (a claim in a savepoint, rolled back)."""
        for registration in self.registrations:
            try:
                with transaction.atomic(using=self.boss.using):
                    if self.jobs.fetch(registration.queue, ignore_start_after=self.ignore_start_after):
                        raise _Peeked
            except _Peeked:
                return True
        return False

    def _run_unit(self, registration: Registration, jobs: list[Job]) -> list[RanJob]:
        name = registration.queue
        signalling.jobs_started(self, name, jobs)
        job_logs.started(name, jobs)
        started = time.perf_counter()
        error: BaseException | None = None
        settles: list[SettleRequest]
        if registration.transactional:
            with _transaction_bounds_kept(self.boss.context):
                rolled_back = transactional.run_unit(
                    self.jobs,
                    registration,
                    jobs,
                    self.stats,
                    committed=lambda pairs, ids: signalling.jobs_completed(self, name, pairs, ids),
                )
            error = rolled_back[0].error if rolled_back else None
            settles = list(rolled_back)
        else:
            outcome = _guarded_call(registration, jobs)
            if isinstance(outcome, _HandlerRaised):
                error = outcome.exception
                settles = [Raised(name, jobs, error)]
            else:
                settles = settle_items(registration, name, jobs, outcome)
        job_logs.ended(name, jobs, time.perf_counter() - started, error)
        for settle in settles:
            self.settler.settle_now(settle)
        return [self._as_ran(name, job, error) for job in jobs]

    def _as_ran(self, name: str, job: Job, error: BaseException | None) -> RanJob:
        stored = self.jobs.get_job_by_id(name, job.id)
        return RanJob(
            queue=name,
            id=job.id,
            data=job.data,
            attempt=job.retry_count + 1,
            state=None if stored is None else stored.state,
            output=None if stored is None else stored.output,
            error=error,
        )


class _Peeked(Exception):
    """Rolls back the claim _any_waiting() made to see whether one was there."""


@dataclass(frozen=True)
class _HandlerRaised:
    exception: BaseException


def _call(registration: Registration, jobs: list[Job]) -> Any:
    argument = jobs if registration.batch else jobs[0]
    if registration.is_async:
        # async_to_sync runs the coroutine's sync_to_async calls (the async ORM) back on this
        # thread, so they see the test's transaction as the handler's sync calls do.
        return async_to_sync(registration.handler)(argument)
    return registration.handler(argument)


def _guarded_call(registration: Registration, jobs: list[Job]) -> Any:
    """The handler call's return value, or _HandlerRaised with what it raised; inside a savepoint on each
    connection that is in a transaction, rolled back when the call left that transaction broken."""
    aliases = [c.alias for c in connections.all(initialized_only=True) if c.in_atomic_block]
    try:
        with contextlib.ExitStack() as savepoints:
            for alias in aliases:
                savepoints.enter_context(transaction.atomic(using=alias))
            try:
                result = _call(registration, jobs)
            except Exception as exc:
                if any(_broken(alias) for alias in aliases):
                    raise  # the savepoints roll back; caught below
                return _HandlerRaised(exc)
            broken = [alias for alias in aliases if _broken(alias)]
            if broken:
                raise transactional.TransactionFailed(
                    f"the handler {registration.label} returned, but left the transaction on database "
                    f"{broken[0]!r} aborted: a database error it caught, outside a "
                    "transaction.atomic() block of its own; its writes there were rolled back"
                )
            return result
    except Exception as exc:
        return _HandlerRaised(exc)


def _broken(alias: str) -> bool:
    """Whether the transaction on ``alias`` can run nothing more until it rolls back."""
    connection = connections[alias]
    if connection.needs_rollback:
        return True
    raw = connection.connection
    info = getattr(raw, "info", None)
    status = getattr(info, "transaction_status", None)
    return status is not None and int(status) == _IN_ERROR


@contextlib.contextmanager
def _transaction_bounds_kept(context: DatabaseContext) -> Iterator[None]:
    """Inside the caller's transaction, give back the timeouts a transactional run sets.

    The run bounds its transaction (plans.transactions.bound_transaction); inside a test's
    transaction that is a savepoint, and the bound would outlive it, for the rest of the test's
    transaction. Outside one, the run's own transaction ends, and its bound with it.
    """
    if not context.connection().in_atomic_block:
        yield
        return
    before = [(name, value) for name, value in context.all(plans.transaction_settings()) if value is not None]
    try:
        yield
    finally:
        if not _broken(context.using):
            context.execute(
                plans.restore_transaction_settings(),
                {
                    "names": [name for name, _value in before],
                    "values": [value for _name, value in before],
                },
            )


class _SavepointStore:
    """The worker's store (worker/ports.py's WorkerStore) over JobStore, each settle in a
    savepoint when the caller's transaction is open: a statement the database refuses (which the
    settler isolates to its job and goes on without) then undoes only itself, not the test's
    transaction. The reads run as they are."""

    def __init__(self, store: JobStore) -> None:
        self.store = store
        self.context = store.context

    def _savepoint(self) -> Any:
        return self.context.atomic() if self.context.in_atomic_block else contextlib.nullcontext()

    def fetch(self, name: str, **options: Any) -> list[Job]:
        return self.store.fetch(name, **options)

    def use_generic_plans(self) -> None:
        self.store.use_generic_plans()

    def touch_attempts(self, name: str, jobs: Sequence[Job]) -> list[str]:
        with self._savepoint():
            return self.store.touch_attempts(name, jobs)

    def retries_waiting(self, name: str) -> tuple[int, Any]:
        return self.store.retries_waiting(name)

    def complete_each(self, name: str, results: Sequence[tuple[Job | Mapping[str, Any], Any]]) -> list[str]:
        with self._savepoint():
            return self.store.complete_each(name, results)

    def fail_reporting(
        self, name: str, jobs: Sequence[Job], output: Any = None, *, terminal: bool = False
    ) -> tuple[int, list[tuple[str, str, str]], dict[str, str]]:
        with self._savepoint():
            return self.store.fail_reporting(name, jobs, output, terminal=terminal)

    def requeue(self, name: str, jobs: Sequence[Job], *, started: bool, output: Any = None) -> list[str]:
        with self._savepoint():
            return self.store.requeue(name, jobs, started=started, output=output)


def _raise_trouble(doing: str, exc: BaseException, failures: int) -> None:
    """The settler's way with database trouble, here: no waiting it out, the test sees it."""
    raise exc
