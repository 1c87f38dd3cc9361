"""A database that was never migrated: every command and the first Boss call say so in one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import ProgrammingError

from django_pgboss import Boss, boss
from django_pgboss.conf import pgboss_settings
from django_pgboss.db.identifiers import quote_identifier
from django_pgboss.exceptions import SchemaNotInstalled
from tests.conftest import database_url

REPO = Path(__file__).resolve().parents[1]
MESSAGE = "the pgboss schema is not installed in database 'default': run manage.py migrate pgboss"


@pytest.mark.django_db
@pytest.mark.parametrize("schema", ["never_migrated", "Never Migrated-2"])
@pytest.mark.parametrize(
    "call",
    [
        lambda b: b.get_queues(),
        lambda b: b.create_queue("emails"),
        lambda b: b.send("emails", {"n": 1}),
        lambda b: b.fetch("emails"),
    ],
    ids=["get_queues", "create_queue", "send", "fetch"],
)
def test_the_first_boss_call_says_the_schema_is_not_installed(schema, call):
    with pytest.raises(SchemaNotInstalled) as raised:
        call(Boss(schema=schema))
    assert str(raised.value) == MESSAGE


@pytest.mark.django_db
def test_a_missing_table_of_the_users_own_is_not_reported_as_a_missing_schema():
    with pytest.raises(ProgrammingError) as raised, boss.context.cursor() as cursor:
        cursor.execute(f"SELECT 1 FROM {quote_identifier(pgboss_settings.SCHEMA)}.not_a_pgboss_table")
    assert not isinstance(raised.value, SchemaNotInstalled)


@pytest.mark.django_db
@pytest.mark.parametrize(
    "command",
    [["pgboss_work", "--burst"], ["pgboss_monitor", "--once"], ["pgboss_doctor"]],
    ids=lambda c: c[0],
)
def test_every_command_says_it_in_one_line_without_a_traceback(command):
    result = subprocess.run(
        [sys.executable, "-m", "django", *command],
        cwd=REPO,
        env={
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            "PYTHONPATH": str(REPO),
            "DATABASE_URL": database_url(),
            "PGBOSS_SCHEMA": "never_migrated",
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1].endswith(f": {MESSAGE}")
    assert len([line for line in result.stderr.splitlines() if "not installed" in line]) == 1
