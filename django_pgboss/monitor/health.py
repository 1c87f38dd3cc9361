"""Index and vacuum health, as pg-boss 12.35 watches them: bloated job indexes (reported, and rebuilt
with PGBOSS["REINDEX"]; which they are is api/indexes.py's), and job-table garbage that nothing
reclaims (xmin_horizon, autovacuum_disabled).

Why garbage matters: every
collapse of a PostgreSQL queue starts with dead rows that vacuum cannot remove, and from the
queue's own counters a backlog of garbage looks like a shortage of workers. The fixes are opposite,
so the diagnosis says which: a vacuum ran and reclaimed nothing (the horizon is pinned: find the
holder), or nothing ran and the pile grew (autovacuum is off on the table).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from django_pgboss.api.indexes import REINDEX_DEFAULTS, bloated_indexes
from django_pgboss.conf import pgboss_settings
from django_pgboss.db.context import DatabaseContext
from django_pgboss.db.identifiers import quote_identifier
from django_pgboss.plans import health as plans


@dataclass
class Health:
    """One monitor's health checks and what they remember between passes: the indexes it warned
    about in the current episode, and each job table's last garbage reading (the vacuum diagnosis
    needs two, so a problem is reported from the second pass that sees it, never guessed)."""

    context: DatabaseContext
    #: The class its warnings are sent from (signals.warning_raised): the Monitor's.
    sender: Any = None
    warned_bloat: set[str] = field(default_factory=set)
    garbage: dict[str, tuple[float, float]] = field(default_factory=dict)  # table -> (dead, last vacuum)
    #: When (time.monotonic()) a pass that only reports bloat may read the indexes again.
    detect_only_until: float = 0.0
    warned_xmin_horizon: bool = False
    warned_autovacuum_disabled: bool = False

    def run(self, report: Any) -> None:
        """The index pass (when its interval is due) and the vacuum diagnosis, after a monitor pass."""
        self.check_indexes(report)
        if pgboss_settings.MONITOR_VACUUM:
            self.check_vacuum(report)

    # -- indexes ---------------------------------------------------------------------------------

    def check_indexes(self, report: Any, *, force: bool = False) -> list[str]:
        """Rebuild the bloated job indexes we own (with PGBOSS["REINDEX"], once per
        REINDEX_INTERVAL_SECONDS across every monitor, by pg-boss's claim), and warn index_bloat for
        each one left bloated, once per episode. Without rebuilds the check runs once per
        REINDEX_INTERVAL_SECONDS of this Health's own; ``force`` runs it now. Returns the indexes
        rebuilt."""
        from django_pgboss.monitor.supervisor import warn

        context = self.context
        # REINDEX CONCURRENTLY cannot run in a transaction block: a pass inside the caller's
        # transaction only reports.
        rebuilding = pgboss_settings.REINDEX and not context.in_atomic_block
        if rebuilding and not force:
            claim = context.one_or_none(
                plans.claim_reindex(context.quoted_schema),
                {"interval": pgboss_settings.REINDEX_INTERVAL_SECONDS},
            )
            if claim is None:
                return []
        elif not force:
            # A pass that can only report leaves the shared claim alone (taking it would cost a
            # monitor that can rebuild its window, pg-boss's reasoning) and keeps to the interval on
            # its own clock instead, as pg-boss's detect-only passes do: the catalog read is not
            # free on a schema of many partitions, and the answer changes slowly.
            now = time.monotonic()
            if now < self.detect_only_until:
                return []
            self.detect_only_until = now + pgboss_settings.REINDEX_INTERVAL_SECONDS
        bloated = bloated_indexes(context)
        rebuilt: list[str] = []
        failed: dict[str, str] = {}
        if rebuilding:
            candidates = bloated_indexes(context, force=True) if force else bloated
            targets = [i for i in candidates if i.owned and i.bytes <= REINDEX_DEFAULTS["max_index_bytes"]]
            if targets:
                self._drop_leftovers()
            for index in targets:
                try:
                    context.execute(plans.reindex_index(context.quoted_schema, quote_identifier(index.name)))
                    rebuilt.append(index.name)
                except Exception as exc:  # a lock timeout, a lost connection: reported, next one tried
                    failed[index.name] = str(exc).strip().splitlines()[0]
        still = set()
        for index in bloated:
            if index.name in rebuilt:
                continue
            still.add(index.name)
            if index.name in self.warned_bloat:
                continue
            if index.name in failed:
                reason = failed[index.name]
            elif not index.owned:
                reason = "the connected role does not own the index"
            elif not pgboss_settings.REINDEX:
                reason = "automatic reindexing is disabled"
            elif context.in_atomic_block:
                reason = "the pass ran inside a transaction"
            else:
                reason = "the index is larger than the 2 GB automatic rebuilds are limited to"
            warn(
                context,
                report,
                "index_bloat",
                f'Warning: index "{index.name}" is bloated ({round(index.bytes / 1024 / 1024)} MB across '
                f"{index.pages} pages for ~{int(index.entries)} live entries) and was not rebuilt: {reason}. "
                "See get_reindex_commands()",
                {
                    "name": index.name,
                    "table": index.table,
                    "pages": index.pages,
                    "entries": index.entries,
                    "bytes": index.bytes,
                    "owned": index.owned,
                },
                sender=self.sender,
            )
        self.warned_bloat = still
        return rebuilt

    def _drop_leftovers(self) -> None:
        context = self.context
        rows = context.all(
            plans.reindex_leftovers(context.quoted_schema, any_owner=False), {"nspname": context.schema}
        )
        for (name,) in rows:
            context.execute(plans.drop_index_concurrently(context.quoted_schema, quote_identifier(name)))

    # -- vacuum ----------------------------------------------------------------------------------

    def check_vacuum(self, report: Any) -> None:
        """Compare each job table's garbage with the last pass's: over the point where autovacuum
        would vacuum it, a vacuum ran since and the dead rows did not fall (xmin_horizon), or none
        ran and they grew with autovacuum off on the table (autovacuum_disabled)."""
        from django_pgboss.monitor.supervisor import warn

        context = self.context
        rows = context.all(plans.job_table_garbage(context.quoted_schema), {"nspname": context.schema})
        present = {row[0] for row in rows}
        for table in list(self.garbage):
            if table not in present:
                del self.garbage[table]
        stuck, unvacuumed = [], []
        vacuumed_over, disabled_over = False, False
        for table, live, dead, last_vacuum, vacuum_age, threshold, scale, enabled in rows:
            budget = threshold + scale * live
            last_vacuum = last_vacuum or 0.0
            if dead <= budget:
                self.garbage.pop(table, None)
                continue
            if enabled:
                vacuumed_over = True
            else:
                disabled_over = True
            previous = self.garbage.get(table)
            self.garbage[table] = (dead, last_vacuum)
            if previous is None:
                continue
            reading = {
                "table": table,
                "liveTuples": live,
                "deadTuples": dead,
                "budget": round(budget),
                "vacuumAgeSeconds": vacuum_age,
            }
            if not enabled:
                if last_vacuum == previous[1] and dead > previous[0]:
                    unvacuumed.append(reading)
            elif last_vacuum > previous[1] and dead >= previous[0]:
                stuck.append(reading)
        if not vacuumed_over:
            self.warned_xmin_horizon = False
        if not disabled_over:
            self.warned_autovacuum_disabled = False
        if unvacuumed and not self.warned_autovacuum_disabled:
            self.warned_autovacuum_disabled = True
            worst = max(unvacuumed, key=lambda r: r["deadTuples"])
            since = (
                "has never been vacuumed"
                if worst["vacuumAgeSeconds"] is None
                else f"was last vacuumed {worst['vacuumAgeSeconds']}s ago"
            )
            warn(
                context,
                report,
                "autovacuum_disabled",
                "Warning: autovacuum is disabled, so nothing is reclaiming completed jobs: "
                f"{worst['table']} has autovacuum_enabled = false, holds {worst['deadTuples']} dead rows and "
                f"is still growing, and {since} (Postgres would vacuum this table at {worst['budget']})",
                {**worst, "tables": [r["table"] for r in unvacuumed]},
                sender=self.sender,
            )
        if stuck and not self.warned_xmin_horizon:
            holder = self._horizon_holder()
            if holder is None:
                return
            self.warned_xmin_horizon = True
            worst = max(stuck, key=lambda r: r["deadTuples"])
            warn(
                context,
                report,
                "xmin_horizon",
                "Warning: the database transaction horizon is pinned, so completed jobs cannot be cleaned up: "
                f"{holder['holder']}, holding it {holder['transactions']} transactions back. {worst['table']} "
                f"has {worst['deadTuples']} dead rows that a vacuum {worst['vacuumAgeSeconds']}s ago could not "
                f"reclaim (Postgres vacuums this table at {worst['budget']}).",
                {**worst, **holder, "tables": [r["table"] for r in stuck]},
                sender=self.sender,
            )

    def _horizon_holder(self) -> dict[str, Any] | None:
        """The widest holder of the MVCC horizon (a backend's open transaction, a replication slot,
        a standby, a prepared transaction), or None when none can be named."""
        row = self.context.one_or_none(plans.xmin_horizon())
        if row is None:
            return None
        backends, slots, standbys, prepared, pid, application, state, seconds = row
        sources = {"backends": backends, "slots": slots, "standbys": standbys, "prepared": prepared}
        source, age = max(
            ((s, a) for s, a in sources.items() if a is not None), key=lambda p: p[1], default=(None, None)
        )
        if source is None:
            return None
        described = {
            "backends": f"a transaction open for {seconds}s in backend {pid} ({application or 'no application_name'}, {state})",
            "slots": "a replication slot",
            "standbys": "a standby with hot_standby_feedback",
            "prepared": "a prepared transaction",
        }[source]
        return {
            "source": source,
            "holder": described,
            "transactions": age,
            "holderPid": pid if source == "backends" else None,
            "holderApplicationName": application if source == "backends" else None,
            "holderState": state if source == "backends" else None,
        }
