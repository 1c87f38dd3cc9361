"""The background index builds of ``bam``, as read back (boss.get_bam_status(), get_bam_entries()).

pg-boss's migrations queue ``CREATE INDEX CONCURRENTLY`` commands there; the monitor's bam pass
(monitor/bam.py) builds them. These are pg-boss 12.38's getBamStatus() and getBamEntries(), with
the fields in snake_case.
"""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass

from django_pgboss.db.context import DatabaseContext
from django_pgboss.plans import bam as plans


@dataclass(frozen=True, slots=True)
class BamStatus:
    """How many commands have one status (pending, in_progress, completed or failed), and when the
    newest of them was queued."""

    status: str
    count: int
    last_created_on: dt.datetime


@dataclass(frozen=True, slots=True)
class BamEntry:
    """One queued command: the migration ``version`` that queued it, its ``name`` (the index), the
    job ``table`` it builds on (``queue`` when it was queued for one queue's table), the statement,
    and its progress (``error`` is the last failure's, cleared once it completes)."""

    id: uuid.UUID
    name: str
    version: int
    status: str
    queue: str | None
    table: str
    command: str
    error: str | None
    created_on: dt.datetime
    started_on: dt.datetime | None
    completed_on: dt.datetime | None


def bam_status(context: DatabaseContext) -> list[BamStatus]:
    """One BamStatus per status present, by status."""
    return [BamStatus(*row) for row in context.all(plans.bam_status(context.quoted_schema))]


def bam_entries(context: DatabaseContext) -> list[BamEntry]:
    """Every command, by version and then in the order it was queued (the order the bam pass runs
    a table's commands of one migration in)."""
    return [BamEntry(*row) for row in context.all(plans.bam_entries(context.quoted_schema))]
