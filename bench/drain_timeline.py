"""The timeline of ONE worker draining a batch-size-50 queue: where the server and Python idle at once.

Runs ``manage.py pgboss_work --concurrency 4 --batch-size 50 --burst`` (bench/peersapp's no-op
handler) in this process, over ``--jobs`` waiting jobs, with the worker's three kinds of step timed
as they happen (perf_counter, appended to one list; a list append is atomic under the GIL):

  fetch      JobStore.fetch(): the claim's round trip plus building the Jobs (the fetch thread)
  complete   JobStore.complete_each(): one settler statement (the settler thread)
  unit       HandlerPool._run_unit(): one job's handler call and its hand-off (a handler thread)

and a probe thread that sleeps ``--probe-ms`` in a loop: how late each sleep wakes up is how long a
thread whose wait has ended (a statement's reply arrived, a sleep ran out) waits for the GIL behind
the running ones (a convoy on the GIL).

It prints each step's count and client-seen duration, the share of the drain each of these covers:
a statement in flight, a handler running, a handler idle while claimed jobs wait for it, and
nothing at all (server and Python idle at once); the probe's lateness; and an ASCII picture of a
window of the drain (--picture-ms from --picture-at of the drain). ``--switch-interval`` sets
sys.setswitchinterval() for the run (the experiment's worker, which set its own, took it as its
switch_interval_seconds), ``--no-probe`` leaves the probe out. ``build`` is the part of each fetch
spent turning its rows into Jobs (records.jobs_from_table), after the reply is in; and the fetch
connection's server process is read from /proc/<pid>/schedstat around each fetch (the cluster
runs on this machine): how long it ran, and how long it waited for a CPU, during the fetch.

    DATABASE_URL=postgres://postgres@127.0.0.1:55464/pgboss_bench \\
        .venvs/py3.11-Django__5.2/bin/python bench/drain_timeline.py --jobs 2000
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.peers_settings")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connections  # noqa: E402

from bench.common import TABLE, fill, load_average, process_schedstat, raw_connection, source_revision  # noqa: E402
from bench.peersapp.jobs import QUEUE  # noqa: E402
from django_pgboss.api import jobs as jobs_module  # noqa: E402
from django_pgboss.api.boss import Boss  # noqa: E402
from django_pgboss.api.jobs import JobStore  # noqa: E402
from django_pgboss.worker import Worker  # noqa: E402
from django_pgboss.worker.handlers import HandlerPool  # noqa: E402

#: (kind, start, end, jobs): kind is "fetch", "complete", "unit" or "probe".
EVENTS: list[tuple[str, float, float, int]] = []
#: Each fetch's server process: (ns on a CPU, ns waiting for one) during the fetch.
BACKEND: list[tuple[int, int]] = []
#: What the handlers saw: the switch interval the worker ran with.
SEEN: dict[str, float] = {}


def instrument() -> None:
    """Wrap the three steps so each appends its (kind, start, end, jobs) to EVENTS."""
    fetch, complete_each, run_unit = JobStore.fetch, JobStore.complete_each, HandlerPool._run_unit
    build = jobs_module.jobs_from_table

    def timed_build(table):  # type: ignore[no-untyped-def]
        started = time.perf_counter()
        jobs = build(table)
        EVENTS.append(("build", started, time.perf_counter(), len(jobs)))
        return jobs

    jobs_module.jobs_from_table = timed_build

    def timed_fetch(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        before = backend_schedstat(self)
        started = time.perf_counter()
        jobs = fetch(self, *args, **kwargs)
        EVENTS.append(("fetch", started, time.perf_counter(), len(jobs)))
        after = backend_schedstat(self)
        if before is not None and after is not None:
            BACKEND.append((after[0] - before[0], after[1] - before[1]))
        return jobs

    def timed_complete(self, name, results):  # type: ignore[no-untyped-def]
        started = time.perf_counter()
        settled = complete_each(self, name, results)
        EVENTS.append(("complete", started, time.perf_counter(), len(results)))
        return settled

    def timed_unit(self, state, unit):  # type: ignore[no-untyped-def]
        SEEN["switch interval"] = sys.getswitchinterval()
        started = time.perf_counter()
        run_unit(self, state, unit)
        EVENTS.append(("unit", started, time.perf_counter(), len(unit.jobs)))

    JobStore.fetch = timed_fetch  # type: ignore[method-assign]
    JobStore.complete_each = timed_complete  # type: ignore[method-assign]
    HandlerPool._run_unit = timed_unit  # type: ignore[method-assign]


def backend_schedstat(store: JobStore) -> tuple[int, int] | None:
    """The fetch connection's server process: nanoseconds on a CPU and waiting for one so far
    (/proc/<pid>/schedstat; the cluster runs on this machine). None before the connection opens."""
    connection = connections[store.context.using].connection
    if connection is None:
        return None
    try:
        return process_schedstat(connection.info.backend_pid)
    except OSError:
        return None


def probe(stop: threading.Event, seconds: float) -> None:
    while not stop.is_set():
        started = time.perf_counter()
        time.sleep(seconds)
        EVENTS.append(("probe", started, time.perf_counter(), 0))


def covered(intervals: list[tuple[float, float]], start: float, end: float) -> float:
    """Seconds of [start, end] covered by the union of ``intervals``."""
    total, reach = 0.0, start
    for a, b in sorted(intervals):
        a, b = max(a, reach), min(b, end)
        if b > a:
            total += b - a
            reach = b
    return total


def covered_twice(intervals: list[tuple[float, float]], start: float, end: float) -> float:
    """Seconds of [start, end] during which at least two of ``intervals`` overlap (two fetch
    lanes' claims in flight at once)."""
    edges = sorted(
        [(max(a, start), 1) for a, b in intervals if b > start and a < end]
        + [(min(b, end), -1) for a, b in intervals if b > start and a < end]
    )
    total, depth, last = 0.0, 0, start
    for moment, step in edges:
        if depth >= 2:
            total += moment - last
        depth += step
        last = moment
    return total


def picture(
    events: list[tuple[str, float, float, int]], origin: float, width_ms: float, step_ms: float
) -> str:
    """One line per lane: fetch (F, 2 for two at once), complete (C), handlers running (0-4, '.'
    none)."""
    columns = int(width_ms / step_ms)
    lanes = {"fetch": [" "] * columns, "complete": [" "] * columns}
    running = [0] * columns
    for kind, a, b, _n in events:
        first = int((a - origin) * 1000 / step_ms)
        last = int((b - origin) * 1000 / step_ms)
        for column in range(max(first, 0), min(last + 1, columns)):
            if kind == "unit":
                running[column] += 1
            elif kind in lanes:
                # A second fetch in flight in the same column (two lanes) shows as 2.
                mark = kind[0].upper()
                lanes[kind][column] = "2" if lanes[kind][column] == mark and kind == "fetch" else mark
    handlers = "".join(str(min(n, 9)) if n else "." for n in running)
    scale = "".join("|" if i % int(1 / step_ms) == 0 else " " for i in range(columns))
    return "\n".join(
        [
            f"ms        {scale}",
            f"fetch     {''.join(lanes['fetch'])}",
            f"complete  {''.join(lanes['complete'])}",
            f"handlers  {handlers}",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=50)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--switch-interval", type=float, help="sys.setswitchinterval() for the run, seconds")
    parser.add_argument("--probe-ms", type=float, default=1.0)
    parser.add_argument("--no-probe", action="store_true")
    parser.add_argument(
        "--picture-at", type=float, default=0.5, help="where the picture starts, share of the drain"
    )
    parser.add_argument("--picture-ms", type=float, default=40.0)
    parser.add_argument("--step-ms", type=float, default=0.25)
    args = parser.parse_args()

    admin = raw_connection()
    call_command("migrate", verbosity=0)
    boss = Boss()
    if boss.get_queue(QUEUE) is None:
        boss.create_queue(QUEUE)
    fill(admin, QUEUE, args.jobs)
    instrument()
    if args.switch_interval is not None:
        # The worker sets its own interval while it runs (worker/switching.py); this is the one
        # pgboss_work's Worker() gets. A checkout without the setting runs at the interpreter's.
        defaults = Worker.__init__.__kwdefaults__ or {}
        if "switch_interval_seconds" in defaults:
            defaults["switch_interval_seconds"] = args.switch_interval
        else:
            sys.setswitchinterval(args.switch_interval)
    stop = threading.Event()
    prober = threading.Thread(target=probe, args=(stop, args.probe_ms / 1000), daemon=True)
    if not args.no_probe:
        prober.start()
    began, cpu_began = time.perf_counter(), time.process_time()
    call_command(
        "pgboss_work",
        queue=[QUEUE],
        concurrency=args.concurrency,
        batch_size=args.batch_size,
        burst=True,
        verbosity=0,
    )
    wall, cpu = time.perf_counter() - began, time.process_time() - cpu_began
    stop.set()
    completed = admin.execute(
        f"SELECT count(*) FROM {TABLE} WHERE name = %s AND state = 'completed'", (QUEUE,)
    ).fetchone()[0]
    if completed != args.jobs:
        raise SystemExit(f"{completed} of {args.jobs} jobs completed")

    events = list(EVENTS)
    work = [e for e in events if e[0] not in ("probe", "build")]
    start = min(e[1] for e in work if e[0] == "fetch")
    end = max(e[2] for e in work if e[0] == "complete")
    span = end - start
    print(
        f"django_pgboss at {source_revision()}; {args.jobs} jobs, concurrency {args.concurrency}, batch size "
        f"{args.batch_size}; switch interval while the worker ran {SEEN['switch interval'] * 1000:.2f} ms; load {load_average()}"
    )
    print(
        f"drain (first fetch start to last completion end): {span * 1000:.1f} ms, {args.jobs / span:,.0f} jobs/s, "
        f"{span / args.jobs * 1e6:.0f} us a job; the command: {wall * 1000:.0f} ms, "
        f"its CPU (this process) {cpu / args.jobs * 1e6:.0f} us a job"
    )
    for kind in ("fetch", "build", "complete", "unit"):
        rows = [e for e in events if e[0] == kind]
        durations = sorted((b - a) * 1000 for _k, a, b, _n in rows)
        sizes = [n for *_rest, n in rows]
        print(
            f"  {kind:9} {len(rows):5} calls, {statistics.mean(sizes):6.1f} jobs each; ms median "
            f"{statistics.median(durations):.3f}, p90 {durations[int(len(durations) * 0.9)]:.3f}, "
            f"max {durations[-1]:.3f}, total {sum(durations):.1f}"
        )

    if BACKEND:
        running = sorted(r / 1e6 for r, _w in BACKEND)
        waiting = sorted(w / 1e6 for _r, w in BACKEND)
        print(
            f"  fetch's server process, ms a fetch: on a CPU median {statistics.median(running):.3f} "
            f"(total {sum(running):.1f}), waiting for a CPU median {statistics.median(waiting):.3f} "
            f"(total {sum(waiting):.1f})"
        )
        quarter = max(len(BACKEND) // 4, 1)
        print(
            "  fetch's server process on a CPU, median ms a fetch in each quarter of the drain: "
            + ", ".join(
                f"{statistics.median(r / 1e6 for r, _w in BACKEND[i : i + quarter]):.3f}"
                for i in range(0, quarter * 4, quarter)
            )
        )

    statements = [(a, b) for k, a, b, _n in work if k in ("fetch", "complete")]
    fetches = [(a, b) for k, a, b, _n in work if k == "fetch"]
    completes = [(a, b) for k, a, b, _n in work if k == "complete"]
    units = [(a, b) for k, a, b, _n in work if k == "unit"]
    anything = statements + units
    share = {
        "a fetch in flight": covered(fetches, start, end),
        "two fetches in flight at once (two lanes)": covered_twice(fetches, start, end),
        "a completion in flight": covered(completes, start, end),
        "a fetch and a completion at once": covered(fetches, start, end)
        + covered(completes, start, end)
        - covered(fetches + completes, start, end),
        "a handler running": covered(units, start, end),
        "no handler running": span - covered(units, start, end),
        "no handler running, a fetch in flight": covered(fetches + units, start, end)
        - covered(units, start, end),
        "nothing timed running (no statement, no handler)": span - covered(anything, start, end),
    }
    for label, seconds in share.items():
        print(f"  {label:52} {seconds * 1000:8.1f} ms  {seconds / span:6.1%}")
    late = sorted(
        (b - a) * 1000 - args.probe_ms for k, a, b, _n in events if k == "probe" and start <= a <= end
    )
    if late:
        print(
            f"  probe: {len(late)} sleeps of {args.probe_ms} ms woke late by median {statistics.median(late):.3f} ms, "
            f"p90 {late[int(len(late) * 0.9)]:.3f}, p99 {late[int(len(late) * 0.99)]:.3f}, max {late[-1]:.3f}"
        )
    origin = start + span * args.picture_at
    print(
        f"\n{args.picture_ms:.0f} ms from {origin - start:.3f} s into the drain, one column {args.step_ms} ms:"
    )
    print(picture(work, origin, args.picture_ms, args.step_ms))


if __name__ == "__main__":
    main()
