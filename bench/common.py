"""What the bench scripts share: the connection, the job table's reset and fill, the drains'
child processes, the alternating rounds, and the lines that say what was measured.

Importing it sets Django up (with bench.settings unless DJANGO_SETTINGS_MODULE names other
settings, as bench/peers.py's do), since django_pgboss needs the settings; a script that has
already done so loses nothing, django.setup() is done once. The spawned children of the drains
import it again as they unpickle their target, and get the same set-up.
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import django

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
django.setup()

import psycopg  # noqa: E402
from django.db import connections  # noqa: E402

from django_pgboss.api.boss import Boss  # noqa: E402

SCHEMA = "pgboss"
# Queues without a partition of their own live in job_common, the DEFAULT partition of pgboss.job:
# the table Boss.send() writes to for the bench queues, so the ceilings write there too.
TABLE = f"{SCHEMA}.job_common"
#: Jobs per Boss.insert() call when a script fills a queue before a drain.
FILL_BATCH = 1000


# -- connections and the table ---------------------------------------------------------------------


def raw_connection() -> psycopg.Connection:
    """A psycopg 3 connection to the database Django uses, with psycopg's own defaults.

    Built from the settings rather than from Django's get_connection_params(), which would bring
    Django's choices along (client-side binding, prepared statements off): the ceiling is what
    plain psycopg does out of the box, server-side binding with automatic prepared statements.
    """
    return psycopg.connect(**connection_arguments())


def connection_arguments() -> dict[str, object]:
    """psycopg's keyword arguments for the database Django uses, in autocommit (see raw_connection())."""
    s = connections["default"].settings_dict
    return {
        "host": s["HOST"],
        "port": s["PORT"] or 5432,
        "user": s["USER"],
        "password": s["PASSWORD"] or None,
        "dbname": s["NAME"],
        "autocommit": True,
    }


def fresh_queues(boss: Boss, *names: str, create: Sequence[str] | None = None) -> None:
    """Delete the named queues if a run left them behind (their jobs go with them), then create
    `create` (all of them unless told otherwise), so every invocation starts from the same state."""
    for name in names:
        if boss.get_queue(name) is not None:
            boss.delete_queue(name)
    for name in names if create is None else create:
        boss.create_queue(name)


def reset(admin: psycopg.Connection) -> None:
    """Empty the job table and checkpoint, so each run starts from the same state.

    The CHECKPOINT matters with full_page_writes on: the first change to an index page after a
    checkpoint logs the whole page, so a checkpoint falling in the middle of one run and not
    another would tilt the comparison.
    """
    admin.execute(f"TRUNCATE {TABLE}")
    admin.execute("CHECKPOINT")


def count_jobs(admin: psycopg.Connection) -> int:
    return admin.execute(f"SELECT count(*) FROM {TABLE}").fetchone()[0]


def settle_table(admin: psycopg.Connection, table: str = TABLE) -> None:
    """VACUUM ANALYZE, then CHECKPOINT: the state every drain starts from.

    VACUUM sets the hint bits and visibility map the first reader would otherwise set (and pay
    for) during the timed drain; ANALYZE gives every scenario's claims the same plan; CHECKPOINT
    makes every run pay the same full-page writes (see reset()).
    """
    admin.execute(f"VACUUM ANALYZE {table}")
    admin.execute("CHECKPOINT")


def fill(admin: psycopg.Connection, queue: str, jobs: int) -> None:
    """An empty table, then `jobs` waiting jobs in `queue` (Boss.insert, FILL_BATCH a call),
    vacuumed, analysed and checkpointed."""
    admin.execute(f"TRUNCATE {TABLE}")
    boss = Boss()
    for start in range(0, jobs, FILL_BATCH):
        boss.insert(queue, [{"data": {"i": i}} for i in range(start, min(start + FILL_BATCH, jobs))])
    settle_table(admin)


def transactions(admin: psycopg.Connection) -> int:
    """The database's committed transactions so far (pg_stat_database.xact_commit)."""
    admin.execute("SELECT pg_stat_clear_snapshot()")
    return admin.execute(
        "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
    ).fetchone()[0]


def last_completed(admin: psycopg.Connection, queue: str, jobs: int, label: str) -> float:
    """The epoch of the queue's last completed_on, once every one of its `jobs` is completed
    (a drain that lost jobs would look fast: its figure is refused instead)."""
    last, completed = admin.execute(
        f"SELECT extract(epoch FROM max(completed_on))::float8, count(*) FILTER (WHERE state = 'completed') "
        f"FROM {TABLE} WHERE name = %s",
        (queue,),
    ).fetchone()
    if completed != jobs:
        raise SystemExit(f"{label}: {completed} of {jobs} jobs completed")
    return last


# -- drains in child processes ---------------------------------------------------------------------


def start_children(
    target: Callable[..., None], args: tuple, processes: int, label: str, timeout: float = 60
) -> tuple[list[Any], Any]:
    """Spawn `processes` children running target(*args, ready, go) and wait until each has
    released `ready` (Django imported, nothing timed yet); returns the children and `go`, the
    event the caller sets when its clock starts."""
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Semaphore(0)
    go = ctx.Event()
    children = [ctx.Process(target=target, args=(*args, ready, go)) for _ in range(processes)]
    for child in children:
        child.start()
    for _ in children:
        if not ready.acquire(timeout=timeout):
            raise SystemExit(f"{label}: a process did not start within {timeout:g} s")
    return children, go


def join_children(children: list[Any], label: str, timeout: float = 600) -> None:
    for child in children:
        child.join(timeout=timeout)
        if child.exitcode != 0:
            raise SystemExit(f"{label}: a process exited with {child.exitcode}")


# -- alternating rounds ----------------------------------------------------------------------------


def alternate(
    admin: psycopg.Connection,
    scenarios: Sequence[tuple[str, int, Callable[[int], object]]],
    repeat: int,
) -> dict[str, list[float]]:
    """Run every (label, jobs, run) once per repeat, in turn, so a drift of the machine hits them
    all; each run starts from an empty, checkpointed table (reset()) and must leave exactly `jobs`
    jobs in it. Returns the seconds of each label's runs."""
    seconds: dict[str, list[float]] = {label: [] for label, _, _ in scenarios}
    width = max(len(label) for label, _, _ in scenarios)
    for index in range(repeat):
        for label, jobs, run in scenarios:
            reset(admin)
            started = time.perf_counter()
            run(jobs)
            elapsed = time.perf_counter() - started
            inserted = count_jobs(admin)
            if inserted != jobs:
                raise SystemExit(f"{label}: inserted {inserted} jobs, expected {jobs}")
            seconds[label].append(elapsed)
            print(
                f"  run {index + 1}/{repeat} {label:<{width}} {jobs / elapsed:>10,.0f} jobs/s  (load {load_average()})",
                file=sys.stderr,
                flush=True,
            )
    reset(admin)
    return seconds


# -- what was measured -----------------------------------------------------------------------------


def server_facts(admin: psycopg.Connection) -> dict[str, str]:
    names = (
        "server_version",
        "fsync",
        "synchronous_commit",
        "full_page_writes",
        "wal_sync_method",
        "shared_buffers",
        "max_wal_size",
    )
    return {name: admin.execute("SELECT current_setting(%s)", (name,)).fetchone()[0] for name in names}


def source_revision() -> str:
    """The commit of the django_pgboss being measured, flagged when its files differ from it.

    The figures belong to one version of Boss's SQL and Python; this line ties them to it.
    """

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(REPO_ROOT), *args], capture_output=True, text=True, check=True
        ).stdout.strip()

    try:
        commit = git("rev-parse", "--short", "HEAD")
        dirty = git("status", "--porcelain", "--", "django_pgboss")
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    return commit + (" + uncommitted changes in django_pgboss/" if dirty else "")


def memory_total() -> str:
    with open("/proc/meminfo") as meminfo:
        kib = int(meminfo.readline().split()[1])
    return f"{kib / 1024 / 1024:.1f} GiB"


def load_average() -> str:
    """The machine's load average (1, 5 and 15 minutes), printed beside every figure."""
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def process_schedstat(pid: int) -> tuple[int, int]:
    """Nanoseconds a process has run on a CPU and waited for one so far: the scheduler's own
    counts (/proc/<pid>/schedstat), which a loaded machine moves less than the wall clock. The
    process must run on this machine (a backend of a local cluster)."""
    running, waiting, _slices = Path(f"/proc/{pid}/schedstat").read_text().split()
    return int(running), int(waiting)
