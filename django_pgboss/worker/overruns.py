"""pg-boss's ``handler_overrun`` warning: a handler still running when its jobs passed their
deadline (``expire_in_seconds``), so the worker failed them and went on without it.

Each overrun is logged and sent as ``signals.warning_raised`` with pg-boss 12.38's event data
(``type``, ``instance``, ``queue``, ``jobs``, ``expireInSeconds``). With PERSIST_WARNINGS the
warning table gets rows as pg-boss's manager writes them, per queue per one-hour window: the
queue's first overrun at once, then, at the window's end, one row counting the overruns since
(``count``, ``since``, ``until``, the longest ``expireInSeconds`` and up to 10 sample ``jobs``),
and a window that counted none closes the tally, so the next overrun is written at once again.
The worker's stop writes what the open windows counted.

All of it runs on one thread of its own (``pgboss-warnings``), started at the first overrun: the
deadline thread and the async handlers' event loop, which find the overruns, neither wait on the
database nor run receivers' code for it.
"""

from __future__ import annotations

import datetime as dt
import logging
import queue as queue_module
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import connections

from django_pgboss.api.warnings import HANDLER_OVERRUN, emit_warning, store_warning
from django_pgboss.conf import pgboss_settings
from django_pgboss.db.context import DatabaseContext

logger = logging.getLogger("django_pgboss.worker")

#: How long a queue's tally runs before its count is written (pg-boss's HANDLER_OVERRUN_WINDOW_MS).
OVERRUN_WINDOW_SECONDS = 3600.0
#: Job ids a stored row keeps at most (pg-boss's HANDLER_OVERRUN_SAMPLE_JOBS).
SAMPLE_JOBS = 10
#: How long the worker's stop waits for the last rows to be written.
FLUSH_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class Overrun:
    """One unit whose handler outran its deadline."""

    queue: str
    jobs: tuple[str, ...]
    expire_in_seconds: float


@dataclass(slots=True)
class _Window:
    """A queue's tally since its last row: when it began (wall clock, for the row, and monotonic,
    for its end), and what it counted since."""

    since: dt.datetime
    ends_at: float
    count: int = 0
    expire_in_seconds: float = 0
    jobs: list[str] = field(default_factory=list)


def overrun_message(queue: str, expire_in_seconds: float) -> str:
    """pg-boss's message for one overrun, saying what this worker does instead of waiting."""
    return (
        f"a handler on queue {queue} is still running after exceeding {expire_in_seconds:g}s. Its jobs "
        "were failed and their signals set, and the worker goes on without it. Stop the handler on "
        "job.signal."
    )


def _iso(moment: dt.datetime) -> str:
    # JavaScript's toISOString(), which pg-boss writes: milliseconds and a Z.
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


class HandlerOverruns:
    """The handler_overrun warnings of one worker (``instance_id()``: its instance registry id)."""

    def __init__(
        self,
        context: DatabaseContext,
        *,
        instance_id: Callable[[], str],
        sender: Any,
        window_seconds: float | None = None,
    ) -> None:
        self.context = context
        self.instance_id = instance_id
        self.sender = sender
        self.window_seconds = OVERRUN_WINDOW_SECONDS if window_seconds is None else window_seconds
        self._events: queue_module.SimpleQueue[Overrun | None] = queue_module.SimpleQueue()
        self._windows: dict[str, _Window] = {}
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._stopped = False

    def overrun(self, queue: str, job_ids: list[str], expire_in_seconds: float) -> None:
        """Report a unit of ``queue`` whose handler outran its deadline (from any thread)."""
        with self._lock:
            if self._stopped:
                return
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="pgboss-warnings", daemon=True)
                self._thread.start()
        self._events.put(Overrun(queue, tuple(job_ids), expire_in_seconds))

    def stop(self) -> None:
        """Write what the open windows counted and end the thread (the worker's stop)."""
        with self._lock:
            self._stopped = True
            thread = self._thread
        if thread is not None:
            self._events.put(None)
            thread.join(FLUSH_TIMEOUT_SECONDS)

    def _run(self) -> None:
        try:
            while True:
                try:
                    event = self._events.get(timeout=self._until_next_window_end())
                except queue_module.Empty:
                    self._close_due_windows()
                    continue
                if event is None:
                    for name in list(self._windows):
                        self._close_window(name, reopen=False)
                    return
                self._emit(event)
                self._record(event)
                self._close_due_windows()
        finally:
            connections.close_all()

    def _until_next_window_end(self) -> float | None:
        if not self._windows:
            return None
        return max(0.0, min(window.ends_at for window in self._windows.values()) - time.monotonic())

    def _emit(self, event: Overrun) -> None:
        emit_warning(
            self.context,
            HANDLER_OVERRUN,
            overrun_message(event.queue, event.expire_in_seconds),
            {
                "type": HANDLER_OVERRUN,
                "instance": self.instance_id(),
                "queue": event.queue,
                "jobs": list(event.jobs),
                "expireInSeconds": event.expire_in_seconds,
            },
            sender=self.sender,
            logger=logger,
            extra={"queue": event.queue, "job_ids": list(event.jobs)},
        )

    def _record(self, event: Overrun) -> None:
        if not pgboss_settings.PERSIST_WARNINGS:
            return
        window = self._windows.get(event.queue)
        if window is not None:
            window.count += 1
            window.expire_in_seconds = max(window.expire_in_seconds, event.expire_in_seconds)
            window.jobs = [*window.jobs, *event.jobs][-SAMPLE_JOBS:]
            return
        now = dt.datetime.now(dt.UTC)
        self._write(event.queue, now, now, 1, event.expire_in_seconds, list(event.jobs))
        self._windows[event.queue] = _Window(since=now, ends_at=time.monotonic() + self.window_seconds)

    def _close_due_windows(self) -> None:
        now = time.monotonic()
        for name in [name for name, window in self._windows.items() if window.ends_at <= now]:
            self._close_window(name, reopen=True)

    def _close_window(self, name: str, *, reopen: bool) -> None:
        window = self._windows.pop(name)
        if not window.count:
            return
        now = dt.datetime.now(dt.UTC)
        self._write(name, window.since, now, window.count, window.expire_in_seconds, window.jobs)
        if reopen:
            self._windows[name] = _Window(since=now, ends_at=time.monotonic() + self.window_seconds)

    def _write(
        self, name: str, since: dt.datetime, until: dt.datetime, count: int, expire: float, jobs: list[str]
    ) -> None:
        if count == 1:
            message = overrun_message(name, expire)
        else:
            message = (
                f"{count} handlers on queue {name} kept running after exceeding their timeout of up to "
                f"{expire:g}s between {_iso(since)} and {_iso(until)}. Their jobs were failed and their "
                "signals set, and the worker went on without them. Stop the handler on job.signal."
            )
        store_warning(
            self.context,
            HANDLER_OVERRUN,
            message,
            {
                "type": HANDLER_OVERRUN,
                "instance": self.instance_id(),
                "queue": name,
                "count": count,
                "since": _iso(since),
                "until": _iso(until),
                "expireInSeconds": expire,
                "jobs": jobs[:SAMPLE_JOBS],
            },
        )
