"""A mixed fleet under a kill -9 storm: django_pgboss's and pg-boss's workers on the same queues.

The harness tests/test_mixed_fleet.py runs at a small scale and bench/mixed_fleet.py at 20,000
jobs. It starts ``manage.py pgboss_work`` processes (tests/fleetapp) and pg-boss 12.38.0 workers
(tests/node/fleet.mjs) on two queues, and two monitors, our ``pgboss_monitor`` on one queue and
pg-boss's own supervisor on the other (the plan says which; the test lets its seed decide); sends
the plan's jobs from both sides, spread over a while; and meanwhile kills a process with SIGKILL at
random moments: a worker while it runs a job, each side in turn, and a monitor now and then,
starting a fresh one of the same kind in its place. The killed jobs come back through the monitors:
on one queue through their expiry, on the other when their heartbeat stops, each queue's by the
monitor it has, whichever side's worker ran them.

Every handler appends a ``run`` line to the ledger file before its work (outside any
transaction, so a killed attempt's line stays) and writes its effect, a row of the effect table,
inside the transaction that completes the job, so a row exists exactly when that attempt
completed. ``check()`` (tests/fleet_verdict.py, which says how a retry is explained) then reads the
job rows, the ledger, the effects and the kills, and names every job lost, completed twice, or
retried without a kill to explain it.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict, deque
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from django.db import connection

from django_pgboss import boss
from django_pgboss.conf import pgboss_settings
from django_pgboss.db.identifiers import quote_identifier
from tests.fleet_verdict import FleetResult, JobRow, Kill, Run, check
from tests.fleetapp import CONCURRENCY, EFFECT_TABLE, EXPIRY_QUEUE, HEARTBEAT_QUEUE, LEDGER_ENV, QUEUES

NODE_SCRIPT = Path(__file__).resolve().parent / "node" / "fleet.mjs"
MONITOR_ROLES = ("python-monitor", "node-monitor")
#: The order the storm picks its victims in: each side's workers in turn, a monitor now and then.
VICTIMS = ("python-worker", "node-worker", "python-worker", "node-worker", "monitor")
#: What each kind of process prints once it works.
READY = {
    "python-worker": "worker started:",
    "python-monitor": "monitor started:",
    "node-worker": '{"ready":true}',
    "node-monitor": '{"ready":true}',
}
#: What pgboss_monitor prints after each pass.
PASS_LINE = re.compile(r"(?P<expired>\d+) expired and (?P<stalled>\d+) stalled job\(s\) failed for retry")


@dataclass(frozen=True)
class FleetPlan:
    """The size of the fleet, its jobs, and the storm."""

    jobs: int = 300
    send_seconds: float = 10.0
    python_workers: int = 2
    node_workers: int = 2
    #: Each job's handler sleeps a random whole number of milliseconds in this range.
    handler_ms: tuple[int, int] = (50, 250)
    #: Seconds between two kills, drawn at random in this range while the jobs flow.
    kill_every: tuple[float, float] = (0.6, 1.4)
    expire_in_seconds: int = 5
    heartbeat_seconds: int = 10
    retry_limit: int = 10
    settle_seconds: float = 60.0
    #: The storm ends once every job was sent and no more than this many are left to settle.
    calm: int = 20
    start_seconds: float = 120.0
    #: The queue our monitor keeps (pg-boss's supervisor keeps the other).
    our_monitor_on: str = EXPIRY_QUEUE
    seed: int = 0

    @property
    def pgboss_monitor_on(self) -> str:
        return QUEUES[1 - QUEUES.index(self.our_monitor_on)]


@dataclass(frozen=True)
class Launch:
    """How the fleet's processes are started: the Python side's settings, pg-boss's folder."""

    python_env: dict[str, str]
    node_dir: str
    database_url: str
    cwd: Path


@dataclass
class Member:
    """One process of the fleet and where its output goes."""

    role: str
    process: subprocess.Popen
    log: Path
    killed: bool = False


# -- the ledger --------------------------------------------------------------------------------------


class Ledger:
    """The handlers' run and end lines, read as they grow."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.path.touch()
        self.lines: list[Run] = []
        self._offset = 0
        self._open: dict[int, set[tuple[str, int]]] = defaultdict(set)

    def read(self) -> None:
        with self.path.open("rb") as f:
            f.seek(self._offset)
            chunk = f.read()
        # Only whole lines: a handler may be writing the next one right now.
        whole = chunk[: chunk.rfind(b"\n") + 1]
        self._offset += len(whole)
        for text in whole.decode().splitlines():
            event, queue, job_id, attempt, side, pid, at = text.split()
            line = Run(event, queue, job_id, int(attempt), side, int(pid), float(at))
            self.lines.append(line)
            key = (line.job_id, line.attempt)
            if event == "run":
                self._open[line.pid].add(key)
            else:
                self._open[line.pid].discard(key)

    def running(self, pid: int) -> int:
        """How many jobs the process has started and not finished, as far as the ledger knows."""
        return len(self._open.get(pid, ()))

    def runs(self) -> dict[str, dict[int, list[Run]]]:
        by_job: dict[str, dict[int, list[Run]]] = defaultdict(lambda: defaultdict(list))
        for line in self.lines:
            if line.event == "run":
                by_job[line.job_id][line.attempt].append(line)
        return by_job


# -- the processes -----------------------------------------------------------------------------------


class Fleet:
    """The fleet's processes: started, killed and replaced, stopped."""

    def __init__(self, plan: FleetPlan, launch: Launch, directory: Path, ledger: Ledger) -> None:
        self.plan, self.launch, self.directory, self.ledger = plan, launch, directory, ledger
        self.members: list[Member] = []
        self.kills: list[Kill] = []
        self.crashes: list[str] = []
        self._started = 0

    def command(self, role: str) -> tuple[list[str], dict[str, str]]:
        queue_args = [arg for queue in QUEUES for arg in ("--queue", queue)]
        python_env = {**self.launch.python_env, LEDGER_ENV: str(self.ledger.path), "PYTHONUNBUFFERED": "1"}
        node_env = {**os.environ, "PGBOSS_NODE_DIR": self.launch.node_dir}
        node_role = {"node-worker": "work", "node-monitor": "supervise"}.get(role, "")
        node = ["node", str(NODE_SCRIPT), node_role, self.launch.database_url, node_schema()]
        if role == "python-worker":
            return [sys.executable, "-m", "django", "pgboss_work", *queue_args], python_env
        if role == "python-monitor":
            monitor = ["pgboss_monitor", "--interval", "1", "--queue", self.plan.our_monitor_on]
            return [sys.executable, "-m", "django", *monitor], python_env
        if role == "node-worker":
            extra = [str(self.ledger.path), EFFECT_TABLE, json.dumps(QUEUES), str(CONCURRENCY)]
            return [*node, *extra], node_env
        if role == "node-monitor":
            return [*node, self.plan.pgboss_monitor_on], node_env
        raise ValueError(f"no such role {role!r}")

    def start(self, role: str) -> Member:
        self._started += 1
        log = self.directory / f"{self._started:03d}-{role}.log"
        argv, env = self.command(role)
        with log.open("w") as out:
            process = subprocess.Popen(
                argv, cwd=self.launch.cwd, env=env, stdout=out, stderr=subprocess.STDOUT
            )
        member = Member(role, process, log)
        self.members.append(member)
        return member

    def start_all(self) -> None:
        for role, count in (
            ("python-worker", self.plan.python_workers),
            ("node-worker", self.plan.node_workers),
            ("python-monitor", 1),
            ("node-monitor", 1),
        ):
            for _ in range(count):
                self.start(role)

    def wait_ready(self, timeout: float) -> None:
        """Wait until every process started so far says it is working (a loaded machine may take a
        while to start Django), so the storm begins on a fleet that runs."""
        deadline = time.monotonic() + timeout
        waiting = list(self.alive())
        while waiting and time.monotonic() < deadline:
            self.watch()
            waiting = [
                m for m in waiting if m.process.poll() is None and READY[m.role] not in m.log.read_text()
            ]
            time.sleep(0.1)
        if waiting:
            raise AssertionError(f"not started within {timeout}s: {[m.role for m in waiting]}")

    def alive(self, role: str | None = None) -> list[Member]:
        return [
            m for m in self.members if not m.killed and m.process.poll() is None and role in (None, m.role)
        ]

    def watch(self) -> None:
        """Note every process that ended without being killed (and start another in its place)."""
        for member in self.members:
            if not member.killed and member.process.poll() is not None:
                member.killed = True
                tail = member.log.read_text(errors="replace")[-2000:]
                self.crashes.append(
                    f"{member.role} pid {member.process.pid} exited by itself with status "
                    f"{member.process.returncode}:\n{tail}"
                )
                # A process that keeps failing to start is reported, not restarted for ever.
                if len(self.crashes) <= 5:
                    self.start(member.role)

    def kill(self, role: str, rng: random.Random) -> Kill | None:
        """SIGKILL one worker of ``role`` running a job (None when none is), or a monitor, and start
        another of the same kind in its place."""
        if role == "monitor":
            candidates = [m for m in self.alive() if m.role in MONITOR_ROLES]
        else:
            candidates = [m for m in self.alive(role) if self.ledger.running(m.process.pid)]
        if not candidates:
            return None
        victim = rng.choice(candidates)
        role = victim.role
        victim.killed = True
        victim.process.send_signal(signal.SIGKILL)
        victim.process.wait()
        # Taken once the process is gone: every run line it wrote is older than this.
        kill = Kill(role, victim.process.pid, time.time())
        self.kills.append(kill)
        self.start(role)
        return kill

    def reclaimed_by_our_monitor(self) -> int:
        """The expired and stalled jobs our monitors said they failed for retry (their log lines)."""
        found = 0
        for member in self.members:
            if member.role == "python-monitor":
                for match in PASS_LINE.finditer(member.log.read_text(errors="replace")):
                    found += int(match["expired"]) + int(match["stalled"])
        return found

    def stop(self) -> None:
        for member in self.alive():
            member.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 20
        for member in self.alive():
            try:
                member.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                member.process.kill()
                member.process.wait()


def node_schema() -> str:
    """The schema spelled as a pg-boss user configures it: quoted only when the name needs it."""
    return quote_identifier(pgboss_settings.SCHEMA)


# -- the database ------------------------------------------------------------------------------------


def prepare(plan: FleetPlan) -> None:
    """The two queues, fresh, and an empty effect table."""
    for queue in QUEUES:
        if boss.get_queue(queue) is not None:
            boss.delete_queue(queue)
    boss.create_queue(
        EXPIRY_QUEUE, expire_in_seconds=plan.expire_in_seconds, retry_limit=plan.retry_limit, retry_delay=0
    )
    # Its expiry is far off, so only the heartbeat can bring a killed job of this queue back.
    boss.create_queue(
        HEARTBEAT_QUEUE,
        heartbeat_seconds=plan.heartbeat_seconds,
        expire_in_seconds=600,
        retry_limit=plan.retry_limit,
        retry_delay=0,
    )
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {EFFECT_TABLE}")
        cursor.execute(
            f"CREATE TABLE {EFFECT_TABLE} (job_id uuid NOT NULL, queue text NOT NULL, attempt int NOT NULL, "
            "side text NOT NULL, pid int NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())"
        )


def drop_effects() -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {EFFECT_TABLE}")


def job_rows(ids: Iterable[str]) -> dict[str, JobRow]:
    schema = quote_identifier(pgboss_settings.SCHEMA)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id::text, name, state::text, retry_count, extract(epoch FROM created_on)::float8, "
            f"extract(epoch FROM completed_on)::float8 FROM {schema}.job "
            "WHERE name = ANY(%s) AND id = ANY(%s::uuid[])",
            [list(QUEUES), list(ids)],
        )
        return {row[0]: JobRow(*row[1:]) for row in cursor.fetchall()}


def settled() -> int:
    """How many jobs of the fleet's queues are completed or failed (the queues hold only the plan's)."""
    schema = quote_identifier(pgboss_settings.SCHEMA)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*) FROM {schema}.job WHERE name = ANY(%s) AND state IN ('completed', 'failed')",
            [list(QUEUES)],
        )
        return cursor.fetchone()[0]


def effects() -> list[tuple[str, str, int, str, int]]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT job_id::text, queue, attempt, side, pid FROM {EFFECT_TABLE}")
        return cursor.fetchall()


# -- the storm ---------------------------------------------------------------------------------------


def job_plan(plan: FleetPlan, rng: random.Random) -> list[tuple[str, dict]]:
    low, high = plan.handler_ms
    return [(rng.choice(QUEUES), {"ms": rng.randint(low, high)}) for _ in range(plan.jobs)]


def send_python(jobs: list[tuple[str, dict]], seconds: float, ids: list[str], errors: list[str]) -> None:
    """Send ``jobs`` with boss.send(), spread evenly over ``seconds`` (a thread of the harness)."""
    try:
        start = time.monotonic()
        for i, (queue, data) in enumerate(jobs):
            delay = start + i * seconds / len(jobs) - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            job_id = boss.send(queue, data)
            if job_id is None:
                errors.append(f"send() to {queue} returned no id")
            else:
                ids.append(job_id)
    except Exception as exc:  # reported as a problem of the run, not lost with the thread
        errors.append(f"the Python sender failed: {exc!r}")
    finally:
        connection.close()


def storm(plan: FleetPlan, launch: Launch, directory: Path) -> FleetResult:
    """Run the fleet through the plan's storm until every job settled (or the time is up); check it."""
    rng = random.Random(plan.seed)
    prepare(plan)
    ledger = Ledger(directory / "ledger.txt")
    fleet = Fleet(plan, launch, directory, ledger)
    jobs = job_plan(plan, rng)
    python_jobs, node_jobs = jobs[: plan.jobs // 2], jobs[plan.jobs // 2 :]
    (directory / "node-plan.json").write_text(json.dumps(node_jobs))
    python_ids: list[str] = []
    send_errors: list[str] = []
    started = time.time()
    node_sender: subprocess.Popen | None = None
    try:
        fleet.start_all()
        fleet.wait_ready(plan.start_seconds)
        ready_at = time.time()
        send = [str(directory / "node-plan.json"), str(plan.send_seconds), str(directory / "node-ids.json")]
        with (directory / "node-sender.log").open("w") as out:
            node_sender = subprocess.Popen(
                ["node", str(NODE_SCRIPT), "send", launch.database_url, node_schema(), *send],
                cwd=launch.cwd,
                env={**os.environ, "PGBOSS_NODE_DIR": launch.node_dir},
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        sender = threading.Thread(
            target=send_python, args=(python_jobs, plan.send_seconds, python_ids, send_errors), daemon=True
        )
        sender.start()
        victims = deque(VICTIMS)
        next_kill = time.monotonic() + rng.uniform(*plan.kill_every)
        # The storm lasts as long as the jobs flow: while they are sent, and then while the backlog a
        # slower fleet built up drains, until only the plan's last few are left to settle.
        flowing, next_count, drained_by = True, 0.0, None
        while flowing:
            time.sleep(0.02)
            ledger.read()
            fleet.watch()
            if time.monotonic() >= next_count:
                sending = sender.is_alive() or node_sender.poll() is None
                if not sending and drained_by is None:
                    drained_by = time.monotonic() + plan.settle_seconds
                flowing = sending or (settled() < plan.jobs - plan.calm and time.monotonic() < drained_by)
                next_count = time.monotonic() + 0.5
            # A worker is killed only while it runs a job; until one of that side does, the kill waits.
            if time.monotonic() >= next_kill and fleet.kill(victims[0], rng):
                victims.rotate(-1)
                next_kill = time.monotonic() + rng.uniform(*plan.kill_every)
        sender.join()
        if node_sender.wait() != 0:
            send_errors.append(f"the pg-boss sender failed:\n{(directory / 'node-sender.log').read_text()}")
            node_ids: list[str] = []
        else:
            node_ids = json.loads((directory / "node-ids.json").read_text())
        sent = {job_id: "python" for job_id in python_ids} | {job_id: "node" for job_id in node_ids}
        storm_ended_at = time.time()
        deadline = time.monotonic() + plan.settle_seconds
        while settled() < len(sent) and time.monotonic() < deadline:
            time.sleep(0.5)
            fleet.watch()
        settled_at = time.time()
    finally:
        if node_sender is not None and node_sender.poll() is None:
            node_sender.kill()
            node_sender.wait()
        fleet.stop()
    ledger.read()
    result = check(sent, job_rows(sent), ledger.runs(), effects(), fleet.kills, settled_at)
    result.problems[:0] = send_errors + fleet.crashes
    result.reclaimed_by_our_monitor = fleet.reclaimed_by_our_monitor()
    result.seconds = settled_at - started
    result.phases = {
        "start": ready_at - started,
        "storm": storm_ended_at - ready_at,
        "settle": settled_at - storm_ended_at,
    }
    return result
