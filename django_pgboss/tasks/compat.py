"""One import point for Django's task framework: ``django.tasks`` (Django >= 6) or the backport.

Django 6 ships the framework as ``django.tasks``; on Django 5.2 the ``django-tasks`` backport
provides the same API as ``django_tasks`` (``pip install "django-pgboss[tasks]"``). Django's own
package is preferred whenever it exists, so a Django 6 project that still has the backport
installed gets the framework its ``TASKS`` setting is read by. The backport spells one name
differently (``InvalidTaskError``); it is exported here as Django's ``InvalidTask``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

try:
    from django.tasks import DEFAULT_TASK_QUEUE_NAME, task, task_backends
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import (
        TASK_MAX_PRIORITY,
        TASK_MIN_PRIORITY,
        Task,
        TaskContext,
        TaskError,
        TaskResult,
        TaskResultStatus,
    )
    from django.tasks.exceptions import InvalidTask, InvalidTaskBackend, TaskResultDoesNotExist
    from django.tasks.signals import task_enqueued, task_finished, task_started
    from django.utils.json import normalize_json

    SOURCE = "django.tasks"
except ImportError:
    # The type checker reads Django's own framework (django-stubs declares it); the backport's
    # twins of the same names would only be reported as redefinitions, so it skips this branch.
    if not TYPE_CHECKING:
        try:
            from django_tasks import DEFAULT_TASK_QUEUE_NAME, task, task_backends
            from django_tasks.backends.base import BaseTaskBackend
            from django_tasks.base import (
                TASK_MAX_PRIORITY,
                TASK_MIN_PRIORITY,
                Task,
                TaskContext,
                TaskError,
                TaskResult,
                TaskResultStatus,
            )
            from django_tasks.exceptions import InvalidTaskBackendError as InvalidTaskBackend
            from django_tasks.exceptions import InvalidTaskError as InvalidTask
            from django_tasks.exceptions import TaskResultDoesNotExist
            from django_tasks.signals import task_enqueued, task_finished, task_started
            from django_tasks.utils import normalize_json
        except ImportError as exc:
            raise ImportError(
                "django_pgboss's tasks backend needs Django's task framework: Django 6 or newer "
                '(django.tasks), or on Django 5.2 the django-tasks backport (pip install "django-pgboss[tasks]")'
            ) from exc

        SOURCE = "django_tasks"

__all__ = [
    "DEFAULT_TASK_QUEUE_NAME",
    "SOURCE",
    "TASK_MAX_PRIORITY",
    "TASK_MIN_PRIORITY",
    "BaseTaskBackend",
    "InvalidTask",
    "InvalidTaskBackend",
    "Task",
    "TaskContext",
    "TaskError",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TaskResultStatus",
    "normalize_json",
    "task",
    "task_backends",
    "task_enqueued",
    "task_finished",
    "task_started",
]
