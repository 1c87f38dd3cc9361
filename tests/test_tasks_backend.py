"""The django.tasks backend (Django 6) / django_tasks backend (Django 5.2): enqueue, work, read back.

The backend is TASKS["default"] in tests/settings.py; the tasks are in tests/taskapp/tasks.py.
The worker runs in this process (burst: it drains the queues and returns) or as
``manage.py pgboss_work``, against the real database, so every result below was produced by a
real worker claiming, running and settling the job.
"""

from __future__ import annotations

import datetime as dt
import inspect
import logging
import math
import os
import re
import signal
import sys
import threading
import time
import uuid
from io import StringIO
from pathlib import Path

import psycopg
import pytest
from asgiref.sync import async_to_sync
from django.conf import settings
from django.core.management import CommandError, call_command
from django.db import connections, transaction
from django.test import override_settings
from django.utils import timezone

from django_pgboss import boss
from django_pgboss.db.identifiers import quote_identifier
from django_pgboss.exceptions import JobDataNotSerializable, QueueNotFound, TaskNotEnqueued
from django_pgboss.tasks.backend import WORKER_ID, PgBossBackend, PgBossTask, UnresolvedTask
from django_pgboss.tasks.compat import (
    SOURCE,
    InvalidTask,
    InvalidTaskBackend,
    TaskResultDoesNotExist,
    TaskResultStatus,
    task,
    task_backends,
    task_enqueued,
    task_finished,
    task_started,
)
from django_pgboss.tasks.registrations import task_registrations
from django_pgboss.worker import Worker
from tests.conftest import CLUSTER_LOCK_WAITS, database_url
from tests.helpers import count_jobs, install_schema, job_row, move_back, rows, schema_sql, uninstall_schema
from tests.processes import run_worker, wait_for
from tests.taskapp import tasks

pytestmark = pytest.mark.django_db(transaction=True)


def work_tasks(alias: str = "default", **changes) -> None:
    """Run pgboss_work's worker for a tasks backend in this process until its queues are drained."""
    backend = task_backends[alias]
    backend.ensure_queues()
    registrations = [r.replace(**changes) for r in backend.registrations()]
    Worker(registrations, boss=backend.boss, burst=True).run()


def result_of(result):
    return task_backends["default"].get_result(result.id)


# -- enqueue -----------------------------------------------------------------------------------


def test_enqueue_sends_a_job_with_the_task_path_args_kwargs_priority_and_queue():
    result = tasks.describe.using(priority=40).enqueue(1, (2, 3), x={"y": None})
    assert result.status == TaskResultStatus.READY
    assert result.enqueued_at is not None
    assert result.args == [1, [2, 3]]
    name, data, priority, state = job_row(result.id, "name", "data", "priority", "state")
    assert (name, priority, state) == ("default", 40, "created")
    assert data == {"task": "tests.taskapp.tasks.describe", "args": [1, [2, 3]], "kwargs": {"x": {"y": None}}}
    # The queue did not exist: CREATE_QUEUES made it with QUEUE_OPTIONS.
    assert boss.get_queue("default").retry_limit == 2
    other = tasks.on_other_queue.enqueue()
    assert job_row(other.id, "name") == ("tasks-other",)


def test_a_worker_runs_the_task_and_get_result_reads_its_return_value():
    result = tasks.add.enqueue(2, 3)
    work_tasks()
    done = result_of(result)
    assert done.status == TaskResultStatus.SUCCESSFUL
    assert done.return_value == 5
    assert done.errors == []
    assert done.worker_ids == [WORKER_ID]
    assert done.attempts == 1
    assert done.enqueued_at <= done.started_at <= done.finished_at
    assert done.last_attempted_at == done.started_at
    assert done.task.module_path == "tests.taskapp.tasks.add"
    assert done.args == [2, 3] and done.kwargs == {}
    # Task.get_result() checks the id belongs to that task; refresh() updates a stale result.
    assert tasks.add.get_result(result.id).return_value == 5
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL and result.return_value == 5


def test_a_failing_task_is_retried_then_failed_with_the_error_of_each_attempt():
    result = tasks.fail_always.enqueue("broken input")
    work_tasks()
    failed = result_of(result)
    assert failed.status == TaskResultStatus.FAILED
    assert failed.attempts == 3  # retry_limit 2: the first attempt and two retries
    assert failed.worker_ids == [WORKER_ID] * 3
    assert [error.exception_class_path for error in failed.errors] == ["builtins.ValueError"] * 3
    assert failed.errors[-1].exception_class is ValueError
    assert "ValueError: broken input" in failed.errors[-1].traceback
    assert "fail_always" in failed.errors[-1].traceback
    assert failed.finished_at is not None
    with pytest.raises(ValueError, match="Task failed"):
        _ = failed.return_value
    assert job_row(result.id, "state", "retry_count") == ("failed", 2)


def test_a_task_retries_twice_by_default_as_a_pg_boss_queue_does():
    # docs/tasks.md, "Retries: twice by default": a backend without QUEUE_OPTIONS.
    plain = {
        "default": {
            "BACKEND": "django_pgboss.tasks_backend.PgBossBackend",
            "QUEUES": ["default"],
            "OPTIONS": {"WORKER": {"polling_interval_seconds": 0.2}},
        }
    }
    with override_settings(TASKS=plain):
        result = tasks.fail_always.enqueue("still broken")
        assert boss.get_queue("default").retry_limit == 2
        work_tasks()
        failed = result_of(result)
    assert failed.status == TaskResultStatus.FAILED
    assert failed.attempts == 3


def test_a_tasks_own_retry_limit_wins_over_its_queues():
    result = tasks.fail_always.using(retry_limit=0).enqueue("once only")
    assert boss.get_queue("default").retry_limit == 2
    work_tasks()
    assert result_of(result).attempts == 1


def test_a_burst_worker_runs_every_retry_even_when_the_settler_is_faster_than_the_handler(monkeypatch):
    # A handler thread's bookkeeping after a job used to run after it handed the result to the
    # settler: a settle that came first left the queue counted as unsettled for ever (the burst
    # never ended), or let the retry be claimed before the old attempt left in_flight (the burst
    # ended with the retry still running). A slow close of old connections widens that window.
    wrapper_class = type(connections["default"])
    real = wrapper_class.close_if_unusable_or_obsolete

    def slow_close_if_unusable_or_obsolete(self):
        real(self)
        time.sleep(0.3)

    monkeypatch.setattr(wrapper_class, "close_if_unusable_or_obsolete", slow_close_if_unusable_or_obsolete)
    result = tasks.fail_always.enqueue("every attempt")
    thread = threading.Thread(target=work_tasks, daemon=True)
    thread.start()
    thread.join(30)
    assert not thread.is_alive(), "the burst worker did not stop"
    failed = result_of(result)
    assert (failed.status, failed.attempts) == (TaskResultStatus.FAILED, 3)


def test_a_task_that_succeeds_on_a_retry_sees_its_attempt_and_keeps_the_earlier_error():
    result = tasks.succeed_on_attempt.enqueue(2)
    work_tasks()
    done = result_of(result)
    assert done.status == TaskResultStatus.SUCCESSFUL
    assert done.return_value == {
        "attempt": 2,
        "result_id": result.id,
        "worker_ids": [WORKER_ID, WORKER_ID],
        "earlier_errors": 1,
    }
    assert done.attempts == 2
    assert [e.exception_class_path for e in done.errors] == ["builtins.RuntimeError"]
    assert "attempt 1 fails" in done.errors[0].traceback


def test_a_failed_task_retried_by_hand_keeps_its_history():
    result = tasks.succeed_on_attempt.using(retry_limit=0).enqueue(3)
    for attempt in (1, 2, 3):
        if attempt > 1:
            assert boss.retry("default", result.id) == 1
        work_tasks()
        current = result_of(result)
        assert current.attempts == attempt
    assert current.status == TaskResultStatus.SUCCESSFUL
    assert current.return_value["attempt"] == 3
    assert [e.exception_class_path for e in current.errors] == ["builtins.RuntimeError"] * 2


def test_run_after_defers_the_task_until_its_time():
    later = timezone.now() + dt.timedelta(hours=1)
    result = tasks.add.using(run_after=later).enqueue(1, 1)
    (start_after,) = job_row(result.id, "start_after")
    assert start_after == later
    work_tasks()
    waiting = result_of(result)
    assert waiting.status == TaskResultStatus.READY
    assert waiting.task.run_after == later
    assert waiting.attempts == 0 and waiting.started_at is None
    rows("UPDATE {s}.job SET start_after = now() WHERE id = %s", [result.id])
    work_tasks()
    assert result_of(result).return_value == 2


def test_higher_priority_tasks_run_first():
    results = {
        name: tasks.label.using(priority=priority).enqueue(name)
        for name, priority in [("low", -100), ("normal", 0), ("urgent", 100), ("high", 10)]
    }
    work_tasks(concurrency=1, batch_size=1)
    done = {name: result_of(result) for name, result in results.items()}
    assert [name for name, _ in sorted(done.items(), key=lambda item: item[1].started_at)] == [
        "urgent",
        "high",
        "normal",
        "low",
    ]
    assert done["low"].task.priority == -100


def test_an_async_task_runs_on_an_event_loop():
    result = tasks.async_add.enqueue(20, 22)
    work_tasks()
    value = result_of(result).return_value
    assert value["sum"] == 42 and value["loop"] is True


def test_an_async_task_can_use_the_orm():
    from django.contrib.auth.models import User

    User.objects.create_user("async-ada")
    User.objects.create_user("async-bob")
    result = tasks.count_users.enqueue("async-")
    work_tasks()
    assert result_of(result).return_value == 2


def test_aenqueue_and_aget_result_work_from_async_code():
    async def enqueue_and_read():
        result = await tasks.add.aenqueue(4, 5)
        return result, await tasks.add.aget_result(result.id)

    result, read = async_to_sync(enqueue_and_read)()
    assert read.status == TaskResultStatus.READY and read.id == result.id
    work_tasks()
    assert async_to_sync(task_backends["default"].aget_result)(result.id).return_value == 9


def test_a_task_enqueued_in_a_rolled_back_transaction_never_exists():
    class Abort(Exception):
        pass

    with pytest.raises(Abort), transaction.atomic():
        lost = tasks.add.enqueue(1, 2)
        assert job_row(lost.id, "state") == ("created",)  # visible inside the transaction
        raise Abort
    with transaction.atomic():
        kept = tasks.add.enqueue(3, 4)
    with pytest.raises(TaskResultDoesNotExist):
        result_of(lost)
    work_tasks()
    assert result_of(kept).return_value == 7
    assert count_jobs("default") == 1


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_signals_are_sent_on_enqueue_start_and_finish(kind):
    # The async pair runs as async handlers on the worker's loop (tasks/runners.py), whose
    # receivers run on the job's thread, where they may query as they do here.
    if kind == "sync":
        good, bad, good_args, bad_args = tasks.add, tasks.fail_to_dead_letter, (1, 2), ()
    else:
        good, bad = tasks.async_add, tasks.async_fail.using(retry_limit=0, dead_letter="tasks-dead")
        good_args, bad_args = (1, 2), ("refused",)
    seen = []
    lock = threading.Lock()

    def receiver(signal_name):
        def receive(sender, task_result, **kwargs):
            with lock:
                seen.append(
                    (
                        signal_name,
                        sender,
                        task_result.task.name,
                        task_result.status,
                        list(task_result.worker_ids),
                    )
                )

        return receive

    receivers = {name: receiver(name) for name in ("enqueued", "started", "finished")}
    stored = []

    def reads_the_stored_result(sender, task_result, **kwargs):
        # task_finished comes once the worker has stored the attempt: get_result() agrees with it.
        with lock:
            stored.append((task_result.task.name, result_of(task_result).status))

    task_finished.connect(reads_the_stored_result)
    task_enqueued.connect(receivers["enqueued"])
    task_started.connect(receivers["started"])
    task_finished.connect(receivers["finished"])
    boss.create_queue("tasks-dead")
    try:
        good.enqueue(*good_args)
        bad.enqueue(*bad_args)
        work_tasks(concurrency=1)
    finally:
        task_enqueued.disconnect(receivers["enqueued"])
        task_started.disconnect(receivers["started"])
        task_finished.disconnect(receivers["finished"])
        task_finished.disconnect(reads_the_stored_result)
    assert seen[:2] == [
        ("enqueued", PgBossBackend, good.name, TaskResultStatus.READY, []),
        ("enqueued", PgBossBackend, bad.name, TaskResultStatus.READY, []),
    ]
    # Each task's finish comes from the worker's settler, after its start; another task may start
    # in between.
    for name, status in (
        (good.name, TaskResultStatus.SUCCESSFUL),
        (bad.name, TaskResultStatus.FAILED),
    ):
        mine = [entry for entry in seen[2:] if entry[2] == name]
        assert mine == [
            ("started", PgBossBackend, name, TaskResultStatus.RUNNING, [WORKER_ID]),
            ("finished", PgBossBackend, name, status, [WORKER_ID]),
        ]
    assert sorted(stored) == sorted(
        [
            (good.name, TaskResultStatus.SUCCESSFUL),
            (bad.name, TaskResultStatus.FAILED),
        ]
    )


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_the_frameworks_failed_task_line_carries_the_tasks_exception(kind):
    # Django's task framework logs each task_finished of a failed result with the exception being
    # handled (for error trackers); the worker sends it from a handler of the task's exception.
    task = tasks.fail_always if kind == "sync" else tasks.async_fail
    framework = logging.getLogger(SOURCE)  # "django.tasks", or "django_tasks" for the backport
    records = _Records()
    framework.addHandler(records)
    try:
        result = task.using(retry_limit=0).enqueue("broken input")
        work_tasks()
    finally:
        framework.removeHandler(records)
    (line,) = [r for r in records.records if "state=FAILED" in r.getMessage()]
    assert line.levelno == logging.ERROR
    assert line.getMessage() == f"Task id={result.id} path={task.module_path} state=FAILED"
    exc = line.exc_info[1]
    assert type(exc) is (ValueError if kind == "sync" else LookupError) and str(exc) == "broken input"
    text = logging.Formatter().format(line)
    assert "NoneType: None" not in text
    # The traceback is the task's own, from the task function down, with no frame of the worker's
    # re-raise in front of it.
    assert f"in {task.func.__name__}" in text
    assert "_send_finished_in_handler" not in text


def test_a_running_task_reads_as_running_and_a_cancelled_one_as_failed():
    result = tasks.wait_for_release.enqueue()
    cancelled = tasks.add.enqueue(1, 1)
    assert boss.cancel("default", cancelled.id) == 1
    backend = task_backends["default"]
    backend.ensure_queues()
    worker = Worker(backend.registrations(), boss=backend.boss, burst=True)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        # Claimed, the job reads as running at once; its worker is recorded as the task starts.
        running = wait_for(
            lambda: (
                (r := result_of(result)).status == TaskResultStatus.RUNNING
                and r.worker_ids == [WORKER_ID]
                and r
            )
        )
        assert running.attempts == 1
        assert running.started_at is not None and running.finished_at is None
    finally:
        tasks.RELEASE.set()
        thread.join(30)
        tasks.RELEASE.clear()
    assert result_of(result).return_value == "released"
    failed = result_of(cancelled)
    assert failed.status == TaskResultStatus.FAILED
    assert failed.errors == [] and failed.attempts == 0 and failed.finished_at is not None


#: The sessions waiting for a lock, on every node (CLUSTER_LOCK_WAITS).
LOCK_WAITS = f"SELECT (SELECT count(*) FROM pg_locks WHERE NOT granted){CLUSTER_LOCK_WAITS}"


def test_a_worker_stopping_leaves_task_finished_to_another_worker_of_the_backend():
    """Two workers in one process, on two queues of one backend: the one that stops first forgets
    only its own unstored results, so the other's finished task still sends task_finished once
    its worker stores it."""
    finished = []

    def on_finished(sender, task_result, **kwargs):
        finished.append((task_result.task.name, task_result.status))

    slow = tasks.wait_for_release.enqueue()
    tasks.on_other_queue.enqueue()
    backend = task_backends["default"]
    backend.ensure_queues()
    by_queue = {r.queue: r for r in backend.registrations()}
    waiting = Worker([by_queue["default"]], boss=backend.boss, burst=True)
    other = Worker([by_queue["tasks-other"]], boss=backend.boss, burst=True)
    task_finished.connect(on_finished)
    thread = threading.Thread(target=waiting.run, daemon=True)
    thread.start()
    # A second session holds the slow job's row, so its completion waits between the task's return
    # and the worker's store: the window in which the other worker stops.
    holder = psycopg.connect(database_url())
    try:
        wait_for(lambda: result_of(slow).status == TaskResultStatus.RUNNING)
        holder.execute(
            "SELECT 1 FROM " + schema_sql() + ".job WHERE name = 'default' AND id = %s FOR UPDATE", [slow.id]
        )
        tasks.RELEASE.set()
        wait_for(lambda: rows(LOCK_WAITS)[0][0] > 0)
        other.run()  # drains tasks-other and stops while the slow task's end is unstored
        assert ("on_other_queue", TaskResultStatus.SUCCESSFUL) in finished
        holder.rollback()
        thread.join(30)
    finally:
        holder.close()
        tasks.RELEASE.set()
        thread.join(30)
        tasks.RELEASE.clear()
        task_finished.disconnect(on_finished)
    assert ("wait_for_release", TaskResultStatus.SUCCESSFUL) in finished
    assert result_of(slow).return_value == "released"


def test_an_attempt_the_monitor_expired_is_an_error_of_the_result():
    result = tasks.add.enqueue(2, 2)
    (job,) = boss.fetch("default")  # a worker claimed it, then died
    move_back(job.id, "started_on", 3600)
    assert boss.supervise().expired == 1
    expired = result_of(result)
    assert expired.status == TaskResultStatus.READY
    assert expired.attempts == 1 and expired.worker_ids == ["unknown"]
    (error,) = expired.errors
    assert error.exception_class_path == "django_pgboss.exceptions.TaskAttemptLost"
    assert "job timed out" in error.traceback
    work_tasks()
    done = result_of(result)
    assert done.return_value == 4
    assert done.worker_ids == ["unknown", WORKER_ID]
    assert [e.exception_class_path for e in done.errors] == ["django_pgboss.exceptions.TaskAttemptLost"]


def test_an_attempt_the_monitor_expired_keeps_the_history_of_the_attempts_before_it():
    result = tasks.fail_then_wait_for_release.enqueue()
    backend = task_backends["default"]
    backend.ensure_queues()
    # One slot: while the hung attempt holds it, the worker claims nothing more.
    registrations = [r.replace(concurrency=1, batch_size=1) for r in backend.registrations()]
    worker = Worker(registrations, boss=backend.boss)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        running = wait_for(
            lambda: (r := result_of(result)).attempts == 2 and r.worker_ids == [WORKER_ID, WORKER_ID] and r
        )
        assert running.status == TaskResultStatus.RUNNING
        assert [e.exception_class_path for e in running.errors] == ["builtins.RuntimeError"]
        # The second attempt hangs; the monitor expires it, which replaces the job's output.
        move_back(result.id, "started_on", 3600)
        assert boss.supervise().expired == 1
        expired = result_of(result)
        assert expired.status == TaskResultStatus.READY
        assert expired.worker_ids == [WORKER_ID, WORKER_ID]
        assert [e.exception_class_path for e in expired.errors] == [
            "builtins.RuntimeError",
            "django_pgboss.exceptions.TaskAttemptLost",
        ]
        assert "the first attempt fails" in expired.errors[0].traceback
        assert "job timed out" in expired.errors[1].traceback
    finally:
        tasks.RELEASE.set()
        # The third attempt runs (and, RELEASE set, returns at once); the hung one's late result
        # is refused by the attempt fence.
        wait_for(lambda: result_of(result).status == TaskResultStatus.SUCCESSFUL)
        worker.stop()
        thread.join(30)
        tasks.RELEASE.clear()
    done = result_of(result)
    assert done.return_value == "released"
    assert done.worker_ids == [WORKER_ID] * 3
    assert [e.exception_class_path for e in done.errors] == [
        "builtins.RuntimeError",
        "django_pgboss.exceptions.TaskAttemptLost",
    ]


# -- per-task pg-boss options ------------------------------------------------------------------


def test_task_options_set_retry_limit_and_dead_letter_of_the_job():
    boss.create_queue("tasks-dead")
    assert isinstance(tasks.fail_to_dead_letter, PgBossTask)
    result = tasks.fail_to_dead_letter.enqueue()
    assert job_row(result.id, "retry_limit", "dead_letter") == (0, "tasks-dead")
    work_tasks()
    failed = result_of(result)
    assert failed.status == TaskResultStatus.FAILED and failed.attempts == 1
    ((copy_data, source_id),) = rows("SELECT data, source_id FROM {s}.job WHERE name = 'tasks-dead'")
    assert str(source_id) == result.id
    assert '"tests.taskapp.tasks.fail_to_dead_letter"' in copy_data
    # using() takes the options too, and None keeps the task's own.
    assert tasks.fail_to_dead_letter.using(retry_limit=4, dead_letter=None).job_options == {
        "retry_limit": 4,
        "dead_letter": "tasks-dead",
    }


def test_the_task_decorator_takes_job_options_where_django_passes_them_on():
    if inspect.Parameter.VAR_KEYWORD in {p.kind for p in inspect.signature(task).parameters.values()}:
        # Django 6.1+ and the backport hand @task's extra arguments to the backend's task class.
        declared = task(retry_limit=2, dead_letter="tasks-dead")(tasks.add.func)
        assert isinstance(declared, PgBossTask)
        assert declared.job_options == {"retry_limit": 2, "dead_letter": "tasks-dead"}
        with pytest.raises(InvalidTask, match="retry_delay must be an integer"):
            task(retry_delay="soon")(tasks.add.func)
    else:
        # Django 6.0's @task takes none: the options go through using() (docs/tasks.md).
        with pytest.raises(TypeError):
            task(retry_limit=2)


def test_a_singleton_task_dropped_by_its_slot_raises_task_not_enqueued():
    first = tasks.nightly_report.enqueue()
    assert job_row(first.id, "singleton_key") == ("nightly-report",)
    with pytest.raises(TaskNotEnqueued, match="nightly_report was not enqueued"):
        tasks.nightly_report.enqueue()
    assert count_jobs("default") == 1


# -- bad input -----------------------------------------------------------------------------------


def test_a_task_that_is_not_module_level_is_invalid():
    def nested():
        return 1

    with pytest.raises(InvalidTask, match="module level"):
        task(nested)


def test_a_queue_not_in_queues_is_invalid():
    with pytest.raises(InvalidTask, match="'elsewhere' is not valid"):
        tasks.add.using(queue_name="elsewhere")
    with pytest.raises(InvalidTask, match="retry_limit must be an integer >= 0"):
        tasks.add.using(retry_limit=-1)
    with pytest.raises(TypeError, match="unknown option"):
        tasks.add.using(retries=3)


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [((object(), 1), {}, "Unsupported type"), ((1,), {"b": math.nan}, "Out of range float")],
    ids=["object", "nan"],
)
def test_an_argument_that_is_not_json_raises_before_anything_is_written(args, kwargs, message):
    with pytest.raises(JobDataNotSerializable, match=f"arguments of task tests.taskapp.tasks.add.*{message}"):
        tasks.add.enqueue(*args, **kwargs)
    assert count_jobs() == 0


def test_a_return_value_that_is_not_json_fails_the_task():
    result = tasks.unstorable.using(retry_limit=0).enqueue()
    work_tasks()
    failed = result_of(result)
    assert failed.status == TaskResultStatus.FAILED
    assert failed.errors[0].exception_class_path == "builtins.TypeError"


def test_a_job_whose_task_no_longer_imports_fails_naming_the_path():
    result = tasks.add.using(retry_limit=0, priority=7).enqueue(1, 2)
    rows(
        "UPDATE {s}.job SET data = jsonb_set(data, '{task}', '\"tests.taskapp.tasks.removed\"') WHERE id = %s",
        [result.id],
    )
    waiting = result_of(result)
    assert isinstance(waiting.task, UnresolvedTask)
    assert waiting.task.module_path == "tests.taskapp.tasks.removed"
    assert waiting.task.name == "removed" and waiting.task.priority == 7
    assert waiting.status == TaskResultStatus.READY
    work_tasks()
    failed = result_of(result)
    assert failed.status == TaskResultStatus.FAILED
    (error,) = failed.errors
    assert error.exception_class_path == "django_pgboss.exceptions.TaskNotFound"
    assert "task 'tests.taskapp.tasks.removed' cannot be imported" in error.traceback


def test_a_job_naming_something_that_is_not_a_task_is_refused():
    boss.create_queue("default")
    job_id = boss.send(
        "default",
        {"task": "tests.taskapp.tasks.plain_function", "args": [], "kwargs": {}},
        retry_limit=0,
    )
    work_tasks()
    failed = task_backends["default"].get_result(job_id)
    assert failed.status == TaskResultStatus.FAILED
    assert "is a function, not a task" in failed.errors[0].traceback
    assert "should never run" not in failed.errors[0].traceback


def test_get_result_of_an_unknown_id_raises_task_result_does_not_exist():
    backend = task_backends["default"]
    with pytest.raises(TaskResultDoesNotExist):
        backend.get_result(str(uuid.uuid4()))
    with pytest.raises(TaskResultDoesNotExist):
        backend.get_result("not-a-uuid")
    boss.create_queue("default")
    plain = boss.send("default", {"not": "a task"})
    with pytest.raises(TaskResultDoesNotExist):
        backend.get_result(plain)
    boss.create_queue("elsewhere")
    foreign = boss.send("elsewhere", {"task": "tests.taskapp.tasks.add", "args": [1, 2], "kwargs": {}})
    with pytest.raises(TaskResultDoesNotExist):
        backend.get_result(foreign)  # a queue that is not one of this backend's


def test_without_create_queues_a_missing_queue_raises_queue_not_found():
    without = {
        "default": {
            "BACKEND": "django_pgboss.tasks_backend.PgBossBackend",
            "QUEUES": ["default"],
            "OPTIONS": {"CREATE_QUEUES": False},
        }
    }
    with override_settings(TASKS=without):
        with pytest.raises(QueueNotFound, match="'default' does not exist"):
            tasks.add.enqueue(1, 2)
        assert task_backends["default"].ensure_queues() == ["default"]
    assert count_jobs() == 0


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"QUEUES": ["default"], "OPTIONS": {"SCHEMAS": "x"}}, "unknown key\\(s\\) SCHEMAS"),
        ({"QUEUES": []}, "QUEUES'\\] is empty"),
        ({"QUEUES": ["bad name!"]}, "can only contain"),
        (
            {"QUEUES": ["default"], "OPTIONS": {"QUEUE_OPTIONS": {"policy": "lifo"}}},
            "'lifo' is not a queue policy",
        ),
        ({"QUEUES": ["default"], "OPTIONS": {"DATABASE": "nope"}}, "not in DATABASES"),
        ({"QUEUES": ["default"], "OPTIONS": {"WORKER": {"threads": 2}}}, "unknown key\\(s\\) threads"),
        (
            {"QUEUES": ["default"], "OPTIONS": {"WORKER": {"concurrency": 0}}},
            "concurrency must be an integer >= 1",
        ),
        (
            {"QUEUES": ["default"], "OPTIONS": {"CREATE_QUEUES": "yes"}},
            "CREATE_QUEUES'\\] must be True or False",
        ),
    ],
    ids=[
        "unknown-option",
        "no-queues",
        "bad-queue-name",
        "bad-queue-option",
        "unknown-database",
        "worker-key",
        "worker-value",
        "create-queues",
    ],
)
def test_bad_backend_options_raise_invalid_task_backend(params, message):
    with pytest.raises(InvalidTaskBackend, match=message):
        PgBossBackend("broken", {"BACKEND": "django_pgboss.tasks_backend.PgBossBackend", **params})


# -- manage.py pgboss_work ---------------------------------------------------------------------


def test_the_worker_command_works_the_tasks_backend_queues():
    results = [tasks.add.enqueue(i, i) for i in range(5)] + [tasks.on_other_queue.enqueue()]
    # The tasks backend's queues are worked beside the @work handlers' (tests/workapp/jobs.py).
    boss.create_queue("echo")
    echo_id = boss.send("echo", {"n": 1})
    result = run_worker("--queue", "default", "--queue", "tasks-other", "--queue", "echo", "--burst")
    assert result.returncode == 0, result.stderr
    assert "7 completed, 0 failed" in result.stdout
    done = [result_of(r) for r in results]
    assert [r.return_value for r in done] == [0, 2, 4, 6, 8, "other"]
    assert job_row(echo_id, "state") == ("completed",)
    host, _, pid = done[0].worker_ids[0].rpartition(":")
    assert host and pid.isdigit() and int(pid) != os.getpid()


def test_the_worker_command_can_work_one_tasks_backend_only():
    result = tasks.add.enqueue(1, 1)
    completed = run_worker("--tasks-backend", "default", "--queue", "default", "--burst")
    assert completed.returncode == 0, completed.stderr
    assert result_of(result).return_value == 2
    unknown = run_worker("--tasks-backend", "nope", "--burst")
    assert unknown.returncode == 1 and "--tasks-backend 'nope'" in unknown.stderr


def test_the_worker_command_refuses_a_queue_with_both_a_handler_and_a_tasks_backend():
    clash = {"default": {"BACKEND": "django_pgboss.tasks_backend.PgBossBackend", "QUEUES": ["echo"]}}
    with (
        override_settings(TASKS=clash),
        pytest.raises(CommandError, match="'echo' have both an @work handler"),
    ):
        call_command("pgboss_work", "--queue", "echo", "--burst")
    twice = {
        "one": {"BACKEND": "django_pgboss.tasks_backend.PgBossBackend", "QUEUES": ["shared"]},
        "two": {"BACKEND": "django_pgboss.tasks_backend.PgBossBackend", "QUEUES": ["shared"]},
    }
    with (
        override_settings(TASKS=twice),
        pytest.raises(CommandError, match="'shared' is a queue of two tasks"),
    ):
        call_command("pgboss_work", "--burst")
    assert count_jobs() == 0 and boss.get_queues() == []


def test_a_backend_on_another_schema_is_left_to_its_own_worker():
    backends = {
        "default": {"BACKEND": "django_pgboss.tasks_backend.PgBossBackend", "QUEUES": ["default"]},
        "elsewhere": {
            "BACKEND": "django_pgboss.tasks_backend.PgBossBackend",
            "QUEUES": ["remote"],
            "OPTIONS": {"SCHEMA": "other_jobs"},
        },
    }
    with override_settings(TASKS=backends):
        assert set(task_registrations(boss)) == {"default"}
        assert set(task_registrations()) == {"default", "remote"}
        assert task_backends["elsewhere"].boss.schema == "other_jobs"


@pytest.mark.django_db(transaction=True, databases=["default", "tasks"])
def test_a_backend_on_another_database_alias_sends_in_that_alias_transactions():
    on_alias = {
        "default": {
            "BACKEND": "django_pgboss.tasks_backend.PgBossBackend",
            "QUEUES": ["default"],
            "OPTIONS": {"DATABASE": "tasks"},
        }
    }

    class Abort(Exception):
        pass

    with override_settings(TASKS=on_alias):
        assert task_backends["default"].boss.using == "tasks"
        with pytest.raises(Abort), transaction.atomic(using="tasks"):
            rolled_back = tasks.add.enqueue(1, 1)
            raise Abort
        with pytest.raises(Abort), transaction.atomic(using="default"):
            # Not the backend's alias: its enqueue commits on its own connection.
            kept = tasks.add.enqueue(2, 2)
            raise Abort
        with pytest.raises(TaskResultDoesNotExist):
            task_backends["default"].get_result(rolled_back.id)
        assert task_backends["default"].get_result(kept.id).status == TaskResultStatus.READY
    assert count_jobs("default") == 1


@pytest.fixture
def second_schema():
    """A second pg-boss schema in the test database, as the migrations would create it."""
    name = "Tasks elsewhere-2"
    install_schema(name)
    yield name
    uninstall_schema(name)


def test_a_backend_on_its_own_schema_is_worked_by_pgboss_work_tasks_backend(second_schema):
    backends = {
        **settings.TASKS,
        "elsewhere": {
            "BACKEND": "django_pgboss.tasks_backend.PgBossBackend",
            "QUEUES": ["remote"],
            "OPTIONS": {"SCHEMA": second_schema, "WORKER": {"polling_interval_seconds": 0.2}},
        },
    }
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}
    try:
        with override_settings(TASKS=backends):
            result = tasks.add.using(backend="elsewhere", queue_name="remote").enqueue(20, 1)
            schema = quote_identifier(second_schema)
            assert rows(f"SELECT name, state::text FROM {schema}.job") == [("remote", "created")]
            assert count_jobs() == 0  # nothing in the suite's own schema
            with pytest.raises(TaskResultDoesNotExist):
                task_backends["default"].get_result(result.id)
            out = StringIO()
            call_command("pgboss_work", "--tasks-backend", "elsewhere", "--burst", stdout=out)
            assert "1 completed, 0 failed" in out.getvalue()
            done = task_backends["elsewhere"].get_result(result.id)
            assert (done.return_value, done.backend, done.task.backend) == (21, "elsewhere", "elsewhere")
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)


# -- docs/tasks.md -------------------------------------------------------------------------------


REPO = Path(__file__).resolve().parents[1]


def install_shop_tasks(tmp_path, monkeypatch, tasks_block: str) -> None:
    """Make a ``shop.tasks`` module of a documented block, importable as the worker imports tasks."""
    if SOURCE == "django_tasks":
        # The one line the docs spell differently for Django 5.2 (its comment says so).
        tasks_block = tasks_block.replace("from django.tasks import task", "from django_tasks import task")
    (tmp_path / "shop").mkdir()
    (tmp_path / "shop" / "__init__.py").write_text("")
    (tmp_path / "shop" / "tasks.py").write_text(tasks_block)
    monkeypatch.syspath_prepend(str(tmp_path))
    for module in ("shop.reports", "shop.tasks", "shop"):
        monkeypatch.delitem(sys.modules, module, raising=False)


def test_the_readme_task_example_runs_as_written(tmp_path, monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(), re.S)
    (settings_block,) = [block for block in blocks if "PgBossBackend" in block]
    (tasks_block,) = [block for block in blocks if "# shop/tasks.py" in block]
    install_shop_tasks(tmp_path, monkeypatch, tasks_block)
    namespace: dict = {}
    exec(settings_block, namespace)
    try:
        with override_settings(TASKS=namespace["TASKS"]):
            from shop.tasks import add

            result = add.enqueue(2, 3)
            work_tasks()
            assert add.get_result(result.id).return_value == 5
    finally:
        for module in ("shop.tasks", "shop"):
            sys.modules.pop(module, None)


def test_the_docs_example_runs_as_written(tmp_path, monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", (REPO / "docs" / "tasks.md").read_text(), re.S)

    def block(marker: str) -> str:
        (found,) = [b for b in blocks if marker in b]
        return found

    settings_block, tasks_block = block("TASKS = {"), block("# shop/tasks.py")
    enqueue_block, result_block = block(".enqueue(user.pk)"), block(".get_result(result.id)")
    install_shop_tasks(tmp_path, monkeypatch, tasks_block)
    # The job options example is a module of the same app.
    reports = block("# shop/reports.py")
    if SOURCE == "django_tasks":
        reports = reports.replace("from django.tasks import task", "from django_tasks import task")
    (tmp_path / "shop" / "reports.py").write_text(reports)
    namespace: dict = {}
    exec(settings_block, namespace)
    try:
        with override_settings(TASKS=namespace["TASKS"]):
            exec(enqueue_block, namespace)
            assert namespace["result"].status == TaskResultStatus.READY
            work_tasks()
            exec(result_block, namespace)
            result = namespace["result"]
            assert result.status == TaskResultStatus.SUCCESSFUL
            assert result.return_value == {"sent_to": "ada@example.com"}
            assert result.task.queue_name == "emails"

            from shop.reports import send_report

            report = send_report.enqueue("2026-11-29")
            assert job_row(report.id, "name", "retry_limit", "singleton_key") == ("emails", 5, "daily-report")
            with pytest.raises(TaskNotEnqueued):
                send_report.enqueue("2026-11-29")  # the same hour's slot
            work_tasks()
            assert send_report.get_result(report.id).return_value == {"day": "2026-11-29"}
    finally:
        for module in ("shop.reports", "shop.tasks", "shop"):
            sys.modules.pop(module, None)
    assert boss.get_queue("emails").retry_backoff is True
