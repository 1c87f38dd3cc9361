"""A TestClock's timers: the clock of the package's timed waits, moved by the test.

Installed in ``django_pgboss.clocks`` while a TestClock is attached, this is the clock the
monitor's passes, the timekeeper's cron cadence and the health checks' intervals count on, and
the shape of the worker's clock (``worker/ports.py``). Time moves only when the test moves it. A
thread waiting on it wakes when the test moves time past the end of its wait, and ``move()``
returns only once each thread it woke has run what came due and waits again (or has ended): so
after ``clock.advance(seconds=60)`` the passes of that minute have run, and a test asserts on their
effects without sleeping.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

from django_pgboss.exceptions import WaitTimedOut

# How often (real time) a waiting thread looks at what else may end its wait: setting a
# threading.Event, or notifying another condition than the clock's, wakes no waiter of the clock.
_POLL_SECONDS = 0.02


class TimerClock:
    """A monotonic clock that only ``move()`` advances, a wall clock the test sets, and waits
    measured on them.

    ``wall`` is the wall-clock time (seconds since the epoch) it starts at; ``settle_seconds`` is
    how long, in real time, ``move()`` gives the threads it woke to run what came due and wait
    again before it raises WaitTimedOut.
    """

    def __init__(self, *, wall: float | None = None, settle_seconds: float = 30.0) -> None:
        self.settle_seconds = settle_seconds
        self._now = time.monotonic()
        self._wall = time.time() if wall is None else wall
        self._condition = threading.Condition()
        # Each waiting thread and the time it waits until.
        self._sleepers: dict[threading.Thread, float] = {}
        # The threads a move woke, until they wait again or end.
        self._woken: set[threading.Thread] = set()
        self._stopped = False

    def monotonic(self) -> float:
        with self._condition:
            return self._now

    def time(self) -> float:
        with self._condition:
            return self._wall

    def wait(self, event: threading.Event, seconds: float | None) -> bool:
        """Wait until ``event`` is set or the test moved time ``seconds`` on (None: for ever);
        returns whether the event is set. Once the clock is stopped (its TestClock detached) it
        waits no more."""
        with self._condition:
            deadline = self._begin(seconds)
            try:
                while not event.is_set() and self._waiting(deadline):
                    self._condition.wait(_POLL_SECONDS)
            finally:
                self._end()
        return event.is_set()

    def wait_on(self, condition: threading.Condition, seconds: float | None) -> None:
        """``condition.wait()`` (its lock held by the caller) until it is notified or the test
        moved time ``seconds`` on; it may return early, as any condition wait may."""
        with self._condition:
            deadline = self._begin(seconds)
        try:
            while self._still_waiting(deadline):
                if condition.wait(_POLL_SECONDS):
                    return
        finally:
            with self._condition:
                self._end()

    def _begin(self, seconds: float | None) -> float:
        """Register the calling thread as waiting; returns when its wait ends. Lock held."""
        thread = threading.current_thread()
        deadline = math.inf if seconds is None else self._now + max(seconds, 0.0)
        if deadline > self._now:
            # Back to waiting: whatever a move woke this thread for is done.
            self._woken.discard(thread)
        self._sleepers[thread] = deadline
        self._condition.notify_all()
        return deadline

    def _end(self) -> None:
        """The calling thread waits no more. Lock held."""
        self._sleepers.pop(threading.current_thread(), None)
        self._condition.notify_all()

    def _waiting(self, deadline: float) -> bool:
        return not self._stopped and self._now < deadline

    def _still_waiting(self, deadline: float) -> bool:
        with self._condition:
            return self._waiting(deadline)

    def move(self, seconds: float, *, wall: float | None = None) -> None:
        """Move the clock ``seconds`` forward (and the wall clock to ``wall``), then wait until
        every thread whose wait ended is waiting again (its passes ran) or has ended."""
        with self._condition:
            self._now += max(seconds, 0.0)
            if wall is not None:
                self._wall = wall
            self._woken |= {thread for thread, until in self._sleepers.items() if until <= self._now}
            self._condition.notify_all()
            self._wait_until(
                lambda: not self._live_woken(),
                self.settle_seconds,
                lambda: (
                    f"the TestClock moved time on, and after {self.settle_seconds}s the timers it made "
                    f"due are still running on thread(s) {', '.join(sorted(t.name for t in self._woken))}"
                ),
            )

    def set_wall(self, wall: float) -> None:
        """Set the wall clock alone (a jump back: the monotonic clock never goes back)."""
        with self._condition:
            self._wall = wall

    def _live_woken(self) -> set[threading.Thread]:
        self._woken = {thread for thread in self._woken if thread.is_alive()}
        return self._woken

    def wait_for_sleepers(self, count: int, timeout: float) -> int:
        """Wait until at least ``count`` threads wait on this clock; returns how many do."""
        with self._condition:
            self._wait_until(
                lambda: len(self._sleepers) >= count,
                timeout,
                lambda: (
                    f"waited {timeout}s for {count} thread(s) to wait on the TestClock's timers; "
                    f"{len(self._sleepers)} do"
                ),
            )
            return len(self._sleepers)

    def _wait_until(self, done: Callable[[], bool], timeout: float, message: Callable[[], str]) -> None:
        """Wait (real time, the lock held) until ``done()``; WaitTimedOut after ``timeout``."""
        give_up = time.monotonic() + timeout
        while not done():
            left = give_up - time.monotonic()
            if left <= 0:
                raise WaitTimedOut(message())
            self._condition.wait(min(left, _POLL_SECONDS))

    def stop(self) -> None:
        """End every wait now, and every later one at once: the TestClock is detached."""
        with self._condition:
            self._stopped = True
            self._woken.clear()
            self._condition.notify_all()
