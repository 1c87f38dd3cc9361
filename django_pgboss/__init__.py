"""django_pgboss: pg-boss's PostgreSQL job queue (schema version 43) as a Django app.

The public API (``boss``, ``Boss``, ``work``, ``Job``) grows here as the job API, workers and the
monitor land; this release provides the schema, the read-only models and the settings.
"""

from __future__ import annotations

from django_pgboss.constants import SCHEMA_VERSION, JobState, QueuePolicy
from django_pgboss.exceptions import (
    ImproperlyConfiguredSchema,
    InvalidQueueName,
    PgBossError,
    ReadOnlyModelError,
)

__version__ = "0.1.0.dev0"

__all__ = [
    "SCHEMA_VERSION",
    "ImproperlyConfiguredSchema",
    "InvalidQueueName",
    "JobState",
    "PgBossError",
    "QueuePolicy",
    "ReadOnlyModelError",
    "__version__",
]
