"""Scale bench: the peers workloads on one PostgreSQL and on a 3-node Citus cluster, in one run.

    PGBOSS_BENCH_PORT=55450 PGBOSS_CITUS_PORT=25510 bash bench/citus_cluster.sh start
    .venvs/py3.11-Django__5.2__5.3/bin/python bench/citus_scale.py [--rounds 3] [--move-jobs 100000]
    bash bench/citus_cluster.sh stop

Three targets run each workload, alternating within every round, the order rotated from one round
to the next (round r starts with target r), so that a drift of this shared machine hits all three:

  postgres           one PostgreSQL (bench/cluster.sh), PGBOSS["BACKEND"] = "postgres"
  citus              the Citus coordinator, its tables local to it (pg-boss's own Citus profile)
  citus-distributed  the same cluster, the job table distributed by name over the two workers

All are durable (fsync, synchronous_commit and full_page_writes on, as the peers run) and on this
one machine. The workloads are bench/peers.py's, spread over --queues queues (4) instead of one:

  insert    Boss.insert() of 1,000 jobs a call, the calls taking the queues in turn, one client
  send      Boss.send() of one job a call, awaited in turn, the jobs taking the queues in turn
  drain-1   ONE process, `manage.py pgboss_work --queue Q ... --concurrency 1 --batch-size 1
            --burst`: a fetch loop and a handler thread per queue (4 in all, the peers' concurrency)
  drain-50  the same at --batch-size 50

The queues' names are chosen so that the distributed job table's shards holding them are split
evenly over the two workers: candidate names are taken in order and each is kept while its
worker (the node of get_shard_id_for_distribution_column()'s shard, from citus_shards) holds
fewer than its half. The same names are used on every target.

Per workload and target it prints the median rate and the median of its per-round ratio to the
PostgreSQL target's; the statements a job, from pg_stat_statements on each node (reset before
each timed part: top-level statements, no utility ones, neither the reading query nor the foreign
keys' checks that PostgreSQL runs at commit, one a job on the node that holds it; a drain's
counts include its process's start-up, a few dozen statements), and the CPU a job of the client
(this process and its children) and of each node's processes (the postmaster's tree read from
/proc, bench/peers.py's server_cpu()), with the coordinator's share of the cluster's CPU.

--move-jobs N then measures a rebalance on the distributed target: one queue filled with N jobs,
its shard group moved to the other worker with citus_move_shard_placement() (block_writes, the
mode that needs no logical replication) while a sender keeps sending to that queue and another
to a queue on the other worker, then citus_rebalance_start() and citus_rebalance_wait() to even
the shard counts again; prints each step's time, what moved and the senders' longest waits.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import NamedTuple

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.peers_settings")

import psycopg  # noqa: E402

from bench.common import load_average, memory_total, server_facts, source_revision  # noqa: E402
from bench.peers import client_cpu, server_cpu  # noqa: E402

SCHEMA = "pgboss"
TABLE = f"{SCHEMA}.job_common"
PER_CALL = 1000
TARGETS = ("postgres", "citus", "citus-distributed")
WORKLOADS = {
    "insert": "enqueue, 1,000 per insert() call",
    "send": "enqueue, one send() per job",
    "drain-1": "drain, ONE process, batch size 1",
    "drain-50": "drain, ONE process, batch size 50",
}
#: Where each target's database is: (port offset from its cluster's port, database name).
DATABASES = {
    "postgres": "pgboss_bench",
    "citus": "pgboss_bench_local",
    "citus-distributed": "pgboss_bench_dist",
}


class Target(NamedTuple):
    name: str
    url: str  # the database the client connects to (the coordinator's on Citus)
    nodes: dict[str, psycopg.Connection]  # node label -> an admin connection to its copy of the database


def node_url(port: int, database: str) -> str:
    return f"postgres://postgres@127.0.0.1:{port}/{database}"


def connect_targets(postgres_port: int, citus_port: int) -> dict[str, Target]:
    targets = {}
    for name in TARGETS:
        database = DATABASES[name]
        if name == "postgres":
            ports = {"postgres": postgres_port}
        else:
            ports = {"coordinator": citus_port, "worker1": citus_port + 1, "worker2": citus_port + 2}
        nodes = {
            label: psycopg.connect(node_url(port, database), autocommit=True) for label, port in ports.items()
        }
        for label, conn in nodes.items():
            libraries = conn.execute("SHOW shared_preload_libraries").fetchone()[0]
            if "pg_stat_statements" not in libraries:
                raise SystemExit(
                    f"{name} {label}: pg_stat_statements is not preloaded (bench/citus_cluster.sh start)"
                )
        # On Citus the coordinator's CREATE EXTENSION reaches the workers (which refuse their own).
        next(iter(nodes.values())).execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        targets[name] = Target(name, node_url(next(iter(ports.values())), database), nodes)
    return targets


# -- the children: Django and django_pgboss run in them, one target each ---------------------------


def child_env(target: Target, queues: list[str]) -> dict[str, str]:
    return {
        **os.environ,
        "DATABASE_URL": target.url,
        "PGBOSS_BACKEND": target.name,
        "PEERS_QUEUES": ",".join(queues),
        "DJANGO_SETTINGS_MODULE": "bench.peers_settings",
        "PYTHONPATH": str(REPO_ROOT),
    }


def child(target: Target, queues: list[str], *args: str) -> list[str]:
    """Run this script's --child mode against ``target``; returns the words of its last line."""
    done = subprocess.run(
        [sys.executable, __file__, "--child", *args, ",".join(queues)],
        env=child_env(target, queues),
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if done.returncode != 0:
        raise SystemExit(
            f"{target.name}: {' '.join(args)} exited with {done.returncode}: {done.stderr[-3000:]}"
        )
    return done.stdout.strip().splitlines()[-1].split() if done.stdout.strip() else []


def run_child(action: str, arguments: list[str], queues: list[str]) -> None:
    """--child ACTION ...: the django_pgboss side of a run, in a process whose settings name one target."""
    import django

    django.setup()
    from django.core.management import call_command

    from django_pgboss.api.boss import Boss

    boss = Boss()
    if action == "setup":
        call_command("migrate", verbosity=0)
        for name in queues:
            if boss.get_queue(name) is not None:
                boss.delete_queue(name)
            boss.create_queue(name)
        return
    if action == "teardown":
        for name in queues:
            boss.delete_queue(name)
        return
    jobs = int(arguments[0])
    cpu = time.process_time()
    started = time.perf_counter()
    longest = 0.0
    if action == "fill":
        # Each queue its share of the jobs, so that a drain has work on every worker.
        for index, name in enumerate(queues):
            share = range(index, jobs, len(queues))
            for start in range(0, len(share), PER_CALL):
                boss.insert(name, [{"data": {"i": i}} for i in share[start : start + PER_CALL]])
    elif action == "insert":
        for call, start in enumerate(range(0, jobs, PER_CALL)):
            batch = [{"data": {"i": i}} for i in range(start, min(start + PER_CALL, jobs))]
            boss.insert(queues[call % len(queues)], batch)
    elif action == "send":
        for i in range(jobs):
            boss.send(queues[i % len(queues)], {"i": i})
    elif action == "probe":
        # Sends to its one queue until told to stop (a file appears), timing the longest send.
        stop_file = Path(arguments[1])
        print("ready", flush=True)
        while not stop_file.exists():
            sent = time.perf_counter()
            boss.send(queues[0], {"probe": True})
            longest = max(longest, time.perf_counter() - sent)
    else:
        raise SystemExit(f"unknown child action {action}")
    print(time.perf_counter() - started, time.process_time() - cpu, longest)


# -- measuring a timed part ---------------------------------------------------------------------


#: The statements of a node's copy of the database since the last reset, but the reading query and
#: the foreign keys' checks: PostgreSQL runs those at commit, one a job wherever the job is written,
#: and pg_stat_statements counts them as top-level statements though no client sent them.
STATEMENTS = """
SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND query NOT LIKE '%%pg_stat_statements%%'
  AND query NOT LIKE 'SELECT %% FROM ONLY %% FOR KEY SHARE OF x'
"""


class Counters(NamedTuple):
    client: float
    cpu: dict[str, float]  # node -> CPU seconds of its whole cluster so far


def start_counting(target: Target) -> Counters:
    for conn in target.nodes.values():
        conn.execute("SELECT pg_stat_statements_reset()")
    return Counters(client_cpu(), {label: server_cpu(conn) for label, conn in target.nodes.items()})


class Sample(NamedTuple):
    seconds: float
    client_cpu: float
    node_cpu: dict[str, float]
    statements: dict[str, int]


def stop_counting(target: Target, before: Counters, seconds: float) -> Sample:
    cpu = {label: server_cpu(conn) - before.cpu[label] for label, conn in target.nodes.items()}
    statements = {label: conn.execute(STATEMENTS).fetchone()[0] for label, conn in target.nodes.items()}
    return Sample(seconds, client_cpu() - before.client, cpu, statements)


def settle(target: Target, analyze: bool) -> None:
    """The state every run starts from: the table vacuumed and analysed (a drain's), every node checkpointed."""
    coordinator = next(iter(target.nodes.values()))
    if analyze:
        coordinator.execute(f"VACUUM ANALYZE {TABLE}")
    for conn in target.nodes.values():
        conn.execute("CHECKPOINT")


def drain_window(target: Target, queues: list[str], jobs: int) -> float:
    """The drain's time from the rows, first started_on to last completed_on; checks every job."""
    coordinator = next(iter(target.nodes.values()))
    first, last, completed = coordinator.execute(
        f"SELECT extract(epoch FROM min(started_on))::float8, extract(epoch FROM max(completed_on))::float8, "
        f"count(*) FILTER (WHERE state = 'completed') FROM {TABLE} WHERE name = ANY(%s)",
        (queues,),
    ).fetchone()
    if completed != jobs:
        raise SystemExit(f"{target.name}: {completed} of {jobs} jobs completed")
    return last - first


def run(target: Target, workload: str, queues: list[str], jobs: int) -> Sample:
    coordinator = next(iter(target.nodes.values()))
    coordinator.execute(f"TRUNCATE {TABLE}")
    if workload in ("insert", "send"):
        settle(target, analyze=False)
        before = start_counting(target)
        seconds, loop_cpu, _longest = child(target, queues, workload, str(jobs))
        # The child's CPU over its loop alone: its start-up (Django's, a few hundred ms) is no job's.
        sample = stop_counting(target, before, float(seconds))._replace(client_cpu=float(loop_cpu))
        found = coordinator.execute(
            f"SELECT count(*) FROM {TABLE} WHERE name = ANY(%s)", (queues,)
        ).fetchone()[0]
        if found != jobs:
            raise SystemExit(f"{target.name}: {found} of {jobs} jobs enqueued")
        return sample
    startup = startup_cpu(target, queues)
    child(target, queues, "fill", str(jobs))
    settle(target, analyze=True)
    before = start_counting(target)
    drain(target, queues, int(workload.split("-")[1]))
    sample = stop_counting(target, before, 0.0)
    return sample._replace(seconds=drain_window(target, queues, jobs), client_cpu=sample.client_cpu - startup)


def drain(target: Target, queues: list[str], batch_size: int) -> None:
    command = [
        sys.executable,
        "-m",
        "django",
        "pgboss_work",
        "--concurrency",
        "1",
        "--burst",
        "--verbosity",
        "0",
    ]
    command += ["--batch-size", str(batch_size), *(f"--queue={name}" for name in queues)]
    done = subprocess.run(
        command, env=child_env(target, queues), cwd=REPO_ROOT, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"{target.name}: pgboss_work exited with {done.returncode}: {done.stderr[-3000:]}")


STARTUP_CPU: dict[str, float] = {}


def startup_cpu(target: Target, queues: list[str]) -> float:
    """The client CPU of a drain with nothing to drain (imports, Django's set-up and checks), the
    least of two, taken off each drain's (bench/peers.py does the same): it is no job's cost."""
    if target.name not in STARTUP_CPU:
        samples = []
        for _ in range(2):
            before = client_cpu()
            drain(target, queues, 1)
            samples.append(client_cpu() - before)
        STARTUP_CPU[target.name] = min(samples)
    return STARTUP_CPU[target.name]


# -- placement ---------------------------------------------------------------------------------


SHARD_NODE = f"""
SELECT s.shardid, s.nodeport FROM citus_shards s
WHERE s.shardid = get_shard_id_for_distribution_column('{TABLE}', %s::text) AND s.table_name = '{TABLE}'::regclass
"""


def spread_queues(distributed: Target, count: int) -> tuple[list[str], dict[str, tuple[int, int]]]:
    """``count`` queue names whose job_common shards are split evenly over the workers, and
    where each is (shard id, worker port)."""
    coordinator = distributed.nodes["coordinator"]
    workers = sorted(
        row[0]
        for row in coordinator.execute(
            "SELECT nodeport FROM pg_dist_node WHERE noderole = 'primary' AND groupid > 0"
        )
    )
    per_worker = {port: 0 for port in workers}
    limit = -(-count // len(workers))  # each worker's share, rounded up
    chosen: dict[str, tuple[int, int]] = {}
    for index in range(10_000):
        name = f"bench_scale_{index}"
        shard, port = coordinator.execute(SHARD_NODE, (name,)).fetchone()
        if per_worker[port] < limit:
            per_worker[port] += 1
            chosen[name] = (shard, port)
        if len(chosen) == count:
            return list(chosen), chosen
    raise SystemExit("could not spread the queues over the workers")


# -- the rebalance -----------------------------------------------------------------------------


def measure_move(distributed: Target, jobs: int, placement: dict[str, tuple[int, int]]) -> None:
    coordinator = distributed.nodes["coordinator"]
    # From the worker holding fewer shards (or as many), so that the move leaves the cluster
    # uneven by two and the rebalance below has a shard group to move back.
    held = Counter(
        port
        for _, port in coordinator.execute(
            f"SELECT shardid, nodeport FROM citus_shards WHERE table_name = '{TABLE}'::regclass"
        ).fetchall()
    )
    moved_queue = min(placement, key=lambda name: held[placement[name][1]])
    shard, source = placement[moved_queue]
    other = next(name for name, (_, port) in placement.items() if port != source)
    target_port = placement[other][1]
    coordinator.execute(f"TRUNCATE {TABLE}")
    child(distributed, [moved_queue], "fill", str(jobs))
    settle(distributed, analyze=True)
    group = coordinator.execute(
        "SELECT count(*), pg_size_pretty(sum(shard_size)) FROM citus_shards WHERE shardid IN ("
        " SELECT shardid FROM pg_dist_shard_placement JOIN pg_dist_shard USING (shardid)"
        " WHERE nodeport = %s AND shardminvalue = (SELECT shardminvalue FROM pg_dist_shard WHERE shardid = %s))",
        (source, shard),
    ).fetchone()
    stop_file = Path(f"/tmp/citus-scale-probe-{os.getpid()}")
    stop_file.unlink(missing_ok=True)
    probes = [
        subprocess.Popen(
            [sys.executable, __file__, "--child", "probe", "0", str(stop_file), name],
            env=child_env(distributed, [name]),
            cwd=REPO_ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        for name in (moved_queue, other)
    ]
    for probe in probes:
        assert probe.stdout is not None
        if probe.stdout.readline().strip() != "ready":
            raise SystemExit("a sender did not start")
    time.sleep(1)
    started = time.perf_counter()
    coordinator.execute(
        "SELECT citus_move_shard_placement(%s, '127.0.0.1', %s, '127.0.0.1', %s, shard_transfer_mode => 'block_writes')",
        (shard, source, target_port),
    )
    move_seconds = time.perf_counter() - started
    time.sleep(1)
    stop_file.touch()
    waits = [float(probe.communicate(timeout=120)[0].split()[-1]) for probe in probes]
    stop_file.unlink(missing_ok=True)
    where = coordinator.execute(SHARD_NODE, (moved_queue,)).fetchone()[1]
    print(
        f"Move: queue {moved_queue} ({jobs:,} jobs) in shard {shard}, its colocation group of {group[0]} shards "
        f"({group[1]}) moved from port {source} to {where} in {move_seconds:.2f} s (block_writes); "
        f"longest send meanwhile to that queue {waits[0]:.2f} s, to {other} on the other worker {waits[1]:.3f} s"
    )
    placements = "SELECT shardid, nodeport FROM citus_shards WHERE table_name = %s::regclass"
    before = dict(coordinator.execute(placements, (TABLE,)).fetchall())
    started = time.perf_counter()
    # By shard count: the default strategy weighs shards by disk size, and would leave the
    # one-shard imbalance of the move above alone.
    coordinator.execute(
        "SELECT citus_rebalance_start(rebalance_strategy => 'by_shard_count', shard_transfer_mode => 'block_writes')"
    )
    coordinator.execute("SELECT citus_rebalance_wait()")
    rebalance_seconds = time.perf_counter() - started
    after = dict(coordinator.execute(placements, (TABLE,)).fetchall())
    moved = {shard: (before[shard], port) for shard, port in after.items() if before[shard] != port}
    print(
        f"Rebalance by shard count: citus_rebalance_start() + citus_rebalance_wait() {rebalance_seconds:.2f} s; "
        f"{TABLE} shards per worker before {sorted(Counter(before.values()).items())}, after "
        f"{sorted(Counter(after.values()).items())}; moved (shard: from, to): {moved}"
    )
    coordinator.execute(f"TRUNCATE {TABLE}")


# -- the report --------------------------------------------------------------------------------


def report(
    samples: dict[tuple[str, str], list[Sample]],
    ratios: dict[tuple[str, str], list[float]],
    jobs: dict[str, int],
    targets: list[str],
) -> None:
    print(
        "| workload | "
        + " | ".join(f"{t} jobs/s" for t in targets)
        + " | "
        + " | ".join(f"{t} / postgres" for t in targets[1:])
        + " |"
    )
    print("|---|" + "--:|" * (2 * len(targets) - 1))
    for workload in WORKLOADS:
        if (workload, targets[0]) not in samples:
            continue
        rates = [
            f"{jobs[workload] / statistics.median(s.seconds for s in samples[(workload, t)]):,.0f}"
            for t in targets
        ]
        shares = [
            f"**{statistics.median(ratios[(workload, t)]):.0%}** ({', '.join(f'{r:.0%}' for r in ratios[(workload, t)])})"
            for t in targets[1:]
        ]
        print(f"| {WORKLOADS[workload]} | " + " | ".join(rates) + " | " + " | ".join(shares) + " |")
    print()
    print(
        "Statements a job (pg_stat_statements, medians over the rounds): coordinator (or the one server) / worker1 / worker2"
    )
    print(
        "and CPU a job in µs (medians): client; coordinator (or the one server); workers; the coordinator's share of the cluster's"
    )
    print()
    print(
        "| workload | target | statements a job | client µs | coordinator µs | workers µs | coordinator's share |"
    )
    print("|---|---|--:|--:|--:|--:|--:|")
    for workload in WORKLOADS:
        for target in targets:
            runs = samples.get((workload, target))
            if not runs:
                continue
            n = jobs[workload]
            labels = list(runs[0].statements)
            statements = " / ".join(
                f"{statistics.median(r.statements[label] for r in runs) / n:.3f}" for label in labels
            )
            client = statistics.median(r.client_cpu for r in runs) / n * 1e6
            head = statistics.median(r.node_cpu[labels[0]] for r in runs) / n * 1e6
            workers = (
                statistics.median(sum(r.node_cpu[label] for label in labels[1:]) for r in runs) / n * 1e6
            )
            share = f"{head / (head + workers):.0%}" if len(labels) > 1 else ""
            print(
                f"| {WORKLOADS[workload]} | {target} | {statements} | {client:,.0f} | {head:,.0f} | {workers:,.0f} | {share} |"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--jobs", type=int, default=20_000, help="jobs a run of insert and drain-50 (20000)")
    parser.add_argument(
        "--per-commit-jobs", type=int, default=2_000, help="jobs a run of send and drain-1 (2000)"
    )
    parser.add_argument("--rounds", type=int, default=3, help="rounds, the order rotated (3)")
    parser.add_argument("--queues", type=int, default=4, help="queues, split evenly over the workers (4)")
    parser.add_argument("--only", action="append", choices=list(WORKLOADS), help="run only this workload")
    parser.add_argument(
        "--targets", default=",".join(TARGETS), help="comma-separated subset of the targets (postgres first)"
    )
    parser.add_argument(
        "--move-jobs", type=int, default=0, help="then measure a shard move of a queue holding this many jobs"
    )
    parser.add_argument("--postgres-port", type=int, default=int(os.environ.get("PGBOSS_BENCH_PORT", 55450)))
    parser.add_argument("--citus-port", type=int, default=int(os.environ.get("PGBOSS_CITUS_PORT", 25510)))
    args = parser.parse_args()
    if args.child:
        action, *rest = args.child
        run_child(action, rest[:-1], [name for name in rest[-1].split(",") if name])
        return
    targets = [t for t in TARGETS if t in args.targets.split(",")]
    if targets[0] != "postgres":
        raise SystemExit("--targets must include postgres: every rate is a ratio to it")
    connected = connect_targets(args.postgres_port, args.citus_port)
    # Migrated first (the distributed job table's shards exist from then on), then the queues,
    # named where the shards lie.
    child(connected["citus-distributed"], [], "setup")
    queues, placement = spread_queues(connected["citus-distributed"], args.queues)
    for target in targets:
        child(connected[target], queues, "setup")
    if "citus-distributed" in targets:
        distributed = connected["citus-distributed"].nodes["coordinator"]
        kind = distributed.execute(
            f"SELECT citus_table_type FROM citus_tables WHERE table_name = '{TABLE}'::regclass"
        ).fetchone()
        if not kind or kind[0] != "distributed":
            raise SystemExit(
                f"citus-distributed: {TABLE} is not distributed ({kind}): migration 0008 did not run"
            )
    print(
        "Queues: "
        + ", ".join(
            f"{name} (shard {shard}, worker port {port})" for name, (shard, port) in placement.items()
        )
    )

    jobs = {w: args.per_commit_jobs if w in ("send", "drain-1") else args.jobs for w in WORKLOADS}
    loads = [load_average()]
    samples: dict[tuple[str, str], list[Sample]] = {}
    ratios: dict[tuple[str, str], list[float]] = {}
    for round_index in range(args.rounds):
        order = targets[round_index % len(targets) :] + targets[: round_index % len(targets)]
        for workload in args.only or list(WORKLOADS):
            this_round = {}
            for target in order:
                sample = run(connected[target], workload, queues, jobs[workload])
                this_round[target] = sample.seconds
                samples.setdefault((workload, target), []).append(sample)
                print(
                    f"  round {round_index + 1}/{args.rounds} {workload:<8} {target:<17} {jobs[workload] / sample.seconds:>8,.0f} jobs/s, "
                    f"statements {sample.statements}, CPU s { ({k: round(v, 2) for k, v in sample.node_cpu.items()}) } "
                    f"client {sample.client_cpu:.2f}  (load {load_average()})",
                    file=sys.stderr,
                    flush=True,
                )
            for target in targets:
                ratios.setdefault((workload, target), []).append(this_round["postgres"] / this_round[target])
        loads.append(load_average())
    for target in targets:
        connected[target].nodes[next(iter(connected[target].nodes))].execute(f"TRUNCATE {TABLE}")

    facts = server_facts(connected["postgres"].nodes["postgres"])
    citus_version = (
        connected["citus"]
        .nodes["coordinator"]
        .execute("SELECT extversion FROM pg_extension WHERE extname = 'citus'")
        .fetchone()[0]
    )
    print(
        f"django_pgboss at {source_revision()}; Citus {citus_version}, a coordinator and 2 workers on this machine"
    )
    print(
        f"PostgreSQL {facts['server_version']} on 127.0.0.1 (TCP); fsync={facts['fsync']} "
        f"synchronous_commit={facts['synchronous_commit']} full_page_writes={facts['full_page_writes']}; "
        f"{os.cpu_count()} CPUs, {memory_total()}; {args.jobs} jobs a run ({args.per_commit_jobs} for send and drain-1) "
        f"over {len(queues)} queues, {args.rounds} rounds; load (1/5/15 min) at the start and after each round: {' | '.join(loads)}"
    )
    print()
    report(samples, ratios, jobs, targets)
    if args.move_jobs and "citus-distributed" in targets:
        print()
        measure_move(connected["citus-distributed"], args.move_jobs, placement)
    for target in targets:
        child(connected[target], queues, "teardown")


if __name__ == "__main__":
    main()
