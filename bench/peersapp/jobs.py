"""The handler of bench/peers.py's drain: ``pgboss_work`` imports it as every app's jobs.py.

--concurrency and --batch-size come from the command line, as a user would give them. The polling
interval is pg-boss's minimum (0.5 s), the one pg-boss's side of the bench uses too: it only
matters once the queue is empty, since a fetch that claims jobs is followed by the next at once.

The capability variants of bench/peers.py (--variant) switch on one capability each through the
environment, so the same command measures it on and off:

  PEERS_SIGNALS=1         a no-op receiver on job_started and job_completed (django_pgboss.signals)
  PEERS_ASYNC=1           the handler is an ``async def`` (when the worker runs coroutines)
  PEERS_TRANSACTIONAL=1   @work(..., transactional=True) (when the worker has it)
  PEERS_PER_JOB_RESULTS=1 @work(..., per_job_results=True)
  PEERS_METRICS_PORT=N    pgboss_work --metrics-port N (bench/peers.py adds it; the [metrics] extra)
"""

from __future__ import annotations

import inspect
import os
from typing import Any

from django_pgboss import work

QUEUE = "bench_peers"

options: dict[str, Any] = {"polling_interval_seconds": 0.5}
accepted = inspect.signature(work).parameters
for variable, option in (
    ("PEERS_TRANSACTIONAL", "transactional"),
    ("PEERS_PER_JOB_RESULTS", "per_job_results"),
):
    if os.environ.get(variable):
        if option not in accepted:
            raise SystemExit(f"{variable}: this django_pgboss's @work has no {option} option")
        options[option] = True

if os.environ.get("PEERS_SIGNALS"):
    from django_pgboss import signals

    def _receiver(**kwargs: Any) -> None:
        return None

    signals.job_started.connect(_receiver, weak=False)
    signals.job_completed.connect(_receiver, weak=False)

if os.environ.get("PEERS_ASYNC"):

    @work(QUEUE, **options)
    async def noop_async(job: Any) -> None:
        return None

else:

    @work(QUEUE, **options)
    def noop(job: Any) -> None:
        return None
