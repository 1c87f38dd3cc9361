"""The claim's plans, custom against generic, in every variant of the statement.

    DATABASE_URL=postgres://postgres@127.0.0.1:55464/pgboss_bench \\
        .venvs/py3.11-Django__5.2/bin/python bench/claim_plans.py [--jobs 20000] [--batch 50]

The worker's fetch loop runs its claim with plan_cache_mode = force_generic_plan
(JobStore.use_generic_plans: PostgreSQL never picks the generic plan of the claim by itself and
plans it again on every fetch). This fills the peers bench's queue with --jobs waiting jobs, then
for each variant of plans.jobs.fetch_jobs (6 policies x include_metadata, ignore_start_after,
priorities, group_concurrency counted with and without tiers or probed as a single group,
ignore_groups: 384 in all) prepares it and EXPLAINs it at --batch under force_custom_plan and
under force_generic_plan, and prints the scans and joins of each plan, and whether the two plan
modes differ in any of them.

With --groups ACTIVE it instead fills one queue with ACTIVE active jobs of as many groups and
--jobs waiting ones, and EXPLAIN ANALYZEs the group_concurrency=1 claim both ways: probing each
candidate's group (what a limit of 1 runs) and counting the active jobs by group (any other limit).

    DATABASE_URL=... .venvs/py3.11-Django__5.2/bin/python bench/claim_plans.py --groups 10000

With --keyed it instead fills one queue of each keyed policy (singleton, stately, key_strict_fifo)
with --jobs waiting jobs, each its own singleton_key, claims a tenth of each (so the claim has
active jobs to probe), and runs the claim of --batch under EXPLAIN ANALYZE in a rolled-back
transaction: how each policy's "is this key taken" test is read, and what one claim costs.

    DATABASE_URL=... .venvs/py3.11-Django__5.2/bin/python bench/claim_plans.py --keyed --jobs 200000
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.peers_settings")

import django

django.setup()

from django.core.management import call_command  # noqa: E402

from bench.common import TABLE, fill, raw_connection, settle_table  # noqa: E402
from bench.peersapp.jobs import QUEUE  # noqa: E402
from django_pgboss.api.boss import Boss  # noqa: E402
from django_pgboss.plans import jobs as job_plans  # noqa: E402

TYPES = {
    "name": "text",
    "batch_size": "int",
    "min_priority": "int",
    "max_priority": "int",
    "group_limit": "int",
    "group_tiers": "jsonb",
    "ignore_groups": "text[]",
}
NODES = re.compile(
    r"(Seq Scan on \w+|Bitmap Heap Scan on \w+|Index Scan using \w+|Index Only Scan using \w+|"
    r"Hash Join|Merge Join|Nested Loop)"
)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--keyed", action="store_true", help="EXPLAIN ANALYZE the keyed policies' claims")
    parser.add_argument("--keys", type=int, help="with --keyed: this many distinct keys (default: one a job)")
    parser.add_argument(
        "--groups",
        type=int,
        metavar="ACTIVE",
        help="EXPLAIN ANALYZE a group_concurrency=1 claim, probed and counted, with ACTIVE grouped jobs active",
    )
    args = parser.parse_args()
    if args.jobs < 1 or args.batch < 1 or any(v is not None and v < 1 for v in (args.keys, args.groups)):
        parser.error("--jobs, --batch, --keys and --groups must be at least 1")
    call_command("migrate", verbosity=0)
    boss = Boss()
    if args.keyed:
        keyed_claims(boss, args.jobs, args.batch, args.keys or args.jobs)
        return
    if args.groups:
        group_claims(boss, args.jobs, args.batch, args.groups)
        return
    if boss.get_queue(QUEUE) is None:
        boss.create_queue(QUEUE)
    fill(raw_connection(), QUEUE, args.jobs)
    route = boss.context.route(QUEUE)
    values = {
        "name": f"'{QUEUE}'",
        "batch_size": str(args.batch),
        "min_priority": "-5",
        "max_priority": "5",
        "group_limit": "2",
        "group_tiers": "'{\"gold\": 3}'::jsonb",
        "ignore_groups": "ARRAY['x']",
    }
    connection = raw_connection()
    differ = 0
    variants = itertools.product(
        ["standard", "short", "singleton", "stately", "exclusive", "key_strict_fifo"], *[[False, True]] * 7
    )
    for index, (policy, metadata, start_after, priority, groups, tiers, single, ignore) in enumerate(
        variants
    ):
        if ((tiers or single) and not groups) or (tiers and single):
            continue
        sql = job_plans.fetch_jobs(
            boss.context.quoted_schema,
            route.table,
            policy=policy,
            include_metadata=metadata,
            ignore_start_after=start_after,
            min_priority=priority,
            max_priority=priority,
            group_concurrency=groups,
            group_tiers=tiers,
            single_group=single,
            ignore_groups=ignore,
        )
        names: list[str] = []

        def number(match: re.Match[str], names: list[str] = names) -> str:
            if match.group(1) not in names:
                names.append(match.group(1))
            return f"${names.index(match.group(1)) + 1}"

        numbered = re.sub(r"%\((\w+)\)s", number, sql)
        connection.execute(f"PREPARE claim{index}({', '.join(TYPES[n] for n in names)}) AS {numbered}")
        seen = {}
        for mode in ("force_custom_plan", "force_generic_plan"):
            connection.execute(f"SET plan_cache_mode = {mode}")
            connection.execute("BEGIN")
            plan = connection.execute(
                f"EXPLAIN EXECUTE claim{index}({', '.join(values[n] for n in names)})"
            ).fetchall()
            connection.execute("ROLLBACK")
            seen[mode] = sorted(set(NODES.findall("\n".join(row[0] for row in plan))))
        same = seen["force_custom_plan"] == seen["force_generic_plan"]
        differ += not same
        options = f"metadata={metadata} start_after={start_after} priority={priority} groups={groups} tiers={tiers} single={single} ignore={ignore}"
        print(
            f"{'same' if same else 'DIFFERENT'}  {policy:15} {options}: {', '.join(seen['force_generic_plan'])}"
        )
    print(f"variants whose generic plan differs from the custom one: {differ}")


KEYED_POLICIES = ("singleton", "stately", "key_strict_fifo")
KEYED_NODES = re.compile(
    r"(Seq Scan on \w+ \w+|Index (?:Only )?Scan using \w+ on \w+ \w+|Nested Loop Anti Join)"
)
GROUP_NODES = re.compile(
    r"(Seq Scan on \w+ \w+|Index (?:Only )?Scan using \w+ on \w+ \w+|SubPlan \d+|HashAggregate)"
)


def keyed_claims(boss: Boss, jobs: int, batch: int, keys: int) -> None:
    """Fill a queue of each keyed policy, claim a tenth of it, then EXPLAIN ANALYZE one claim.

    Job i has key i modulo ``keys``; a stately queue keeps one waiting job a key, so it gets one
    job a key whatever ``keys`` is."""
    admin = raw_connection()
    admin.execute(f"TRUNCATE {TABLE}")
    for policy in KEYED_POLICIES:
        queue = f"keyed_{policy}"
        if boss.get_queue(queue) is None:
            boss.create_queue(queue, policy=policy)
        for start in range(0, jobs, 1000):
            boss.insert(
                queue,
                [
                    {"data": {"i": i}, "singleton_key": f"k{i % keys}"}
                    for i in range(start, min(start + 1000, jobs))
                ],
            )
        boss.fetch(queue, batch_size=max(1, jobs // 10))
    settle_table(admin)
    print(
        f"{jobs} jobs of {keys} keys in each of {len(KEYED_POLICIES)} queues (all in {TABLE}), a tenth of each claimed; a claim of {batch}"
    )
    for policy in KEYED_POLICIES:
        queue = f"keyed_{policy}"
        sql = job_plans.fetch_jobs(boss.context.quoted_schema, boss.context.route(queue).table, policy=policy)
        admin.execute("BEGIN")
        plan = admin.execute("EXPLAIN (ANALYZE) " + sql, {"name": queue, "batch_size": batch}).fetchall()
        admin.execute("ROLLBACK")
        text = "\n".join(row[0] for row in plan)
        execution = re.search(r"Execution Time: ([\d.]+) ms", text)
        nodes = sorted(set(KEYED_NODES.findall(text)))
        print(f"{policy:15} {execution.group(1) if execution else '?':>9} ms: {', '.join(nodes)}")


def group_claims(boss: Boss, jobs: int, batch: int, active: int) -> None:
    """A queue with ``active`` active jobs, each of its own group, and ``jobs`` waiting: every
    other one in one of those active groups, the rest in 2,000 idle groups. Then a claim of
    ``batch`` at group_concurrency=1, probed (single_group, what the API runs) and counted (the
    statement any other limit runs), each EXPLAIN ANALYZEd three times, alternating, rolled back."""
    admin = raw_connection()
    admin.execute(f"TRUNCATE {TABLE}")
    queue = "grouped"
    if boss.get_queue(queue) is None:
        boss.create_queue(queue)
    for start in range(0, active, 1000):
        boss.insert(
            queue, [{"data": {}, "group_id": f"a{i}"} for i in range(start, min(start + 1000, active))]
        )
    while boss.fetch(queue, batch_size=1000):
        pass
    for start in range(0, jobs, 1000):
        boss.insert(
            queue,
            [
                {"data": {}, "group_id": f"a{i % active}" if i % 2 else f"g{i % 2000}"}
                for i in range(start, min(start + 1000, jobs))
            ],
        )
    settle_table(admin)
    print(
        f"{active} active jobs, each its own group, and {jobs} waiting; a claim of {batch} at group_concurrency=1"
    )
    table = boss.context.route(queue).table
    for _ in range(3):
        for single in (True, False):
            sql = job_plans.fetch_jobs(
                boss.context.quoted_schema,
                table,
                policy="standard",
                group_concurrency=True,
                single_group=single,
            )
            admin.execute("BEGIN")
            plan = admin.execute(
                "EXPLAIN (ANALYZE) " + sql, {"name": queue, "batch_size": batch, "group_limit": 1}
            ).fetchall()
            admin.execute("ROLLBACK")
            text = "\n".join(row[0] for row in plan)
            execution = re.search(r"Execution Time: ([\d.]+) ms", text)
            claimed = re.search(r"CTE Scan on claimed .*rows=(\d+) loops", text)
            nodes = sorted(set(GROUP_NODES.findall(text)))
            print(
                f"{'probed' if single else 'counted':8} {execution.group(1) if execution else '?':>9} ms, "
                f"{claimed.group(1) if claimed else '?'} claimed: {', '.join(nodes)}"
            )


if __name__ == "__main__":
    main()
