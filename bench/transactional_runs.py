"""One transactional run after another in one thread: the CPU a run costs the client and the cluster.

    PGBOSS_BENCH_PORT=55466 bash bench/cluster.sh start
    git archive <commit> | tar -x -C /tmp/other        # another checkout to compare, if any
    for src in /tmp/other "$PWD"; do
      DATABASE_URL=postgres://postgres@127.0.0.1:55466/pgboss_bench PEERS_CONN_MAX_AGE=60 \\
        PYTHONPATH="$src" DJANGO_SETTINGS_MODULE=bench.peers_settings \\
        .venvs/py3.11-Django__5.2/bin/python bench/transactional_runs.py --jobs 1500 "$src"
    done
    PGBOSS_BENCH_PORT=55466 bash bench/cluster.sh stop

It inserts ``--jobs`` jobs, claims them all, then calls worker/transactional.py's
``run_in_transaction()`` once per job with a no-op handler, on one persistent connection: BEGIN,
the bound, the fenced completion and COMMIT, with nothing of the worker's threads around them. It
prints the client's CPU a run (this process's) and the cluster's (bench/peers.py's reading of
/proc), and the wall clock. The code measured is whatever PYTHONPATH puts first, so two checkouts
alternate by running the command in each.
"""

from __future__ import annotations

import argparse
import resource
import time

import django


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("label", help="what to call this checkout in the output line")
    parser.add_argument("--jobs", type=int, default=1500)
    args = parser.parse_args()
    django.setup()
    import psycopg

    # bench/peers.py's CPU reading, from the checkout on PYTHONPATH (its bench/ has peers.py).
    from bench.peers import conninfo, server_cpu
    from django_pgboss.api.boss import Boss
    from django_pgboss.api.jobs import JobStore
    from django_pgboss.worker.registry import Registration
    from django_pgboss.worker.transactional import run_in_transaction

    boss = Boss()
    queue = "bench_transactional_runs"
    if boss.get_queue(queue) is not None:
        boss.delete_queue(queue)
    boss.create_queue(queue)
    boss.insert(queue, [{"data": {"i": i}} for i in range(args.jobs)])
    jobs = []
    while len(jobs) < args.jobs:
        jobs += boss.fetch(queue, batch_size=200)
    store = JobStore(boss.context)
    registration = Registration(queue, lambda job: None, transactional=True)
    with psycopg.connect(conninfo(), autocommit=True) as admin:
        server_before = server_cpu(admin)
        own_before = resource.getrusage(resource.RUSAGE_SELF)
        started = time.perf_counter()
        for job in jobs:
            outcome = run_in_transaction(store, registration, [job])
            if outcome[0] != "completed":
                raise SystemExit(f"run of {job.id} did not commit: {outcome}")
        wall = time.perf_counter() - started
        own_after = resource.getrusage(resource.RUSAGE_SELF)
        server = server_cpu(admin) - server_before
    client = (own_after.ru_utime - own_before.ru_utime) + (own_after.ru_stime - own_before.ru_stime)
    per_job = 1e6 / args.jobs
    print(
        f"{args.label}: client CPU {client * per_job:.0f} + server {server * per_job:.0f} us a run, "
        f"wall {wall * per_job:.0f} us a run ({args.jobs} runs)"
    )
    boss.delete_queue(queue)


if __name__ == "__main__":
    main()
