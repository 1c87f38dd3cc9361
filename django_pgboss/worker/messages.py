"""What the worker's threads hand each other: typed values, one class per kind, that mypy checks.

- A ``Unit`` goes from a queue's fetcher to its handler threads (or async slots) through the
  queue's buffer: the jobs of one handler call.
- A ``SettleRequest`` goes from whoever ended a unit (a handler thread, an async slot, the
  deadlines, the stop, a fetcher handing back what it may not run) to the settler
  (worker/settler.py), which writes it.
- An ``Outcome`` is how an async unit ended, handed by its slot (worker/async_slots.py) to the
  worker, which turns it into settle requests as a handler thread's return value is.

Every class is a dataclass with slots, built once per unit on the hot path and read once; none is
changed after it is built. They are not ``frozen``: a frozen dataclass's ``__init__`` sets each
field through ``object.__setattr__``, which doubled what building a message costs (two a job, on
the drain's hot path).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django_pgboss.records import Job


@dataclass(slots=True)
class Unit:
    """The jobs of one handler call on ``queue``: one job, or a batch with ``batch=True``."""

    queue: str
    jobs: list[Job]


# -- settle requests ------------------------------------------------------------------------------


@dataclass(slots=True)
class Complete:
    """Complete every job with the one ``output`` (None stores none)."""

    queue: str
    jobs: list[Job]
    output: Any = None


@dataclass(slots=True)
class CompleteEach:
    """Complete each job with its own output: ``outputs[i]`` is ``jobs[i]``'s (per-job results)."""

    queue: str
    jobs: list[Job]
    outputs: list[Any]


@dataclass(slots=True)
class Raised:
    """The handler raised ``error``: fail the jobs (retried while their limit allows), and log the
    exception at ERROR once the failure is written, saying whether they retry."""

    queue: str
    jobs: list[Job]
    error: BaseException


@dataclass(slots=True)
class Fail:
    """Fail the jobs with ``output`` (an output dict or an exception): a deadline, a dead thread,
    an output that cannot be stored, a per-job failure. Retried while their limit allows."""

    queue: str
    jobs: list[Job]
    output: Any


@dataclass(slots=True)
class DeadLetter:
    """Fail the jobs for good at once, whatever retries they have left (per-job results)."""

    queue: str
    jobs: list[Job]
    output: Any


@dataclass(slots=True)
class Requeue:
    """Put back jobs that were claimed and never started (a stop), uncharged; ``output`` is what
    a job that cannot go back is failed with."""

    queue: str
    jobs: list[Job]
    output: Any


@dataclass(slots=True)
class Unclaim:
    """As Requeue, for jobs a fetch claimed past their group's local limit. Counted as a handler
    result, so that the queue is not taken for drained before they are back."""

    queue: str
    jobs: list[Job]
    output: Any


@dataclass(slots=True)
class Interrupt:
    """Put back jobs a stop's grace period cut short; their attempt is not counted, ``output``
    records why."""

    queue: str
    jobs: list[Job]
    output: Any


@dataclass(slots=True)
class StopSettling:
    """The last request: the settler flushes what it holds and ends."""


#: Everything the settler is handed.
SettleRequest = (
    Complete | CompleteEach | Raised | Fail | DeadLetter | Requeue | Unclaim | Interrupt | StopSettling
)

#: The requests that stand for one handler unit's result: the settler reports them written
#: (``settled``), so that a queue is not taken for drained while one may still put a job back.
COUNTED = (Complete, CompleteEach, Raised, Fail, DeadLetter, Unclaim)


# -- an async unit's outcome ----------------------------------------------------------------------


@dataclass(slots=True)
class Returned:
    """The handler returned ``value``."""

    value: Any


@dataclass(slots=True)
class Errored:
    """The handler raised ``error`` (however it ended: every way is the jobs' failure)."""

    error: BaseException


@dataclass(slots=True)
class DeadlinePassed:
    """The unit passed its deadline: its jobs fail with ``output``."""

    output: Any


#: How an async unit ended; None stands for "nothing to settle" (cancelled by a stop, its claim lost).
Outcome = Returned | Errored | DeadlinePassed
