"""A documented import path kept working: the @work registry, and the queues of the tasks backends.

The code lives in django_pgboss.worker.registry (``@work``) and django_pgboss.tasks.registrations
(``task_registrations``, which imports Django's task framework only when settings.TASKS is set).
"""

from __future__ import annotations

from django_pgboss.tasks.registrations import task_registrations
from django_pgboss.worker.registry import Registration, autodiscover, registrations, validated, work

__all__ = ["Registration", "autodiscover", "registrations", "task_registrations", "validated", "work"]
