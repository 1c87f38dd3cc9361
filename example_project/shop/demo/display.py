"""The demo's progress: a table of per-queue counts redrawn in place on a terminal, plain lines otherwise."""

from __future__ import annotations

import shutil
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TextIO

from example_project.shop.demo.counts import QueueCounts

COLUMNS = ("queued", "active", "completed", "failed", "retried", "dead letters", "jobs/s")
#: Throughput is completions over this many seconds, so the rate follows the traffic.
RATE_WINDOW_SECONDS = 3.0


class LiveProgress:
    """Draws ``read()``'s counts every ``refresh`` seconds until stopped; events print above the table.

    On a terminal the table is redrawn in place (ANSI cursor movement); elsewhere (a pipe, a CI
    log) one line of totals is printed every ``plain_every`` seconds instead.
    """

    def __init__(
        self,
        out: TextIO,
        read: Callable[[], dict[str, QueueCounts]],
        status: Callable[[], str],
        *,
        tty: bool,
        refresh: float = 0.5,
        plain_every: float = 5.0,
    ) -> None:
        self.out = out
        self.read = read
        self.status = status
        self.tty = tty
        self.refresh = refresh
        self.plain_every = plain_every
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self._drawn_lines = 0
        self._history: deque[tuple[float, dict[str, int]]] = deque()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="demo-progress", daemon=True)
        self._last_plain = self.started
        #: Set while nothing changes (the demo waits for the monitor): no periodic plain lines.
        self.quiet = False

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Draw a last time and stop; the table stays on screen."""
        self._stop.set()
        self._thread.join()
        self._draw(final=True)

    def event(self, message: str) -> None:
        """Print a line of the story above the table."""
        with self._lock:
            self._erase()
            self.out.write(f"  [{time.monotonic() - self.started:4.1f} s] {message}\n")
            self.out.flush()
            self._drawn_lines = 0
        if self.tty:
            self._draw()

    def _loop(self) -> None:
        from django.db import connection

        try:
            while not self._stop.wait(self.refresh):
                self._draw()
        finally:
            connection.close()  # this thread's own connection

    def _draw(self, *, final: bool = False) -> None:
        counts = self.read()
        now = time.monotonic()
        rates = self._rates(now, counts)
        with self._lock:
            if self.tty:
                self._erase()
                lines = self._table(counts, rates)
                self.out.write("\n".join(lines) + "\n")
                self._drawn_lines = 0 if final else len(lines)
            elif final or (not self.quiet and now - self._last_plain >= self.plain_every):
                self._last_plain = now
                total = QueueCounts()
                for entry in counts.values():
                    for key in ("queued", "active", "completed", "failed", "retried"):
                        setattr(total, key, getattr(total, key) + getattr(entry, key))
                self.out.write(
                    f"  [{now - self.started:4.1f} s] {total.completed} completed, {total.failed} failed, "
                    f"{total.retried} retried, {total.queued} queued, {total.active} active, "
                    f"{sum(rates.values()):.1f} jobs/s; {self.status().replace(chr(10), '; ')}\n"
                )
            self.out.flush()

    def _rates(self, now: float, counts: dict[str, QueueCounts]) -> dict[str, float]:
        settled = {name: c.completed + c.failed for name, c in counts.items()}
        self._history.append((now, settled))
        while len(self._history) > 1 and now - self._history[0][0] > RATE_WINDOW_SECONDS:
            self._history.popleft()
        then, before = self._history[0]
        elapsed = now - then
        if elapsed <= 0:
            return dict.fromkeys(counts, 0.0)
        return {name: (settled[name] - before.get(name, 0)) / elapsed for name in counts}

    def _table(self, counts: dict[str, QueueCounts], rates: dict[str, float]) -> list[str]:
        # Sized for an 80-column terminal; the policies were listed when the queues were created.
        width = max(len(name) for name in counts) + 1
        header = f"  {'queue':<{width}}" + "".join(f"{c:>{len(c) + 1}}" for c in COLUMNS)
        lines = [header]
        for name, c in counts.items():
            values = (c.queued, c.active, c.completed, c.failed, c.retried, c.dead_lettered)
            lines.append(
                f"  {name:<{width}}"
                + "".join(f"{v:>{len(column) + 1}}" for v, column in zip(values, COLUMNS, strict=False))
                + f"{rates.get(name, 0.0):>{len(COLUMNS[-1]) + 1}.1f}"
            )
        lines += [f"  {time.monotonic() - self.started:4.1f} s: {line}" for line in self.status().split("\n")]
        # A line wider than the terminal would wrap, and the redraw would move up too few lines.
        columns = shutil.get_terminal_size().columns - 1
        return [line[:columns] for line in lines]

    def _erase(self) -> None:
        if self.tty and self._drawn_lines:
            # Up to the table's first line, then clear to the end of the screen.
            self.out.write(f"\x1b[{self._drawn_lines}F\x1b[J")
            self._drawn_lines = 0
