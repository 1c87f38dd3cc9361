"""PGBOSS["BACKEND"]: the set-ups refused (pgboss.E008, pgboss.E009, migrate's one-line refusal)
and what pg-boss's citus profile changes (the monitor's queue claims wait instead of skipping).

The refusals are checked on real servers: a database without the citus extension beside the test
database (on one PostgreSQL, plain PostgreSQL; on the cluster, a coordinator database nobody ran
CREATE EXTENSION citus in), and, on the Citus cluster of scripts/citus.sh (the tests marked
citus), a Citus database without worker nodes and a worker node's database.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from django.db import connection, connections
from django.test import override_settings

from django_pgboss import boss
from django_pgboss.checks import check_backend_fits_database, check_backend_setting
from django_pgboss.conf import pgboss_settings
from django_pgboss.db.identifiers import quote_identifier
from tests.conftest import CLUSTER_LOCK_WAITS, DISTRIBUTED
from tests.processes import wait_for

REPO = Path(__file__).resolve().parents[1]


def server_dsn(database: str, port: int | None = None) -> str:
    """A libpq URL for ``database`` on the test database's server (or on another port of it)."""
    s = connection.settings_dict
    return f"postgres://{s['USER'] or 'postgres'}@{s['HOST'] or '127.0.0.1'}:{port or s['PORT'] or 5432}/{database}"


@pytest.fixture
def scratch_database() -> Iterator:
    """Make empty databases beside the test database, each dropped after the test.

    ``make(citus=False, register=False)`` returns the new database's name: with ``citus`` the
    extension is created in it (on this server only: on the cluster, the coordinator), with
    ``register`` the coordinator is also registered in it (citus_set_coordinator_host), and no
    worker.
    """
    made: list[str] = []

    def make(*, citus: bool = False, register: bool = False) -> str:
        name = f"pgboss_scratch_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(server_dsn("postgres"), autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        made.append(name)
        if citus:
            with psycopg.connect(server_dsn(name), autocommit=True) as scratch:
                scratch.execute("CREATE EXTENSION citus")
                if register:
                    port = connection.settings_dict["PORT"]
                    scratch.execute("SELECT citus_set_coordinator_host('127.0.0.1', %s)", [int(port)])
        return name

    yield make
    with psycopg.connect(server_dsn("postgres"), autocommit=True) as admin:
        for name in made:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def manage(*args: str, database_url: str, backend: str) -> subprocess.CompletedProcess:
    """Run manage.py (the suite's settings) on ``database_url`` with PGBOSS["BACKEND"] = ``backend``."""
    return subprocess.run(
        [sys.executable, "-m", "django", *args],
        cwd=REPO,
        env={
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            "PYTHONPATH": str(REPO),
            "DATABASE_URL": database_url,
            "PGBOSS_BACKEND": backend,
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def tables_in(database: str, port: int | None = None) -> list[str]:
    """Every table and schema a user made in ``database``: what any DDL would have left."""
    with psycopg.connect(server_dsn(database, port)) as scratch:
        return [
            row[0]
            for row in scratch.execute(
                "SELECT nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg\\_%%' AND nspname NOT IN "
                "('information_schema', 'public', 'citus', 'citus_internal', 'columnar', "
                "'columnar_internal') "
                "UNION ALL SELECT schemaname || '.' || tablename FROM pg_tables "
                "WHERE schemaname IN ('public', %s)",
                [pgboss_settings.SCHEMA],
            )
        ]


def assert_refused(database: str, backend: str, problem: str, port: int | None = None) -> None:
    """``check --deploy`` reports pgboss.E009 with ``problem``, and ``migrate pgboss`` refuses in
    one line before any DDL."""
    url = server_dsn(database, port)
    checked = manage("check", "--deploy", "--database", "default", database_url=url, backend=backend)
    assert checked.returncode == 1, checked.stderr
    assert f"(pgboss.E009) {problem}." in checked.stderr
    assert "Traceback" not in checked.stderr

    migrated = manage("migrate", "pgboss", database_url=url, backend=backend)
    assert migrated.returncode == 1, migrated.stderr
    assert migrated.stderr.strip() == f"UnfitBackend: {problem}; nothing was migrated."
    assert migrated.stdout.strip().splitlines()[-1:] != ["Running migrations:"]
    assert tables_in(database, port) == []  # not even django_migrations


# -- the setting itself -------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["postgres", "citus", "citus-distributed"])
def test_each_backend_is_a_setting_the_check_accepts(backend):
    with override_settings(PGBOSS={"BACKEND": backend}):
        assert check_backend_setting() == []


@pytest.mark.parametrize("backend", ["cockroachdb", "Citus", "", None, 1])
def test_a_backend_django_pgboss_does_not_know_is_e008(backend):
    with override_settings(PGBOSS={"BACKEND": backend}):
        (error,) = check_backend_setting()
    assert error.id == "pgboss.E008"
    assert error.msg == (
        f'settings.PGBOSS["BACKEND"] = {backend!r} is not a database engine django_pgboss knows.'
    )
    assert error.hint == "Use one of: 'postgres', 'citus', 'citus-distributed'."


# -- citus settings on a database without Citus -------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("backend", ["citus", "citus-distributed"])
def test_citus_backends_on_a_database_without_the_extension_are_refused(scratch_database, backend):
    database = scratch_database()
    assert_refused(
        database,
        backend,
        f"settings.PGBOSS[\"BACKEND\"] is {backend!r}, but database 'default' has no citus extension "
        "(it is plain PostgreSQL, or CREATE EXTENSION citus was not run in that database)",
    )


@pytest.mark.django_db(transaction=True)
def test_the_postgres_backend_reads_nothing_and_migrates_anywhere(scratch_database):
    database = scratch_database()
    migrated = manage("migrate", "pgboss", database_url=server_dsn(database), backend="postgres")
    assert migrated.returncode == 0, migrated.stderr
    assert f"{pgboss_settings.SCHEMA}.version" in tables_in(database)


# -- citus-distributed on a Citus database without workers, or off the coordinator --------------


@pytest.mark.citus
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("register", [False, True], ids=["no-nodes", "coordinator-only"])
def test_citus_distributed_without_worker_nodes_is_refused(scratch_database, register):
    database = scratch_database(citus=True, register=register)
    assert_refused(
        database,
        "citus-distributed",
        "settings.PGBOSS[\"BACKEND\"] is 'citus-distributed', but database 'default' knows no active "
        "Citus worker node to distribute the job table over (on the coordinator, register it with "
        "citus_set_coordinator_host() and the workers with citus_add_node())",
    )


@pytest.mark.citus
@pytest.mark.django_db(transaction=True)
def test_citus_distributed_on_a_worker_node_is_refused(scratch_database):
    # A database on the first worker, made as scripts/citus.sh makes one (the worker has it, with
    # the extension, and the coordinator's copy registers the nodes, which sends the worker the
    # metadata); the project is then pointed at the worker instead of the coordinator.
    worker_port = int(os.environ["PGBOSS_CITUS_PORT"]) + 1
    name = f"pgboss_scratch_{uuid.uuid4().hex[:12]}"
    coordinator_port = int(connection.settings_dict["PORT"])
    ports = [coordinator_port, worker_port, worker_port + 1]
    try:
        for port in ports:
            with psycopg.connect(server_dsn("postgres", port), autocommit=True) as admin:
                admin.execute(f'CREATE DATABASE "{name}"')
            with psycopg.connect(server_dsn(name, port), autocommit=True) as node:
                node.execute("CREATE EXTENSION citus")
        with psycopg.connect(server_dsn(name, coordinator_port), autocommit=True) as coordinator:
            coordinator.execute("SELECT citus_set_coordinator_host('127.0.0.1', %s)", [coordinator_port])
            for port in ports[1:]:
                coordinator.execute("SELECT citus_add_node('127.0.0.1', %s)", [port])
        assert_refused(
            name,
            "citus-distributed",
            "settings.PGBOSS[\"BACKEND\"] is 'citus-distributed', but database 'default' is on a Citus "
            "worker node, not the coordinator (point the database at the coordinator)",
            port=worker_port,
        )
    finally:
        for port in reversed(ports):
            with psycopg.connect(server_dsn("postgres", port), autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.citus
@pytest.mark.django_db
@pytest.mark.parametrize("backend", ["citus", "citus-distributed"])
def test_the_cluster_coordinator_fits_both_citus_backends(backend):
    with override_settings(PGBOSS={**pgboss_settings_dict(), "BACKEND": backend}):
        assert check_backend_fits_database(databases=["default"]) == []


def pgboss_settings_dict() -> dict:
    from django.conf import settings

    return dict(settings.PGBOSS)


# -- what the citus profile changes: the monitor's queue claims wait ----------------------------


def _hold_queue_row(name: str, held: threading.Event, release: threading.Event) -> None:
    """In a connection of its own, lock queue ``name``'s row as a claiming monitor would, until
    ``release``."""
    try:
        with connections["default"].cursor() as cursor:
            cursor.execute("BEGIN")
            cursor.execute(
                f"SELECT name FROM {quote_identifier(pgboss_settings.SCHEMA)}.queue WHERE name = %s "
                "FOR NO KEY UPDATE",
                [name],
            )
            held.set()
            release.wait(60)
            cursor.execute("COMMIT")
    finally:
        connections["default"].close()


def _backends_waiting_on_a_lock() -> int:
    # With the job table distributed, queue is a reference table: the claim waits for the row's
    # copy on a worker (CLUSTER_LOCK_WAITS).
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT (SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            f"AND wait_event_type = 'Lock' AND query LIKE '%%monitor_claim_on%%'){CLUSTER_LOCK_WAITS}"
        )
        return cursor.fetchone()[0]


#: Each backend's claim, on a cluster whose tables fit it: with the job table distributed, only
#: the distributed mode's statements run (the other two are the set-up pgboss.E009 refuses there).
CLAIM_BACKENDS = (
    [("citus-distributed", True)]
    if DISTRIBUTED
    else [("postgres", False), ("citus", True), ("citus-distributed", True)]
)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("backend", "waits"), CLAIM_BACKENDS)
def test_a_monitor_pass_skips_a_held_queue_on_postgres_and_waits_for_it_on_citus(backend, waits):
    boss.create_queue("held")
    boss.create_queue("free")
    held, release = threading.Event(), threading.Event()
    holder = threading.Thread(target=_hold_queue_row, args=("held", held, release))
    holder.start()
    reports = []
    try:
        assert held.wait(30)
        with override_settings(PGBOSS={**pgboss_settings_dict(), "BACKEND": backend}):

            def run_pass() -> None:
                try:
                    reports.append(boss.supervise(["held", "free"]))
                finally:
                    connections["default"].close()

            monitor = threading.Thread(target=run_pass)
            monitor.start()
            if waits:
                # The pass's claim waits on the held row (PostgreSQL shows it waiting on the lock),
                # and goes on once the holder lets go.
                wait_for(lambda: _backends_waiting_on_a_lock() == 1, timeout=30)
                assert reports == []
            else:
                # The pass does not wait: it skips the held queue and counts the other.
                monitor.join(60)
                assert not monitor.is_alive()
            release.set()
            monitor.join(60)
    finally:
        release.set()
        holder.join(60)
    (report,) = reports
    assert sorted(report.counted) == (["free", "held"] if waits else ["free"])
