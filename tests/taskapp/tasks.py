"""Tasks the tasks backend tests enqueue (the backend in tests/settings.py TASKS)."""

from __future__ import annotations

import asyncio
import threading

from django_pgboss.tasks.compat import task


@task
def add(a, b):
    return a + b


@task()
def describe(*args, **kwargs):
    return {"args": list(args), "kwargs": kwargs}


@task
def fail_always(message):
    raise ValueError(message)


@task(takes_context=True)
def succeed_on_attempt(context, attempt):
    if context.attempt < attempt:
        raise RuntimeError(f"attempt {context.attempt} fails")
    return {
        "attempt": context.attempt,
        "result_id": context.task_result.id,
        "worker_ids": context.task_result.worker_ids,
        "earlier_errors": len(context.task_result.errors),
    }


@task
async def async_add(a, b):
    await asyncio.sleep(0.01)
    # Each run gets an event loop of its own, on a thread that is not the worker's handler thread.
    return {
        "sum": a + b,
        "loop": asyncio.get_running_loop().is_running(),
        "thread": threading.current_thread().name,
    }


@task
async def count_users(username_prefix):
    # The ORM's async API from a coroutine task: its queries run on a worker thread's connection.
    from django.contrib.auth.models import User

    return await User.objects.filter(username__startswith=username_prefix).acount()


@task
def label(name):
    return name


@task(queue_name="tasks-other")
def on_other_queue():
    return "other"


@task
def unstorable():
    return {"handle": object()}


# pg-boss job options through using(), which every supported Django takes (Django 6.0's @task
# passes no extra arguments); the module attribute is the task the worker imports by path.
@task
def fail_to_dead_letter():
    raise RuntimeError("no retries")


fail_to_dead_letter = fail_to_dead_letter.using(retry_limit=0, dead_letter="tasks-dead")


@task
def nightly_report():
    return "report"


nightly_report = nightly_report.using(singleton_key="nightly-report", singleton_seconds=600)


#: Not a task: the worker must refuse to run it when a job names it.
def plain_function():
    return "should never run"


#: Set by a test to let wait_for_release() finish.
RELEASE = threading.Event()


@task
def wait_for_release():
    RELEASE.wait(30)
    return "released"


@task(takes_context=True)
def fail_then_wait_for_release(context):
    """Fails its first attempt, then waits like wait_for_release() (for the monitor to expire it)."""
    if context.attempt == 1:
        raise RuntimeError("the first attempt fails")
    RELEASE.wait(30)
    return "released"


# -- how the worker runs a queue with an async task (tasks/runners.py) ------------------------


def _where() -> dict:
    try:
        asyncio.get_running_loop()
        on_a_loop = True
    except RuntimeError:
        on_a_loop = False
    return {"thread": threading.current_thread().name, "loop": on_a_loop}


def _note(marker, event: str) -> None:
    import os
    import time

    if marker:
        with open(marker, "a") as f:
            f.write(f"{event} {os.getpid()} {time.time()}\n")


@task
def sync_where():
    """A sync task on a queue that runs on the worker's loop: where it runs."""
    return _where()


@task
async def async_where():
    """Where a coroutine task runs (on the worker's loop thread, as an async handler)."""
    return _where()


@task
async def async_fail(message):
    await asyncio.sleep(0)
    raise LookupError(message)


@task
async def async_sleep(seconds, marker=None):
    """Sleeps on the loop, noting its start, its end, and a cancellation, in the file ``marker``."""
    _note(marker, "start")
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        _note(marker, "cancelled")
        raise
    _note(marker, "end")
    return {"slept": seconds}


@task
async def async_orm(username):
    """The async ORM inside a coroutine task: a write and a read, then the task's own result id."""
    from django.contrib.auth.models import User

    await User.objects.acreate(username=username)
    return await User.objects.filter(username=username).acount()
