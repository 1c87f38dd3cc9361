"""Exceptions raised by django_pgboss. Every one derives from ``PgBossError``."""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import CommandError
from django.db import DatabaseError


class PgBossError(Exception):
    """Base class of every error django_pgboss raises on purpose."""


class ImproperlyConfiguredSchema(PgBossError, ImproperlyConfigured):
    """settings.PGBOSS["SCHEMA"] names a schema django_pgboss cannot use safely."""


class InvalidQueueName(PgBossError, ValueError):
    """A queue name breaks pg-boss's naming rule (letters, digits, ``_ . - /``)."""


class ReadOnlyModelError(PgBossError):
    """A write was attempted through one of the read-only pg-boss models.

    The tables belong to pg-boss's SQL: rows are written through ``Boss`` so that policies,
    partitions and the attempt fence apply, never through the ORM.
    """


class InvalidOption(PgBossError, ValueError):
    """An option has the wrong type or is out of range; the message names the option."""


class InvalidSchedule(InvalidOption):
    """A schedule's expression, time zone or preview argument cannot be used; the message names
    the part at fault, and ``field`` says which argument it is ("cron", "tz", "count" or "start").

    An InvalidOption, as every cron error was before rules existed, so code that caught
    InvalidOption around schedule() keeps catching these.
    """

    def __init__(self, message: str, *, field: str = "cron") -> None:
        super().__init__(message)
        self.field = field


class InvalidPolicy(InvalidOption):
    """A queue policy that is not one of QueuePolicy's values."""


class InvalidStartAfter(InvalidOption):
    """start_after is neither seconds, a datetime, nor a parseable ISO 8601 string."""


class QueueNotFound(PgBossError, LookupError):
    """The named queue does not exist: create it with create_queue() first."""


class DeadLetterQueueNotFound(QueueNotFound):
    """A dead_letter option names a queue that does not exist."""


class JobDataNotSerializable(PgBossError, TypeError):
    """A job's data (or output) cannot be stored as JSON."""


class InvalidJobReference(PgBossError, ValueError):
    """A settle call got something that is neither a Job, an id, nor an {"id", "retry_count"} pair."""


class QueueInUse(PgBossError):
    """A queue cannot be deleted while other queues or jobs name it as their dead letter queue."""


class NotADeadLetterQueue(InvalidOption):
    """redrive() or preview_redrive() was given a queue that no queue uses as its dead_letter and
    that holds no dead-letter copies."""


class InvalidTimestamp(InvalidOption):
    """A moment (such as redrive's created_before) is neither a datetime nor an ISO 8601 string."""


class TaskNotEnqueued(PgBossError):
    """A task's job was dropped by its queue's policy or its singleton settings, so nothing runs."""


class TaskNotFound(PgBossError, LookupError):
    """A task job names a task that no longer imports, or a path that is not a task."""


class TaskAttemptLost(PgBossError):
    """A task attempt ended without the task's own outcome: it timed out, its heartbeat stopped,
    or its worker stopped. A task result lists such an attempt as an error of this class."""


class WrongPolicy(InvalidOption):
    """The call is only for queues of another policy (get_blocked_keys() on a queue that is not
    key_strict_fifo); the message names the queue and its policy."""


class InvalidFlow(InvalidOption):
    """A flow() graph that cannot be inserted; the message names the job (its ref) or the queue.
    Raised before anything is written: the whole flow is inserted, or none of it."""


class EmptyFlow(InvalidFlow):
    """flow() was given no jobs, or too few to make a graph (pg-boss needs two jobs, one of them
    depending on another)."""


class DuplicateFlowRef(InvalidFlow):
    """Two jobs of one flow() share a ref."""


class UnknownFlowRef(InvalidFlow):
    """A job's depends_on names a ref that no job of the flow has."""


class FlowCycle(InvalidFlow):
    """The flow's dependencies form a cycle (a job depending on itself included), so no job of the
    cycle could ever run; the message lists the refs on it."""


class FlowJobRefused(PgBossError):
    """A flow job was not inserted (its queue's policy or a throttle slot dropped it, or its id is
    taken); the flow was rolled back whole. Its ``refs`` attribute lists the jobs refused."""

    def __init__(self, message: str, refs: list[str]) -> None:
        super().__init__(message)
        self.refs = refs


class SchemaError(PgBossError, CommandError):
    """The pg-boss schema in the database is not one django_pgboss can use or install over.

    A CommandError too, so ``manage.py migrate`` and the other commands print its one-line message
    instead of a traceback.
    """


class SchemaNotInstalled(SchemaError, DatabaseError):
    """The pgboss schema is not installed in the database: ``manage.py migrate pgboss`` first.

    Also a DatabaseError, as the statement's own error was: code that outlives database errors
    (the monitor's loop, which backs off and retries) outlives this one too, now saying why.
    """


class UnfitBackend(SchemaError):
    """The database does not fit settings.PGBOSS["BACKEND"]: "citus" or "citus-distributed" on a
    database without the citus extension, or "citus-distributed" without Citus worker nodes.

    ``migrate`` raises it before it installs or upgrades anything; the message names the problem
    (the deployment check pgboss.E009 reports the same).
    """


class StatementReturnedNoRow(PgBossError, DatabaseError):
    """A statement that always returns a row returned none (``DatabaseContext.one()``): the
    database is not in the state the statement is written for. A DatabaseError, like the error
    unpacking the missing row would have been, so code that outlives database errors outlives it."""


class JobCancelled(PgBossError):
    """Raised by ``job.signal.raise_if_set()`` once the worker has cancelled the job's attempt.

    ``reason`` says why: "deadline" (the job passed its expire_in_seconds), "claim_lost" (a
    heartbeat found the attempt no longer this worker's) or "shutdown" (a stop's grace period
    ended); the message says it in words. A handler may let it propagate: the attempt is settled
    without it by then, so nothing it ends with is stored.
    """

    def __init__(self, reason: str, message: str | None = None) -> None:
        super().__init__(message or reason)
        self.reason = reason


class WaitTimedOut(PgBossError, TimeoutError):
    """A testing aid's wait (``django_pgboss.testing``: wait_for_job(), a JobSpy, a TestClock
    waiting for the timers it made due) ran out of time; the message says what it waited for and
    what it saw last."""


class JobStateUnreachable(PgBossError):
    """A wait for a job's state that can no longer come: the job ended in another final state
    (completed, failed or cancelled), or was deleted. The message names the state it is in."""


class OffWorkWaitsOnItself(PgBossError, RuntimeError):
    """``off_work(name, wait=True)`` was called from inside a handler of the queue it stops (its
    thread, or its coroutine and what that runs through ``sync_to_async``): the call would wait
    for that handler to return, and the handler waits for the call. Nothing was changed; from a
    handler, ``off_work(name, wait=False)`` stops the queue and lets the handler finish."""
