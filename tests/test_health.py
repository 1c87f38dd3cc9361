"""Index and vacuum health (pg-boss 12.35): bloated job indexes are listed by get_reindex_commands()
and rebuilt or reported by the monitor; garbage nothing reclaims is diagnosed as xmin_horizon (a
held snapshot) or autovacuum_disabled. Each condition is created for real; VACUUM and REINDEX
CONCURRENTLY need autocommit, hence committing tests."""

from __future__ import annotations

import json
import logging
import time

import psycopg
import pytest
from django.db import connection
from django.test import override_settings

from django_pgboss import boss, signals
from django_pgboss.api.indexes import bloated_indexes
from django_pgboss.conf import pgboss_settings
from django_pgboss.db.identifiers import quote_identifier
from django_pgboss.monitor import Monitor
from django_pgboss.monitor.health import Health
from django_pgboss.records import PassReport
from tests.conftest import database_url

pytestmark = pytest.mark.django_db(transaction=True)


def q() -> str:
    return quote_identifier(pgboss_settings.SCHEMA)


def execute(*statements: str) -> None:
    with connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)


def fetchall(sql: str, params=None) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def flush_stats() -> None:
    # PostgreSQL 15+ writes a backend's table statistics when it goes idle; the check reads them now.
    if connection.pg_version >= 150000:
        execute("SELECT pg_stat_force_next_flush()")


def bloat(queue: str, jobs: int = 40_000) -> str:
    """Fill a queue's own table with jobs, delete them all and vacuum it: its indexes keep the pages
    of the backlog for a handful of live entries, which is what a drained backlog leaves behind."""
    boss.create_queue(queue, partition=True)
    table = boss.get_queue(queue).table_name
    execute(
        f"INSERT INTO {q()}.{table} (name, data) SELECT '{queue}', jsonb_build_object('n', n) "
        f"FROM generate_series(1, {jobs}) n",
        f"DELETE FROM {q()}.{table}",
        f"VACUUM ANALYZE {q()}.{table}",
    )
    return table


def test_get_reindex_commands_lists_the_bloated_indexes_and_nothing_when_healthy():
    boss.create_queue("healthy", partition=True)
    assert boss.get_reindex_commands() == []
    table = bloat("drained")
    commands = boss.get_reindex_commands()
    # The primary key is bloated for sure (40,000 entries' pages for none); every command is a
    # rebuild of one of the drained table's indexes, largest first.
    assert commands[0] == f"REINDEX INDEX CONCURRENTLY {q()}.{table}_pkey"
    assert all(c.startswith(f"REINDEX INDEX CONCURRENTLY {q()}.{table}_") for c in commands)
    for command in commands:
        execute(command)
    assert boss.get_reindex_commands() == []
    # force lists every job index, bloated or not.
    forced = boss.get_reindex_commands(force=True)
    assert f"REINDEX INDEX CONCURRENTLY {q()}.job_common_i11" in forced
    assert len(forced) == len(set(forced)) > 10


def test_the_monitor_rebuilds_a_bloated_index_once_per_interval():
    table = bloat("drained")
    monitor = Monitor(cron=False)
    report = monitor.supervise()
    assert "index_bloat" not in report.warnings
    assert bloated_indexes(boss.context) == []
    (pages,) = fetchall("SELECT relpages FROM pg_class WHERE oid = to_regclass(%s)", [f"{q()}.{table}_pkey"])[
        0
    ]
    assert pages < 10
    # The interval is claimed in the version row: a second pass (here or in another monitor) does nothing.
    assert fetchall(f"SELECT reindex_on IS NOT NULL FROM {q()}.version") == [(True,)]
    assert Health(boss.context).check_indexes(PassReport()) == []


@override_settings(PGBOSS={"SCHEMA": pgboss_settings.SCHEMA, "REINDEX": False, "PERSIST_WARNINGS": True})
def test_with_reindex_off_the_bloat_is_reported_once_and_kept_as_pg_boss_keeps_it():
    table = bloat("drained")
    health = Health(boss.context)
    report = PassReport()
    assert health.check_indexes(report) == []
    # One warning per bloated index: the primary key at least (autovacuum's own ANALYZE may move a
    # smaller index across the thresholds between two readings).
    assert report.warnings and set(report.warnings) == {"index_bloat"}
    rows = fetchall(
        f"SELECT type, message, data::text FROM {q()}.warning WHERE data->>'name' = %s", [f"{table}_pkey"]
    )
    ((kind, message, data),) = rows
    data = json.loads(data)
    assert (kind, data["table"], data["owned"]) == ("index_bloat", table, True)
    assert message.startswith(f'Warning: index "{table}_pkey" is bloated (')
    assert message.endswith(
        "and was not rebuilt: automatic reindexing is disabled. See get_reindex_commands()"
    )
    # The same episode is not reported again.
    again = PassReport()
    health.check_indexes(again)
    assert again.warnings == []


def garbage(queue: str, table: str, rows: int) -> None:
    execute(
        f"INSERT INTO {q()}.{table} (name) SELECT '{queue}' FROM generate_series(1, {rows})",
        f"DELETE FROM {q()}.{table}",
    )
    flush_stats()


@override_settings(PGBOSS={"SCHEMA": pgboss_settings.SCHEMA, "PERSIST_WARNINGS": True})
def test_garbage_on_a_table_with_autovacuum_off_is_autovacuum_disabled():
    boss.create_queue("garbage", partition=True)
    table = boss.get_queue("garbage").table_name
    execute(f"ALTER TABLE {q()}.{table} SET (autovacuum_enabled = false, autovacuum_vacuum_threshold = 50)")
    health = Health(boss.context)
    garbage("garbage", table, 500)
    first = PassReport()
    health.check_vacuum(first)
    assert first.warnings == []  # one reading establishes nothing
    garbage("garbage", table, 500)
    second = PassReport()
    health.check_vacuum(second)
    assert second.warnings == ["autovacuum_disabled"]
    ((message, data),) = fetchall(
        f"SELECT message, data::text FROM {q()}.warning WHERE type = 'autovacuum_disabled'"
    )
    data = json.loads(data)
    assert message.startswith(
        f"Warning: autovacuum is disabled, so nothing is reclaiming completed jobs: {table} has "
        "autovacuum_enabled = false, holds 1000 dead rows and is still growing"
    )
    assert (data["table"], data["deadTuples"]) == (table, 1000)


@override_settings(PGBOSS={"SCHEMA": pgboss_settings.SCHEMA, "PERSIST_WARNINGS": True})
def test_garbage_a_vacuum_cannot_reclaim_under_a_held_snapshot_is_xmin_horizon():
    boss.create_queue("pinned", partition=True)
    table = boss.get_queue("pinned").table_name
    execute(f"ALTER TABLE {q()}.{table} SET (autovacuum_enabled = true, autovacuum_vacuum_threshold = 50)")
    # Another application holds a snapshot open: nothing that dies after it can be vacuumed away.
    with psycopg.connect(database_url(), application_name="report-tool", autocommit=False) as holder:
        holder.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        holder.execute("SELECT 1").fetchall()
        health = Health(boss.context)
        garbage("pinned", table, 500)
        execute(f"VACUUM {q()}.{table}")
        flush_stats()
        first = PassReport()
        health.check_vacuum(first)
        assert first.warnings == []
        execute(f"VACUUM {q()}.{table}")
        flush_stats()
        second = PassReport()
        health.check_vacuum(second)
        assert second.warnings == ["xmin_horizon"]
        holder_pid = holder.info.backend_pid
    ((message, data),) = fetchall(
        f"SELECT message, data::text FROM {q()}.warning WHERE type = 'xmin_horizon'"
    )
    data = json.loads(data)
    assert message.startswith(
        "Warning: the database transaction horizon is pinned, so completed jobs cannot be cleaned up: "
        "a transaction open for "
    )
    assert f"in backend {holder_pid} (report-tool, idle in transaction)" in message
    assert (data["table"], data["deadTuples"], data["source"], data["holderPid"]) == (
        table,
        500,
        "backends",
        holder_pid,
    )


def test_a_listen_that_cannot_start_is_listen_notify_unavailable_and_a_later_loss_is_not(caplog):
    from django_pgboss.db.context import DatabaseContext
    from django_pgboss.worker.listener import NotifyListener

    class Unreachable(DatabaseContext):
        # A server that refuses the LISTEN connection (a closed port), as a pooler that cannot
        # LISTEN refuses it.
        def connection_params(self):
            return {**super().connection_params(), "port": 1, "connect_timeout": 2}

    errors = []

    def on_error(sender, error, doing, instance, **kwargs):
        errors.append((sender, type(error), doing, instance))

    listener = NotifyListener(Unreachable(), ["q"], wake=lambda name: None)
    signals.error_raised.connect(on_error)
    try:
        with caplog.at_level(logging.WARNING, logger="django_pgboss.worker"):
            listener.start()
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and len(caplog.records) < 2:
                time.sleep(0.05)
            listener.stop()
    finally:
        signals.error_raised.disconnect(on_error)
    first, second = caplog.records[:2]
    assert first.getMessage().startswith(
        "Failed to start LISTEN/NOTIFY listener. Continuing with polling only."
    )
    assert first.pgboss_warning == "listen_notify_unavailable"
    assert second.getMessage().startswith("LISTEN connection lost")
    assert not hasattr(second, "pgboss_warning")
    # The lost connection is also an error the worker survived; the first failure is the warning.
    assert errors[0][0] is NotifyListener and issubclass(errors[0][1], psycopg.OperationalError)
    assert errors[0][2] == f"listening on {listener.channel}" and errors[0][3] is listener


def test_a_monitor_that_only_reports_bloat_reads_the_indexes_once_per_interval():
    from django.test.utils import CaptureQueriesContext

    def statements() -> int:
        with CaptureQueriesContext(connection) as captured:
            health.check_indexes(PassReport())
        return len(captured.captured_queries)

    # pg-boss's detect-only passes throttle themselves on their own clock, leaving the shared
    # reindex claim to a monitor that can rebuild.
    with override_settings(
        PGBOSS={"SCHEMA": pgboss_settings.SCHEMA, "REINDEX": False, "REINDEX_INTERVAL_SECONDS": 1}
    ):
        health = Health(boss.context)
        assert statements() > 0
        assert statements() == 0
        time.sleep(1.05)
        assert statements() > 0
        assert fetchall(f"SELECT reindex_on FROM {q()}.version") == [(None,)]
