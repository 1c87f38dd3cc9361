"""pg-boss 12.38's own upgrade leaves index builds queued in bam; our monitor builds them.

pg-boss 12.20.0 installs its schema (version 31) with queues (two with a table of their own) and
jobs; pg-boss 12.38.0 migrates it to 46 with its bam runner held off (version.bam_on stamped, and a
24-hour interval), so the CREATE INDEX CONCURRENTLY commands of migrations 33, 38, 40, 43, 45 and
46 stay pending. Our monitor's bam pass builds them, and pg-boss's getBamStatus() and its drift
check then see a finished schema 46.
"""

from __future__ import annotations

import re

import pytest

from django_pgboss import signals
from django_pgboss.api.boss import Boss
from django_pgboss.conf import pgboss_settings
from django_pgboss.monitor import Monitor
from tests.helpers import rows
from tests.test_upgrade import empty_database, run_legacy, schema_for

pytestmark = [pytest.mark.node, pytest.mark.django_db(transaction=True)]

__all__ = ["empty_database"]

CREATE = re.compile(r"CREATE INDEX CONCURRENTLY IF NOT EXISTS (\w+)")
DROP = re.compile(r"DROP INDEX CONCURRENTLY IF EXISTS \S+\.(\w+)")


def valid_indexes() -> set[str]:
    return {
        name
        for (name,) in rows(
            "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND i.indisvalid",
            [pgboss_settings.SCHEMA],
        )
    }


def test_the_builds_pg_boss_left_pending_are_built_by_our_monitor(empty_database, run_pgboss):
    with schema_for("12.20.0"):
        run_legacy("12.20.0")
        rows("UPDATE {s}.version SET bam_on = now()")
        run_pgboss("migrate", pgboss_settings.SCHEMA)
        assert rows("SELECT version FROM {s}.version") == [(46,)]
        pending = Boss().get_bam_entries()
        assert pending and {e.status for e in pending} == {"pending"}
        assert {e.version for e in pending} == {33, 38, 40, 43, 45, 46}
        # job_common and the two queues' own tables each get every command.
        assert len({e.table for e in pending}) == 3
        # What the commands leave, in their order (33 rebuilds job_i5 and 40 retires it): none
        # of those indexes is there yet, only pg-boss's drift check excuses them as in flight.
        expected = set()
        for entry in pending:
            created, dropped = CREATE.search(entry.command), DROP.search(entry.command)
            if created:
                expected.add(created.group(1))
            elif dropped:
                expected.discard(dropped.group(1))
        assert expected and expected.isdisjoint(valid_indexes())

        # The gate is the one pg-boss stamped; cleared, as once its interval has passed.
        rows("UPDATE {s}.version SET bam_on = NULL")
        events = []

        def on_bam(sender, **kwargs):
            events.append((kwargs["id"], kwargs["name"], kwargs["status"], kwargs["queue"], kwargs["table"]))

        signals.bam_status_changed.connect(on_bam)
        try:
            report = Monitor(cron=False).build_indexes()
        finally:
            signals.bam_status_changed.disconnect(on_bam)

        assert report.failed == {}
        assert len(report.completed) == len(pending)
        # pg-boss's bam event for each command, with its fields (id, name, status, queue, table), one
        # command at a time: in_progress, then completed. The two partitioned queues' commands name
        # their queue, job_common's none.
        assert [status for _, _, status, _, _ in events] == ["in_progress", "completed"] * len(pending)
        assert events[0::2] == [(i, n, "in_progress", q, t) for i, n, _, q, t in events[1::2]]
        assert sorted(events[1::2], key=str) == sorted(
            ((str(e.id), e.name, "completed", e.queue, e.table) for e in pending), key=str
        )
        queues = {e.queue for e in pending}
        assert None in queues and len(queues) == 3
        node = run_pgboss("bam", pgboss_settings.SCHEMA)
        assert [(s["status"], s["count"]) for s in node["status"]] == [("completed", len(pending))]
        assert {e["status"] for e in node["entries"]} == {"completed"}
        assert [e["id"] for e in node["entries"]] == [str(e.id) for e in Boss().get_bam_entries()]
        assert expected <= valid_indexes()
        assert "job_common_i5" not in valid_indexes()
        drift = run_pgboss("drift", pgboss_settings.SCHEMA)["drift"]
        assert drift["ok"], drift
