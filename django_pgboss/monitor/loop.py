"""The timing loop the monitor and the timekeeper run: passes on their intervals until stopped.

A database error (the server restarting, a dropped connection) must not end a long-running monitor:
the loop drops the connections, backs off (2, 4, 8 ... seconds, at most a minute) and tries again.

Time is read from ``django_pgboss.clocks`` on each use, so a test's TestClock, once attached,
drives the waits between passes (the loop then runs a pass when the test moves time past it).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from django.db import DatabaseError, connections

from django_pgboss import clocks

#: Longest wait between retries after a database error.
MAX_BACKOFF_SECONDS = 60.0


def run_periodically(
    passes: Sequence[tuple[Callable[[], object], float]],
    stop: threading.Event,
    *,
    what: str,
    log: logging.Logger,
    on_error: Callable[[DatabaseError], None] | None = None,
    on_start_failure: Callable[[DatabaseError], None] | None = None,
) -> None:
    """Run each ``(function, interval_seconds)`` now and then every interval, until ``stop`` is set.

    The passes run one after the other on the calling thread; a pass that comes due while another
    runs waits for it. Each interval counts from the end of its own pass. ``what`` names the passes
    in the warning logged on ``log`` when a database error interrupts them, which is also handed
    to ``on_error`` (the Monitor sends it as signals.error_raised). ``on_start_failure`` is told
    the first error if it comes before any round of passes finished: the start failed (the
    Monitor raises start_retry).
    """
    due = [clocks.current().monotonic()] * len(passes)
    failures = 0
    started = False
    try:
        while not stop.is_set():
            try:
                for index, (function, interval) in enumerate(passes):
                    if clocks.current().monotonic() >= due[index]:
                        function()
                        due[index] = clocks.current().monotonic() + interval
                failures = 0
                started = True
            except DatabaseError as exc:
                failures += 1
                delay = min(MAX_BACKOFF_SECONDS, 2.0**failures)
                log.warning("%s failed (%s); retrying in %.0fs", what, exc, delay)
                if on_error is not None:
                    on_error(exc)
                if not started and failures == 1 and on_start_failure is not None:
                    on_start_failure(exc)
                # A broken connection must be thrown away: Django reconnects on the next statement.
                connections.close_all()
                clocks.current().wait(stop, delay)
                continue
            clock = clocks.current()
            clock.wait(stop, max(min(due) - clock.monotonic(), 0))
    finally:
        connections.close_all()
