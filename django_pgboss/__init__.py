"""django_pgboss: pg-boss's PostgreSQL job queue (schema version 46) as a Django app.

``boss`` (the default :class:`Boss`) sends, fetches and settles jobs on Django's own connection;
``Job`` and ``QueueInfo`` are what it hands back.
"""

from __future__ import annotations

from django_pgboss.api.boss import Boss, boss
from django_pgboss.api.deadletters import RedriveDestination, RedrivePreview, RedriveResult
from django_pgboss.api.flows import FlowJob
from django_pgboss.cancellation import JobSignal
from django_pgboss.constants import SCHEMA_VERSION, UNSET, JobState, QueuePolicy
from django_pgboss.exceptions import (
    DeadLetterQueueNotFound,
    DuplicateFlowRef,
    EmptyFlow,
    FlowCycle,
    FlowJobRefused,
    ImproperlyConfiguredSchema,
    InvalidFlow,
    InvalidJobReference,
    InvalidOption,
    InvalidPolicy,
    InvalidQueueName,
    InvalidSchedule,
    InvalidStartAfter,
    InvalidTimestamp,
    JobCancelled,
    JobDataNotSerializable,
    NotADeadLetterQueue,
    PgBossError,
    QueueInUse,
    QueueNotFound,
    ReadOnlyModelError,
    UnknownFlowRef,
    WrongPolicy,
)
from django_pgboss.records import DependencyRef, Job, QueueInfo, UpdateResult, UpsertResult
from django_pgboss.worker.registry import work
from django_pgboss.worker.results import JobResult

__version__ = "0.1.0"
"""django_pgboss's version: the one source pyproject.toml reads (``python -m django_pgboss --version``)."""

__all__ = [
    "SCHEMA_VERSION",
    "UNSET",
    "Boss",
    "DeadLetterQueueNotFound",
    "DependencyRef",
    "DuplicateFlowRef",
    "EmptyFlow",
    "FlowCycle",
    "FlowJob",
    "FlowJobRefused",
    "ImproperlyConfiguredSchema",
    "InvalidFlow",
    "InvalidJobReference",
    "InvalidOption",
    "InvalidPolicy",
    "InvalidQueueName",
    "InvalidSchedule",
    "InvalidStartAfter",
    "InvalidTimestamp",
    "Job",
    "JobCancelled",
    "JobDataNotSerializable",
    "JobResult",
    "JobSignal",
    "JobState",
    "NotADeadLetterQueue",
    "PgBossError",
    "QueueInUse",
    "QueueInfo",
    "QueueNotFound",
    "QueuePolicy",
    "ReadOnlyModelError",
    "RedriveDestination",
    "RedrivePreview",
    "RedriveResult",
    "UnknownFlowRef",
    "UpdateResult",
    "UpsertResult",
    "WrongPolicy",
    "__version__",
    "boss",
    "work",
]
