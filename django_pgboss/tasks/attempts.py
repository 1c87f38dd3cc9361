"""One attempt of a task job, in the steps the threaded and the async runner share.

A TaskRunner on a handler thread runs all of them in one call (PgBossBackend.run_job()). An
async runner on the worker's event loop (tasks/runners.py) runs the steps that touch the
database, or send signals whose receivers may, on the job's thread (thread-sensitive
sync_to_async), and awaits the coroutine itself on the loop in between: ``begin()`` (the task
looked up, the attempt recorded, task_started sent), the call, then ``returned()`` or ``raised()``.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from asgiref.sync import iscoroutinefunction
from django.db import DatabaseError
from django.utils import timezone
from django.utils.module_loading import import_string

from django_pgboss.exceptions import TaskNotFound
from django_pgboss.records import Job
from django_pgboss.tasks.attempt_history import META_KEY, History, padded, traceback_text
from django_pgboss.tasks.compat import (
    Task,
    TaskContext,
    TaskError,
    TaskResult,
    TaskResultStatus,
    normalize_json,
    task_started,
)
from django_pgboss.tasks.task_classes import UnresolvedTask
from django_pgboss.wire import to_json

logger = logging.getLogger("django_pgboss.tasks")

#: Who ran an attempt, as TaskResult.worker_ids lists it: this host and process.
WORKER_ID = f"{socket.gethostname()}:{os.getpid()}"[:64]


class AttemptBackend(Protocol):
    """What an attempt needs of its backend (tasks/backend.py's PgBossBackend)."""

    alias: str

    def _task_of(self, job: Job) -> Task: ...

    def _record_attempt(
        self, job: Job, worker_ids: list[str], errors: list[dict[str, str]], *, ended: bool
    ) -> None: ...

    def _finishing(self, job: Job, result: TaskResult) -> None: ...

    def _in_transaction(self) -> bool: ...

    def _task_result(
        self,
        job: Job,
        task: Task,
        status: TaskResultStatus,
        *,
        finished_at: Any,
        errors: list[dict[str, str]],
        worker_ids: list[str],
    ) -> TaskResult: ...


@dataclass
class Attempt:
    """A task job's attempt under way: its task, its running TaskResult and what it records."""

    backend: AttemptBackend
    job: Job
    task: Task
    result: TaskResult
    worker_ids: list[str]
    errors: list[dict[str, str]]
    #: The attempt runs inside a transaction the worker opened (a transactional handler), which
    #: the task's failure rolls back: its records are then made as the task returns, or after the
    #: rollback (TaskHandler.rolled_back()), never before the task (see begin()).
    deferred: bool = False

    @classmethod
    def begin(cls, backend: AttemptBackend, job: Job, worker_id: str) -> Attempt:
        """Look the task up (TaskNotFound naming the path when it cannot run), record the attempt
        as ``worker_id``'s before the task runs, and send task_started."""
        if not is_task_data(job.data):
            raise TaskNotFound(
                f"job {job.id} of queue {job.name!r} holds no task: it was not enqueued through a tasks backend"
            )
        task = backend._task_of(job)
        if isinstance(task, UnresolvedTask):
            resolve_task(job.data["task"])  # raises TaskNotFound with the reason
        errors, worker_ids = history_of(job, worker_id)
        # Inside a transaction the worker opened, every write here commits or rolls back with the
        # task: a record made before the task would lock the job's row for the whole run (the
        # monitor's expiry and the heartbeat would wait on it) and, like the record of a failure,
        # vanish in the rollback. There the attempt is recorded as the task returns, and a
        # failure after the rollback.
        deferred = backend._in_transaction()
        if not deferred:
            # Recorded before the task runs, so a running attempt reads as this worker's, and kept
            # whatever ends the attempt (see plans/tasks.py's record_attempt).
            backend._record_attempt(job, worker_ids, errors, ended=False)
        result = backend._task_result(
            job, task, TaskResultStatus.RUNNING, finished_at=None, errors=errors, worker_ids=worker_ids
        )
        task_started.send(type(backend), task_result=result)
        return cls(backend, job, task, result, worker_ids, errors, deferred)

    @property
    def is_async(self) -> bool:
        """Whether the task is a coroutine function (``async def``)."""
        return iscoroutinefunction(self.task.func)

    def arguments(self) -> tuple[list[Any], dict[str, Any]]:
        """The task function's positional and keyword arguments (its context first, if it takes one)."""
        args = list(self.result.args)
        if self.task.takes_context:
            args.insert(0, TaskContext(task_result=self.result))
        return args, dict(self.result.kwargs)

    def checked(self, value: Any) -> Any:
        """The task's return value as JSON will give it back; raises when it cannot be stored."""
        value = normalize_json(value)
        to_json(value, f"the return value of task {self.task.module_path}")
        return value

    def returned(self, value: Any) -> dict[str, Any]:
        """The task returned ``value`` (already checked()): the job's output."""
        if self.deferred:
            # In the task's transaction, so it commits with the completion.
            self.backend._record_attempt(self.job, self.worker_ids, self.errors, ended=False)
        result = self.result
        object.__setattr__(result, "_return_value", value)
        object.__setattr__(result, "status", TaskResultStatus.SUCCESSFUL)
        object.__setattr__(result, "finished_at", timezone.now())
        self.backend._finishing(self.job, result)
        return {"return_value": value, META_KEY: self._meta()}

    def raised(self, exc: Exception) -> None:
        """The task raised ``exc``: record the error on the attempt and on the exception, which the
        caller raises again so that the worker fails the job with it."""
        path = f"{type(exc).__module__}.{type(exc).__qualname__}"
        error = {"exception_class_path": path, "traceback": traceback_text(exc)}
        result = self.result
        result.errors.append(TaskError(**error))
        object.__setattr__(result, "status", TaskResultStatus.FAILED)
        object.__setattr__(result, "finished_at", timezone.now())
        if not self.deferred:
            record_failure(self.backend, self.job, self.worker_ids, [*self.errors, error])
        self.backend._finishing(self.job, result)
        # The worker stores the exception's attributes with its name, message and traceback: this
        # one carries the class path and the attempt history into the job's output.
        exc.__dict__[META_KEY] = {**self._meta(), "exception_class_path": path}

    def run(self) -> dict[str, Any]:
        """The whole call on this thread (a coroutine task through Task.call(), async_to_sync):
        the job's output, or the task's exception raised."""
        args, kwargs = self.arguments()
        try:
            value = self.checked(self.task.call(*args, **kwargs))
        except Exception as exc:
            self.raised(exc)
            raise
        return self.returned(value)

    def _meta(self) -> dict[str, Any]:
        return {"worker_ids": self.worker_ids, "errors": self.errors}


def history_of(job: Job, worker_id: str) -> tuple[list[dict[str, str]], list[str]]:
    """The errors of the attempts before ``job``'s (as fetched), and the worker ids of every
    attempt up to it, its own ``worker_id``'s last."""
    history = History.of(job)
    return history.errors, [*padded(history.worker_ids, job.retry_count), worker_id]


def record_failure(
    backend: AttemptBackend, job: Job, worker_ids: list[str], errors: list[dict[str, str]]
) -> None:
    """Record a failed attempt (its errors, the last its own); a database error is logged."""
    try:
        backend._record_attempt(job, worker_ids, errors, ended=True)
    except DatabaseError:
        # The task's own error is what the job must keep; the monitor's expiry of a later
        # attempt could then cost this one's error, nothing more.
        logger.warning("could not record the failed attempt of task job %s", job.id, exc_info=True)


def record_rolled_back(backend: AttemptBackend, job: Job, exc: BaseException) -> None:
    """Record the failed attempt of a job whose transactional run rolled back, taking with it what
    the attempt recorded inside it; ``exc`` is why (the task's exception, or the worker's reason
    the run could not commit). The worker fails the job next, so the attempt fence still lets
    the record land."""
    errors, worker_ids = history_of(job, WORKER_ID)
    error = {
        "exception_class_path": f"{type(exc).__module__}.{type(exc).__qualname__}",
        "traceback": traceback_text(exc),
    }
    record_failure(backend, job, worker_ids, [*errors, error])


def resolve_task(path: str) -> Task:
    """The task object at a module path; TaskNotFound when it does not import or is no task."""
    try:
        task = import_string(path)
    except ImportError as exc:
        raise TaskNotFound(f"task {path!r} cannot be imported: {exc}") from exc
    if not isinstance(task, Task):
        raise TaskNotFound(
            f"{path!r} is a {type(task).__name__}, not a task (a function decorated with @task): refusing to run it"
        )
    return task


def is_task_data(data: Any) -> bool:
    """Whether a job's data is a task's, as PgBossBackend.prepare() writes it."""
    return (
        isinstance(data, Mapping)
        and isinstance(data.get("task"), str)
        and isinstance(data.get("args"), list)
        and isinstance(data.get("kwargs"), Mapping)
    )
