"""The handler of bench/peers.py's drain: ``pgboss_work`` imports it as every app's jobs.py.

--concurrency and --batch-size come from the command line, as a user would give them. The polling
interval is pg-boss's minimum (0.5 s), the one pg-boss's side of the bench uses too: it only
matters once the queue is empty, since a fetch that claims jobs is followed by the next at once.

The capability variants of bench/peers.py (--variant) switch on one capability each through the
environment, so the same command measures it on and off:

  PEERS_SIGNALS=1         a no-op receiver on job_started, job_completed, job_failed and
                          job_dead_lettered (django_pgboss.signals)
  PEERS_ASYNC=1           the handler is an ``async def``, run on the worker's event loop
  PEERS_TRANSACTIONAL=1   @work(..., transactional=True)
  PEERS_PER_JOB_RESULTS=1 @work(..., batch=True, per_job_results=True): the handler gets the
                          fetch's jobs and returns a JobResult.completed(job, output) for each
  PEERS_BATCH=1           @work(..., batch=True): the handler gets the fetch's jobs and returns
                          None, so all of them complete together, as pg-boss's work() hands its
                          handler the array of a fetch (its side of the bench)
  PEERS_METRICS_PORT=N    pgboss_work --metrics-port N (bench/peers.py adds it; the [metrics] extra)
  PEERS_TRACING=1         OpenTelemetry's SDK TracerProvider, always-on sampling, recording every
                          span into a BatchSpanProcessor whose exporter drops them (the [tracing]
                          extra): what tracing costs with a provider set
  PEERS_NO_DEADLINES=1    the worker's deadline thread returns at once, so no job is failed at its
                          deadline: the worker has no such switch (every job has a deadline, its
                          expire_in_seconds), so this is the bench's own, to measure what keeping
                          the deadlines costs
  PEERS_CONN_MAX_AGE=N    (bench/peers_settings.py) the worker's connections persist N seconds
  PEERS_QUEUES=a,b        the no-op handler on these queues too (bench/citus_scale.py)

A variant that asks for something this checkout's worker lacks stops the run with a message.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Sequence
from typing import Any

from django_pgboss import work

QUEUE = "bench_peers"

options: dict[str, Any] = {"polling_interval_seconds": 0.5}
accepted = inspect.signature(work).parameters
for variable, option in (
    ("PEERS_TRANSACTIONAL", "transactional"),
    ("PEERS_PER_JOB_RESULTS", "per_job_results"),
    ("PEERS_BATCH", "batch"),
):
    if os.environ.get(variable):
        if option not in accepted:
            raise SystemExit(f"{variable}: this django_pgboss's @work has no {option} option")
        options[option] = True
if options.get("per_job_results"):
    # per_job_results is for batch handlers.
    options["batch"] = True

if os.environ.get("PEERS_SIGNALS"):
    from django_pgboss import signals

    def _receiver(**kwargs: Any) -> None:
        return None

    for signal in (signals.job_started, signals.job_completed, signals.job_failed, signals.job_dead_lettered):
        signal.connect(_receiver, weak=False)

if os.environ.get("PEERS_TRACING"):
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
    from opentelemetry.sdk.trace.sampling import ALWAYS_ON

    class _Dropping(SpanExporter):
        """Takes every finished span and keeps none: the SDK's work without an exporter's I/O."""

        def export(self, spans: Sequence[Any]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    _provider = TracerProvider(sampler=ALWAYS_ON)
    _provider.add_span_processor(BatchSpanProcessor(_Dropping()))
    trace.set_tracer_provider(_provider)

if os.environ.get("PEERS_NO_DEADLINES"):
    from django_pgboss.worker import deadlines

    if not hasattr(deadlines.Deadlines, "_keep_deadlines"):
        raise SystemExit("PEERS_NO_DEADLINES: this django_pgboss's worker keeps no deadlines")
    deadlines.Deadlines._keep_deadlines = lambda self: None  # type: ignore[method-assign]

if os.environ.get("PEERS_ASYNC"):

    @work(QUEUE, **options)
    async def noop_async(job: Any) -> None:
        return None

elif options.get("batch") and not options.get("per_job_results"):

    @work(QUEUE, **options)
    def noop_batch(jobs: list[Any]) -> None:
        return None

elif os.environ.get("PEERS_PER_JOB_RESULTS"):
    from django_pgboss import JobResult

    @work(QUEUE, **options)
    def noop_results(jobs: list[Any]) -> list[Any]:
        return [JobResult.completed(job, {"i": job.data["i"]}) for job in jobs]

else:

    @work(QUEUE, **options)
    def noop(job: Any) -> None:
        return None

    # PEERS_QUEUES=a,b,...: more queues with the same no-op handler (bench/citus_scale.py drains
    # several queues at once, so that a Citus cluster's workers each hold some).
    for _name in filter(None, os.environ.get("PEERS_QUEUES", "").split(",")):
        work(_name, **options)(noop)
