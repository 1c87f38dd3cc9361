"""Building the Worker that ``manage.py pgboss_work`` runs: which handlers, on which database.

The handlers are the ``@work`` registrations of every installed app's jobs.py and those a
``task_source`` adds: manage.py pgboss_work passes django_pgboss.tasks.registrations.worker_tasks,
the queues of the django.tasks backends that are PgBossBackends, or, with ``tasks_backend``, one
backend's queues on its own database and schema. The worker layer itself knows nothing of Django's
task framework (tasks/ builds on worker/, not the other way round). build_worker() checks the whole
plan before anything runs and raises LaunchError with a message for the operator.
"""

from __future__ import annotations

from collections.abc import Callable

from django.core.exceptions import ImproperlyConfigured

from django_pgboss.api.boss import Boss
from django_pgboss.api.queues import QueueStore
from django_pgboss.exceptions import PgBossError
from django_pgboss.worker import Worker
from django_pgboss.worker.registry import Registration, autodiscover, registrations

#: ``(boss, tasks_backend) -> (registrations by queue, the Boss to run them on)``: where the
#: handlers beyond @work come from (tasks/registrations.py's worker_tasks for the command).
TaskSource = Callable[[Boss, str | None], tuple[dict[str, Registration], Boss]]


class LaunchError(Exception):
    """The worker cannot start as asked; the message says why (the command prints it)."""


def build_worker(
    *,
    queues: list[str] | None = None,
    concurrency: int | None = None,
    batch_size: int | None = None,
    burst: bool = False,
    tasks_backend: str | None = None,
    task_source: TaskSource | None = None,
    max_jobs: int | None = None,
    grace_seconds: float = 30.0,
    max_abandoned_threads: int | None = None,
) -> Worker:
    """The Worker for these settings (those of ``pgboss_work``'s options), not yet running.

    ``queues`` narrows the handlers to those queues; ``concurrency`` and ``batch_size`` override
    each registration's; ``max_abandoned_threads`` is the Worker's. ``task_source`` adds handlers beyond @work (see TaskSource); with
    ``tasks_backend`` only that source's are run. A selected handler with a ``prepare()`` method
    (a tasks backend's runner: CREATE_QUEUES) is prepared here. Raises LaunchError when a jobs
    module does not import, a registration is invalid, no handler serves a queue asked for, a
    queue has two, or a queue does not exist.
    """
    try:
        autodiscover()
    except ImportError as exc:
        raise LaunchError(f"could not import a jobs module: {exc}") from exc
    except PgBossError as exc:
        raise LaunchError(f"invalid @work registration: {exc}") from exc
    boss = Boss()
    handlers: dict[str, Registration] = registrations()
    try:
        if tasks_backend and task_source is None:
            raise LaunchError(f"tasks backend {tasks_backend!r} asked for, but no task source given")
        tasks, boss = task_source(boss, tasks_backend) if task_source is not None else ({}, boss)
        if tasks_backend:
            handlers = tasks
        else:
            clash = sorted(set(tasks) & set(handlers))
            if clash:
                raise LaunchError(
                    f"queue(s) {', '.join(map(repr, clash))} have both an @work handler and a tasks "
                    f"backend ({tasks[clash[0]].label}); a queue is worked by one of them"
                )
            handlers = {**handlers, **tasks}
        selected = _select(handlers, queues)
        # A tasks backend with CREATE_QUEUES creates its queues on first use; the worker is one.
        for handler in {r.handler for name, r in selected.items() if name in tasks}:
            prepare = getattr(handler, "prepare", None)
            if prepare is not None:
                prepare()
    except (PgBossError, ImproperlyConfigured, ImportError) as exc:
        # ImportError: TASKS names a PgBossBackend, but Django's task framework is missing.
        raise LaunchError(str(exc)) from exc
    # All of them, however many: get_queues() pages at 1,000.
    existing = {q.name for q in QueueStore(boss.context).all_queues(list(selected))}
    missing = sorted(set(selected) - existing)
    if missing:
        raise LaunchError(
            f"queue(s) {', '.join(map(repr, missing))} do not exist in schema {boss.schema!r}; "
            "create them with boss.create_queue() first"
        )
    try:
        plans = [r.replace(concurrency=concurrency, batch_size=batch_size) for r in selected.values()]
    except PgBossError as exc:
        raise LaunchError(str(exc)) from exc
    return Worker(
        plans,
        boss=boss,
        burst=burst,
        max_jobs=max_jobs,
        grace_seconds=grace_seconds,
        max_abandoned_threads=max_abandoned_threads,
    )


def _select(registered: dict[str, Registration], queues: list[str] | None) -> dict[str, Registration]:
    if not registered:
        raise LaunchError(
            "no @work handlers are registered: put them in an installed app's jobs.py "
            "(from django_pgboss import work), or configure a PgBossBackend in TASKS"
        )
    if not queues:
        return registered
    unknown = [q for q in queues if q not in registered]
    if unknown:
        raise LaunchError(
            f"no @work handler for queue(s) {', '.join(map(repr, unknown))} (nor a tasks backend); "
            f"registered: {', '.join(sorted(registered))}"
        )
    return {q: registered[q] for q in queues}
