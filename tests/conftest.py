"""Fixtures shared by the suite: a clean pg-boss schema around committing tests, and pg-boss (Node)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from urllib.parse import quote

import pytest
from django.core.management.color import no_style
from django.db import connection, connections
from django.test import TransactionTestCase

from django_pgboss.conf import pgboss_settings
from django_pgboss.db.identifiers import quote_identifier

NODE_SCRIPT = Path(__file__).resolve().parent / "node" / "pgboss.mjs"


def reset_pgboss_schema(schema: str | None = None) -> None:
    """Empty the pg-boss schema as a fresh migrate leaves it: no queues, no jobs, version kept.

    Queues go through delete_queue() so a partitioned queue's table is dropped, not just emptied;
    the remaining tables are truncated in one statement.
    """
    schema = schema or pgboss_settings.SCHEMA
    quoted = quote_identifier(schema)
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s)", [f"{quoted}.queue"])
        if cursor.fetchone()[0] is None:
            return
        cursor.execute(f"SELECT {quoted}.delete_queue(name) FROM {quoted}.queue WHERE partition")
        # The claim stamps a committing test left behind would make the next one wait an interval.
        cursor.execute(
            f"UPDATE {quoted}.version SET cron_on = NULL, bam_on = NULL, flow_on = NULL, reindex_on = NULL, "
            "monitor_backoff_on = NULL"
        )
        # The instance registry exists from schema 44 on (a test may hold the schema at 43); every
        # pg-boss (Node) process a test starts registers there.
        cursor.execute("SELECT to_regclass(%s)", [f"{quoted}.instance"])
        registry = f", {quoted}.instance" if cursor.fetchone()[0] is not None else ""
        cursor.execute(
            f"TRUNCATE {quoted}.job, {quoted}.queue_stats, {quoted}.job_dependency, {quoted}.warning, "
            f"{quoted}.subscription, {quoted}.schedule, {quoted}.bam, {quoted}.queue{registry}"
        )


#: The tables a committing test's flush keeps: the content types and permissions, which Django's
#: flush empties and its post_migrate signal then writes back, the same rows every time (no test
#: changes them). Writing them back took about half of each committing test's teardown.
KEPT_BY_FLUSH = frozenset({"django_content_type", "auth_permission"})


def _flush_keeping_content_types(test_case: TransactionTestCase) -> None:
    """TransactionTestCase._fixture_teardown as Django runs it for the suite (no available_apps,
    no serialized rollback), without emptying KEPT_BY_FLUSH and so without post_migrate."""
    if test_case.available_apps is not None or test_case.serialized_rollback:
        _django_fixture_teardown(test_case)
        return
    for alias in test_case._databases_names(include_mirrors=False):
        ops, introspection = connections[alias].ops, connections[alias].introspection
        tables = [
            table
            for table in introspection.django_table_names(only_existing=True, include_views=False)
            if table not in KEPT_BY_FLUSH
        ]
        ops.execute_sql_flush(ops.sql_flush(no_style(), tables))


_django_fixture_teardown = TransactionTestCase._fixture_teardown


def pytest_configure(config):
    TransactionTestCase._fixture_teardown = _flush_keeping_content_types  # type: ignore[method-assign]


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    # Leftovers of an interrupted --reuse-db run would otherwise reach the first tests.
    with django_db_blocker.unblock():
        reset_pgboss_schema()


@pytest.fixture(autouse=True)
def _reset_pgboss_schema_after_committing_tests(request):
    """Committing tests write pg-boss rows for real; Django's flush only empties managed tables."""
    marker = request.node.get_closest_marker("django_db")
    committing = {"transactional_db", "live_server"} & set(request.fixturenames) or (
        marker is not None and (marker.kwargs.get("transaction") or (marker.args and marker.args[0]))
    )
    if not committing:
        yield
        return
    request.getfixturevalue("transactional_db")
    yield
    reset_pgboss_schema()


def _node_dir() -> Path:
    node_dir = os.environ.get("PGBOSS_NODE_DIR")
    if not node_dir or not (Path(node_dir) / "node_modules" / "pg-boss").is_dir():
        pytest.fail(
            "pg-boss 12.38.0 (Node) is not installed: set PGBOSS_NODE_DIR to a folder holding "
            "node_modules/pg-boss (scripts/test.sh installs it), or deselect with -m 'not node'.",
            pytrace=False,
        )
    if shutil.which("node") is None:
        pytest.fail("node is not on PATH; scripts/test.sh installs it.", pytrace=False)
    return Path(node_dir)


def database_url() -> str:
    """A libpq URL for the database the tests run on (the test database, not the configured one)."""
    s = connection.settings_dict
    user, password = quote(s["USER"] or "postgres", safe=""), quote(s["PASSWORD"] or "", safe="")
    return f"postgres://{user}:{password}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{quote(s['NAME'], safe='')}"


def node_backend() -> dict[str, str]:
    """The environment that gives pg-boss (tests/node/pgboss.mjs) the `backend` option matching
    PGBOSS["BACKEND"]: its own citus profile beside django_pgboss's "citus", its default otherwise."""
    return {"PGBOSS_NODE_BACKEND": "citus"} if pgboss_settings.BACKEND == "citus" else {}


#: Whether the suite runs on the Citus cluster of scripts/citus.sh (scripts/test.sh with
#: PGBOSS_TEST_BACKEND=citus or citus-distributed), which the tests marked ``citus`` need.
ON_CITUS = os.environ.get("PGBOSS_TEST_BACKEND") in ("citus", "citus-distributed")

#: Whether the suite runs on that cluster with the job table distributed (citus-distributed).
DISTRIBUTED = os.environ.get("PGBOSS_TEST_BACKEND") == "citus-distributed"

#: What a count of the sessions waiting for a lock adds with the job table distributed: a wait for
#: a row is then on the worker holding the row's shard (or a reference table's copy), which the
#: coordinator's pg_locks and pg_stat_activity do not show but Citus's view of the cluster does.
CLUSTER_LOCK_WAITS = " + (SELECT count(*) FROM citus_lock_waits)" if DISTRIBUTED else ""


def pytest_report_header(config):
    if DISTRIBUTED:
        return "database: the Citus cluster of scripts/citus.sh, job table distributed; the tests marked node are deselected"
    if ON_CITUS:
        return "database: the Citus cluster of scripts/citus.sh (PGBOSS_TEST_BACKEND=citus)"
    return "database: PostgreSQL; the tests marked citus are deselected (PGBOSS_TEST_BACKEND=citus runs them)"


#: The part of the suite CI runs on the Citus cluster (``-m citus_part``): one module or a few for
#: every feature (send and insert, fetch, each settle, the policies, queues, retries and dead
#: letters, redrive and lineage, flows, schedules, publish, update and upsert, bulk deletes, the
#: monitor's counts, expiry, retention and history, the tasks backend, the admin pages, the worker
#: with its database restarts, the instance registry, bam, the doctor), pg-boss itself beside it
#: in its citus profile (test_citus_interop), and the Citus tests (the routing test runs in its
#: own step, in the citus-distributed mode it is about); the modules left out test pure
#: layers (argument checks, cron and rrule, charts, import paths), which no database changes, or
#: repeat a feature here through another door (transactional handlers are the worker's fetch and
#: settle inside one transaction; the plain interop suite is test_citus_interop's in more
#: variants). The whole suite runs on the cluster too; this part keeps CI under its time budget.
CITUS_PART = frozenset(
    {
        "test_send",
        "test_fetch",
        "test_settle",
        "test_stale_routes",
        "test_policies",
        "test_queues",
        "test_failure",
        "test_redrive",
        "test_lineage",
        "test_flows",
        "test_schedules",
        "test_publish",
        "test_editing",
        "test_purge",
        "test_supervise",
        "test_monitor",
        "test_latency",
        "test_tasks_backend",
        "test_admin",
        "test_admin_deadletters",
        "test_worker",
        "test_instances",
        "test_bam",
        "test_doctor",
        "test_citus",
        "test_citus_interop",
    }
)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.stem in CITUS_PART and item.path.parent.name == "tests":
            item.add_marker(pytest.mark.citus_part)
    # The citus tests need the cluster's other nodes and databases; on one PostgreSQL they are
    # deselected, which pytest counts in its summary line. In the citus-distributed mode the
    # tests that run pg-boss (Node) beside django_pgboss are deselected instead: pg-boss cannot
    # share a distributed schema (docs/citus.md, "What a user gives up"), so a Node neighbour is
    # not a set-up this mode supports.
    if ON_CITUS and not DISTRIBUTED:
        return
    unsupported = "node" if DISTRIBUTED else "citus"
    deselected = [item for item in items if item.get_closest_marker(unsupported)]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = [item for item in items if not item.get_closest_marker(unsupported)]


def pgboss_schema_option(schema: str) -> str:
    """The schema spelled as a pg-boss user configures it: quoted only when the name needs it."""
    return quote_identifier(schema)


@pytest.fixture(scope="session")
def run_pgboss():
    """Run tests/node/pgboss.mjs (pg-boss 12.38.0 itself) and return its JSON output."""
    node_dir = _node_dir()

    def run(command: str, schema: str, *args: str) -> dict:
        completed = subprocess.run(
            ["node", str(NODE_SCRIPT), command, database_url(), pgboss_schema_option(schema), *args],
            env={**os.environ, "PGBOSS_NODE_DIR": str(node_dir), **node_backend()},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if completed.returncode != 0:
            raise AssertionError(f"pg-boss (node) {command} failed:\n{completed.stderr}\n{completed.stdout}")
        return json.loads(completed.stdout.strip().splitlines()[-1])

    return run


@pytest.fixture
def queue(request) -> str:
    """A queue created through the public API for the test; its name is returned.

    The queue is named "q" with create_queue()'s defaults, unless the test or its module says
    otherwise with ``@pytest.mark.queue(name, **create_queue_options)`` (a module sets it in
    ``pytestmark``; the closest marker wins). The test's database marker decides whether it commits.
    """
    from django_pgboss import boss

    marker = request.node.get_closest_marker("queue")
    args, options = (marker.args, marker.kwargs) if marker else ((), {})
    name = args[0] if args else "q"
    boss.create_queue(name, **options)
    return name


@pytest.fixture
def staff_client(client, django_user_model):
    """Log a staff user (not a superuser) in, holding exactly the named pgboss permissions."""
    from django.contrib.auth.models import Permission

    def login(*codenames: str):
        # No password: force_login needs none, and hashing one costs a good part of a second.
        user = django_user_model.objects.create_user("operator", is_staff=True)
        permissions = list(
            Permission.objects.filter(content_type__app_label="pgboss", codename__in=codenames)
        )
        assert sorted(p.codename for p in permissions) == sorted(codenames)
        user.user_permissions.add(*permissions)
        client.force_login(user)
        return client

    return login


@pytest.fixture
def clock(request):
    """A TestClock on job_now(), attached for the test: time moves only when the test moves it."""
    from django_pgboss.testing import TestClock

    with TestClock() as test_clock:
        yield test_clock
