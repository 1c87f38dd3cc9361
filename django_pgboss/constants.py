"""Names and defaults shared by pg-boss 12.38 and django_pgboss.

Everything here mirrors a value pg-boss writes into, or reads from, the database: changing one
breaks interoperability with a pg-boss instance running on the same schema.
"""

from __future__ import annotations

import re

from django.db import models

SCHEMA_VERSION = 46
"""The pg-boss schema version these migrations create (pg-boss 12.38)."""
INITIAL_SCHEMA_VERSION = 43
"""The version migration 0001 installs (pg-boss 12.35's); migrations 0005 to 0007 take it on."""

DEFAULT_SCHEMA = "pgboss"
"""The schema used when settings.PGBOSS["SCHEMA"] is not set; pg-boss's own default."""


class Backend(models.TextChoices):
    """The database engines PGBOSS["BACKEND"] names, after pg-boss's ``backend`` profiles.

    ``citus`` is pg-boss 12.38's own profile: its tables stay on the Citus coordinator, and the
    only thing it changes at run time is that the monitor's queue claims wait for a locked queue
    row instead of skipping it. ``citus-distributed`` is django_pgboss's: the job table distributed
    by queue name over the Citus workers.
    """

    POSTGRES = "postgres"
    CITUS = "citus"
    CITUS_DISTRIBUTED = "citus-distributed"


def queue_claims_skip_locked(backend: str) -> bool:
    """Whether the monitor's queue claims skip queue rows another session holds (pg-boss's
    ``queueClaimSkipLocked``): on PostgreSQL only. Elsewhere the claim waits; locking the rows in
    name order keeps it free of deadlocks either way, and pg-boss tests skipping nowhere else."""
    return backend == Backend.POSTGRES


#: The prefix of pg-boss's own queues' names (the timekeeper's ``__pgboss__send-it``).
INTERNAL_QUEUE_PREFIX = "__pgboss__"


class JobState(models.TextChoices):
    """The job_state enum, in its declared order.

    The order is load-bearing: the enum sorts by declaration, and pg-boss's SQL relies on
    ``created < retry < active < completed < cancelled < failed`` (``state < 'active'`` means
    "waiting to run").
    """

    CREATED = "created"
    RETRY = "retry"
    ACTIVE = "active"
    COMPLETED = "completed"
    CANCELLED = "cancelled"
    FAILED = "failed"


class QueuePolicy(models.TextChoices):
    """How a queue limits its jobs, each enforced by a partial unique index on the job table."""

    STANDARD = "standard"
    SHORT = "short"
    SINGLETON = "singleton"
    STATELY = "stately"
    EXCLUSIVE = "exclusive"
    KEY_STRICT_FIFO = "key_strict_fifo"


QUEUE_NAME_PATTERN = re.compile(r"^[A-Za-z0-9_.\-/]+\Z")
"""pg-boss's rule for queue names: ASCII letters, digits and ``_ . - /``."""
QUEUE_NAME_MAX_LENGTH = 255
"""Longest queue name we accept. pg-boss sets no bound of its own; partition tables are named by a
hash of the queue name, so the bound only keeps names readable and btree entries small.
"""

SCHEMA_NAME_MAX_BYTES = 50
"""Longest schema name, in bytes: PostgreSQL silently truncates identifiers at 63 bytes, and
pg-boss keeps room for the names it derives from the schema.
"""
BARE_IDENTIFIER_PATTERN = re.compile(r"^[a-z_][a-z0-9_]*\Z")
"""A schema name that needs no quotes: what PostgreSQL stores when it is written bare."""


class _Unset:
    """The type of UNSET; one instance, falsy, and printed as its name."""

    __slots__ = ()
    _instance: _Unset | None = None

    def __new__(cls) -> _Unset:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNSET"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self) -> str:
        return "UNSET"


UNSET = _Unset()
"""The "not given" marker: the default of update()'s and upsert()'s ``data``, where None means "clear it"."""
