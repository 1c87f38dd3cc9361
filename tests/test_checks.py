"""System checks name the problem (pgboss.E001 ...) instead of failing with a traceback later."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core import checks
from django.db import connections
from django.test import override_settings

from django_pgboss.checks import check_database_engine, check_postgres_version, check_schema_name

REPO = Path(__file__).resolve().parents[1]


def run_manage(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "django", *args],
        cwd=REPO,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", "PYTHONPATH": str(REPO), **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_sqlite_gives_the_check_error_not_a_traceback(tmp_path):
    result = run_manage("check", DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}")
    assert result.returncode == 1
    assert "pgboss.E001" in result.stderr
    assert (
        "django_pgboss needs PostgreSQL, but database 'default' uses django.db.backends.sqlite3"
        in result.stderr
    )
    assert "Traceback" not in result.stderr


def test_migrate_on_sqlite_stops_at_the_check(tmp_path):
    result = run_manage("migrate", DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}")
    assert result.returncode == 1
    assert "pgboss.E001" in result.stderr
    assert "Traceback" not in result.stderr


def test_invalid_schema_setting_is_named_by_the_check():
    result = run_manage("check", PGBOSS_SCHEMA="jobs.v2")
    assert result.returncode == 1
    assert "pgboss.E002" in result.stderr
    assert (
        "settings.PGBOSS[\"SCHEMA\"] = 'jobs.v2' is invalid: the schema name must not contain a period"
        in (result.stderr)
    )
    assert "Traceback" not in result.stderr


def test_valid_settings_pass_every_check():
    assert check_database_engine() == []
    assert check_schema_name() == []
    assert run_manage("check").returncode == 0


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        ("", "must not be empty"),
        ("a" * 51, "at most 50 bytes"),
        ("my'schema", "single quote"),
        ('my"schema', "double quote"),
        ("pg_temp_jobs", "pg_"),
        ("tab\there", "control characters"),
        (42, "must be a string"),
    ],
)
def test_schema_name_check_explains_each_problem(schema, problem):
    with override_settings(PGBOSS={"SCHEMA": schema}):
        (error,) = check_schema_name()
    assert error.id == "pgboss.E002"
    assert problem in error.msg


@pytest.mark.parametrize("schema", ["pgboss", "Job Queue", "jobs-2", "ÉTÉ", "_private"])
def test_schema_names_that_need_quotes_are_accepted(schema):
    with override_settings(PGBOSS={"SCHEMA": schema}):
        assert check_schema_name() == []


def test_unknown_pgboss_setting_is_an_error_reported_once():
    with override_settings(PGBOSS={"SCHEME": "typo"}):
        errors = [e for e in checks.run_checks(include_deployment_checks=True) if e.id.startswith("pgboss.")]
    (error,) = errors
    assert error.id == "pgboss.E004"
    assert "unknown key(s) SCHEME" in error.msg


def test_database_alias_must_exist():
    with override_settings(PGBOSS={"DATABASE": "jobs"}):
        (error,) = check_database_engine()
    assert error.id == "pgboss.E004"
    assert "'jobs' is not a key of settings.DATABASES" in error.msg


@pytest.mark.django_db
def test_postgres_older_than_13_is_refused(monkeypatch):
    connection = connections["default"]
    assert check_postgres_version(databases=["default"]) == []
    # Only the version number the server reported is replaced: the check's own logic runs.
    monkeypatch.setitem(connection.__dict__, "pg_version", 120011)
    (error,) = check_postgres_version(databases=["default"])
    assert error.id == "pgboss.E003"
    assert "needs PostgreSQL 13 or newer; database 'default' runs PostgreSQL 12" in error.msg


def test_postgres_version_check_is_a_database_check():
    # Registered with the database tag: run by migrate and `check --database`, not at import time.
    assert check_postgres_version.tags == (checks.Tags.database,)
    assert check_postgres_version(databases=None) == []


@pytest.mark.parametrize(
    ("setting", "value", "message"),
    [
        ("MONITOR_INTERVAL_SECONDS", 0, "must be an integer from 1 to 86400"),
        ("CRON_INTERVAL_SECONDS", 46, "must be an integer from 1 to 45"),
        ("CRON_INTERVAL_SECONDS", 0, "must be an integer from 1 to 45"),
        ("FLOW_INTERVAL_SECONDS", 0, "must be an integer from 1 to 86400"),
        ("BAM_INTERVAL_SECONDS", 9, "must be an integer from 10 to 86400"),
        ("QUEUE_STATS_RETENTION_DAYS", 400, "must be an integer from 1 to 365"),
        ("WARNING_QUEUE_SIZE", "big", "must be an integer at least 1"),
        ("PERSIST_WARNINGS", "yes", "must be True or False"),
        # The settings last session added: each refused before any command runs.
        ("FLOW_INTERVAL_SECONDS", 1.5, "must be an integer from 1 to 86400"),
        ("FLOW_INTERVAL_SECONDS", "5", "must be an integer from 1 to 86400"),
        ("FLOW_INTERVAL_SECONDS", 86_401, "must be an integer from 1 to 86400"),
        ("WARNING_SLOW_QUERY_SECONDS", 0, "must be an integer at least 1"),
        ("WARNING_SLOW_QUERY_SECONDS", 0.5, "must be an integer at least 1"),
        ("WARNING_SLOW_QUERY_SECONDS", None, "must be an integer at least 1"),
        ("MAX_ABANDONED_THREADS", -1, "must be an integer at least 0"),
        ("MAX_ABANDONED_THREADS", True, "must be an integer at least 0"),
        ("MAX_ABANDONED_THREADS", float("inf"), "must be an integer at least 0"),
        # The instance registry's, pg-boss's bounds.
        ("INSTANCE_HEARTBEAT_SECONDS", 0, "must be an integer from 1 to 3600"),
        ("INSTANCE_HEARTBEAT_SECONDS", 3601, "must be an integer from 1 to 3600"),
        ("INSTANCE_HEARTBEAT_SECONDS", 2.5, "must be an integer from 1 to 3600"),
        ("REGISTER_INSTANCE", "no", "must be True or False"),
        # The worker's LISTEN heartbeat and keepalives, whole seconds as pg-boss's milliseconds.
        ("NOTIFY_HEARTBEAT_INTERVAL_SECONDS", 0, "must be an integer from 1 to 3600"),
        ("NOTIFY_HEARTBEAT_INTERVAL_SECONDS", 0.5, "must be an integer from 1 to 3600"),
        ("NOTIFY_HEARTBEAT_TIMEOUT_SECONDS", 3601, "must be an integer from 1 to 3600"),
        ("NOTIFY_HEARTBEAT_TIMEOUT_SECONDS", None, "must be an integer from 1 to 3600"),
        ("NOTIFY_KEEPALIVE_INITIAL_DELAY_SECONDS", -1, "must be an integer from 1 to 3600"),
        ("NOTIFY_KEEPALIVE_INITIAL_DELAY_SECONDS", True, "must be an integer from 1 to 3600"),
        ("INSTANCE_NAME", "", "must be None or a non-empty string"),
        ("INSTANCE_NAME", 7, "must be None or a non-empty string"),
        ("INSTANCE_NAME", "a\x00b", "must be None or a non-empty string"),
    ],
)
def test_monitor_settings_are_checked(setting, value, message):
    from django_pgboss.checks import check_monitor_settings

    with override_settings(PGBOSS={setting: value}):
        (error,) = check_monitor_settings()
    assert error.id == "pgboss.E005"
    assert setting in error.msg and message in error.msg


def test_default_monitor_settings_pass():
    from django_pgboss.checks import check_monitor_settings

    assert check_monitor_settings() == []
