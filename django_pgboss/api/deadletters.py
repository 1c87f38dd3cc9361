"""Dead letters: redrive jobs back out of a dead-letter queue, preview a redrive, follow a lineage.

:class:`DeadLetters` holds them over a database context, and Boss delegates its redrive(),
preview_redrive() and get_lineage() to one; they validate their arguments, read the queues
involved, and run the statements of :mod:`django_pgboss.plans.redrive`. See
docs/dead-letters.md for the semantics (pg-boss 12.35's redrive, with conflicts failed in place).
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django_pgboss import arguments
from django_pgboss.api.lineage import one_chain
from django_pgboss.arguments import attempt_references
from django_pgboss.arguments import queue_name as validate_queue_name
from django_pgboss.db.context import DatabaseContext
from django_pgboss.db.identifiers import quote_job_table
from django_pgboss.db.split_redrive import split_redrive
from django_pgboss.exceptions import (
    InvalidJobReference,
    InvalidOption,
    NotADeadLetterQueue,
    QueueNotFound,
)
from django_pgboss.plans import queues as queue_plans
from django_pgboss.plans import redrive as redrive_plans
from django_pgboss.records import Job, jobs_from_table


@dataclass(frozen=True, slots=True)
class RedriveResult:
    """What one redrive() did.

    ``moved`` jobs were re-created in their destination and left the dead-letter queue;
    ``conflicted`` ones collided with the destination's policy and were failed in place in the
    dead-letter queue with a redrive_conflict output; ``waiting`` ones were refused too but left
    queued behind an older refused job of their key_strict_fifo key. ``moved_ids`` pairs each
    moved job's dead-letter id with its new id, oldest first. ``int(result)`` is ``moved``, the
    number pg-boss's redrive() returns.
    """

    moved: int
    conflicted: int
    waiting: int
    moved_ids: tuple[tuple[str, str], ...]
    conflicted_ids: tuple[str, ...]
    waiting_ids: tuple[str, ...]

    def __int__(self) -> int:
        return self.moved


@dataclass(frozen=True, slots=True)
class RedriveDestination:
    """A queue a redrive would send jobs to, and how many."""

    name: str
    count: int


@dataclass(frozen=True, slots=True)
class RedrivePreview:
    """What a redrive with the same filter would find: ``total`` matching jobs, of which
    ``destinations`` say how many go to each existing queue (most first) and ``unroutable`` how
    many have nowhere to go (no source queue, or it was deleted) and would stay put."""

    total: int
    destinations: tuple[RedriveDestination, ...]
    unroutable: int

    def as_dict(self) -> dict[str, Any]:
        """pg-boss's previewRedrive() shape: {"total", "destinations": [{"name", "count"}], "unroutable"}."""
        return {
            "total": self.total,
            "destinations": [{"name": d.name, "count": d.count} for d in self.destinations],
            "unroutable": self.unroutable,
        }


class DeadLetters:
    """The dead-letter operations over one database context: redrive(), preview_redrive() and
    get_lineage(). Boss delegates to one; their docstrings are the reference."""

    def __init__(self, context: DatabaseContext) -> None:
        self.context = context

    def redrive(
        self,
        dlq_name: str,
        *,
        destination: str | None = None,
        source_name: str | None = None,
        data: Mapping[str, Any] | None = None,
        created_before: dt.datetime | dt.date | str | None = None,
        ids: str | uuid.UUID | Job | Sequence[str | uuid.UUID | Job] | None = None,
        limit: int = 1000,
    ) -> RedriveResult:
        """See Boss.redrive()."""
        params = self._redrive_params(
            dlq_name, destination, source_name, data, created_before, ids, limit=limit
        )
        table = self._dead_letter_table(dlq_name, destination)
        if self.context.distributed:
            # Citus runs a statement that writes two queues' shards only split (db/split_redrive.py).
            taken = split_redrive(self.context, table, params)
        else:
            taken = self.context.all(redrive_plans.redrive(self.context.quoted_schema, table), params)
        moved = tuple((str(old), str(new)) for old, new, _ in taken if new is not None)
        conflicted = tuple(str(old) for old, new, refused in taken if new is None and refused)
        waiting = tuple(str(old) for old, new, refused in taken if new is None and not refused)
        return RedriveResult(len(moved), len(conflicted), len(waiting), moved, conflicted, waiting)

    def preview_redrive(
        self,
        dlq_name: str,
        *,
        destination: str | None = None,
        source_name: str | None = None,
        data: Mapping[str, Any] | None = None,
        created_before: dt.datetime | dt.date | str | None = None,
        ids: str | uuid.UUID | Job | Sequence[str | uuid.UUID | Job] | None = None,
        limit: int | None = None,
    ) -> RedrivePreview:
        """See Boss.preview_redrive()."""
        page = arguments.page_limit("preview_redrive()", limit)
        params = self._redrive_params(dlq_name, destination, source_name, data, created_before, ids)
        params["limit"] = page
        table = self._dead_letter_table(dlq_name, destination)
        rows = self.context.all(redrive_plans.preview_redrive(self.context.quoted_schema, table), params)
        destinations = [RedriveDestination(name, count) for name, routable, count in rows if routable]
        destinations.sort(key=lambda d: (-d.count, d.name))
        unroutable = sum(count for _, routable, count in rows if not routable)
        total = unroutable + sum(d.count for d in destinations)
        return RedrivePreview(total, tuple(destinations), unroutable)

    def get_lineage(self, job_id: str | uuid.UUID | Job, *, name: str | None = None) -> list[Job]:
        """See Boss.get_lineage()."""
        if isinstance(job_id, list | tuple | set):
            raise InvalidJobReference(f"get_lineage() takes one job id, not {job_id!r}")
        if name is None and isinstance(job_id, Job):
            name = job_id.name
        if name is not None:
            validate_queue_name(name)
        (canonical,), _ = attempt_references(job_id, "get_lineage")
        candidates = jobs_from_table(
            self.context.table(
                redrive_plans.lineage(self.context.quoted_schema), {"id": canonical, "name": name}
            )
        )
        holders = sorted({job.name for job in candidates if job.id == canonical})
        if name is None and len(holders) > 1:
            raise InvalidJobReference(
                f"job id {canonical} is held by several queues ({', '.join(map(repr, holders))}): "
                "pass name= to say which job's lineage you want"
            )
        if name is None:
            # One queue holds the id, or none does (a root retention deleted): nothing to tell apart
            # but by the links, from the job itself.
            return one_chain(candidates, holders[0], canonical) if holders else candidates
        return one_chain(candidates, name, canonical)

    # -- helpers -------------------------------------------------------------------------------

    def _redrive_params(
        self,
        dlq_name: str,
        destination: Any,
        source_name: Any,
        data: Any,
        created_before: Any,
        ids: Any,
        *,
        limit: Any = None,
    ) -> dict[str, Any]:
        """Check a redrive's arguments (before anything is read or written) and bind them."""
        validate_queue_name(dlq_name, "dead-letter queue name")
        if destination is not None:
            validate_queue_name(destination, "destination")
            if destination == dlq_name:
                # Every job would be re-created where it is, a candidate again: a loop that
                # redrives until nothing moves would never end.
                raise InvalidOption(
                    f"destination must be another queue than the dead-letter queue {dlq_name!r}"
                )
        if source_name is not None:
            validate_queue_name(source_name, "source_name")
        if data is not None and not isinstance(data, Mapping):
            raise InvalidOption(f"data must be a dict (matched by JSON containment), not {data!r}")
        id_list = None
        if ids is not None:
            if isinstance(ids, list | tuple) and not ids:
                raise InvalidJobReference("redrive ids must not be empty (leave ids out to take every job)")
            id_list, _ = attempt_references(list(ids) if isinstance(ids, set) else ids, "redrive")
        params = {
            "name": dlq_name,
            "destination": destination,
            "source_name": source_name,
            "data": arguments.data_filter(data),
            "created_before": arguments.moment(created_before, "created_before"),
            "ids": id_list,
        }
        if limit is not None:
            arguments.limit("limit", limit)
            params["limit"] = limit
        return params

    def _dead_letter_table(self, dlq_name: str, destination: str | None) -> str:
        """The dead-letter queue's job table, once it is known to be one and the destination exists.

        Read fresh rather than from Boss's route cache: a redrive is rare, and reading the table of
        a queue since re-created with a partition of its own would find nothing to move.
        """
        context = self.context
        row = context.one_or_none(queue_plans.get_queue_routing(context.quoted_schema), {"name": dlq_name})
        if row is None:
            raise QueueNotFound(f"dead-letter queue {dlq_name!r} does not exist")
        table = quote_job_table(row[0])
        (is_dead_letter,) = context.one(
            redrive_plans.is_dead_letter_queue(context.quoted_schema, table), {"name": dlq_name}
        )
        if not is_dead_letter:
            raise NotADeadLetterQueue(
                f"queue {dlq_name!r} is not a dead-letter queue: no queue has it as its "
                "dead_letter and it holds no dead-letter copies"
            )
        if destination is not None and not context.queue_exists(destination):
            raise QueueNotFound(f"destination queue {destination!r} does not exist")
        return table
