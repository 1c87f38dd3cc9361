"""What the worker's signals cost per job, without and with a receiver: the calls the worker's
handler and settler threads make for each job (worker/signalling.py), timed on their own.

    .venvs/py3.11-Django__5.2/bin/python bench/signals.py [--calls 200000] [--repeat 5]

No database: the functions are called with a Job the way the worker calls them, and return before
any statement (the fail statement reports what job_failed needs, so a receiver costs no statement).
Each figure is the median of --repeat runs of --calls calls, in nanoseconds per job; it is a
measure of Python overhead only, against which bench/drain.py's worker figures (hundreds of
microseconds per job) set the scale.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")

import django  # noqa: E402

django.setup()

from django_pgboss import signals  # noqa: E402
from django_pgboss.records import Job  # noqa: E402
from django_pgboss.wire import EncodedOutput  # noqa: E402
from django_pgboss.worker import signalling as events  # noqa: E402


class FakeWorker:
    """Stands in for the Worker argument: the functions only pass it on and take its type."""


def per_job(calls: int, repeat: int, function: Any) -> float:
    runs = []
    for _ in range(repeat):
        started = time.perf_counter_ns()
        for _ in range(calls):
            function()
        runs.append((time.perf_counter_ns() - started) / calls)
    return statistics.median(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    worker = FakeWorker()
    job = Job(
        id="00000000-0000-0000-0000-000000000001",
        name="bench",
        data={"n": 1},
        retry_count=0,
        expire_in_seconds=900,
    )
    output = EncodedOutput('{"n": 1}')
    settled = [job.id]

    def started() -> None:
        events.jobs_started(worker, "bench", [job])

    def completed() -> None:
        events.jobs_completed(worker, "bench", [(job, output)], settled)

    def both() -> None:
        started()
        completed()

    def nothing() -> None:
        pass

    # The loop and the call of a closure, for scale (every row pays it).
    rows = [("an empty function (the loop's own cost)", per_job(args.calls, args.repeat, nothing))]
    rows.append(("job_started + job_completed, no receiver", per_job(args.calls, args.repeat, both)))

    def receiver(sender: Any, **kwargs: Any) -> None:
        pass

    signals.job_started.connect(receiver, weak=False)
    signals.job_completed.connect(receiver, weak=False)
    rows.append(("job_started + job_completed, one receiver each", per_job(args.calls, args.repeat, both)))
    print(f"| what the worker calls per job | ns per job (median of {args.repeat} x {args.calls:,}) |")
    print("|---|---:|")
    for label, ns in rows:
        print(f"| {label} | {ns:,.0f} |")


if __name__ == "__main__":
    main()
