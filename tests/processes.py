"""Starting the commands under test as real processes, and workers on threads of the test's process.

One place for what many test modules did each in their own words: the environment a child
manage.py needs (the suite's settings, database and schema), ``manage()`` / ``run_manage()`` for
any command, the pgboss_work and pgboss_monitor shorthands, ``in_process()`` for a Worker on a
thread, and ``wait_for()``, the one way a test waits for a condition (never a fixed sleep).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from django_pgboss.conf import pgboss_settings
from django_pgboss.worker import Worker
from django_pgboss.worker.registry import Registration
from tests.conftest import database_url

REPO = Path(__file__).resolve().parents[1]


def worker_env(**extra: str) -> dict[str, str]:
    """The environment of a child manage.py: the suite's settings, database and schema."""
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "DATABASE_URL": database_url(),
        "PGBOSS_SCHEMA": pgboss_settings.SCHEMA,
        "PYTHONPATH": str(REPO),
        "PYTHONUNBUFFERED": "1",
        **extra,
    }


def manage(command: str, *args: str, **env: str) -> subprocess.Popen:
    """``manage.py <command> <args>`` started as a process, its output on pipes (text)."""
    return subprocess.Popen(
        [sys.executable, "-m", "django", command, *args],
        cwd=REPO,
        env=worker_env(**env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def run_manage(command: str, *args: str, timeout: float = 120, **env: str) -> subprocess.CompletedProcess:
    """``manage.py <command> <args>`` run to its end (at most ``timeout`` seconds), output captured."""
    return subprocess.run(
        [sys.executable, "-m", "django", command, *args],
        cwd=REPO,
        env=worker_env(**env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def start_worker(*args: str, **env: str) -> subprocess.Popen:
    return manage("pgboss_work", *args, **env)


def run_worker(*args: str, timeout: float = 120, **env: str) -> subprocess.CompletedProcess:
    return run_manage("pgboss_work", *args, timeout=timeout, **env)


def start_monitor(*args: str, **env: str) -> subprocess.Popen:
    return manage("pgboss_monitor", *args, **env)


def run_monitor(*args: str, timeout: float = 60, **env: str) -> subprocess.CompletedProcess:
    return run_manage("pgboss_monitor", *args, timeout=timeout, **env)


def in_process(*registrations: Registration, **options: Any) -> tuple[Worker, threading.Thread]:
    """A Worker over ``registrations`` running on a daemon thread of this process (stop it with
    ``worker.stop()`` and join the thread)."""
    worker = Worker(list(registrations), **options)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    return worker, thread


def wait_for(predicate: Any, timeout: float = 30.0, interval: float = 0.05) -> Any:
    """Poll ``predicate`` until it returns something true, and return that; fail past ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {predicate}")
