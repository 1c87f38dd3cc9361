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


def _hold(job) -> None:
    """While the file the job's data names as ``hold`` exists (at most two minutes), keep running:
    a test decides when such a job may end instead of guessing how long a step takes."""
    gate = (job.data or {}).get("hold")
    if gate:
        give_up = time.monotonic() + 120
        while Path(gate).exists() and time.monotonic() < give_up:
            time.sleep(0.02)


@work("slow", concurrency=2, polling_interval_seconds=0.2)
def slow(job):
    _note(job, "start")
    time.sleep(job.data.get("sleep", 0))
    _hold(job)
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
    batch = sorted(j.data["n"] for j in jobs)
    marker = jobs[0].data.get("marker")
    if marker:
        with Path(marker).open("a") as f:
            f.write(" ".join(map(str, batch)) + "\n")
    return {"batch": batch}


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


@work("deadline", concurrency=2, polling_interval_seconds=0.2)
def deadline(job):
    """Misbehaves on its first attempt as the job's data says; every retry just completes."""
    _note(job, "start")
    mode = job.data.get("mode") if job.retry_count == 0 else None
    if mode == "forever":
        # Ignores its signal: the worker fails the job at its deadline and abandons the thread.
        while True:
            time.sleep(0.05)
    if mode == "late":
        time.sleep(job.data["sleep"])  # ignores its signal, then returns a result too late
        _note(job, "late")
        return {"late": True}
    if mode == "cooperative":
        job.signal.wait(60)
        _note(job, "stopped")
        job.signal.raise_if_set()
    if mode == "sleep":
        time.sleep(job.data["sleep"])
    _note(job, "end")
    return {"attempt": job.retry_count, "pid": os.getpid()}


@work("perjob", batch=True, batch_size=10, per_job_results=True, polling_interval_seconds=0.2)
def perjob(jobs):
    """One outcome per job, as each job's data asks; plus an entry for a job it was not given."""
    from django_pgboss import JobResult

    results = []
    for job in jobs:
        outcome = job.data["outcome"]
        if outcome == "completed":
            results.append(JobResult.completed(job, {"n": job.data["n"]}))
        elif outcome == "failed":
            results.append(JobResult.failed(job, {"why": f"failed {job.data['n']}"}))
        elif outcome == "deadletter":
            results.append({"id": job.id, "status": "deadletter", "output": {"why": "poison"}})
    results.append(JobResult.completed("00000000-0000-4000-8000-000000000000", {"stranger": True}))
    return results


# -- async handlers (worker/async_slots.py) ---------------------------------------------------


@work("aslow", concurrency=3, polling_interval_seconds=0.2)
async def aslow(job):
    """An async handler that sleeps on the worker's event loop, noting its start and end."""
    import asyncio

    _note(job, "start")
    await asyncio.sleep(job.data.get("sleep", 0))
    _note(job, "end")
    return {"slept": job.data.get("sleep", 0), "pid": os.getpid()}


@work("aorm", concurrency=4, polling_interval_seconds=0.2)
async def aorm(job):
    """An async handler using Django's async ORM and Boss's async twins."""
    from django.contrib.auth.models import User

    from django_pgboss import boss

    await User.objects.acreate(username=job.data["username"])
    follow_up = await boss.asend("echo", {"after": job.data["username"]})
    return {"users": await User.objects.filter(username__startswith="async-").acount(), "sent": follow_up}


@work("aecho", concurrency=4, batch_size=10, polling_interval_seconds=0.2)
async def aecho(job):
    """echo's async twin: the same output, from a coroutine on the worker's event loop."""
    return {"echo": job.data, "pid": os.getpid()}


@work("ahostile", concurrency=2, polling_interval_seconds=0.2)
async def ahostile(job):
    """An async handler that misbehaves as its job's data says (tests/test_async_hostile.py)."""
    import asyncio

    how = job.data["how"]
    if how == "unstorable":
        return {"handle": object()}
    if how == "cancelled":
        raise asyncio.CancelledError("raised by the handler itself")
    if how == "keyboard":
        raise KeyboardInterrupt("raised by the handler")
    if how == "exit":
        raise SystemExit(3)
    if how == "block":
        time.sleep(job.data["seconds"])  # blocks the worker's event loop
        return {"blocked": job.data["seconds"]}
    if how == "ignore":
        # Never lets its cancellation through: swallows it until its own time is up.
        until = time.monotonic() + job.data["seconds"]
        while time.monotonic() < until:
            try:
                await asyncio.sleep(0.05)
            except asyncio.CancelledError:
                continue
        return {"ignored": True}
    return {"ok": True, "pid": os.getpid()}


@work("aspin", concurrency=1, batch_size=50, polling_interval_seconds=0.2)
async def aspin(job):
    """Runs job.data["seconds"] of CPU without awaiting anything (tests/test_async_hostile.py)."""
    until = time.monotonic() + job.data["seconds"]
    while time.monotonic() < until:
        pass
    return {"spun": job.data["seconds"]}
