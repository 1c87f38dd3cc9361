"""A tasks backend whose handlers are transactional (WORKER {"transactional": True}): each attempt's
record (its worker id, its error and traceback) is kept as for any other task, although the run's
transaction rolls back when the task raises."""

from __future__ import annotations

import threading

import pytest

from django_pgboss import boss
from django_pgboss.tasks.attempt_history import META_KEY
from django_pgboss.tasks.backend import WORKER_ID
from django_pgboss.tasks.compat import TaskResultStatus, task_backends
from django_pgboss.worker import Worker
from tests.helpers import job_row, rows
from tests.processes import wait_for
from tests.taskapp import tasks

pytestmark = pytest.mark.django_db(transaction=True)


#: The backend's queue with no async task: its runner is a threaded handler, which may be
#: transactional (an async handler may not; the default queue has async tasks).
QUEUE = "tasks-other"


def transactional_registrations(**changes):
    backend = task_backends["default"]
    backend.ensure_queues()
    (registration,) = [r for r in backend.registrations() if r.queue == QUEUE]
    assert not registration.is_async
    return backend, [registration.replace(transactional=True, **changes)]


def result_of(result):
    return task_backends["default"].get_result(result.id)


def test_each_failed_attempt_of_a_transactional_task_is_recorded_after_its_rollback():
    result = tasks.fail_always.using(queue_name=QUEUE).enqueue("broken input")
    backend, registrations = transactional_registrations()
    Worker(registrations, boss=backend.boss, burst=True).run()
    failed = result_of(result)
    assert failed.status == TaskResultStatus.FAILED
    assert failed.attempts == 3 and failed.worker_ids == [WORKER_ID] * 3
    assert [error.exception_class_path for error in failed.errors] == ["builtins.ValueError"] * 3
    assert all("ValueError: broken input" in error.traceback for error in failed.errors)
    # The record is in the job's data, where the task backend keeps it (an output is replaced by
    # whatever ends a later attempt), for the last attempt, with its end.
    (data,) = job_row(result.id, "data")
    record = data[META_KEY]
    assert (record["job"], record["attempt"], record["ended"]) == (result.id, 2, True)
    assert record["worker_ids"] == [WORKER_ID] * 3
    assert [error["exception_class_path"] for error in record["errors"]] == ["builtins.ValueError"] * 3
    assert "fail_always" in record["errors"][-1]["traceback"]


def test_a_transactional_task_that_succeeds_on_a_retry_keeps_the_earlier_error():
    result = tasks.succeed_on_attempt.using(queue_name=QUEUE).enqueue(2)
    backend, registrations = transactional_registrations()
    Worker(registrations, boss=backend.boss, burst=True).run()
    done = result_of(result)
    assert done.status == TaskResultStatus.SUCCESSFUL
    assert done.return_value["earlier_errors"] == 1
    assert done.worker_ids == [WORKER_ID, WORKER_ID]
    assert [e.exception_class_path for e in done.errors] == ["builtins.RuntimeError"]
    assert "attempt 1 fails" in done.errors[0].traceback


def test_a_transactional_task_s_history_outlives_the_monitor_expiring_a_later_attempt():
    """The monitor's expiry replaces the job's output: the first attempt's error is then only in
    the record, which must have been committed after that attempt's rollback. The running attempt
    must not hold its job's row either, or the expiry would wait for it."""
    result = tasks.fail_then_wait_for_release.using(queue_name=QUEUE).enqueue()
    backend, registrations = transactional_registrations(concurrency=1, batch_size=1)
    worker = Worker(registrations, boss=backend.boss)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        running = wait_for(
            lambda: (r := result_of(result)).status == TaskResultStatus.RUNNING and r.attempts == 2 and r,
            timeout=60,
        )
        assert [e.exception_class_path for e in running.errors] == ["builtins.RuntimeError"]
        rows(
            "UPDATE {s}.job SET started_on = started_on - interval '1 hour' WHERE id = %s AND state = 'active'",
            [result.id],
        )
        # On its own connection, so a row lock the running attempt held would block it, not the test.
        expired = run_with_timeout(lambda: boss.supervise().expired, seconds=20)
        assert expired == 1
        lost = result_of(result)
        assert lost.status == TaskResultStatus.READY
        assert [e.exception_class_path for e in lost.errors] == [
            "builtins.RuntimeError",
            "django_pgboss.exceptions.TaskAttemptLost",
        ]
        assert "the first attempt fails" in lost.errors[0].traceback
        assert "job timed out" in lost.errors[1].traceback
    finally:
        tasks.RELEASE.set()
        wait_for(lambda: result_of(result).status == TaskResultStatus.SUCCESSFUL, timeout=60)
        worker.stop()
        thread.join(30)
        tasks.RELEASE.clear()
    done = result_of(result)
    assert done.return_value == "released"
    assert [e.exception_class_path for e in done.errors] == [
        "builtins.RuntimeError",
        "django_pgboss.exceptions.TaskAttemptLost",
    ]


def run_with_timeout(call, *, seconds: float):
    """``call()`` on a thread of its own (its own connection); fails the test past ``seconds``."""
    from django.db import connection

    outcome: list = []

    def target():
        try:
            outcome.append(("ok", call()))
        except BaseException as exc:  # handed back to the test
            outcome.append(("error", exc))
        finally:
            connection.close()

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert outcome, f"still waiting after {seconds}s (a row lock held by the running attempt?)"
    kind, value = outcome[0]
    if kind == "error":
        raise value
    return value


class _Raising:
    """A transactional handler that raises, whose rolled_back() hook raises too."""

    calls: list = []

    def __call__(self, job):
        raise ValueError("the handler fails")

    def rolled_back(self, jobs, exc):
        self.calls.append(([job.id for job in jobs], type(exc).__name__))
        raise RuntimeError("the hook fails too")


def test_a_rolled_back_hook_that_raises_is_logged_and_the_job_is_failed_all_the_same(caplog):
    from django_pgboss.worker.registry import Registration

    boss.create_queue("hooked", retry_limit=0)
    job_id = boss.send("hooked", {})
    handler = _Raising()
    Worker([Registration("hooked", handler, transactional=True)], burst=True).run()
    assert handler.calls == [([job_id], "ValueError")]
    state, output = job_row(job_id, "state", "output")
    assert state == "failed" and output["message"] == "the handler fails"
    assert "rolled_back() raised" in caplog.text
