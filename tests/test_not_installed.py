"""A database that was never migrated: every command and the first Boss call say so in one line, and
a long-running worker or monitor waits for the migration instead of exiting."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from django.db import ProgrammingError, connection

from django_pgboss import Boss, boss
from django_pgboss.conf import pgboss_settings
from django_pgboss.db.identifiers import quote_identifier
from django_pgboss.exceptions import SchemaNotInstalled
from tests.conftest import database_url
from tests.helpers import install_schema

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


WAITING_SCHEMA = "not_migrated_yet"


class Lines:
    """The lines a process writes to ``stream``, read by a thread of their own so that a wait for
    one can time out (a readline() on a quiet process never returns)."""

    def __init__(self, stream) -> None:
        self.seen: list[str] = []
        self._lines: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._reader = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._reader.start()

    def join(self) -> None:
        """Wait for the reader to reach the end of the stream (the process has exited)."""
        self._reader.join(timeout=30)

    def _read(self, stream) -> None:
        for line in stream:
            self._lines.put(line)
        self._lines.put(None)

    def until(self, needle: str, timeout: float = 30.0) -> None:
        """Wait for a line holding ``needle``; fail, with what was seen, after ``timeout``."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self._lines.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                break
            self.seen.append(line)
            if needle in line:
                return
        pytest.fail(f"{needle!r} not seen in:\n{''.join(self.seen)}")


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "command", [["pgboss_work", "--queue", "echo"], ["pgboss_monitor", "--interval", "1"]], ids=lambda c: c[0]
)
def test_a_long_running_command_waits_for_the_migration_saying_so_once_then_starts(command):
    with subprocess.Popen(
        [sys.executable, "-m", "django", *command, "-v", "2"],
        cwd=REPO,
        env={
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            "PYTHONPATH": str(REPO),
            "DATABASE_URL": database_url(),
            "PGBOSS_SCHEMA": WAITING_SCHEMA,
        },
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    ) as process:
        lines = Lines(process.stderr)
        try:
            lines.until("waits for it")
            assert process.poll() is None  # still running: waiting, not failed
            install_schema(WAITING_SCHEMA)
            Boss(schema=WAITING_SCHEMA).create_queue("echo")
            lines.until("the pgboss schema is installed")
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
            lines.join()
            with connection.cursor() as cursor:
                cursor.execute(f"DROP SCHEMA IF EXISTS {WAITING_SCHEMA} CASCADE")
    output = "".join(lines.seen)
    assert process.returncode == 0, output
    said = [line for line in lines.seen if "not installed" in line]
    assert len(said) == 1 and MESSAGE in said[0], said
    assert "not answering" not in output and "Traceback" not in output
