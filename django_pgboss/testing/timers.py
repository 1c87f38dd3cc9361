"""A TestClock's timers: the monotonic clock and the waits of the monitor's loop, moved by the test.

Installed in ``django_pgboss.clocks`` while a TestClock is attached, this is the clock the
monitor's passes, the timekeeper's cron cadence and the health checks' intervals count on. Time
moves only when the test moves it. A thread waiting for a pass (``wait()``) wakes when the test
moves time past the pass's due time, and ``move()`` returns only once each thread it woke has run
what came due and is waiting again (or has ended): so after ``clock.advance(seconds=60)`` the
passes of that minute have run, and a test asserts on their effects without sleeping.
"""

from __future__ import annotations

import threading
import time

from django_pgboss.exceptions import WaitTimedOut

# How often a waiting thread looks at its event: setting a threading.Event wakes no condition, so
# a stop() is seen within this much real time.
_EVENT_POLL_SECONDS = 0.02


class TimerClock:
    """A monotonic clock that only ``move()`` advances, and waits measured on it.

    ``settle_seconds`` is how long (real time) ``move()`` gives the threads it woke to run what came
    due and wait again before it raises WaitTimedOut.
    """

    def __init__(self, *, settle_seconds: float = 30.0) -> None:
        self.settle_seconds = settle_seconds
        self._now = time.monotonic()
        self._condition = threading.Condition()
        # Each waiting thread and the time it waits until.
        self._sleepers: dict[threading.Thread, float] = {}
        # The threads a move woke, until they wait again or end.
        self._woken: set[threading.Thread] = set()
        self._stopped = False

    def monotonic(self) -> float:
        with self._condition:
            return self._now

    def wait(self, event: threading.Event, seconds: float) -> bool:
        """Wait until ``event`` is set or the test moved time ``seconds`` on; returns whether the
        event is set. Once the clock is stopped (its TestClock detached) it waits no more."""
        thread = threading.current_thread()
        with self._condition:
            deadline = self._now + max(seconds, 0.0)
            if deadline > self._now:
                # Back to waiting: whatever a move woke this thread for is done.
                self._woken.discard(thread)
            self._sleepers[thread] = deadline
            self._condition.notify_all()
            try:
                while not event.is_set() and not self._stopped and self._now < deadline:
                    self._condition.wait(_EVENT_POLL_SECONDS)
            finally:
                del self._sleepers[thread]
                self._condition.notify_all()
        return event.is_set()

    def move(self, seconds: float) -> None:
        """Move the clock ``seconds`` forward, then wait until every thread whose wait ended is
        waiting again (its passes ran) or has ended."""
        with self._condition:
            self._now += max(seconds, 0.0)
            self._woken |= {thread for thread, until in self._sleepers.items() if until <= self._now}
            self._condition.notify_all()
            give_up = time.monotonic() + self.settle_seconds
            while True:
                self._woken = {thread for thread in self._woken if thread.is_alive()}
                if not self._woken:
                    return
                left = give_up - time.monotonic()
                if left <= 0:
                    names = ", ".join(sorted(thread.name for thread in self._woken))
                    raise WaitTimedOut(
                        f"the TestClock moved time on, and after {self.settle_seconds}s the timers it "
                        f"made due are still running on thread(s) {names}"
                    )
                self._condition.wait(min(left, _EVENT_POLL_SECONDS))

    def wait_for_sleepers(self, count: int, timeout: float) -> int:
        """Wait until at least ``count`` threads wait on this clock; returns how many do."""
        give_up = time.monotonic() + timeout
        with self._condition:
            while len(self._sleepers) < count:
                left = give_up - time.monotonic()
                if left <= 0:
                    raise WaitTimedOut(
                        f"waited {timeout}s for {count} thread(s) to wait on the TestClock's timers; "
                        f"{len(self._sleepers)} do"
                    )
                self._condition.wait(min(left, _EVENT_POLL_SECONDS))
            return len(self._sleepers)

    def stop(self) -> None:
        """End every wait now, and every later one at once: the TestClock is detached."""
        with self._condition:
            self._stopped = True
            self._woken.clear()
            self._condition.notify_all()
