"""A documented import path kept working: the django.tasks backend, named in settings as django_pgboss.tasks_backend.PgBossBackend. The code lives in django_pgboss.tasks.backend."""

from __future__ import annotations

from django_pgboss.tasks.backend import PgBossBackend, PgBossTask, TaskRunner, resolve_task, task_backends_for

__all__ = ["PgBossBackend", "PgBossTask", "TaskRunner", "resolve_task", "task_backends_for"]
