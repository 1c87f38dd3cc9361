"""Observability benchmark: the drain and the send with and without the metrics and otel extras.

    bash bench/cluster.sh start
    .venvs/py3.11-Django__5.2/bin/python bench/observability.py [--jobs 10000] [--processes 2]
                                                               [--repeat 3] [--sends 2000]
                                                               [--handler sync|async] [--mode M ...]
    bash bench/cluster.sh stop

Five modes, each run in freshly spawned processes, alternating within each repeat (--mode picks
some; --handler async drains with an async def handler on the worker's event loop instead):

  no extras        opentelemetry and prometheus_client made unimportable (sys.modules[...] = None
                   before Django starts), as in a project that installed neither extra: every
                   span helper is the shared do-nothing context manager
  installed, idle  both importable (the test extra installs them), no tracer provider set and no
                   metrics asked for: the API's no-op spans, no WorkerMetrics
  signals          installed, idle, plus receivers that do nothing on job_started and job_completed
  metrics          WorkerMetrics connected to the signals and given to the Worker as instruments
  metrics + traces the same, plus the SDK's TracerProvider recording every span (always-on
                   sampling) into a BatchSpanProcessor whose exporter drops them

The drain: --jobs jobs queued (boss.insert), drained by --processes Worker processes (fetch size
50, concurrency 4, burst), timed to the last job's completed_on as bench/drain.py does, and the CPU
seconds the processes spent in Worker.run() (time.process_time()). The send: one process sends
--sends jobs one at a time with boss.send (autocommit), timed and CPU-timed in the process. CPU
per job is the figure to compare on a machine shared with other work: the wall clock then measures
the scheduler as much as the code.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

MODES = ("no extras", "installed, idle", "signals", "metrics", "metrics + traces")
MODE_VARIABLE = "PGBOSS_BENCH_OBSERVABILITY"
#: "sync" (a def handler on handler threads) or "async" (an async def on the worker's loop).
HANDLER_VARIABLE = "PGBOSS_BENCH_HANDLER"

# Before anything imports either library: the spawned children run this too (as __mp_main__).
if os.environ.get(MODE_VARIABLE) == "no extras":
    for blocked in ("opentelemetry", "prometheus_client"):
        sys.modules[blocked] = None  # type: ignore[assignment]

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

import multiprocessing  # noqa: E402

from bench.common import (  # noqa: E402
    TABLE,
    fill,
    fresh_queues,
    join_children,
    last_completed,
    raw_connection,
    server_facts,
    source_revision,
    start_children,
    transactions,
)
from bench.drain import QUEUE  # noqa: E402
from django_pgboss.api.boss import Boss  # noqa: E402
from django_pgboss.observability import tracing  # noqa: E402
from django_pgboss.worker import Worker  # noqa: E402
from django_pgboss.worker.registry import Registration  # noqa: E402

SEND_QUEUE = "bench_obs_send"
FETCH_SIZE = 50
CONCURRENCY = 4


def instruments() -> Any:
    """Set the mode up in this process; returns the Worker's instruments (or None)."""
    mode = os.environ.get(MODE_VARIABLE)
    if mode == "no extras":
        assert not tracing.ENABLED
    if mode == "signals":
        from django_pgboss import signals

        # Receivers that do nothing: what being told costs (for an async handler, job_started's
        # hop to the job's thread), without what a receiver does.
        for signal in (signals.job_started, signals.job_completed):
            signal.connect(_nothing, weak=False)
    if mode not in ("metrics", "metrics + traces"):
        return None
    from django_pgboss.observability.metrics import WorkerMetrics

    if mode == "metrics + traces":
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

        class Dropped(SpanExporter):
            def export(self, spans: Any) -> SpanExportResult:
                return SpanExportResult.SUCCESS

        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(Dropped()))
        trace.set_tracer_provider(provider)
    return WorkerMetrics().connect()


def _nothing(sender: Any, **kwargs: Any) -> None:
    return None


async def _async_no_op(job: Any) -> None:
    return None


def drain(cpu: Any, ready: Any, go: Any) -> None:
    metrics = instruments()
    handler = _async_no_op if os.environ.get(HANDLER_VARIABLE) == "async" else (lambda job: None)
    registration = Registration(
        QUEUE, handler, batch_size=FETCH_SIZE, concurrency=CONCURRENCY, polling_interval_seconds=0.1
    )
    worker = Worker([registration], burst=True, instruments=metrics)
    ready.release()
    go.wait()
    # CPU time, not only wall time: on a machine shared with other work, the CPU seconds a
    # process spent per job are what the extras add, whatever the scheduler did meanwhile.
    before = time.process_time()
    stats = worker.run()
    cpu.put(time.process_time() - before)
    if stats.failed or stats.lost:
        raise SystemExit(f"worker: {stats.failed} failed, {stats.lost} lost")


def send(sends: int, result: Any) -> None:
    instruments()
    boss = Boss()
    boss.send(SEND_QUEUE, {"warm": True})
    started, cpu = time.perf_counter(), time.process_time()
    for i in range(sends):
        boss.send(SEND_QUEUE, {"i": i})
    result.put((time.perf_counter() - started, time.process_time() - cpu))


def run_drain(admin: Any, mode: str, processes: int, jobs: int) -> tuple[float, float]:
    """One timed drain: (seconds, CPU seconds the worker processes spent in Worker.run())."""
    fill(admin, QUEUE, jobs)
    os.environ[MODE_VARIABLE] = mode
    cpu = multiprocessing.get_context("spawn").Queue()
    children, go = start_children(drain, (cpu,), processes, mode, timeout=120)
    transactions(admin)
    started = time.time()
    go.set()
    join_children(children, mode, timeout=900)
    last = last_completed(admin, QUEUE, jobs, mode)
    return last - started, sum(cpu.get(timeout=60) for _ in children)


def run_send(admin: Any, mode: str, sends: int) -> tuple[float, float]:
    """One send run: (seconds, CPU seconds), both of the sending process."""
    admin.execute(f"DELETE FROM {TABLE} WHERE name = %s", (SEND_QUEUE,))
    os.environ[MODE_VARIABLE] = mode
    ctx = multiprocessing.get_context("spawn")
    result = ctx.Queue()
    child = ctx.Process(target=send, args=(sends, result))
    child.start()
    timing = result.get(timeout=900)
    child.join(timeout=60)
    return timing


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000, help="jobs per drain (default 10000)")
    parser.add_argument("--processes", type=int, default=2, help="draining processes (default 2)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each mode (default 3)")
    parser.add_argument("--sends", type=int, default=2000, help="sends per send run (0: no send runs)")
    parser.add_argument(
        "--handler",
        choices=("sync", "async"),
        default="sync",
        help="the drain's no-op handler (default sync)",
    )
    parser.add_argument(
        "--mode", action="append", choices=MODES, help="a mode to run, repeatable (default: all five)"
    )
    args = parser.parse_args()
    modes = [mode for mode in MODES if mode in (args.mode or MODES)]
    if "no extras" not in modes:
        raise SystemExit("--mode: 'no extras' must be one of them, the others are compared with it")
    os.environ[HANDLER_VARIABLE] = args.handler

    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    admin = raw_connection()
    boss = Boss()
    fresh_queues(boss, QUEUE, SEND_QUEUE)
    drains: dict[str, list[tuple[float, float]]] = {mode: [] for mode in modes}
    sends: dict[str, list[tuple[float, float]]] = {mode: [] for mode in modes}
    per_send = max(args.sends, 1)
    for repeat in range(args.repeat):
        for mode in modes:
            drains[mode].append(run_drain(admin, mode, args.processes, args.jobs))
            # --sends 0: no send runs; the send columns then read as placeholders (one "send").
            sends[mode].append(run_send(admin, mode, args.sends) if args.sends else (1.0, 1.0))
            (seconds, cpu), (send_seconds, send_cpu) = drains[mode][-1], sends[mode][-1]
            print(
                f"  run {repeat + 1}/{args.repeat} {mode:<17} drain {args.jobs / seconds:>7,.0f} jobs/s "
                f"{cpu / args.jobs * 1e6:>5.0f} us CPU/job, send {send_seconds / per_send * 1e6:>6.0f} us "
                f"{send_cpu / per_send * 1e6:>5.0f} us CPU",
                file=sys.stderr,
            )
    for name in (QUEUE, SEND_QUEUE):
        boss.delete_queue(name)
    facts = server_facts(admin)
    load_average = os.getloadavg()[0]
    print(
        f"django_pgboss at {source_revision()}; PostgreSQL {facts['server_version']}, {os.cpu_count()} CPUs, "
        f"load average {load_average:.1f} at the end"
    )
    print(
        f"drain: {args.jobs} jobs, {args.processes} processes, {args.handler} handler, fetch size "
        f"{FETCH_SIZE}, concurrency {CONCURRENCY}; send: {args.sends} sends; median of {args.repeat} runs"
    )
    print()
    print("| mode | drain jobs/s | drain CPU us/job | vs no extras | send us | send CPU us | vs no extras |")
    print("|---|---:|---:|---:|---:|---:|---:|")

    def median(values: list[tuple[float, float]], index: int) -> float:
        return statistics.median(value[index] for value in values)

    base_drain_cpu = median(drains["no extras"], 1)
    base_send_cpu = median(sends["no extras"], 1)
    for mode in modes:
        rate = args.jobs / median(drains[mode], 0)
        drain_cpu = median(drains[mode], 1)
        send_cpu = median(sends[mode], 1)
        send_columns = (
            f"{median(sends[mode], 0) / per_send * 1e6:.0f} | {send_cpu / per_send * 1e6:.0f} "
            f"| {send_cpu / base_send_cpu - 1:+.1%}"
            if args.sends
            else "| |"
        )
        print(
            f"| {mode} | {rate:,.0f} | {drain_cpu / args.jobs * 1e6:.0f} | {drain_cpu / base_drain_cpu - 1:+.1%} "
            f"| {send_columns} |"
        )


if __name__ == "__main__":
    main()
