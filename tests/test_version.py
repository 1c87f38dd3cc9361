"""The version: one number in django_pgboss/__init__.py, reported by ``python -m django_pgboss``
and by the management commands' --version, with the pg-boss release and schema it ports."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from django.db import connection

import django_pgboss
from django_pgboss.conf import pgboss_settings
from django_pgboss.db.identifiers import quote_schema
from django_pgboss.version import version_text

REPO = Path(__file__).resolve().parents[1]


def run(*args: str, settings: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``python *args`` in the repository, as a user would from a shell."""
    env = {key: value for key, value in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"}
    if settings:
        env["DJANGO_SETTINGS_MODULE"] = settings
    return subprocess.run(
        [sys.executable, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_python_m_django_pgboss_version_names_the_package_pgboss_and_schema_versions():
    result = run("-m", "django_pgboss", "--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"django_pgboss {django_pgboss.__version__} (pg-boss 12.38, schema 46)\n"
    assert result.stdout.strip() == version_text()


def test_python_m_django_pgboss_without_arguments_prints_a_short_help():
    result = run("-m", "django_pgboss")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: python -m django_pgboss [-h] [--version]")
    for command in ("manage.py migrate pgboss", "manage.py pgboss_work", "manage.py pgboss_monitor"):
        assert command in result.stdout
    assert result.stderr == ""


def test_python_m_django_pgboss_with_a_bad_argument_exits_non_zero_naming_it():
    result = run("-m", "django_pgboss", "--verison")
    assert result.returncode == 2
    assert result.stdout == ""
    assert "python -m django_pgboss: error: unrecognized arguments: --verison" in result.stderr


@pytest.mark.parametrize("command", ["pgboss_work", "pgboss_monitor"])
def test_management_commands_report_the_same_version(command):
    result = run("-m", "django", command, "--version", settings="tests.settings")
    assert result.returncode == 0, result.stderr
    assert result.stdout == version_text() + "\n"


def test_pyproject_reads_the_version_from_the_package():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "version" not in project["project"]
    assert "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "django_pgboss.__version__"}


def test_changelog_has_an_entry_for_the_version():
    changelog = (REPO / "CHANGELOG.md").read_text()
    assert f"## [{django_pgboss.__version__}] - " in changelog


@pytest.mark.django_db
def test_the_schema_version_reported_is_the_one_the_migrations_created():
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT version FROM {quote_schema(pgboss_settings.SCHEMA)}.version")
        assert cursor.fetchone()[0] == 46
    assert version_text().endswith(", schema 46)")
