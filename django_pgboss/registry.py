"""A documented import path kept working: the @work registry. The code lives in django_pgboss.worker.registry."""

from __future__ import annotations

from django_pgboss.worker.registry import (
    Registration,
    autodiscover,
    registrations,
    task_registrations,
    validated,
    work,
)

__all__ = ["Registration", "autodiscover", "registrations", "task_registrations", "validated", "work"]
