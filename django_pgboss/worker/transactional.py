"""Transactional handlers: the handler and its jobs' completion in one transaction.

``@work("q", transactional=True)`` (pg-boss's ``transactional``) runs the handler inside
``transaction.atomic()`` on the handler thread's Django connection to the queue's database, and
completes the jobs, fenced to the attempt that was fetched, in that same transaction: the
handler's writes there and the completion commit together or not at all. The claim is made
before, outside the transaction (by the fetch loop, as for every handler), so the jobs stay
visibly ``active`` throughout and the monitor's expiry, heartbeats and another instance's
supervisor treat them as any other running job.

How a run ends:

- The handler returns and the completion settles every job: COMMIT. The jobs are completed and
  the handler's writes are there.
- The handler raises, its output cannot be stored, or the completion finds a job no longer held
  by this attempt (its expiry passed and the monitor retried it, an operator cancelled it): the
  transaction rolls back, and the jobs are failed afterwards, outside it, by the settler, as any
  failed job is (so retries and dead letters work as usual; a job another attempt holds is left
  alone by the fence). A job the handler itself completed, failed, cancelled or deleted through
  Boss inside the transaction is its own doing, not a lost claim.
- The process dies (kill -9) or its connection does: PostgreSQL rolls the transaction back, and
  the job, still ``active``, is retried once its expiry passes.
- The transaction outlives its bound: PostgreSQL ends it (see plans/transactions.py for which
  settings); the handler's next statement, or the completion, fails, and the job is failed.

The bound is ``transaction_timeout_seconds``, by default the longest ``expire_in_seconds`` of the
unit plus TRANSACTION_GRACE_SECONDS, as pg-boss derives it: the transaction is open a little wider
than the handler (the bound is set before it, the completion and COMMIT come after), so a bound
equal to the expiry would kill a run that had succeeded by its commit.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.db import DatabaseError, connections, transaction

from django_pgboss.api.jobs import recording_settles
from django_pgboss.records import Job
from django_pgboss.wire import EncodedOutput, output_value, storable_text, to_json
from django_pgboss.worker.messages import Raised
from django_pgboss.worker.outcomes import sqlstate
from django_pgboss.worker.ports import TransactionalStore
from django_pgboss.worker.registry import Registration

logger = logging.getLogger("django_pgboss.worker")

#: Added to a unit's longest expire_in_seconds for its default transaction bound (pg-boss's 5 s).
TRANSACTION_GRACE_SECONDS = 5

# SQLSTATEs of a transaction PostgreSQL ended for its bound: idle_in_transaction_session_timeout
# (25P03), transaction_timeout (25P04, PostgreSQL 17) and a statement cancelled (57014, which
# statement_timeout raises on older servers).
_TIMED_OUT = frozenset({"25P03", "25P04", "57014"})
# The transaction was aborted by an error the handler caught and did not let out of it.
_ABORTED = "25P02"


class TransactionFailed(Exception):
    """Why a transactional run was rolled back when the handler itself raised nothing."""


def transaction_timeout(registration: Registration, jobs: list[Job]) -> int:
    """The bound, in seconds, of the transaction that runs ``jobs`` (see the module docstring).

    This is the run's deadline too: past it PostgreSQL has ended the transaction, so nothing the
    handler does afterwards can commit.
    """
    if registration.transaction_timeout_seconds is not None:
        return registration.transaction_timeout_seconds
    expiry = max((job.expire_in_seconds or 0) for job in jobs)
    return expiry + TRANSACTION_GRACE_SECONDS


def run_unit(
    store: TransactionalStore,
    registration: Registration,
    jobs: list[Job],
    stats: Any,
    *,
    is_late: Callable[[], bool] = lambda: False,
    committed: Callable[[list[tuple[Job, Any]], list[str]], None] | None = None,
) -> list[Raised]:
    """The worker's call: run one unit transactionally. Returns nothing to settle when it
    committed (the jobs are completed and counted in ``stats``), else the item that fails its
    jobs. ``is_late`` says whether the worker already failed the unit at its deadline;
    ``committed`` is run_in_transaction's."""
    outcome, value = run_in_transaction(store, registration, jobs, is_late=is_late, committed=committed)
    if outcome == "completed":
        stats.add(completed=len(value))
        return []
    # The settler logs the reason at ERROR (worker/job_logs.py) once the jobs are failed.
    return [Raised(registration.queue, jobs, value)]


def run_in_transaction(
    store: TransactionalStore,
    registration: Registration,
    jobs: list[Job],
    *,
    is_late: Callable[[], bool] = lambda: False,
    committed: Callable[[list[tuple[Job, Any]], list[str]], None] | None = None,
) -> tuple[str, Any]:
    """Run the handler over ``jobs`` and complete them, in one transaction.

    ``committed`` is called once the transaction committed, with the (job, output) pairs the
    completion wrote and the ids it completed (the worker sends job_completed for them).

    Returns ``("completed", ids)`` once committed, or ``("failed", reason)`` after the rollback:
    the exception the handler raised, or one saying why the run could not commit. The caller
    fails the jobs with the reason (outside the transaction, on the settler's connection).
    """
    name = registration.queue
    using = store.context.using
    seconds = transaction_timeout(registration, jobs)
    try:
        with transaction.atomic(using=using):
            store.bound_transaction(seconds)
            with recording_settles(using) as settled_by_handler:
                result = registration.handler(jobs if registration.batch else jobs[0])
            if is_late():
                # The worker failed the unit at its deadline while the handler ran (and set its
                # jobs' signal): committing the handler's writes now would put them beside a
                # failed job that will run again, the split this mode exists to prevent.
                raise TransactionFailed(
                    "the handler returned after its jobs' deadline, when the worker had failed them; "
                    "its transaction was rolled back"
                )
            # As for any batch handler, a batch's return value is stored only when it held one job.
            output = None if registration.batch and len(jobs) > 1 else _encoded(registration, result)
            pending = [job for job in jobs if job.id not in settled_by_handler]
            pairs = [(job, output) for job in pending]
            try:
                completed = store.complete_each(name, pairs)
            except DatabaseError as exc:
                raise _explained(exc, seconds, registration) from exc
            if len(completed) < len(pending):
                raise TransactionFailed(
                    f"{len(pending) - len(completed)} of {len(jobs)} job(s) were no longer held by this "
                    "attempt when the handler returned (their expiry passed, or they were cancelled or "
                    "failed meanwhile), so the handler's transaction was rolled back; the attempt that "
                    "holds them now runs them"
                )
    except BaseException as exc:
        # Every way a run can end is the jobs' failure (see runner/handlers: SystemExit and
        # KeyboardInterrupt raised in a handler thread are the handler's own). atomic() has rolled
        # back, or closed a connection its ROLLBACK could not reach; either way nothing committed.
        _discard_broken(using)
        if isinstance(exc, DatabaseError):
            exc = _explained(exc, seconds, registration)
        _after_rollback(registration, jobs, exc, using)
        return "failed", exc
    if committed is not None:
        committed(pairs, completed)
    return "completed", completed


def _after_rollback(registration: Registration, jobs: list[Job], exc: BaseException, using: str) -> None:
    """Call the handler's ``rolled_back(jobs, exc)``, when it has one (a tasks backend's runner,
    which records the failed attempt the rollback took), before the jobs are failed: they are still
    this attempt's then, so what it writes, fenced to the attempt, lands. Its own failure is logged:
    the jobs are failed with ``exc`` all the same."""
    hook = getattr(registration.handler, "rolled_back", None)
    if hook is None:
        return
    try:
        hook(jobs, exc)
    except Exception:
        logger.warning("%s.rolled_back() raised", registration.label, exc_info=True)
        _discard_broken(using)


def _encoded(registration: Registration, result: Any) -> EncodedOutput | None:
    try:
        encoded = to_json(output_value(result), "output")
    except Exception as exc:
        # Raised inside the transaction, so the handler's writes go with the job's failure.
        raise TransactionFailed(
            storable_text(
                f"the handler {registration.label} returned a value that cannot be stored as JSON: {exc}"
            )
        ) from exc
    return None if encoded is None else EncodedOutput(encoded)


def _explained(exc: BaseException, seconds: int, registration: Registration) -> BaseException:
    """The database error that ended a run, with what it means for a transactional handler."""
    if isinstance(exc, TransactionFailed):
        return exc
    code = sqlstate(exc)
    if code in _TIMED_OUT:
        reason = f"the handler's transaction outlived its bound of {seconds}s (transaction_timeout_seconds)"
    elif code == _ABORTED:
        reason = (
            "the handler left its transaction aborted: let a database error out of the handler, or "
            "run the statement that may fail in its own transaction.atomic() block (a savepoint)"
        )
    else:
        return exc
    failure = TransactionFailed(storable_text(f"{reason}: {type(exc).__name__}: {str(exc).strip()}"))
    failure.__cause__ = exc
    return failure


def _discard_broken(using: str) -> None:
    """Close the thread's connection when the server ended it, so the next job gets a fresh one."""
    connection = connections[using]
    if connection.connection is not None and not connection.is_usable():
        connection.close()
