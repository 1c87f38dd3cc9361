"""Waiting for a job to reach a state, and spies on what a queue's handler saw (pg-boss's spies).

``wait_for_job()`` reads the job from the database until it is in the state asked for, so it
sees a worker on a thread of the test process and one in another process alike (the job must be
committed for another connection to see it: a ``transactional_db`` test). ``JobSpy`` records
what the worker's signals report for one queue, in this process (a Worker on a thread,
``run_jobs()``): each job its handler started, completed, or failed for good, with the data and
output, as pg-boss's ``getSpy(name)`` does; its waits fall back to the database for a job it has
not seen, so they also see a worker in another process.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from django_pgboss import arguments, signals
from django_pgboss.api.boss import Boss
from django_pgboss.constants import JobState
from django_pgboss.exceptions import InvalidOption, JobStateUnreachable, WaitTimedOut
from django_pgboss.records import Job

__all__ = ["JobSpy", "SpyJob", "wait_for_job"]

#: The states after which a job changes no more (its retries used up, or none asked for).
FINAL_STATES = frozenset({JobState.COMPLETED.value, JobState.CANCELLED.value, JobState.FAILED.value})
#: The states a spy records, as pg-boss's spies name them.
SPY_STATES = ("created", "active", "completed", "failed")
#: How often a wait reads the job again (real time).
POLL_SECONDS = 0.05


def wait_for_job(
    name: str,
    id: str,
    state: str = "completed",
    *,
    timeout: float = 10.0,
    using: str | None = None,
    schema: str | None = None,
) -> Job:
    """Wait until job ``id`` of queue ``name`` is in ``state`` (a job state: "completed" by
    default, "active", "failed", "retry", ...), and return it as it is then.

    Reads the job every POLL_SECONDS, in real time whatever a TestClock says. Raises WaitTimedOut
    after ``timeout`` seconds (naming the state the job was last seen in), JobStateUnreachable as
    soon as the job ended in another final state or was deleted, and InvalidOption (or
    InvalidQueueName) for a bad argument before reading anything.
    """
    _check_wait(name, id, state, timeout, states=tuple(JobState.values))
    if using is not None and using not in settings.DATABASES:
        raise InvalidOption(f"using names no database in settings.DATABASES: {using!r}")
    boss = Boss(using, schema)
    job_id = arguments.uuid_text(id, "id")
    give_up = time.monotonic() + timeout
    while True:
        job = boss.get_job_by_id(name, job_id)
        reached = _reached(job, state, name, job_id)
        if reached is not None:
            return reached
        if time.monotonic() >= give_up:
            seen = "does not exist (yet)" if job is None else f"is {job.state!r}"
            raise WaitTimedOut(
                f"job {job_id} of {name!r} did not become {state!r} within {timeout}s: it {seen}"
            )
        time.sleep(POLL_SECONDS)


def _check_wait(name: object, id: object, state: object, timeout: object, *, states: tuple[str, ...]) -> None:
    arguments.queue_name(name, "name")
    arguments.uuid_text(id, "id")
    if not isinstance(state, str) or state not in states:
        raise InvalidOption(f"state must be one of {', '.join(states)}, not {state!r}")
    arguments.number("timeout", timeout, minimum=0.0)


def _reached(job: Job | None, state: str, name: str, job_id: str, *, seen: bool = False) -> Job | None:
    """The job when it is in ``state``; None to wait more; JobStateUnreachable when it never will be."""
    if job is None:
        if seen:
            raise JobStateUnreachable(f"job {job_id} of {name!r} was deleted before it became {state!r}")
        return None
    if job.state == state:
        return job
    if job.state in FINAL_STATES:
        raise JobStateUnreachable(
            f"job {job_id} of {name!r} is {job.state!r}, a final state: it will not become {state!r}"
            + _failure(job)
        )
    return None


def _failure(job: Job) -> str:
    output = job.output
    if job.state == JobState.FAILED.value and isinstance(output, dict) and "message" in output:
        return f" (it failed with {output.get('name', 'an error')}: {output['message']})"
    return ""


@dataclass(frozen=True)
class SpyJob:
    """A job as a spy saw it: pg-boss's SpyJob (``state`` is one of SPY_STATES)."""

    id: str
    name: str
    data: Any
    state: str
    output: Any = None


class JobSpy:
    """Records the jobs of queue ``name`` that handlers in this process started and ended.

    A context manager (or ``attach()`` / ``detach()``): while attached it listens to the worker's
    signals (``job_started``, ``job_completed``, ``job_failed``), sent by a Worker on a thread and
    by run_jobs() alike, and keeps each job in each state it reached: "active" (its handler
    started), "completed" (with the output stored), "failed" (for good: a failure that will retry
    is not recorded, as in pg-boss). pg-boss also records "created" at send; Django sends no signal
    there, so a spy never sees it: wait for it with wait_for_job().

    ``wait_for_job(selector, state)`` and ``wait_for_job_with_id(id, state)`` return the first
    recorded job that matches, waiting for one if need be; the wait by id also reads the job from
    the database, so it sees a worker in another process too. ``jobs`` lists what was recorded;
    ``clear()`` forgets it.
    """

    def __init__(self, name: str, *, using: str | None = None, schema: str | None = None) -> None:
        self.name = arguments.queue_name(name, "name")
        if using is not None and using not in settings.DATABASES:
            raise InvalidOption(f"using names no database in settings.DATABASES: {using!r}")
        self._using = using
        self._schema = schema
        self._records: dict[tuple[str, str], SpyJob] = {}
        self._changed = threading.Condition()
        self._attached = False

    def __enter__(self) -> JobSpy:
        self.attach()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.detach()

    def attach(self) -> None:
        """Start recording."""
        if self._attached:
            raise RuntimeError(f"this JobSpy on {self.name!r} is already attached")
        uid = self._uid()
        signals.job_started.connect(self._started, dispatch_uid=f"{uid}:started", weak=False)
        signals.job_completed.connect(self._completed, dispatch_uid=f"{uid}:completed", weak=False)
        signals.job_failed.connect(self._failed, dispatch_uid=f"{uid}:failed", weak=False)
        self._attached = True

    def detach(self) -> None:
        """Stop recording (what was recorded stays readable)."""
        uid = self._uid()
        signals.job_started.disconnect(dispatch_uid=f"{uid}:started")
        signals.job_completed.disconnect(dispatch_uid=f"{uid}:completed")
        signals.job_failed.disconnect(dispatch_uid=f"{uid}:failed")
        self._attached = False

    def _uid(self) -> str:
        return f"django_pgboss.testing.JobSpy:{id(self)}"

    # -- recording -------------------------------------------------------------------------------

    def _started(self, sender: Any, queue: str, job: Job, **kwargs: Any) -> None:
        if queue == self.name:
            self._record(job, "active", None)

    def _completed(self, sender: Any, queue: str, job: Job, output: Any = None, **kwargs: Any) -> None:
        if queue == self.name:
            self._record(job, "completed", output)

    def _failed(
        self, sender: Any, queue: str, job: Job, output: Any = None, will_retry: bool = False, **kwargs: Any
    ) -> None:
        if queue == self.name and not will_retry:
            self._record(job, "failed", output)

    def _record(self, job: Job, state: str, output: Any) -> None:
        entry = SpyJob(job.id, self.name, copy.deepcopy(job.data), state, copy.deepcopy(output))
        with self._changed:
            self._records[(job.id, state)] = entry
            self._changed.notify_all()

    # -- reading ---------------------------------------------------------------------------------

    @property
    def jobs(self) -> list[SpyJob]:
        """Every job recorded, in each state it was recorded in, in the order they came."""
        with self._changed:
            return list(self._records.values())

    def clear(self) -> None:
        """Forget every job recorded."""
        with self._changed:
            self._records.clear()

    def wait_for_job(
        self, selector: Callable[[Any], bool], state: str = "completed", *, timeout: float = 10.0
    ) -> SpyJob:
        """The first job recorded in ``state`` whose data ``selector(data)`` accepts, waiting up to
        ``timeout`` seconds (real time) for one; raises WaitTimedOut after that."""
        if not callable(selector):
            raise InvalidOption(f"selector must be a function of a job's data, not {selector!r}")
        self._check_state(state)
        arguments.number("timeout", timeout, minimum=0.0)
        give_up = time.monotonic() + timeout
        with self._changed:
            while True:
                for entry in self._records.values():
                    if entry.state == state and selector(entry.data):
                        return entry
                left = give_up - time.monotonic()
                if left <= 0:
                    raise WaitTimedOut(
                        f"no job of {self.name!r} matching the selector became {state!r} within {timeout}s"
                    )
                self._changed.wait(left)

    def wait_for_job_with_id(self, id: str, state: str = "completed", *, timeout: float = 10.0) -> SpyJob:
        """Job ``id`` once recorded in ``state``, or found in it in the database (a worker in
        another process); raises WaitTimedOut after ``timeout`` seconds (real time), and
        JobStateUnreachable once the job is in another final state."""
        _check_wait(self.name, id, state, timeout, states=SPY_STATES)
        job_id = arguments.uuid_text(id, "id")
        boss = Boss(self._using, self._schema)
        give_up = time.monotonic() + timeout
        while True:
            with self._changed:
                entry = self._records.get((job_id, state))
                if entry is not None:
                    return entry
            stored = boss.get_job_by_id(self.name, job_id)
            if stored is not None and stored.state == state:
                return SpyJob(stored.id, self.name, stored.data, state, stored.output)
            if state != "active":
                # A job that ended otherwise will not get there; one that went past "active"
                # while nobody looked was active all the same, so that wait runs to its timeout.
                _reached(stored, state, self.name, job_id)
            left = give_up - time.monotonic()
            if left <= 0:
                seen = "does not exist (yet)" if stored is None else f"is {stored.state!r}"
                raise WaitTimedOut(
                    f"job {job_id} of {self.name!r} did not become {state!r} within {timeout}s: it {seen}"
                )
            with self._changed:
                self._changed.wait(min(left, POLL_SECONDS))

    @staticmethod
    def _check_state(state: object) -> None:
        if not isinstance(state, str) or state not in SPY_STATES:
            raise InvalidOption(f"a spy's state is one of {', '.join(SPY_STATES)}, not {state!r}")
