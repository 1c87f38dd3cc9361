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
    return registration


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
) -> Callable[[Handler], Handler]:
    """Register the decorated function as the handler of ``queue`` for ``manage.py pgboss_work``.

    The function gets a Job (or a list of them with ``batch=True``); what it returns is stored as
    the job's output; an exception fails the job (it is retried, then dead-lettered). Put handlers
    in an app's ``jobs.py``: the worker command imports every installed app's.
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
