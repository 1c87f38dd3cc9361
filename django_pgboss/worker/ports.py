"""What the worker needs from outside itself: its store of jobs, its catalogue of queues, a clock.

The worker's parts (worker/fetching.py, worker/handlers.py, worker/settler.py, worker/heartbeats.py,
worker/deadlines.py, worker/shutdown.py) call only these protocols, never a concrete class, so the
same engine runs over PostgreSQL (``JobStore`` and ``QueueStore`` of the API, and ``SYSTEM_CLOCK``)
and, in the fast tests, over an in-memory store and a clock the test moves (tests/unit/fakes.py).
What one part needs of another is a protocol too, declared beside the part that needs it (the
deadlines' ``DetachingPool``, the async host's ``ReleasesUnits`` and ``SlotFactory``, the stop's
``HandlerThreads``...) or here when two parts share it (``OverrunReports``): no part imports
another, and worker/engine.py hands each the parts it built.

Every moment the worker keeps (a unit's deadline, a stop's grace period, a poll's interval, the
last heartbeat of a job) is read from ``Clock.monotonic()``, and every timed wait goes through
``Clock.wait()`` or ``Clock.wait_on()``, so that a clock which only moves when told can drive them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

# The worker's clock is the package's (clocks.py, beneath every layer): one clock a test moves
# drives the worker's timers and the monitor's.
from django_pgboss.clocks import SYSTEM_CLOCK, Clock, SystemClock
from django_pgboss.db.context import DatabaseContext
from django_pgboss.records import Job

__all__ = [
    "SYSTEM_CLOCK",
    "Clock",
    "OverrunReports",
    "QueueCatalog",
    "QueueFacts",
    "SystemClock",
    "TransactionalStore",
    "WorkerStore",
]


class WorkerStore(Protocol):
    """The job statements the worker runs, each fenced to the attempt it names (api/jobs.py says
    what each does over PostgreSQL)."""

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
        """Claim up to ``batch_size`` ready jobs of ``name`` (active, their attempt started)."""
        ...

    def use_generic_plans(self) -> None:
        """Prepare the calling thread's connection for repeated fetches (nothing, in memory)."""
        ...

    def complete_each(self, name: str, results: Sequence[tuple[Job | Mapping[str, Any], Any]]) -> list[str]:
        """Complete each (job, output) whose attempt is still active; returns the ids completed."""
        ...

    def fail_reporting(
        self, name: str, jobs: Sequence[Job], output: Any = None, *, terminal: bool = False
    ) -> tuple[int, list[tuple[str, str, str]], dict[str, str]]:
        """Fail these attempts (for good with ``terminal``); returns how many failed, the dead
        letter copies as (source id, queue, copy id), and each failed job's new state by id."""
        ...

    def touch_attempts(self, name: str, jobs: Sequence[Job]) -> list[str]:
        """Refresh these attempts' heartbeat; returns the ids still held."""
        ...

    def requeue(self, name: str, jobs: Sequence[Job], *, started: bool, output: Any = None) -> list[str]:
        """Put these active attempts back without charging them; returns the ids put back."""
        ...

    def retries_waiting(self, name: str) -> tuple[int, Any]:
        """How many jobs of ``name`` wait for a retry, and when the first is due (or None)."""
        ...


class TransactionalStore(WorkerStore, Protocol):
    """A store that can also run a transactional handler's unit (worker/transactional.py): the
    handler and its jobs' completion in one transaction on the store's Django database, which
    only PostgreSQL gives."""

    @property
    def context(self) -> DatabaseContext:
        """The database context whose connection the transaction runs on."""
        ...

    def bound_transaction(self, seconds: float) -> dict[str, str]:
        """Bound the caller's open transaction to ``seconds``, enforced by the server."""
        ...


class QueueFacts(Protocol):
    """What the worker reads of a queue when it starts (a ``QueueInfo`` has it)."""

    @property
    def name(self) -> str: ...

    @property
    def notify(self) -> bool:
        """Whether a send to the queue notifies its listeners."""
        ...


class QueueCatalog(Protocol):
    """The queue reads the worker makes when it starts (``QueueStore`` over PostgreSQL)."""

    def all_queues(self, names: Iterable[str] | None = None) -> Sequence[QueueFacts]:
        """The named queues that exist (every queue when ``names`` is None), in name order."""
        ...


class OverrunReports(Protocol):
    """Where a handler still running past its deadline is reported (pg-boss's handler_overrun):
    ``HandlerOverruns`` of worker/overruns.py, which the deadline thread and the async host share."""

    def overrun(self, queue: str, job_ids: list[str], expire_in_seconds: float) -> None:
        """The jobs ``job_ids`` of ``queue`` were failed at their deadline while their handler ran
        on; returns at once (the warning is raised and stored on a thread of its own)."""
        ...
