"""The @work registry: which function handles which queue, and how the worker runs it."""

from __future__ import annotations

import difflib
import inspect
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from asgiref.sync import iscoroutinefunction
from django.utils.module_loading import autodiscover_modules

from django_pgboss import arguments
from django_pgboss.arguments import queue_name as validate_queue_name
from django_pgboss.exceptions import InvalidOption

Handler = Callable[[Any], Any]

#: The longest transaction timeout PostgreSQL can enforce (its timeouts are int4 milliseconds).
MAX_TRANSACTION_TIMEOUT_SECONDS = arguments.INT4_MAX // 1000
#: The longest polling or heartbeat interval a registration takes: a day. Beyond it an interval is
#: a mistake, and far beyond it (past threading.TIMEOUT_MAX, about 292 years) the worker's waits
#: would raise OverflowError on their thread instead of waiting.
MAX_INTERVAL_SECONDS = 86_400


def is_async_handler(handler: Any) -> bool:
    """Whether ``handler`` is an ``async def`` function, or an object whose ``__call__`` is one."""
    if iscoroutinefunction(handler):
        return True
    if inspect.isroutine(handler) or not callable(handler):
        return False
    return iscoroutinefunction(type(handler).__call__)


@dataclass(frozen=True)
class Registration:
    """A handler and how the worker runs it for its queue.

    ``concurrency`` handler calls run at once; each gets one Job, or with ``batch`` a list of up
    to ``batch_size`` jobs. Without ``batch``, ``batch_size`` is how many jobs one fetch may claim:
    the queue holds up to ``max(concurrency, batch_size)`` jobs, running or waiting for a thread.
    The other options are documented in docs/workers.md (``work()``'s).
    """

    queue: str
    handler: Handler
    batch_size: int = 1
    concurrency: int = 1
    polling_interval_seconds: float = 2.0
    include_metadata: bool = False
    batch: bool = False
    group_concurrency: int | Mapping[str, Any] | None = None
    min_priority: int | None = None
    max_priority: int | None = None
    local_group_concurrency: int | Mapping[str, Any] | None = None
    heartbeat_refresh_seconds: float | None = None
    notify_polling_interval_seconds: float | None = None
    per_job_results: bool = False
    transactional: bool = False
    transaction_timeout_seconds: int | None = None

    @property
    def is_async(self) -> bool:
        """Whether the handler is an ``async def``, run on the worker's event loop (worker/async_slots.py)."""
        return is_async_handler(self.handler)

    @property
    def label(self) -> str:
        """The handler's import path, for logs and errors."""
        return f"{self.handler.__module__}.{getattr(self.handler, '__qualname__', repr(self.handler))}"

    def replace(self, **changes: Any) -> Registration:
        """A copy with some settings overridden (the command's --concurrency, --batch-size)."""
        values = {**self.__dict__, **{k: v for k, v in changes.items() if v is not None}}
        return validated(Registration(**values))


_registry: dict[str, Registration] = {}
_lock = threading.Lock()


def validated(registration: Registration) -> Registration:
    """Check a registration's settings; raises InvalidOption naming the bad one."""
    validate_queue_name(registration.queue, "queue")
    if not callable(registration.handler):
        raise InvalidOption(f"the handler for queue {registration.queue!r} is not callable")
    arguments.limit("batch_size", registration.batch_size)
    arguments.integer("concurrency", registration.concurrency, minimum=1)
    _interval("polling_interval_seconds", registration.polling_interval_seconds, minimum=0.1)
    arguments.boolean("include_metadata", registration.include_metadata)
    arguments.boolean("batch", registration.batch)
    arguments.boolean("per_job_results", registration.per_job_results)
    if registration.per_job_results and not registration.batch:
        raise InvalidOption(
            f"per_job_results is for batch handlers (batch=True); the handler for queue "
            f"{registration.queue!r} gets one job, whose result is its own already"
        )
    # Checked here as fetch() checks them, so that a bad one is refused at registration rather
    # than by every fetch of the running worker.
    for option in ("min_priority", "max_priority"):
        arguments.integer(option, getattr(registration, option), minimum=arguments.INT4_MIN, nullable=True)
    low, high = registration.min_priority, registration.max_priority
    if low is not None and high is not None and low > high:
        raise InvalidOption(f"min_priority {low} is above max_priority {high} (queue {registration.queue!r})")
    if registration.group_concurrency is not None:
        arguments.group_limits(registration.group_concurrency)
    if registration.local_group_concurrency is not None:
        if registration.group_concurrency is not None:
            raise InvalidOption(
                "group_concurrency and local_group_concurrency cannot both be given: the first caps "
                "a group across every worker, the second within this one; choose one"
            )
        default, tiers = arguments.group_limits(
            registration.local_group_concurrency, "local_group_concurrency"
        )
        # As pg-boss: more than the queue's handler threads could never be reached.
        for label, limit in [("local_group_concurrency", default)] + [
            (f"local_group_concurrency tier {tier!r}", value) for tier, value in tiers.items()
        ]:
            if limit > queue_units(registration):
                raise InvalidOption(
                    f"{label} ({limit}) cannot exceed the queue's concurrency ({queue_units(registration)})"
                )
    if registration.heartbeat_refresh_seconds is not None:
        _interval("heartbeat_refresh_seconds", registration.heartbeat_refresh_seconds, minimum=0.01)
    if registration.notify_polling_interval_seconds is not None:
        _interval(
            "notify_polling_interval_seconds", registration.notify_polling_interval_seconds, minimum=0.1
        )
        if registration.notify_polling_interval_seconds < registration.polling_interval_seconds:
            raise InvalidOption(
                f"notify_polling_interval_seconds ({registration.notify_polling_interval_seconds}) must "
                f"be at least polling_interval_seconds ({registration.polling_interval_seconds})"
            )
    arguments.boolean("transactional", registration.transactional)
    timeout = registration.transaction_timeout_seconds
    if timeout is not None:
        if not registration.transactional:
            # Refused rather than ignored: the bound exists only for a transaction the worker opens.
            raise InvalidOption(
                f"transaction_timeout_seconds needs transactional=True (queue {registration.queue!r})"
            )
        # PostgreSQL's timeouts are int4 milliseconds: about 24.8 days is the longest it can enforce.
        arguments.integer(
            "transaction_timeout_seconds", timeout, minimum=1, maximum=MAX_TRANSACTION_TIMEOUT_SECONDS
        )
    if registration.transactional and registration.per_job_results:
        # pg-boss refuses the pair too: per-job results settle a batch's jobs apart, and one
        # transaction can only commit or roll back as a whole.
        raise InvalidOption(
            f"transactional cannot be combined with per_job_results (queue {registration.queue!r}): "
            "one transaction commits or rolls back the whole batch, so its jobs cannot end apart"
        )
    if registration.transactional and registration.is_async:
        # The transaction is the worker thread's, around a sync call; an async handler's ORM
        # calls run on its job's own thread (worker/async_slots.py), outside that transaction.
        raise InvalidOption(
            f"an async handler cannot be transactional=True (queue {registration.queue!r}, "
            f"{registration.label}): the handler and its job's completion share one transaction on "
            "the worker thread's connection, which a coroutine's ORM calls do not use; write a sync "
            "def handler, or open the transaction inside the coroutine with a sync_to_async-wrapped "
            "atomic() block"
        )
    return registration


def _interval(option: str, value: object, *, minimum: float) -> float:
    """A registration's interval in seconds: a finite number from ``minimum`` to MAX_INTERVAL_SECONDS."""
    seconds = arguments.number(option, value, minimum=minimum)
    if seconds > MAX_INTERVAL_SECONDS:
        raise InvalidOption(f"{option} must be at most {MAX_INTERVAL_SECONDS} seconds (a day), not {value!r}")
    return seconds


def queue_units(registration: Registration) -> int:
    """How many jobs of the queue can run at once: its threads, times the batch with ``batch``."""
    return registration.concurrency * (registration.batch_size if registration.batch else 1)


def work(
    queue: str,
    *,
    batch_size: int = 1,
    concurrency: int = 1,
    polling_interval_seconds: float = 2.0,
    include_metadata: bool = False,
    batch: bool = False,
    group_concurrency: int | Mapping[str, Any] | None = None,
    min_priority: int | None = None,
    max_priority: int | None = None,
    local_group_concurrency: int | Mapping[str, Any] | None = None,
    heartbeat_refresh_seconds: float | None = None,
    notify_polling_interval_seconds: float | None = None,
    per_job_results: bool = False,
    transactional: bool = False,
    transaction_timeout_seconds: int | None = None,
    **unknown: Any,
) -> Callable[[Handler], Handler]:
    """Register the decorated function as the handler of ``queue`` for ``manage.py pgboss_work``.

    The function gets a Job (or a list of them with ``batch=True``); what it returns is stored as
    the job's output (a batch's only when it held one job, as pg-boss does, unless
    ``per_job_results`` lets it return a JobResult per job); an exception fails the job (it is
    retried, then dead-lettered). A long handler watches ``job.signal`` to stop at its deadline.
    Put handlers in an app's ``jobs.py``: the worker command imports every installed app's. Every
    option is described in docs/workers.md; a bad one (or one that is not an option) raises
    InvalidOption naming it.

    With ``transactional=True`` the handler runs inside ``transaction.atomic()`` on the worker's
    connection to the queue's database, and the job is completed in that same transaction, so the
    handler's writes there and the job's completion commit together or not at all (see
    docs/workers.md). ``transaction_timeout_seconds`` bounds that transaction on the server (by
    default, the job's ``expire_in_seconds`` plus five seconds).
    """
    if unknown:
        raise InvalidOption(_unknown_options(queue, unknown))

    def register(handler: Handler) -> Handler:
        registration = validated(
            Registration(
                queue=queue,
                handler=handler,
                batch_size=batch_size,
                concurrency=concurrency,
                polling_interval_seconds=polling_interval_seconds,
                include_metadata=include_metadata,
                batch=batch,
                group_concurrency=group_concurrency,
                min_priority=min_priority,
                max_priority=max_priority,
                local_group_concurrency=local_group_concurrency,
                heartbeat_refresh_seconds=heartbeat_refresh_seconds,
                notify_polling_interval_seconds=notify_polling_interval_seconds,
                per_job_results=per_job_results,
                transactional=transactional,
                transaction_timeout_seconds=transaction_timeout_seconds,
            )
        )
        with _lock:
            existing = _registry.get(queue)
            if existing is not None and existing.is_async != registration.is_async:
                kinds = ("an async", "a sync") if existing.is_async else ("a sync", "an async")
                raise InvalidOption(
                    f"queue {queue!r} already has {kinds[0]} handler, {existing.label}; {kinds[1]} "
                    f"handler, {registration.label}, cannot share it: a queue's handlers are all sync "
                    "or all async (give the other one a queue of its own)"
                )
            if existing is not None and existing.label != registration.label:
                raise InvalidOption(
                    f"queue {queue!r} already has a handler, {existing.label}; {registration.label} cannot take it too"
                )
            _registry[queue] = registration
        return handler

    return register


def _unknown_options(queue: str, unknown: Mapping[str, Any]) -> str:
    """The refusal of @work options that are not options, each with the one it may stand for."""
    known = [name for name in Registration.__dataclass_fields__ if name not in ("queue", "handler")]
    parts = []
    for name in sorted(unknown):
        close = difflib.get_close_matches(name, known, n=1)
        parts.append(f"{name!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    return f"@work({queue!r}) got unknown option(s) {', '.join(parts)}"


def registrations() -> dict[str, Registration]:
    """Every registered handler, by queue."""
    with _lock:
        return dict(_registry)


def autodiscover() -> None:
    """Import each installed app's ``jobs`` module, where @work handlers live."""
    autodiscover_modules("jobs")
