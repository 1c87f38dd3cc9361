"""The monitor's bam pass (pg-boss 12.38's Bam runner): build the indexes the migrations queued.

pg-boss's migrations 27, 28, 33, 38, 40, 43, 45 and 46 queue ``CREATE INDEX CONCURRENTLY`` commands
in ``bam`` rather than build them inside the migration's transaction, and so do our upgrade steps
from older schemas and migrations 0006 and 0007; a schema is finished by whichever running instance
builds them. Every PGBOSS["BAM_INTERVAL_SECONDS"] a Monitor claims the cluster-wide gate
(version.bam_on, the column pg-boss's runner stamps) and, when it wins it, builds the commands one
at a time: claim one (plans/bam.py says how two claims never take the same row, and why a command
waits for the earlier commands of its migration on its table), heal what an interrupted earlier
attempt left, run it, mark it completed or failed.
Each step is sent as signals.bam_status_changed (pg-boss's ``bam`` event): in_progress when
claimed, then completed or failed.

Each command runs on the monitor's connection in autocommit, outside any transaction block (where
PostgreSQL refuses CONCURRENTLY); a pass asked for inside the caller's transaction does nothing. A
command that fails is marked failed with its error, logged and sent as signals.error_raised; the
pass goes on with the next one, and the failed one is tried again at the next pass.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import DatabaseError

from django_pgboss import signals
from django_pgboss.db.context import DatabaseContext
from django_pgboss.db.identifiers import quote_identifier
from django_pgboss.plans import bam as plans
from django_pgboss.plans import queues as queue_plans

logger = logging.getLogger("django_pgboss.monitor")

#: The index a command builds, as pg-boss's bamHealProbe finds it: only CONCURRENTLY builds are
#: healed (the others run inside no interrupted build of their own).
INDEX_COMMAND = re.compile(
    r'CREATE\s+(?:UNIQUE\s+)?INDEX\s+CONCURRENTLY\s+(?:IF\s+NOT\s+EXISTS\s+)?"?([\w$]+)"?', re.IGNORECASE
)


@dataclass
class BamReport:
    """What one bam pass did: whether it ran (this monitor won the gate, outside a transaction),
    the commands completed and those that failed with their errors, each as (name, table): a
    migration queues one command of a name per job table."""

    claimed: bool = False
    completed: list[tuple[str, str]] = field(default_factory=list)
    failed: dict[tuple[str, str], str] = field(default_factory=dict)


class BamRunner:
    """The bam pass over one database context. A failure is sent as signals.error_raised from
    ``sender`` with ``instance`` (the Monitor's class and the Monitor); ``stopping`` (the
    Monitor's) ends a pass between commands, and hands back a command claimed as the stop came."""

    def __init__(
        self,
        context: DatabaseContext,
        interval_seconds: float,
        *,
        sender: Any = None,
        instance: Any = None,
        stopping: Callable[[], bool] = lambda: False,
    ) -> None:
        self.context = context
        self.interval_seconds = interval_seconds
        self.sender = sender
        self.instance = instance
        self.stopping = stopping

    def run_pass(self, *, gated: bool = True) -> BamReport:
        """One pass; ``gated`` (the loop's) only when no instance ran one within the interval."""
        report = BamReport()
        context = self.context
        if context.in_atomic_block:
            return report
        if gated and (
            context.one_or_none(
                plans.try_set_bam_time(context.quoted_schema), {"seconds": self.interval_seconds}
            )
            is None
        ):
            return report
        report.claimed = True
        tried: set[Any] = set()
        while not self.stopping():
            entry = self._claim()
            if entry is None:
                break
            if entry["id"] in tried or self.stopping():
                # A command that failed in this pass comes back once the pending ones are done (the
                # claim orders failed rows last): it waits for the next pass rather than being run
                # again at once. A stop that came with the claim hands the row back untouched too.
                self._release(entry)
                break
            tried.add(entry["id"])
            self._status(entry, "in_progress")
            self._build(entry, report)
        return report

    def _claim(self) -> dict[str, Any] | None:
        context = self.context
        # Two claims at the same instant would each skip the row the other locked and take the next
        # one, neither seeing the other's in_progress row yet; their two builds on one table then
        # deadlock (each CREATE INDEX CONCURRENTLY waits out the other's transaction). Claims are
        # serialized instead: under the lock, the claim's own snapshot sees a committed claim.
        with context.atomic():
            context.execute(queue_plans.advisory_lock(), {"lock_key": context.lock_key("bam-claim")})
            claimed = context.records(
                plans.claim_bam_command(context.quoted_schema),
                {"grace": plans.LIVENESS_GRACE_SECONDS, "nspname": context.schema},
            )
        return claimed[0] if claimed else None

    def _release(self, entry: dict[str, Any]) -> None:
        self.context.execute(
            plans.release_bam_command(self.context.quoted_schema),
            {
                "id": entry["id"],
                "status": entry["prior_status"],
                "prior_started_on": entry["prior_started_on"],
                "started_on": entry["started_on"],
            },
        )

    def _build(self, entry: dict[str, Any], report: BamReport) -> None:
        context = self.context
        try:
            built = entry["reattempt"] and self._heal(entry["command"])
            if not built:
                # The command is the text job_table_run_async() wrote into the schema's own bam
                # table (a pg-boss migration's statement, its table name filled in), run as is.
                context.execute(entry["command"])
            context.execute(plans.set_bam_completed(context.quoted_schema), {"id": entry["id"]})
            report.completed.append((entry["name"], entry["table_name"]))
            logger.info(
                "bam: built %s on %s (version %s)", entry["name"], entry["table_name"], entry["version"]
            )
            self._status(entry, "completed")
        except DatabaseError as exc:
            error = str(exc).strip()
            report.failed[(entry["name"], entry["table_name"])] = error
            logger.error("bam: %s on %s failed: %s", entry["name"], entry["table_name"], error)
            try:
                context.execute(
                    plans.set_bam_failed(context.quoted_schema), {"id": entry["id"], "error": error}
                )
            except DatabaseError as mark_exc:
                # The failure often took the connection with it, and then the mark fails too: the row
                # stays in_progress, and the next claim takes it back once no build holds its table.
                logger.error("bam: could not mark %s failed: %s", entry["name"], mark_exc)
                self._signal(mark_exc)
            self._signal(exc)
            self._status(entry, "failed", error)

    def _status(self, entry: dict[str, Any], status: str, error: str | None = None) -> None:
        # pg-boss's bam event, with its fields: the command's row id, name, the status it took, the
        # queue and the job table it is for, and the failure's text.
        signals.send(
            signals.bam_status_changed,
            self.sender,
            id=str(entry["id"]),
            name=entry["name"],
            status=status,
            queue=entry["queue"],
            table=entry["table_name"],
            error=error,
            instance=self.instance,
            using=self.context.using,
            schema=self.context.schema,
        )

    def _signal(self, exc: BaseException) -> None:
        signals.send(
            signals.error_raised,
            self.sender,
            error=exc,
            doing="a background index build",
            instance=self.instance,
        )

    def _heal(self, command: str) -> bool:
        """Before a command that ran before is run again: drop the INVALID index an interrupted
        build left (its own IF NOT EXISTS would skip it for ever), or, when a VALID one is there,
        return True: the build finished and only the mark was lost (a rebuild would fail on the
        commands without IF NOT EXISTS, and dropping a live index to rebuild it costs its readers)."""
        match = INDEX_COMMAND.search(command)
        if match is None:
            return False
        context = self.context
        row = context.one_or_none(plans.probe_index(), {"nspname": context.schema, "relname": match.group(1)})
        if row is None:
            return False
        if not row[0]:
            return True
        context.execute(
            plans.drop_index_concurrently(context.quoted_schema, quote_identifier(match.group(1)))
        )
        return False
