"""The clock the package's timers read: how long until the next pass, and the wait for it.

The monitor's passes, the timekeeper's cron cadence and the health checks' intervals count time on
a clock that they look up here on each use, rather than calling ``time.monotonic()`` and
``Event.wait()`` themselves. In production that clock is the system's. A test that attaches a
``django_pgboss.testing.TestClock`` installs its timer clock in its place, so a monitor running on
a thread waits for the test to move time (``clock.advance()``) instead of for real seconds to pass,
as pg-boss's TestClock drives its timers.

The worker's ports (``worker/ports.py``) name this same ``Clock``, and a worker built without a
clock of its own takes ``current()`` then, so one clock a test moves drives both. This module sits beneath every layer, with ``conf`` and ``exceptions``: it imports nothing
of ours.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol

__all__ = ["SYSTEM_CLOCK", "Clock", "SystemClock", "current", "install", "uninstall"]


class Clock(Protocol):
    """What a timer needs: a monotonic reading, a wall-clock reading, and timed waits.

    ``wait(event, seconds)`` returns True as soon as ``event`` is set, False once ``seconds`` have
    passed on this clock. ``wait_on(condition, seconds)`` is ``condition.wait()``: called with the
    condition's lock held, it may return early, and never later than ``seconds`` on this clock.
    """

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (only differences mean anything)."""
        ...

    def time(self) -> float:
        """Seconds since the epoch."""
        ...

    def wait(self, event: threading.Event, seconds: float | None) -> bool:
        """Wait for ``event`` at most ``seconds`` on this clock (None: for ever); True if it was set."""
        ...

    def wait_on(self, condition: threading.Condition, seconds: float | None) -> None:
        """Wait on ``condition`` (its lock held) at most ``seconds`` on this clock."""
        ...


class SystemClock:
    """The real clock: ``time.monotonic()``, ``time.time()`` and the threading waits."""

    # The time module's functions themselves, not methods that call them: a worker's handler
    # thread reads the clock twice a job.
    monotonic = staticmethod(time.monotonic)
    time = staticmethod(time.time)

    def wait(self, event: threading.Event, seconds: float | None) -> bool:
        return event.wait(None if seconds is None else max(seconds, 0.0))

    def wait_on(self, condition: threading.Condition, seconds: float | None) -> None:
        condition.wait(None if seconds is None else max(seconds, 0.0))


#: The clock every timer reads unless a test installed another.
SYSTEM_CLOCK = SystemClock()

_lock = threading.Lock()
_installed: list[Clock] = []


def current() -> Clock:
    """The clock the timers read now: the last one installed, or the system's."""
    installed = _installed
    return installed[-1] if installed else SYSTEM_CLOCK


def install(clock: Clock) -> None:
    """Have every timer read ``clock`` until ``uninstall(clock)``."""
    with _lock:
        _installed.append(clock)


def uninstall(clock: Clock) -> None:
    """Stop reading ``clock`` (one installed earlier); the timers read the one before it again."""
    with _lock:
        if clock in _installed:
            _installed.remove(clock)
