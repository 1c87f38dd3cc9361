"""PgBossBackend: Django's task framework (``django.tasks`` / ``django_tasks``) on pg-boss's queues.

A task enqueued through this backend is a pg-boss job: its queue is the task's queue_name, its
data is ``{"task": module path, "args": [...], "kwargs": {...}}``, its priority is the task's
priority (both run higher numbers first, so the -100..100 range maps onto pg-boss's as it is),
run_after is its start_after, and the result id is the job id. ``enqueue()`` sends on Django's
connection, so inside ``transaction.atomic()`` the task commits or rolls back with the caller's
writes. ``manage.py pgboss_work`` runs the jobs (see :class:`TaskRunner`), and ``get_result()``
reads the job back: its state is the result's status, its output the return value or the error.

Settings::

    TASKS = {
        "default": {
            "BACKEND": "django_pgboss.tasks_backend.PgBossBackend",
            "QUEUES": ["default", "emails"],
            "OPTIONS": {
                "DATABASE": "default",  # the alias pg-boss's tables are on (default: PGBOSS)
                "SCHEMA": "pgboss",  # pg-boss's schema (default: PGBOSS["SCHEMA"])
                "CREATE_QUEUES": True,  # create a missing queue on first use (default True)
                "QUEUE_OPTIONS": {"retry_limit": 3},  # create_queue() options for those queues
                "WORKER": {"concurrency": 4},  # how pgboss_work runs each queue
            },
        }
    }
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Collection, Mapping
from typing import Any, cast

from asgiref.sync import iscoroutinefunction, sync_to_async
from django.conf import settings
from django.db import connections
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.module_loading import autodiscover_modules, import_string

from django_pgboss.api.boss import Boss
from django_pgboss.api.event_loop import refuse_on_running_loop
from django_pgboss.api.queues import QueueStore
from django_pgboss.arguments import job_payload
from django_pgboss.arguments import queue_name as validate_queue_name
from django_pgboss.arguments import queue_options as validate_queue_options
from django_pgboss.db.context import DatabaseContext
from django_pgboss.exceptions import (
    DeadLetterQueueNotFound,
    JobDataNotSerializable,
    PgBossError,
    QueueNotFound,
    TaskAttemptLost,
    TaskNotEnqueued,
    TaskNotFound,
)
from django_pgboss.plans import tasks as task_plans
from django_pgboss.records import Job, jobs_from_table
from django_pgboss.tasks.attempt_history import History, lost_error, padded, return_value
from django_pgboss.tasks.attempts import WORKER_ID, Attempt, is_task_data, resolve_task
from django_pgboss.tasks.compat import (
    TASK_MAX_PRIORITY,
    TASK_MIN_PRIORITY,
    BaseTaskBackend,
    InvalidTask,
    InvalidTaskBackend,
    Task,
    TaskError,
    TaskResult,
    TaskResultDoesNotExist,
    TaskResultStatus,
    task_enqueued,
    task_finished,
)
from django_pgboss.tasks.runners import AsyncTaskRunner, TaskHandler, TaskRunner
from django_pgboss.tasks.task_classes import TASK_JOB_OPTIONS, PgBossTask, UnresolvedTask, unresolved
from django_pgboss.wire import random_uuid_text, to_json
from django_pgboss.worker.registry import Registration, validated

#: PgBossTask, UnresolvedTask and TASK_JOB_OPTIONS live in tasks/task_classes.py; this module
#: names them too, where they were first documented.
__all__ = [
    "STATUSES",
    "TASK_JOB_OPTIONS",
    "WORKER_ID",
    "PgBossBackend",
    "PgBossTask",
    "TaskHandler",
    "TaskRunner",
    "UnresolvedTask",
    "resolve_task",
    "task_backends_for",
]

logger = logging.getLogger("django_pgboss.tasks")

#: Job state -> result status.
STATUSES = {
    "created": TaskResultStatus.READY,
    "retry": TaskResultStatus.READY,
    "active": TaskResultStatus.RUNNING,
    "completed": TaskResultStatus.SUCCESSFUL,
    "cancelled": TaskResultStatus.FAILED,
    "failed": TaskResultStatus.FAILED,
}

# The tasks declared for each backend alias and queue (validate_task()), by path: True for a
# coroutine task. Kept by alias, not on the backend: Django makes a new backend when the TASKS
# setting changes (a test's override_settings), and a module's tasks are declared only once, as
# it is first imported.
_known_tasks: dict[str, dict[str, dict[str, bool]]] = {}
_known_lock = threading.Lock()

_OPTION_KEYS = frozenset({"DATABASE", "SCHEMA", "CREATE_QUEUES", "QUEUE_OPTIONS", "WORKER"})
_WORKER_KEYS = frozenset({"concurrency", "batch_size", "polling_interval_seconds"})


class PgBossBackend(BaseTaskBackend):
    """Runs Django tasks as pg-boss jobs (see the module docstring for the settings)."""

    task_class = PgBossTask

    supports_defer = True
    """Tasks may be deferred with run_after (the job's start_after)."""

    supports_async_task = True
    """Coroutine tasks run too, as async handlers on the worker's event loop (tasks/runners.py)."""

    supports_get_result = True
    """Results are read back from the job, from any thread or process."""

    supports_priority = True
    """Higher priorities are fetched first, as pg-boss orders its jobs."""

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        options = dict(self.options)
        unknown = sorted(set(options) - _OPTION_KEYS)
        if unknown:
            raise InvalidTaskBackend(
                f"TASKS[{alias!r}]['OPTIONS'] has unknown key(s) {', '.join(unknown)}; "
                f"known: {', '.join(sorted(_OPTION_KEYS))}"
            )
        if not self.queues:
            raise InvalidTaskBackend(
                f"TASKS[{alias!r}]['QUEUES'] is empty: list the queues, so that pgboss_work knows what to work"
            )
        try:
            for name in sorted(self.queues):
                validate_queue_name(name, f"TASKS[{alias!r}]['QUEUES'] entry")
            self.queue_options = dict(options.get("QUEUE_OPTIONS") or {})
            validate_queue_options("", self.queue_options, creating=True)
        except PgBossError as exc:
            raise InvalidTaskBackend(f"TASKS[{alias!r}]: {exc}") from exc
        self.create_queues = options.get("CREATE_QUEUES", True)
        if not isinstance(self.create_queues, bool):
            raise InvalidTaskBackend(f"TASKS[{alias!r}]['OPTIONS']['CREATE_QUEUES'] must be True or False")
        self.worker_options = dict(options.get("WORKER") or {})
        unknown = sorted(set(self.worker_options) - _WORKER_KEYS)
        if unknown:
            raise InvalidTaskBackend(
                f"TASKS[{alias!r}]['OPTIONS']['WORKER'] has unknown key(s) {', '.join(unknown)}; "
                f"known: {', '.join(sorted(_WORKER_KEYS))}"
            )
        database = options.get("DATABASE")
        if database is not None and database not in settings.DATABASES:
            raise InvalidTaskBackend(
                f"TASKS[{alias!r}]['OPTIONS']['DATABASE'] is {database!r}, which is not in DATABASES"
            )
        #: The database context of this backend's queues, and the Boss that sends to them.
        self.context = DatabaseContext(using=database, schema=options.get("SCHEMA"))
        self.boss = Boss(context=self.context)
        # Each attempt's TaskResult between the task's end and the worker's storing of it.
        self._unstored: dict[tuple[str, str, int], TaskResult] = {}
        self._finishing_lock = threading.Lock()
        self.registrations()  # checks the WORKER options now rather than when a worker starts

    # -- enqueueing ----------------------------------------------------------------------------

    def validate_task(self, task: Task) -> None:
        """Django's checks, and the queue name and job options pg-boss will take; a valid task is
        remembered as one of its queue's (known_tasks())."""
        super().validate_task(task)
        try:
            validate_queue_name(task.queue_name, "queue_name")
            job_payload(None, getattr(task, "job_options", {}), where=f"task {task.module_path}")
        except PgBossError as exc:
            raise InvalidTask(str(exc)) from exc
        if not isinstance(task, UnresolvedTask):
            with _known_lock:
                queues = _known_tasks.setdefault(self.alias, {})
                queues.setdefault(task.queue_name, {})[task.module_path] = iscoroutinefunction(task.func)

    def enqueue(self, task: Task, args: Any, kwargs: Any) -> TaskResult:
        """Send the task's job on Django's connection (so atomic() applies) and return its result.

        Raises InvalidTask for a task this backend cannot run, JobDataNotSerializable when an
        argument cannot be stored as JSON, and TaskNotEnqueued when the queue's policy or the
        task's singleton settings dropped the job; nothing is written in those cases. From a
        running event loop, await ``task.aenqueue()`` instead (SynchronousOnlyOperation says so).
        """
        refuse_on_running_loop(f"enqueue() of task {task.module_path}", "await task.aenqueue(...)")
        result, data, options = self.prepare(task, args, kwargs)
        if self._send(task.queue_name, data, options) is None:
            raise TaskNotEnqueued(
                f"task {task.module_path} was not enqueued: queue {task.queue_name!r}'s policy or the "
                "task's singleton settings dropped it (another job holds its singleton key or slot)"
            )
        object.__setattr__(result, "enqueued_at", timezone.now())
        task_enqueued.send(type(self), task_result=result)
        return result

    def prepare(
        self, task: Task, args: Any, kwargs: Any
    ) -> tuple[TaskResult[Any, Any], dict[str, Any], dict[str, Any]]:
        """What enqueue() sends for a task call: its result (READY, not yet enqueued), the job's
        data and its send() options (its id is the result's). Raises as enqueue() does before
        anything is written; tasks/flows.py sends several at once through boss.flow()."""
        self.validate_task(task)
        job_id = random_uuid_text()
        try:
            # TaskResult turns the arguments into JSON types (tuples into lists ...) or raises.
            result: TaskResult[Any, Any] = TaskResult(
                task=task,
                id=job_id,
                status=TaskResultStatus.READY,
                enqueued_at=None,
                started_at=None,
                finished_at=None,
                last_attempted_at=None,
                args=list(args),
                kwargs=dict(kwargs),
                backend=self.alias,
                errors=[],
                worker_ids=[],
            )
        except (TypeError, ValueError) as exc:
            raise JobDataNotSerializable(
                f"the arguments of task {task.module_path} cannot be stored as JSON: {exc}"
            ) from exc
        data: dict[str, Any] = {"task": task.module_path, "args": result.args, "kwargs": result.kwargs}
        if task.run_after is not None:
            data["run_after"] = task.run_after.isoformat()
        to_json(data, f"the arguments of task {task.module_path}")
        options: dict[str, Any] = {
            "id": job_id,
            "priority": task.priority,
            **getattr(task, "job_options", {}),
        }
        if task.run_after is not None:
            options["start_after"] = task.run_after
        return result, data, options

    async def aenqueue(self, task: Task, args: Any, kwargs: Any) -> TaskResult:
        """enqueue() for async code, on the path Boss's async twins take (api/async_twins.py):
        Django's thread-sensitive sync_to_async, so the job joins a transaction opened there."""
        return await sync_to_async(self.enqueue, thread_sensitive=True)(task, args, kwargs)

    def _send(self, queue: str, data: dict[str, Any], options: dict[str, Any]) -> str | None:
        try:
            return self.boss.send(queue, data, **options)
        except DeadLetterQueueNotFound:
            raise
        except QueueNotFound:
            if not self.create_queues:
                raise
        # Boss raises QueueNotFound without having written anything, so a caller's transaction is
        # intact: create the queue in it, then send.
        self.boss.create_queue(queue, **self.queue_options)
        return self.boss.send(queue, data, **options)

    def ensure_queues(self) -> list[str]:
        """Create this backend's missing queues (with CREATE_QUEUES); returns those still missing."""
        existing = {info.name for info in QueueStore(self.boss.context).all_queues(sorted(self.queues))}
        missing = sorted(self.queues - existing)
        if self.create_queues:
            for name in missing:
                self.boss.create_queue(name, **self.queue_options)
            return []
        return missing

    # -- results -------------------------------------------------------------------------------

    def get_result(self, result_id: str) -> TaskResult:
        """The result of a task this backend enqueued, read from its job.

        Raises TaskResultDoesNotExist for an id that is not the id of a task job in one of this
        backend's queues (jobs are deleted after their queue's retention and deletion periods).
        """
        refuse_on_running_loop("get_result() of the tasks backend", "await backend.aget_result(...)")
        try:
            job_id = str(uuid.UUID(str(result_id)))
        except ValueError:
            raise TaskResultDoesNotExist(result_id) from None
        found = jobs_from_table(
            self.context.table(
                task_plans.get_task_job(self.context.quoted_schema),
                {"names": sorted(self.queues), "id": job_id},
            )
        )
        job = found[0] if found else None
        if job is None or not is_task_data(job.data):
            raise TaskResultDoesNotExist(result_id)
        return self._result(job)

    async def aget_result(self, result_id: str) -> TaskResult:
        """get_result() for async code, on Django's thread-sensitive path (see aenqueue())."""
        return await sync_to_async(self.get_result, thread_sensitive=True)(result_id)

    def _result(self, job: Job) -> TaskResult:
        status = STATUSES[job.state or "created"]
        history = History.of(job)
        # retry_count counts the claims after the first, so a job that started has run that many
        # attempts plus one (the current one, when it is active).
        attempts = job.retry_count + 1 if job.started_on is not None else 0
        finished = (
            job.completed_on if status in (TaskResultStatus.SUCCESSFUL, TaskResultStatus.FAILED) else None
        )
        result = self._task_result(
            job,
            self._task_of(job),
            status,
            finished_at=finished,
            errors=history.errors,
            worker_ids=padded(history.worker_ids, attempts),
        )
        if status == TaskResultStatus.SUCCESSFUL:
            object.__setattr__(result, "_return_value", return_value(job.output))
        return result

    def _task_result(
        self,
        job: Job,
        task: Task,
        status: TaskResultStatus,
        *,
        finished_at: Any,
        errors: list[dict[str, str]],
        worker_ids: list[str],
    ) -> TaskResult[Any, Any]:
        """The TaskResult a task's job reads as: stored (get_result) or running (a worker's)."""
        return TaskResult(
            task=task,
            id=job.id,
            status=status,
            enqueued_at=job.created_on,
            started_at=job.started_on,
            finished_at=finished_at,
            last_attempted_at=job.started_on,
            args=job.data["args"],
            kwargs=job.data["kwargs"],
            backend=self.alias,
            errors=[TaskError(**error) for error in errors],
            worker_ids=worker_ids,
        )

    def _task_of(self, job: Job) -> Task:
        """The task a job runs, with the priority, queue and run_after it was enqueued with."""
        path = job.data["task"]
        run_after = parse_datetime(job.data["run_after"]) if job.data.get("run_after") else None
        try:
            task = resolve_task(path)
        except TaskNotFound:
            priority = job.priority or 0
            if not TASK_MIN_PRIORITY <= priority <= TASK_MAX_PRIORITY:
                priority = 0
            # Every field is given: Django 6.0's Task has no defaults for them.
            return UnresolvedTask(
                func=unresolved,
                path=path,
                backend=self.alias,
                queue_name=job.name,
                priority=priority,
                run_after=None,
            )
        try:
            return task.using(
                priority=job.priority, queue_name=job.name, run_after=run_after, backend=self.alias
            )
        except InvalidTask:
            # A job someone sent by hand with a priority Django does not allow: the task as declared.
            return task

    # -- the worker's side ---------------------------------------------------------------------

    def registrations(self) -> list[Registration]:
        """How pgboss_work runs this backend's queues: a queue with an async task among those this
        process knows (see known_tasks()) on the worker's event loop (AsyncTaskRunner, its sync
        tasks on each coroutine slot's thread), any other on handler threads (TaskRunner). One
        runner of each kind serves all the queues of its kind."""
        runners: dict[bool, TaskRunner | AsyncTaskRunner] = {}
        found = []
        try:
            for name in sorted(self.queues):
                on_loop = any(self.known_tasks(name).values())
                if on_loop not in runners:
                    runners[on_loop] = AsyncTaskRunner(self) if on_loop else TaskRunner(self)
                registration = Registration(
                    queue=name, handler=runners[on_loop], include_metadata=True, **self.worker_options
                )
                found.append(validated(registration))
        except (PgBossError, TypeError) as exc:
            raise InvalidTaskBackend(f"TASKS[{self.alias!r}]['OPTIONS']['WORKER']: {exc}") from exc
        return found

    def known_tasks(self, queue: str) -> dict[str, bool]:
        """The tasks of ``queue`` this process has seen declared (Django validates each task with
        its backend as it is made, so importing a tasks module shows its tasks), by module path:
        True for a coroutine task. pgboss_work imports each app's ``tasks`` module first
        (discover_tasks())."""
        with _known_lock:
            return dict(_known_tasks.get(self.alias, {}).get(queue, {}))

    @staticmethod
    def discover_tasks() -> None:
        """Import every installed app's ``tasks`` module, as pgboss_work imports ``jobs``
        modules for @work, so that the worker knows which queues have async tasks."""
        autodiscover_modules("tasks")

    def run_job(self, job: Job) -> dict[str, Any]:
        """Run the task a job holds; what it returns is the job's output, what it raises fails it.

        The task is looked up by its module path and must be a task object (a function decorated
        with @task): a path that no longer imports, or names anything else, fails the job with
        TaskNotFound naming the path. task_started and task_finished are sent around the call.
        This runs it all on the calling thread (a coroutine task through Django's Task.call());
        tasks/runners.py's AsyncTaskRunner runs a coroutine task on the worker's event loop instead.
        """
        return Attempt.begin(self, job, WORKER_ID).run()

    def _record_attempt(
        self, job: Job, worker_ids: list[str], errors: list[dict[str, str]], *, ended: bool
    ) -> None:
        history = {
            "job": job.id,
            "attempt": job.retry_count,
            "worker_ids": worker_ids,
            "errors": errors,
            "ended": ended,
        }
        context = self.context
        context.execute(
            task_plans.record_attempt(context.quoted_schema, context.route(job.name).table),
            {
                "name": job.name,
                "id": job.id,
                "attempt": job.retry_count,
                "history": to_json(history, "history"),
            },
        )

    def _in_transaction(self) -> bool:
        """Whether this thread's connection is inside a transaction the worker opened (a
        transactional handler's), whose rollback would take the attempt's records."""
        return connections[self.context.using].in_atomic_block

    def _finishing(self, job: Job, result: TaskResult) -> None:
        """Keep the attempt's result until the worker has stored it: task_finished is sent then
        (signals.job_completed / job_failed, see TaskRunner), so a receiver that reads the result
        finds it finished."""
        with self._finishing_lock:
            self._unstored[(job.name, job.id, job.retry_count)] = result

    def _stored(self, job: Job, *, failed: bool, output: Any, exception: BaseException | None = None) -> None:
        """The worker stored an attempt's end: send its task_finished. ``exception`` is what
        failed the attempt, when the worker failed it with one (the task's own, as it raised)."""
        with self._finishing_lock:
            result = self._unstored.pop((job.name, job.id, job.retry_count), None)
        if result is None:
            return
        if failed and result.status == TaskResultStatus.SUCCESSFUL:
            # The task returned, but the worker failed the job anyway (an output the database
            # would not store): the result is that failure.
            error = lost_error(output if isinstance(output, Mapping) else {})
            result.errors.append(TaskError(**error))
            object.__setattr__(result, "status", TaskResultStatus.FAILED)
            object.__setattr__(result, "_return_value", None)
        if result.status != TaskResultStatus.FAILED:
            task_finished.send(type(self), task_result=result)
            return
        if exception is None:
            # Failed by the worker with an output, not an exception: the error the result lists.
            last = result.errors[-1].traceback.strip().splitlines() if result.errors else []
            exception = TaskAttemptLost(last[-1] if last else "the worker failed the attempt")
        _send_finished_in_handler(type(self), result, exception)

    def _forget_unstored(self, queues: Collection[str]) -> None:
        """A worker of ``queues`` stopped: results it never stored (an attempt its stop
        interrupted, or one whose claim was lost) will not be, and send no task_finished.

        Only those queues' results go: another worker in the same process, on other queues of this
        backend, still stores its own and sends their task_finished.
        """
        with self._finishing_lock:
            for key in [key for key in self._unstored if key[0] in queues]:
                del self._unstored[key]


def _send_finished_in_handler(sender: type, result: TaskResult, exception: BaseException) -> None:
    """Send a failed result's task_finished from inside a handler of the exception that failed it.

    Django's own backends send it there, and Django's receiver relies on it: it logs the failed
    task with the exception being handled (``logger.exception()``, or ``sys.exc_info()`` on
    Django 6), for error trackers. Our worker stores the attempt's end later, on its settler
    thread, where no exception is being handled: sent bare, the receiver logged ``NoneType:
    None`` in place of the traceback. The exception is raised again only to be caught here.
    """
    traceback = exception.__traceback__
    try:
        raise exception
    except BaseException:
        # The raise put this frame in front of the task's traceback; sys.exc_info() reads the
        # traceback from the exception (Python 3.11 and later), so the task's own is put back.
        exception.__traceback__ = traceback
        task_finished.send(sender, task_result=result)


def task_backends_for(boss: Boss | DatabaseContext | None = None) -> list[PgBossBackend]:
    """The PgBossBackends of settings.TASKS; with ``boss`` (a Boss or a DatabaseContext), those on
    its database and schema."""
    from django_pgboss.tasks.compat import task_backends

    context = None if boss is None else DatabaseContext.of(boss)
    found = []
    for alias, params in (getattr(settings, "TASKS", None) or {}).items():
        try:
            backend_class = import_string(params.get("BACKEND", ""))
        except ImportError:
            continue  # Django's own check reports a backend that does not import.
        if not (isinstance(backend_class, type) and issubclass(backend_class, PgBossBackend)):
            continue
        # The class check above makes the instance a PgBossBackend (without building any other).
        backend = cast(PgBossBackend, task_backends[alias])
        if context is None or backend.context.same_database(context):
            found.append(backend)
    return found
