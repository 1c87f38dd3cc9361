"""Flow benchmark: a 10,000-job flow inserted, resolved by the monitor's flow pass, and drained.

    bash bench/cluster.sh start
    .venvs/py3.11-Django__5.2/bin/python bench/flows.py [--children 9999] [--repeat 3]
    bash bench/cluster.sh stop

Two shapes, each --repeat times, on two queues of job_common (bench_flow_parent, bench_flow_child):

1. Fan-out: one parent, --children children (9,999 by default: 10,000 jobs). boss.flow() inserts
   it (timed); the parent is fetched and completed; then monitor passes (Monitor.resolve_flows(),
   the pass pgboss_monitor runs every FLOW_INTERVAL_SECONDS, here without its cadence gate) run
   until no child is blocked: the number of passes and each one's wall time. Then what the admin
   reads of it: boss.get_flow() from a child (the flow page; it stops at 2,000 edges) and the
   root's first 51 children (its job page). Then the children are drained (fetch 100, complete)
   to show they are all fetchable.
2. Fan-in: --children parents, one child. The parents are completed (fetch 1,000 at a time), then
   passes run until the child is unblocked: --children completed parents is that many / 1,000
   resolve statements (FLOW_BATCH_SIZE), all inside one pass (at most 100 per pass).

What is claimed is the pass count, which the design bounds (one pass for the fan-out, however
wide; ceil(parents / 100,000) for the fan-in); times are for this machine only.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

from bench.common import source_revision  # noqa: E402
from django_pgboss.api.boss import Boss  # noqa: E402
from django_pgboss.api.flows import FlowJob  # noqa: E402
from django_pgboss.monitor import Monitor  # noqa: E402

PARENT, CHILD = "bench_flow_parent", "bench_flow_child"


def blocked(name: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*) FROM {Boss().context.quoted_schema}.job WHERE name = %s AND blocked", [name]
        )
        return cursor.fetchone()[0]


def passes_until(done, monitor: Monitor) -> tuple[int, list[float], int]:
    """Run flow passes until ``done()``; returns (passes, each pass's seconds, parents resolved)."""
    times: list[float] = []
    resolved = 0
    while not done():
        start = time.perf_counter()
        resolved += monitor.resolve_flows(gated=False).resolved
        times.append(time.perf_counter() - start)
        if len(times) > 1000:
            raise RuntimeError("the flow did not resolve within 1,000 passes")
    return len(times), times, resolved


def drain(boss: Boss, name: str, batch: int) -> int:
    total = 0
    while jobs := boss.fetch(name, batch_size=batch):
        boss.complete(name, [j.id for j in jobs])
        total += len(jobs)
    return total


def reset(boss: Boss) -> None:
    for name in (PARENT, CHILD):
        boss.delete_queue(name)
        boss.create_queue(name)
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {boss.context.quoted_schema}.job_dependency")
        cursor.execute(f"VACUUM ANALYZE {boss.context.quoted_schema}.job_common")


def fan_out(boss: Boss, monitor: Monitor, children: int) -> dict[str, float]:
    reset(boss)
    jobs = [FlowJob("root", PARENT, {"n": 0})] + [
        FlowJob(f"c{i}", CHILD, {"n": i}, depends_on=["root"]) for i in range(children)
    ]
    start = time.perf_counter()
    ids = boss.flow(jobs)
    insert = time.perf_counter() - start
    (root,) = boss.fetch(PARENT)
    boss.complete(PARENT, root)
    passes, times, resolved = passes_until(lambda: blocked(CHILD) == 0, monitor)
    # What the admin reads for such a flow: the flow page's graph (from a child, so the walk goes
    # through the root), and the root's page's first 51 children.
    start = time.perf_counter()
    graph = boss.get_flow(CHILD, ids["c5"])
    graph_seconds = time.perf_counter() - start
    assert graph.truncated
    start = time.perf_counter()
    boss.get_flow_jobs(PARENT, ids["root"], parents=False, limit=51)
    listed_seconds = time.perf_counter() - start
    start = time.perf_counter()
    drained = drain(boss, CHILD, 100)
    drain_seconds = time.perf_counter() - start
    assert drained == children, drained
    return {
        "insert_s": insert,
        "passes": passes,
        "pass_s": sum(times),
        "resolved": resolved,
        "get_flow_s": graph_seconds,
        "children_s": listed_seconds,
        "drain_s": drain_seconds,
    }


def fan_in(boss: Boss, monitor: Monitor, parents: int) -> dict[str, float]:
    reset(boss)
    jobs = [FlowJob(f"p{i}", PARENT, {"n": i}) for i in range(parents)] + [
        FlowJob("sink", CHILD, depends_on=[f"p{i}" for i in range(parents)])
    ]
    start = time.perf_counter()
    boss.flow(jobs)
    insert = time.perf_counter() - start
    assert drain(boss, PARENT, 1000) == parents
    passes, times, resolved = passes_until(lambda: blocked(CHILD) == 0, monitor)
    return {"insert_s": insert, "passes": passes, "pass_s": sum(times), "resolved": resolved}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--children", type=int, default=9999)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    boss = Boss()
    monitor = Monitor(cron=False)
    print(f"django_pgboss {source_revision()}; {args.children + 1} jobs per flow, {args.repeat} runs")
    for label, run in (("fan-out 1 -> N", fan_out), ("fan-in N -> 1", fan_in)):
        results = [run(boss, monitor, args.children) for _ in range(args.repeat)]
        print(f"\n{label} (N = {args.children}):")
        for key in results[0]:
            values = [r[key] for r in results]
            shown = ", ".join(f"{v:.3f}" if isinstance(v, float) else str(v) for v in values)
            median = statistics.median(values)
            print(f"  {key:10} median {median:.3f}   runs: {shown}")
    for name in (PARENT, CHILD):
        boss.delete_queue(name)


if __name__ == "__main__":
    main()
