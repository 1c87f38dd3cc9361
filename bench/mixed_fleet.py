"""Mixed fleet bench: django_pgboss's and pg-boss 12.38.0's workers on the same queues under a kill -9 storm.

    PGBOSS_BENCH_PORT=55450 bash bench/cluster.sh start
    .venvs/py3.11-Django__5.2__5.3/bin/python bench/mixed_fleet.py [--jobs 20000 --send-seconds 120]
    PGBOSS_BENCH_PORT=55450 bash bench/cluster.sh stop

The test suite's harness (tests/fleet.py, whose docstring says what runs and what is checked) at
scale: ``manage.py pgboss_work`` processes and pg-boss 12.38.0 workers (tests/node/fleet.mjs) on
two transactional queues, one whose killed jobs come back through their expiry and one through their
heartbeat, our ``pgboss_monitor`` keeping one queue and pg-boss's supervisor the other; the jobs sent
half by Boss.send() in this process and half by pg-boss's send(), spread over --send-seconds, while
a worker running a job is killed with SIGKILL every --kill-every seconds (a monitor every fifth
kill) and replaced, for as long as jobs flow: the sends, then the backlog a slower fleet built up,
until the last 20 are left to settle. When every job has settled it prints what it found: jobs lost, completed twice,
retried without a kill to explain it (each named, the first 20), who completed what, the kills and
the attempts they cost, and the fleet's throughput, jobs completed per second from the first send
to the last completion. --no-kills runs the same fleet without the storm, for comparison.

It connects to DATABASE_URL (default: bench/cluster.sh's cluster) with bench/fleet_settings.py,
migrates, and deletes its two queues and its effect table when done. It needs Node 20 and pg-boss
12.38.0 in .venvs/node (`bash scripts/test.sh -q tests/test_send.py` installs it).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.fleet_settings")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

from bench.common import load_average, raw_connection, server_facts, source_revision  # noqa: E402
from django_pgboss import boss  # noqa: E402
from tests.fleet import FleetPlan, Launch, drop_effects, storm  # noqa: E402
from tests.fleetapp import QUEUES  # noqa: E402


def database_url() -> str:
    s = connection.settings_dict
    password = f":{s['PASSWORD']}" if s["PASSWORD"] else ""
    return f"postgres://{s['USER']}{password}@{s['HOST']}:{s['PORT'] or 5432}/{s['NAME']}"


def milliseconds(text: str) -> tuple[int, int]:
    low, high = (int(part) for part in text.split(","))
    return low, high


def seconds(text: str) -> tuple[float, float]:
    low, high = (float(part) for part in text.split(","))
    return low, high


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000, help="jobs sent, half by each side (20000)")
    parser.add_argument(
        "--send-seconds", type=float, default=120.0, help="seconds the sends are spread over (120)"
    )
    parser.add_argument("--python-workers", type=int, default=2, help="pgboss_work processes (2)")
    parser.add_argument("--node-workers", type=int, default=2, help="pg-boss worker processes (2)")
    parser.add_argument(
        "--handler-ms", type=milliseconds, default=(0, 20), help="a handler's sleep, LOW,HIGH ms (0,20)"
    )
    parser.add_argument(
        "--kill-every", type=seconds, default=(1.0, 3.0), help="seconds between kills, LOW,HIGH (1,3)"
    )
    parser.add_argument("--no-kills", action="store_true", help="the same fleet without the storm")
    parser.add_argument(
        "--expire-in-seconds", type=int, default=5, help="the expiry queue's expire_in_seconds (5)"
    )
    parser.add_argument(
        "--heartbeat-seconds", type=int, default=10, help="the heartbeat queue's heartbeat_seconds (10)"
    )
    parser.add_argument("--seed", type=int, default=None, help="the storm's seed (random)")
    parser.add_argument("--keep", action="store_true", help="keep the ledger and the processes' logs")
    args = parser.parse_args()
    # A SIGTERM ends the run through its finally blocks, so the fleet's processes are stopped too.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(143))

    call_command("migrate", verbosity=0)
    seed = random.randrange(2**32) if args.seed is None else args.seed
    plan = FleetPlan(
        jobs=args.jobs,
        send_seconds=args.send_seconds,
        python_workers=args.python_workers,
        node_workers=args.node_workers,
        handler_ms=args.handler_ms,
        # A kill interval longer than the run is no storm at all.
        kill_every=(1e9, 1e9) if args.no_kills else args.kill_every,
        expire_in_seconds=args.expire_in_seconds,
        heartbeat_seconds=args.heartbeat_seconds,
        settle_seconds=max(600.0, args.jobs / 20),
        our_monitor_on=QUEUES[seed % 2],
        seed=seed,
    )
    node_dir = REPO_ROOT / ".venvs" / "node"
    if not (node_dir / "node_modules" / "pg-boss").is_dir() or shutil.which("node") is None:
        sys.exit(
            "mixed_fleet: needs node on PATH and pg-boss 12.38.0 in .venvs/node (bash scripts/test.sh installs it)"
        )
    launch = Launch(
        python_env={
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "bench.fleet_settings",
            "DATABASE_URL": database_url(),
            "PYTHONPATH": str(REPO_ROOT),
        },
        node_dir=str(node_dir),
        database_url=database_url(),
        cwd=REPO_ROOT,
    )
    with raw_connection() as admin:
        facts = server_facts(admin)
    print(f"django_pgboss at {source_revision()}; pg-boss 12.38.0; PostgreSQL {facts['server_version']}")
    print(f"server: {', '.join(f'{k} {v}' for k, v in facts.items() if k != 'server_version')}")
    print(
        f"plan: {plan.jobs} jobs over {plan.send_seconds:g}s, {plan.python_workers} pgboss_work + "
        f"{plan.node_workers} pg-boss workers (concurrency 3 per queue, transactional), handlers "
        f"{plan.handler_ms[0]}-{plan.handler_ms[1]} ms, "
        + ("no kills" if args.no_kills else f"a kill every {plan.kill_every[0]:g}-{plan.kill_every[1]:g}s")
        + f"; our monitor on {plan.our_monitor_on}, pg-boss's on {plan.pgboss_monitor_on}; seed {seed}"
    )
    print(f"load average before: {load_average()}")
    directory = Path(tempfile.mkdtemp(prefix="pgboss-fleet-"))
    started = time.monotonic()
    try:
        result = storm(plan, launch, directory)
    finally:
        drop_effects()
        for queue in QUEUES:
            if boss.get_queue(queue) is not None:
                boss.delete_queue(queue)
    print(f"load average after: {load_average()}; {time.monotonic() - started:.0f}s in all")
    print(result.summary())
    for problem in result.problems[:20]:
        print(f"  PROBLEM: {problem}")
    if len(result.problems) > 20:
        print(f"  ... and {len(result.problems) - 20} more")
    print(
        f"throughput: {result.jobs_per_second:.0f} jobs/s completed, first send to last completion "
        f"({len(result.sent)} jobs, {sum(result.retried_by_kill_of.values())} attempts lost to kills)"
    )
    if args.keep or result.problems:
        print(f"ledger and logs kept in {directory}")
    else:
        shutil.rmtree(directory)
    sys.exit(1 if result.problems else 0)


if __name__ == "__main__":
    main()
