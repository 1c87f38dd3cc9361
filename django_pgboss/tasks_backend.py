"""Compatibility module: ``django_pgboss.tasks_backend``, the path 0.1 documented for the
django.tasks backend (``TASKS = {"default": {"BACKEND": "django_pgboss.tasks_backend.PgBossBackend"}}``),
kept working.

New settings and code name where the code lives: ``django_pgboss.tasks.backend.PgBossBackend``.
Nothing inside the package imports this module (an import contract checks it).
"""

from __future__ import annotations

from django_pgboss.tasks.backend import PgBossBackend, PgBossTask, TaskRunner, resolve_task, task_backends_for

__all__ = ["PgBossBackend", "PgBossTask", "TaskRunner", "resolve_task", "task_backends_for"]
