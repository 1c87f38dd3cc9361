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
from django.core.management import call_command

from django_pgboss import signals
from django_pgboss.api.boss import Boss
from django_pgboss.conf import pgboss_settings
from django_pgboss.monitor import Monitor
from tests.helpers import rows
from tests.test_upgrade import empty_database, run_legacy, schema_for

pytestmark = [pytest.mark.node, pytest.mark.django_db(transaction=True)]

__all__ = ["empty_database"]

CREATE = re.compile(r"CREATE (?:UNIQUE )?INDEX CONCURRENTLY IF NOT EXISTS (\w+)")
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


def queued_builds() -> dict[str, list[tuple]]:
    """What bam holds, per job table in the order its commands run: (queue, version, name, status,
    the command with its whitespace folded; pg-boss's carry the indentation of its source). Before
    version 33 set bam's created_on default to clock_timestamp(), every row pg-boss's migration
    queued had the transaction's start as its created_on, so migrations 27's and 28's rows tie:
    those are ordered by version."""
    by_table: dict[str, list[tuple]] = {}
    for table, queue, version, name, status, command in rows(
        "SELECT table_name, queue, version, name, status, command FROM {s}.bam ORDER BY created_on, version, id"
    ):
        by_table.setdefault(table, []).append((queue, version, name, status, " ".join(command.split())))
    return by_table


@pytest.mark.parametrize(("release", "versions"), [("12.0.0", {27, 28}), ("12.20.0", {33, 38, 40})])
def test_our_upgrade_from_an_old_schema_queues_the_builds_pg_boss_12_38_queues(
    empty_database, run_pgboss, release, versions
):
    """Migrate pgboss on an old schema whose job tables hold jobs leaves the same index commands
    in bam as pg-boss 12.38's own migration of that schema, none built in the migration; pg-boss
    12.38's own bam runner then builds them, and its drift check finds schema 46."""
    with schema_for(release):
        run_legacy(release)
        # pg-boss's bam runner held off, as above; a schema older than 27 has no bam_on yet, and
        # migration 27 adds it only if it is not there.
        rows("ALTER TABLE {s}.version ADD COLUMN IF NOT EXISTS bam_on timestamptz")
        rows("UPDATE {s}.version SET bam_on = now()")
        run_pgboss("migrate", pgboss_settings.SCHEMA)
        theirs = queued_builds()
        rows("DROP SCHEMA {s} CASCADE")

        run_legacy(release)
        call_command("migrate", "pgboss", verbosity=0)
        ours = queued_builds()

        assert rows("SELECT version FROM {s}.version") == [(46,)]
        assert ours == theirs
        assert versions <= {version for commands in ours.values() for _, version, *_ in commands}
        assert {status for commands in ours.values() for *_, status, _ in commands} == {"pending"}
        # The builds are left to bam: none of the indexes they make is there yet, and the drift
        # checks (ours and pg-boss 12.38's) count them as still building.
        expected = set()
        for commands in ours.values():
            for *_, command in commands:
                created, dropped = CREATE.search(command), DROP.search(command)
                if created:
                    expected.add(created.group(1))
                elif dropped:
                    expected.discard(dropped.group(1))
        assert expected and expected.isdisjoint(valid_indexes())
        drift = run_pgboss("drift", pgboss_settings.SCHEMA)["drift"]
        assert drift["ok"] and {i["name"] for i in drift["building"]} == expected, drift

        rows("UPDATE {s}.version SET bam_on = NULL")
        built = run_pgboss("build", pgboss_settings.SCHEMA)

        assert {e["status"] for e in built["entries"]} == {"completed"}, built
        assert expected <= valid_indexes()
        assert "job_common_i5" not in valid_indexes()
        drift = run_pgboss("drift", pgboss_settings.SCHEMA)["drift"]
        assert drift["ok"] and not drift["building"], drift
