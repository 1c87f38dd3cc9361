"""Where a drain's Python time goes, from a py-spy raw profile taken with --gil (samples only while
a thread holds the GIL, so each sample is the interpreter's own time, not waiting on the database).

    py-spy record --gil --threads -r 250 -f raw -o /tmp/drain.txt -- \\
        python -m django pgboss_work --queue bench_peers --concurrency 4 --batch-size 50 --burst
    python bench/pyspy_summary.py /tmp/drain.txt --rate 250 --jobs 20000

Start-up (imports, Django's set-up, the checks) is left out: samples whose stack passes through the
import system or the command's set-up before Worker.run. Each sample is charged to the first frame
of its stack that falls in one of the groups below (the innermost one matching), so a group's time
includes what it calls outside the other groups.
"""

from __future__ import annotations

import argparse
import collections

GROUPS = [
    ("psycopg: sending, waiting, reading rows", ("psycopg/",)),
    ("Django: close_old_connections, cursor wrapper", ("django/db/", "django/utils/connection", "asgiref/")),
    ("Job records built from rows (records.py)", ("django_pgboss/records.py",)),
    ("JSON: outputs encoded, data decoded", ("json/", "django_pgboss/wire.py")),
    ("settler (worker/settler.py, api/jobs.py complete_each)", ("worker/settler.py", "api/jobs.py")),
    ("fetch loop (worker/fetching.py)", ("worker/fetching.py",)),
    ("handler threads (worker/handlers.py, the no-op handler)", ("worker/handlers.py", "peersapp/")),
    ("deadlines, heartbeats, signals", ("worker/deadlines.py", "worker/heartbeats.py", "signals.py")),
    ("threading: locks, events, queues", ("threading.py", "queue.py")),
    ("the main loop and the rest of the worker", ("django_pgboss/worker/",)),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profile")
    parser.add_argument("--rate", type=float, default=250.0, help="py-spy's sampling rate (-r)")
    parser.add_argument("--jobs", type=int, required=True, help="jobs the profiled drain settled")
    args = parser.parse_args()
    per_group: collections.Counter[str] = collections.Counter()
    with open(args.profile) as profile:
        lines = profile.readlines()
    for line in lines:
        stack, _, count = line.rstrip().rpartition(" ")
        frames = stack.split(";")[1:]
        if any("importlib" in f or "django/__init__.py" in f or "/checks/" in f for f in frames):
            continue
        if not any("django_pgboss/worker/" in f for f in frames):
            continue  # the command before the worker runs, and after
        group = "other"
        for frame in reversed(frames):
            found = next((name for name, parts in GROUPS if any(p in frame for p in parts)), None)
            if found:
                group = found
                break
        per_group[group] += int(count)
    total = sum(per_group.values())
    print("| where (Python, GIL held) | us/job | share |\n|---|--:|--:|")
    for name, count in per_group.most_common():
        print(f"| {name} | {count / args.rate / args.jobs * 1e6:.1f} | {count / total:.0%} |")
    print(f"| **total** | **{total / args.rate / args.jobs * 1e6:.1f}** | |")


if __name__ == "__main__":
    main()
