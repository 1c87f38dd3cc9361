"""Exceptions raised by django_pgboss. Every one derives from :class:`PgBossError`."""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured


class PgBossError(Exception):
    """Base class of every error django_pgboss raises on purpose."""


class ImproperlyConfiguredSchema(PgBossError, ImproperlyConfigured):
    """settings.PGBOSS["SCHEMA"] names a schema django_pgboss cannot use safely."""


class InvalidQueueName(PgBossError, ValueError):
    """A queue name breaks pg-boss's naming rule (letters, digits, ``_ . - /``)."""


class ReadOnlyModelError(PgBossError):
    """A write was attempted through one of the read-only pg-boss models.

    The tables belong to pg-boss's SQL: rows are written through ``Boss`` so that policies,
    partitions and the attempt fence apply, never through the ORM.
    """
