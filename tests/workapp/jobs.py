"""Handlers the worker tests run, steered by each job's data."""

from __future__ import annotations

import os
import time
from pathlib import Path

from django_pgboss import work


def _note(job, event: str) -> None:
    """Append to the file the test named, so a test can see what ran, in which process."""
    marker = (job.data or {}).get("marker")
    if marker:
        with Path(marker).open("a") as f:
            f.write(f"{event} {job.id} {os.getpid()} {job.retry_count} {time.time()}\n")


@work("echo", concurrency=4, batch_size=10, polling_interval_seconds=0.2)
def echo(job):
    return {"echo": job.data, "pid": os.getpid()}


@work("slow", concurrency=2, polling_interval_seconds=0.2)
def slow(job):
    _note(job, "start")
    time.sleep(job.data.get("sleep", 0))
    _note(job, "end")
    if job.data.get("fail_first") and job.retry_count == 0:
        raise RuntimeError("first attempt fails")
    return {"slept": job.data.get("sleep", 0)}


@work("flaky", polling_interval_seconds=0.2)
def flaky(job):
    if job.data.get("fail"):
        raise ValueError(f"bad input {job.data['fail']}")
    return job.data.get("result")


@work("unstorable", polling_interval_seconds=0.2)
def unstorable(job):
    return {"handle": object()}


@work("batched", batch=True, batch_size=5, polling_interval_seconds=0.2)
def batched(jobs):
    return {"batch": sorted(j.data["n"] for j in jobs)}


@work("live", polling_interval_seconds=30)
def live(job):
    _note(job, "start")
    return None


@work("refused", concurrency=2, batch_size=10, polling_interval_seconds=0.2)
def refused(job):
    """Returns an output the database cannot store when the job asks for one."""
    bad = job.data.get("bad")
    if bad == "nul":
        return {"t": "a\x00b"}
    if bad == "surrogate":
        return {"t": "\ud800"}
    return {"n": job.data["n"]}


@work("rude", concurrency=1, polling_interval_seconds=0.2)
def rude(job):
    """Ends in a way a handler should not (one thread, so a lost thread would stall the queue)."""
    kind = job.data.get("kind")
    if kind == "exit":
        raise SystemExit(3)
    if kind == "interrupt":
        raise KeyboardInterrupt
    if kind == "nul-error":
        raise ValueError("bad\x00thing")
    if kind == "deep":
        value: list = []
        for _ in range(10_000):
            value = [value]
        return {"deep": value}
    return {"ok": job.data.get("n")}
