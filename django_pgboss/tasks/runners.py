"""The handlers pgboss_work runs a tasks backend's jobs with: TaskRunner on handler threads, and
AsyncTaskRunner, which runs a queue with an async task as an async handler on the worker's loop.

Which queues: those with a coroutine task (``async def``) among the tasks the worker process knows
(PgBossBackend.known_tasks(): pgboss_work imports each app's ``tasks`` module first). A queue with
no async task keeps its handler threads (TaskRunner), unchanged.

A coroutine task is awaited on the worker's event loop, in its job's own ThreadSensitiveContext
(worker/async_slots.py), so ``concurrency`` of them run at once on one thread and the async ORM
works inside it. What touches the database or sends a signal (the attempt recorded, task_started,
a failed attempt's error) runs on the job's thread through thread-sensitive sync_to_async, where
receivers may query as they do for a threaded task; task_finished follows the worker's storing of
the attempt, as for threaded tasks.

A sync task on such a queue (a queue may hold both kinds) runs whole on its coroutine slot's own
thread, the thread the slot keeps for its jobs' thread-sensitive calls, and never on the loop: it
gets a thread of its own as on a threaded queue, with the same connection handling. What differs
is its deadline: a thread cannot be cancelled, so, as for any coroutine that does not end when
cancelled, the slot leaves it running after ABANDON_GRACE_SECONDS, counted as abandoned (and
against ``max_abandoned_threads``), and goes on with a new thread.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, Protocol

from asgiref.sync import sync_to_async

from django_pgboss import signals
from django_pgboss.records import Job
from django_pgboss.tasks.attempts import WORKER_ID, Attempt, AttemptBackend, record_rolled_back


class RunnerBackend(AttemptBackend, Protocol):
    """What a runner needs of its backend (tasks/backend.py's PgBossBackend)."""

    def ensure_queues(self) -> list[str]: ...

    def _stored(
        self, job: Job, *, failed: bool, output: Any, exception: BaseException | None = None
    ) -> None: ...

    def _forget_unstored(self, queues: Collection[str]) -> None: ...


class TaskHandler:
    """What both runners of a backend's jobs share: task_finished once the worker stored an
    attempt's end, and the queues created before a worker runs them. TaskRunner runs the jobs on
    handler threads; AsyncTaskRunner on the worker's event loop."""

    def __init__(self, backend: RunnerBackend) -> None:
        self.backend = backend
        # Registration.label reads these, for the worker's log lines and registration conflicts.
        self.__qualname__ = f"{type(backend).__name__}[{backend.alias!r}]"
        self.__module__ = type(backend).__module__
        # task_finished is sent once the worker stored the attempt's end. Weak receivers: they go
        # when the runner does (with the worker's registrations).
        signals.job_completed.connect(self._completed)
        signals.job_failed.connect(self._failed)
        signals.worker_stopped.connect(self._stopped)

    def _mine(self, worker: Any, queue: str) -> bool:
        registration = next((r for r in getattr(worker, "registrations", ()) if r.queue == queue), None)
        return registration is not None and registration.handler is self

    def _completed(self, sender: Any, worker: Any, queue: str, job: Job, output: Any, **kwargs: Any) -> None:
        if self._mine(worker, queue):
            self.backend._stored(job, failed=False, output=output)

    def _failed(
        self,
        sender: Any,
        worker: Any,
        queue: str,
        job: Job,
        output: Any,
        exception: BaseException | None = None,
        **kwargs: Any,
    ) -> None:
        if self._mine(worker, queue):
            self.backend._stored(job, failed=True, output=output, exception=exception)

    def _stopped(self, sender: Any, worker: Any, **kwargs: Any) -> None:
        queues = {r.queue for r in getattr(worker, "registrations", ()) if r.handler is self}
        if queues:
            self.backend._forget_unstored(queues)

    def prepare(self) -> None:
        """Before a worker runs these queues: a backend with CREATE_QUEUES creates them now (the
        worker is a first use, as an enqueue is)."""
        self.backend.ensure_queues()

    def rolled_back(self, jobs: list[Job], exc: BaseException) -> None:
        """After a transactional run of ``jobs`` rolled back (the worker calls it before failing
        them): record each failed attempt, which the rollback took (tasks/attempts.py)."""
        for job in jobs:
            record_rolled_back(self.backend, job, exc)


class TaskRunner(TaskHandler):
    """The handler pgboss_work calls on handler threads for a backend's jobs (one per backend,
    shared by its queues that have no async task: see PgBossBackend.registrations())."""

    def __call__(self, job: Job) -> dict[str, Any]:
        return Attempt.begin(self.backend, job, WORKER_ID).run()


class AsyncTaskRunner(TaskHandler):
    """The handler pgboss_work awaits for a backend's jobs on queues that have an async task."""

    async def __call__(self, job: Job) -> dict[str, Any]:
        attempt = await sync_to_async(Attempt.begin, thread_sensitive=True)(self.backend, job, WORKER_ID)
        if not attempt.is_async:
            # A sync task: on the slot's thread, never on the loop, as a threaded queue runs it.
            return await sync_to_async(attempt.run, thread_sensitive=True)()
        args, kwargs = attempt.arguments()
        try:
            value = attempt.checked(await attempt.task.func(*args, **kwargs))
        except Exception as exc:
            # Django's TaskResult records Exceptions; a BaseException (CancelledError at the
            # deadline or a stop, KeyboardInterrupt, SystemExit) passes to the worker, which
            # fails or puts back the job as it does for any async handler.
            await sync_to_async(attempt.raised, thread_sensitive=True)(exc)
            raise
        return attempt.returned(value)
