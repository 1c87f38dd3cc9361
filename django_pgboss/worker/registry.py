"""The @work registry: which function handles which queue, and how the worker runs it."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from django.utils.module_loading import autodiscover_modules

from django_pgboss import arguments
from django_pgboss.arguments import queue_name as validate_queue_name
from django_pgboss.exceptions import InvalidOption

Handler = Callable[[Any], Any]


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
    arguments.number("polling_interval_seconds", registration.polling_interval_seconds, minimum=0.1)
    arguments.boolean("include_metadata", registration.include_metadata)
    arguments.boolean("batch", registration.batch)
    arguments.boolean("per_job_results", registration.per_job_results)
    if registration.per_job_results and not registration.batch:
        raise InvalidOption(
            f"per_job_results is for batch handlers (batch=True); the handler for queue "
            f"{registration.queue!r} gets one job, whose result is its own already"
        )
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
        arguments.number("heartbeat_refresh_seconds", registration.heartbeat_refresh_seconds, minimum=0.01)
    if registration.notify_polling_interval_seconds is not None:
        arguments.number(
            "notify_polling_interval_seconds", registration.notify_polling_interval_seconds, minimum=0.1
        )
        if registration.notify_polling_interval_seconds < registration.polling_interval_seconds:
            raise InvalidOption(
                f"notify_polling_interval_seconds ({registration.notify_polling_interval_seconds}) must "
                f"be at least polling_interval_seconds ({registration.polling_interval_seconds})"
            )
    return registration


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
) -> Callable[[Handler], Handler]:
    """Register the decorated function as the handler of ``queue`` for ``manage.py pgboss_work``.

    The function gets a Job (or a list of them with ``batch=True``); what it returns is stored as
    the job's output (a batch's only when it held one job, as pg-boss does, unless
    ``per_job_results`` lets it return a JobResult per job); an exception fails the job (it is
    retried, then dead-lettered). A long handler watches ``job.signal`` to stop at its deadline.
    Put handlers in an app's ``jobs.py``: the worker command imports every installed app's. Every
    option is described in docs/workers.md; a bad one raises InvalidOption naming it.
    """

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
            )
        )
        with _lock:
            existing = _registry.get(queue)
            if existing is not None and existing.label != registration.label:
                raise InvalidOption(
                    f"queue {queue!r} already has a handler, {existing.label}; {registration.label} cannot take it too"
                )
            _registry[queue] = registration
        return handler

    return register


def registrations() -> dict[str, Registration]:
    """Every registered handler, by queue."""
    with _lock:
        return dict(_registry)


def autodiscover() -> None:
    """Import each installed app's ``jobs`` module, where @work handlers live."""
    autodiscover_modules("jobs")
