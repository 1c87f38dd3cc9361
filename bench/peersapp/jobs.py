"""The handler of bench/peers.py's drain: ``pgboss_work`` imports it as every app's jobs.py.

--concurrency and --batch-size come from the command line, as a user would give them. The polling
interval is pg-boss's minimum (0.5 s), the one pg-boss's side of the bench uses too: it only
matters once the queue is empty, since a fetch that claims jobs is followed by the next at once.
"""

from __future__ import annotations

from typing import Any

from django_pgboss import work

QUEUE = "bench_peers"


@work(QUEUE, polling_interval_seconds=0.5)
def noop(job: Any) -> None:
    return None
