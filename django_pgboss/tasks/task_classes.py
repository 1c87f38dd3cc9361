"""The task classes of the pg-boss tasks backend: PgBossTask, a task with pg-boss job options, and
UnresolvedTask, which stands for a task whose module path no longer imports."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, replace
from typing import Any, cast

from django_pgboss.exceptions import TaskNotFound
from django_pgboss.tasks.compat import Task

#: The send() options a task may carry (``@task(retry_limit=5)``, ``.using(singleton_key=...)``).
TASK_JOB_OPTIONS = (
    "retry_limit",
    "retry_delay",
    "retry_backoff",
    "retry_delay_max",
    "expire_in_seconds",
    "heartbeat_seconds",
    "retention_seconds",
    "delete_after_seconds",
    "dead_letter",
    "singleton_key",
    "singleton_seconds",
    "group_id",
    "group_tier",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class PgBossTask(Task):
    """A task with pg-boss job options: ``@task(retry_limit=5, dead_letter="failed-tasks")``.

    Each option left None takes the queue's setting. ``using()`` accepts them too, which is the
    way to set them on Django 6.0, whose ``@task`` passes no extra arguments to the task class.
    """

    retry_limit: int | None = None
    retry_delay: int | None = None
    retry_backoff: bool | None = None
    retry_delay_max: int | None = None
    expire_in_seconds: int | None = None
    heartbeat_seconds: int | None = None
    retention_seconds: int | None = None
    delete_after_seconds: int | None = None
    dead_letter: str | None = None
    singleton_key: str | None = None
    singleton_seconds: int | None = None
    group_id: str | None = None
    group_tier: str | None = None

    @property
    def job_options(self) -> dict[str, Any]:
        """The pg-boss send() options this task sets."""
        return {name: getattr(self, name) for name in TASK_JOB_OPTIONS if getattr(self, name) is not None}

    def using(
        self,
        *,
        priority: int | None = None,
        queue_name: str | None = None,
        run_after: dt.datetime | None = None,
        backend: str | None = None,
        **options: Any,
    ) -> PgBossTask:
        """A copy with other defaults: Django's four, and any of the job options (None keeps one)."""
        unknown = sorted(set(options) - set(TASK_JOB_OPTIONS))
        if unknown:
            raise TypeError(f"using() got unknown option(s) {', '.join(unknown)}")
        # Task's own using(), called explicitly: a slotted dataclass cannot use bare super(). It
        # returns a copy of self, so a PgBossTask.
        task = cast(
            "PgBossTask",
            Task.using(self, priority=priority, queue_name=queue_name, run_after=run_after, backend=backend),
        )
        changes = {name: value for name, value in options.items() if value is not None}
        return replace(task, **changes) if changes else task


def unresolved(*args: Any, **kwargs: Any) -> Any:
    """Stands in for a task function that cannot be imported any more."""
    raise TaskNotFound("this task's function could not be imported")


@dataclass(frozen=True, slots=True, kw_only=True)
class UnresolvedTask(PgBossTask):
    """The task of a result whose module path no longer imports: it names the path, never runs."""

    path: str = ""

    @property
    def module_path(self) -> str:
        return self.path

    @property
    def name(self) -> str:
        return self.path.rpartition(".")[2]
