"""Coroutine tasks run as async handlers on the worker's event loop (tasks/runners.py): a
queue with an async task runs there, its sync tasks on each slot's own thread; in a real
``manage.py pgboss_work`` process, results, errors, deadlines, SIGTERM and the async ORM."""

from __future__ import annotations

import signal

import pytest
from django.contrib.auth.models import User

from django_pgboss.tasks.backend import TaskRunner
from django_pgboss.tasks.compat import TaskResultStatus, task_backends
from django_pgboss.tasks.runners import AsyncTaskRunner
from tests.processes import run_worker, start_worker, wait_for
from tests.taskapp import tasks
from tests.test_tasks_backend import result_of, work_tasks
from tests.test_worker import marker_lines

pytestmark = pytest.mark.django_db(transaction=True)

#: The worker process imports each app's tasks module: tests.taskapp as an installed app.
TASK_APP = {"PGBOSS_TEST_EXTRA_APPS": "tests.taskapp"}


def test_a_queue_with_an_async_task_runs_on_the_loop_and_one_without_on_threads():
    backend = task_backends["default"]
    by_queue = {r.queue: r for r in backend.registrations()}
    # "default" holds sync and async tasks (tests/taskapp/tasks.py); "tasks-other" only sync ones.
    assert backend.known_tasks("default")["tests.taskapp.tasks.async_add"] is True
    assert backend.known_tasks("default")["tests.taskapp.tasks.add"] is False
    assert isinstance(by_queue["default"].handler, AsyncTaskRunner) and by_queue["default"].is_async
    assert isinstance(by_queue["tasks-other"].handler, TaskRunner) and not by_queue["tasks-other"].is_async


def test_in_a_worker_process_an_async_task_runs_on_the_loop_and_a_sync_one_on_a_slot_thread():
    User.objects.create_user("aorm-x")
    where_async = tasks.async_where.enqueue()
    where_sync = tasks.sync_where.enqueue()
    added = tasks.async_add.enqueue(20, 22)
    orm = tasks.async_orm.enqueue("aorm-y")
    failed = tasks.async_fail.using(retry_limit=0).enqueue("no such thing")
    result = run_worker("--queue", "default", "--burst", **TASK_APP)
    assert result.returncode == 0, result.stderr

    # The coroutine ran on the worker's event loop thread, not through async_to_sync on a thread
    # of its own; the sync task on a thread of its coroutine slot, with no loop running there.
    assert result_of(where_async).return_value == {"thread": "pgboss-asyncio", "loop": True}
    sync_where = result_of(where_sync).return_value
    assert sync_where["thread"].startswith("pgboss-async-default-") and sync_where["loop"] is False
    assert result_of(added).return_value["sum"] == 42
    assert result_of(added).return_value["thread"] == "pgboss-asyncio"
    # The async ORM inside the coroutine: its write committed, its read saw it.
    assert result_of(orm).return_value == 1 and User.objects.filter(username="aorm-y").exists()

    # The exception as django.tasks records it: the class path and the traceback, the attempt's
    # worker id, and the result failed.
    lost = result_of(failed)
    assert lost.status == TaskResultStatus.FAILED
    (error,) = lost.errors
    assert error.exception_class_path == "builtins.LookupError"
    assert "LookupError: no such thing" in error.traceback and "async_fail" in error.traceback
    (worker_id,) = lost.worker_ids
    assert worker_id.rpartition(":")[2].isdigit()  # host:pid of the worker process
    for done in (where_async, where_sync, added, orm):
        assert result_of(done).status == TaskResultStatus.SUCCESSFUL


def test_in_a_worker_process_an_async_task_s_deadline_cancels_its_coroutine(tmp_path):
    marker = tmp_path / "marker"
    late = tasks.async_sleep.using(expire_in_seconds=1, retry_limit=0).enqueue(30, str(marker))
    worker = start_worker("--queue", "default", **TASK_APP)
    try:
        wait_for(lambda: marker_lines(marker, "cancelled"), timeout=30)
        wait_for(lambda: result_of(late).status == TaskResultStatus.FAILED, timeout=30)
    finally:
        worker.send_signal(signal.SIGTERM)
        _out, err = worker.communicate(timeout=60)
    assert worker.returncode == 0, err
    assert not marker_lines(marker, "end")
    (error,) = result_of(late).errors
    # As for a threaded task the worker failed at its deadline: an attempt the task did not end.
    assert error.exception_class_path == "django_pgboss.exceptions.TaskAttemptLost"
    assert error.traceback.startswith("JobDeadlineExceeded: handler execution exceeded 1s")


def test_sigterm_with_async_tasks_in_flight_loses_nothing(tmp_path):
    marker = tmp_path / "marker"
    results = [tasks.async_sleep.enqueue(1.5, str(marker)) for _ in range(6)]
    worker = start_worker("--queue", "default", **TASK_APP)
    # WORKER concurrency 2 (tests/settings.py): two run, four wait.
    wait_for(lambda: len(marker_lines(marker, "start")) == 2, timeout=30)
    worker.send_signal(signal.SIGTERM)
    _out, err = worker.communicate(timeout=60)
    assert worker.returncode == 0, err
    assert len(marker_lines(marker, "end")) == 2 and not marker_lines(marker, "cancelled")
    statuses = sorted(result_of(r).status for r in results)
    assert statuses.count(TaskResultStatus.SUCCESSFUL) == 2
    assert statuses.count(TaskResultStatus.READY) == 4
    # The four went back untouched: a later worker runs them.
    work_tasks()
    assert {result_of(r).status for r in results} == {TaskResultStatus.SUCCESSFUL}


def test_without_its_tasks_module_imported_a_worker_runs_the_queue_on_threads():
    # tests.taskapp is not an installed app here: the worker knows no task of "default", so the
    # queue keeps its handler threads and a coroutine task runs through Task.call() (async_to_sync).
    where = tasks.async_where.enqueue()
    result = run_worker("--queue", "default", "--burst")
    assert result.returncode == 0, result.stderr
    value = result_of(where).return_value
    assert value["loop"] is True and value["thread"] != "pgboss-asyncio"
