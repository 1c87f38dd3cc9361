"""The queues of the django.tasks backends that are PgBossBackends, as worker registrations.

The generic ``@work`` registry (worker/registry.py) knows nothing of Django's task framework; this
is where the tasks side hands its queues to the worker: ``manage.py pgboss_work`` works both.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from django_pgboss.exceptions import InvalidOption
from django_pgboss.worker.registry import Registration


def task_registrations(boss: Any = None, alias: str | None = None) -> dict[str, Registration]:
    """The queues of the django.tasks backends that are PgBossBackends, by queue.

    Each app's ``tasks`` module is imported first, so that a queue with an async task runs on the
    worker's event loop (tasks/runners.py); the others run on its handler threads (TaskRunner,
    one per backend). With ``boss`` (a Boss or a DatabaseContext), only
    backends on its database and schema (a worker serves one); with ``alias``, only that backend.
    Empty when settings.TASKS names no PgBossBackend; raises InvalidOption when two backends claim
    one queue.
    """
    if not getattr(settings, "TASKS", None):
        return {}
    # Imported here: the backend needs Django's task framework (or its backport), and a project
    # without TASKS must be able to import this module, through django_pgboss.registry, without it.
    from django_pgboss.tasks.backend import PgBossBackend, task_backends_for

    backends = task_backends_for(boss)
    if backends:
        # After the backends are made: a tasks module's @task validates with its backend.
        PgBossBackend.discover_tasks()
    found: dict[str, Registration] = {}
    for backend in backends:
        if alias is not None and backend.alias != alias:
            continue
        for registration in backend.registrations():
            other = found.get(registration.queue)
            if other is not None:
                raise InvalidOption(
                    f"queue {registration.queue!r} is a queue of two tasks backends, {other.label} and {registration.label}"
                )
            found[registration.queue] = registration
    return found


def backend_registrations(alias: str) -> tuple[dict[str, Registration], Any]:
    """The queues of the tasks backend ``alias`` by queue, and its Boss, for a worker that serves
    that backend alone. Raises InvalidOption when TASKS has no such backend or it is not a
    PgBossBackend, and ImportError without Django's task framework."""
    from django_pgboss.tasks.backend import PgBossBackend
    from django_pgboss.tasks.compat import InvalidTaskBackend, task_backends

    try:
        backend = task_backends[alias]
    except InvalidTaskBackend as exc:
        raise InvalidOption(f"--tasks-backend {alias!r}: {exc}") from exc
    if not isinstance(backend, PgBossBackend):
        raise InvalidOption(f"--tasks-backend {alias!r} is a {type(backend).__name__}, not a PgBossBackend")
    backend.discover_tasks()
    return {r.queue: r for r in backend.registrations()}, backend.boss


def worker_tasks(boss: Any, alias: str | None = None) -> tuple[dict[str, Registration], Any]:
    """The task queues a worker on ``boss``'s database serves, and the Boss it serves them on.

    Without ``alias``: every PgBossBackend on that database and schema (task_registrations()),
    on ``boss``. With ``alias``: that backend's queues alone, on its own Boss
    (backend_registrations()). This is the ``task_source`` manage.py pgboss_work hands to
    django_pgboss.worker.launch.build_worker(), which knows nothing of Django's task framework.
    """
    if alias:
        return backend_registrations(alias)
    return task_registrations(boss), boss
