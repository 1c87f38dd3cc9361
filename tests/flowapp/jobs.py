"""Handlers of the flow tests' queues (tests/test_flow_processes.py), for a worker run as a process
with PGBOSS_TEST_EXTRA_APPS=tests.flowapp: each notes when it ran and what its parents returned."""

from __future__ import annotations

import os
import time
from pathlib import Path

from django_pgboss import boss, work

FLOW_QUEUES = ("flow.a", "flow.b", "flow.c", "flow.d")


def step(job):
    parents = boss.get_parent_outputs(job.name, job.id)
    inputs = sorted(output["step"] for output in parents.values() if output)
    marker = (job.data or {}).get("marker")
    if marker:
        with Path(marker).open("a") as f:
            f.write(f"{job.data['step']} {time.time()} {os.getpid()} {','.join(inputs)}\n")
    if (job.data or {}).get("fail"):
        raise RuntimeError(f"step {job.data['step']} fails")
    return {"step": job.data["step"], "inputs": inputs}


for _queue in FLOW_QUEUES:
    work(_queue, concurrency=2, polling_interval_seconds=0.2)(step)
