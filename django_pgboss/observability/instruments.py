"""What a worker reports around each handler call, for what no signal carries.

django_pgboss's signals (django_pgboss/signals.py) say what happened to each job: started,
completed, failed, dead-lettered. What happens around the handler call itself, how long it ran
and how many run at once, is measured by the worker's handler thread and handed to the object
given as ``Worker(instruments=...)``: the metrics' WorkerMetrics, or anything with these methods.
"""

from __future__ import annotations

from typing import Protocol


class HandlerInstruments(Protocol):
    """Told of each handler call of a worker, on the handler's own thread."""

    def handler_started(self, queue: str) -> None:
        """A handler call of ``queue`` starts."""

    def handler_finished(self, queue: str, seconds: float) -> None:
        """A handler call of ``queue`` returned or raised after ``seconds``."""

    def handler_abandoned(self, queue: str, count: int = 1) -> None:
        """The worker stopped waiting for ``count`` handler calls of ``queue`` that still run (their
        jobs went back to the queue); ``count`` is -1 when such a call ends after all."""
