"""An in-memory job store and a clock the test moves, for the worker's fast tests.

``MemoryStore`` implements the worker's ports (django_pgboss/worker/ports.py: ``WorkerStore`` and
``QueueCatalog``) with the rules of the PostgreSQL statements it stands in for (plans/jobs.py,
plans/settle.py), so that what a test sees is what the database would show:

- a fetch claims ready jobs ('created' or 'retry', due), highest priority first, and makes them
  'active'; a job that was started before has its retry_count bumped by the claim (a new attempt);
- every settle is fenced to the attempt it names (id and retry_count, the job still 'active');
  a job whose attempt is no longer active is left alone and missing from the result;
- a failure retries the job while retry_count < retry_limit, else fails it for good and, when the
  queue has a dead letter queue, copies it there; ``terminal`` fails it for good at once;
- a requeue of a job never started clears its start (its next claim is no new attempt); of one
  cut short, grows its retry_limit by one; either way it waits as 'retry', due now.

It can refuse outputs (``refuse``: a predicate on an output, as the database refuses a value it
cannot store) and fail the next calls of a method with database trouble (``trouble``), and it
records every call (``calls``) for a test to read.

``ManualClock`` implements the ``Clock`` port: its time moves only by ``advance()``, and its waits
end when their event is set or when the clock has been moved past their end.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.db import OperationalError

from django_pgboss.records import Job
from django_pgboss.wire import EncodedOutput, output_value, to_json
from django_pgboss.worker.ports import Clock, QueueCatalog, WorkerStore


@dataclass
class StoredJob:
    """One job row of the memory store."""

    id: str
    name: str
    data: Any
    state: str = "created"
    retry_count: int = 0
    retry_limit: int = 2
    expire_in_seconds: int = 900
    heartbeat_seconds: int | None = None
    priority: int = 0
    group_id: str | None = None
    start_after: float = 0.0
    started: bool = False
    output: Any = None
    order: int = 0
    touches: int = 0


@dataclass
class MemoryQueue:
    """A queue of the memory store: what the worker reads (name, notify) and its retry rules."""

    name: str
    notify: bool = False
    retry_limit: int = 2
    retry_delay: float = 0.0
    dead_letter: str | None = None
    expire_in_seconds: int = 900
    heartbeat_seconds: int | None = None


@dataclass
class Call:
    """One call the worker made on the store: the method, the queue and the jobs' ids."""

    method: str
    queue: str
    ids: list[str] = field(default_factory=list)
    #: What a fetch asked for (its batch_size); 0 for the other calls.
    asked: int = 0


class Refused(ValueError):
    """What the memory store raises for an output it refuses (no DatabaseError: a refusal)."""


class MemoryStore:
    """The worker's store and queue catalogue, in memory (see the module docstring)."""

    def __init__(self, clock: ManualClock | None = None) -> None:
        self.clock = clock
        self.lock = threading.Lock()
        self.jobs: dict[str, StoredJob] = {}
        self.queues: dict[str, MemoryQueue] = {}
        self.calls: list[Call] = []
        self.refuse: Callable[[Any], bool] = lambda output: False
        self._trouble: dict[str, int] = {}
        self._order = itertools.count()

    # -- the test's side ---------------------------------------------------------------------------

    def create_queue(self, name: str, **options: Any) -> None:
        self.queues[name] = MemoryQueue(name, **options)

    def send(self, name: str, data: Any = None, **options: Any) -> str:
        queue = self.queues[name]
        job = StoredJob(
            id=str(uuid.uuid4()),
            name=name,
            data=data,
            retry_limit=options.pop("retry_limit", queue.retry_limit),
            expire_in_seconds=options.pop("expire_in_seconds", queue.expire_in_seconds),
            heartbeat_seconds=options.pop("heartbeat_seconds", queue.heartbeat_seconds),
            order=next(self._order),
            **options,
        )
        with self.lock:
            self.jobs[job.id] = job
        return job.id

    def send_many(self, name: str, count: int, **options: Any) -> list[str]:
        return [self.send(name, {"n": index}, **options) for index in range(count)]

    def trouble(self, method: str, times: int = 1) -> None:
        """Make the next ``times`` calls of ``method`` fail as a lost connection does."""
        self._trouble[method] = times

    def states(self, name: str) -> dict[str, int]:
        """How many jobs of ``name`` are in each state."""
        counts: dict[str, int] = {}
        with self.lock:
            for job in self.jobs.values():
                if job.name == name:
                    counts[job.state] = counts.get(job.state, 0) + 1
        return counts

    def calls_of(self, method: str) -> list[Call]:
        with self.lock:
            return [call for call in self.calls if call.method == method]

    # -- the ports ---------------------------------------------------------------------------------

    def all_queues(self, names: Iterable[str] | None = None) -> list[MemoryQueue]:
        wanted = None if names is None else set(names)
        return [q for name, q in sorted(self.queues.items()) if wanted is None or name in wanted]

    def use_generic_plans(self) -> None:
        return None

    def fetch(
        self,
        name: str,
        *,
        batch_size: int = 1,
        include_metadata: bool = False,
        min_priority: int | None = None,
        max_priority: int | None = None,
        group_concurrency: int | Mapping[str, Any] | None = None,
        ignore_start_after: bool = False,
        ignore_groups: Sequence[str] | None = None,
        include_trace_context: bool = False,
    ) -> list[Job]:
        now = self._now()
        with self.lock:
            self._call("fetch", name, [], asked=batch_size)
            ready = [
                job
                for job in self.jobs.values()
                if job.name == name
                and job.state in ("created", "retry")
                and (ignore_start_after or job.start_after <= now)
                and (min_priority is None or job.priority >= min_priority)
                and (max_priority is None or job.priority <= max_priority)
                and not (ignore_groups and job.group_id in ignore_groups)
            ]
            ready.sort(key=lambda job: (-job.priority, job.order))
            claimed = []
            for job in ready[:batch_size]:
                if job.started:
                    job.retry_count += 1
                job.started = True
                job.state = "active"
                claimed.append(job)
            self.calls[-1].ids = [job.id for job in claimed]
            return [self._record(job) for job in claimed]

    def complete_each(self, name: str, results: Sequence[tuple[Job | Mapping[str, Any], Any]]) -> list[str]:
        with self.lock:
            self._call("complete_each", name, [self._id(job) for job, _output in results])
            for _job, output in results:
                value = _decoded(output)
                if self.refuse(value):
                    raise Refused(f"the store refuses the output {value!r}")
            completed = []
            for job, output in results:
                row = self._held(name, job)
                if row is not None:
                    row.state, row.output = "completed", _decoded(output)
                    completed.append(row.id)
            return completed

    def fail_reporting(
        self, name: str, jobs: Sequence[Job], output: Any = None, *, terminal: bool = False
    ) -> tuple[int, list[tuple[str, str, str]], dict[str, str]]:
        now = self._now()
        with self.lock:
            self._call("fail_reporting", name, [job.id for job in jobs])
            value = _decoded(output)
            if self.refuse(value):
                raise Refused(f"the store refuses the output {value!r}")
            states: dict[str, str] = {}
            copies: list[tuple[str, str, str]] = []
            queue = self.queues[name]
            for job in jobs:
                row = self._held(name, job)
                if row is None:
                    continue
                row.output = value
                if not terminal and row.retry_count < row.retry_limit:
                    row.state, row.start_after = "retry", now + queue.retry_delay
                else:
                    row.state = "failed"
                    if queue.dead_letter is not None:
                        copy = StoredJob(
                            id=str(uuid.uuid4()),
                            name=queue.dead_letter,
                            data=row.data,
                            order=next(self._order),
                        )
                        self.jobs[copy.id] = copy
                        copies.append((row.id, queue.dead_letter, copy.id))
                states[row.id] = row.state
            return len(states), copies, states

    def touch_attempts(self, name: str, jobs: Sequence[Job]) -> list[str]:
        with self.lock:
            self._call("touch_attempts", name, [job.id for job in jobs])
            touched = []
            for job in jobs:
                row = self._held(name, job)
                if row is not None:
                    row.touches += 1
                    touched.append(row.id)
            return touched

    def requeue(self, name: str, jobs: Sequence[Job], *, started: bool, output: Any = None) -> list[str]:
        now = self._now()
        with self.lock:
            self._call("requeue", name, [job.id for job in jobs])
            back = []
            for job in jobs:
                row = self._held(name, job)
                if row is None:
                    continue
                if started:
                    row.output, row.retry_limit = _decoded(output), row.retry_limit + 1
                else:
                    # Never started: its start is cleared, so its next claim is no new attempt
                    # (retry_count stays what this claim made it).
                    row.started = False
                row.state, row.start_after = "retry", now
                back.append(row.id)
            return back

    def retries_waiting(self, name: str) -> tuple[int, Any]:
        with self.lock:
            waiting = [job for job in self.jobs.values() if job.name == name and job.state == "retry"]
            return len(waiting), (min(job.start_after for job in waiting) if waiting else None)

    # -- helpers -------------------------------------------------------------------------------------

    def _now(self) -> float:
        return self.clock.monotonic() if self.clock is not None else time.monotonic()

    def _call(self, method: str, name: str, ids: list[str], asked: int = 0) -> None:
        """Record the call, then raise the database trouble a test asked for (lock held)."""
        self.calls.append(Call(method, name, ids, asked))
        left = self._trouble.get(method, 0)
        if left:
            self._trouble[method] = left - 1
            raise OperationalError(f"the connection was lost during {method}")

    @staticmethod
    def _id(job: Job | Mapping[str, Any]) -> str:
        return job.id if isinstance(job, Job) else str(job["id"])

    def _held(self, name: str, job: Job | Mapping[str, Any]) -> StoredJob | None:
        """The row of ``job``'s attempt while it is still active: the attempt fence."""
        if isinstance(job, Job):
            job_id, attempt = job.id, job.retry_count
        else:
            job_id, attempt = str(job["id"]), int(job["retry_count"])
        row = self.jobs.get(job_id)
        if row is None or row.name != name or row.state != "active" or row.retry_count != attempt:
            return None
        return row

    @staticmethod
    def _record(row: StoredJob) -> Job:
        return Job(
            id=row.id,
            name=row.name,
            data=row.data,
            retry_count=row.retry_count,
            expire_in_seconds=row.expire_in_seconds,
            heartbeat_seconds=row.heartbeat_seconds,
            group_id=row.group_id,
        )


def _decoded(output: Any) -> Any:
    """An output as the database would store it: JSON, decoded again."""
    if isinstance(output, EncodedOutput):
        return json.loads(output)
    encoded = to_json(output_value(output), "output")
    return None if encoded is None else json.loads(encoded)


class ManualClock:
    """A clock that moves only when the test calls ``advance()`` (the ``Clock`` port).

    A wait ends as soon as its event is set, or once the clock has been advanced past its end; it
    looks at its event every few milliseconds of real time, so a thread waiting on this clock
    notices an ``advance()`` at once.
    """

    #: How often (real seconds) a wait looks at its event and at the clock.
    LOOK_SECONDS = 0.002

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self._epoch = 1_800_000_000.0 - start
        self._lock = threading.Lock()

    def monotonic(self) -> float:
        with self._lock:
            return self._now

    def time(self) -> float:
        return self._epoch + self.monotonic()

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds

    def wait(self, event: threading.Event, seconds: float | None) -> bool:
        end = None if seconds is None else self.monotonic() + seconds
        while True:
            if event.wait(self.LOOK_SECONDS):
                return True
            if end is not None and self.monotonic() >= end:
                return False

    def wait_on(self, condition: threading.Condition, seconds: float | None) -> None:
        # The caller looks again on return, as every caller of a condition does.
        condition.wait(self.LOOK_SECONDS)


if TYPE_CHECKING:
    # mypy checks that the fakes implement the worker's ports (mypy tests/unit/fakes.py).
    _store: WorkerStore = MemoryStore()
    _catalog: QueueCatalog = MemoryStore()
    _clock: Clock = ManualClock()
