"""Compatibility module: ``django_pgboss.registry``, the path 0.1 documented, kept working.

New code imports from where the code lives: the ``@work`` registry from
``django_pgboss.worker.registry`` (``work`` is also ``django_pgboss.work``), and the queues of the
tasks backends from ``django_pgboss.tasks.registrations`` (``task_registrations``, which imports
Django's task framework only when settings.TASKS is set). Nothing inside the package imports this
module (an import contract checks it).
"""

from __future__ import annotations

from django_pgboss.tasks.registrations import task_registrations
from django_pgboss.worker.registry import Registration, autodiscover, registrations, validated, work

__all__ = ["Registration", "autodiscover", "registrations", "task_registrations", "validated", "work"]
