"""A job's cancellation signal (pg-boss's ``job.signal``): set once, read from any thread.

Every Job carries one (``job.signal``). The worker sets it when the job passes its deadline
(``expire_in_seconds``), when a heartbeat finds the job's claim gone, and when a stop's grace
period ends. A thread cannot be killed in Python, so cancellation is cooperative: a handler polls
``is_set()``, sleeps with ``wait(timeout)`` (which returns early once the signal is set), or calls
``raise_if_set()`` between steps to end with ``JobCancelled``.

The class is small and knows nothing of threads beyond its own lock and event, so other runners
can build on it: ``add_callback()`` runs a function once the signal is set (at once if it already
is), which is how an asyncio runner cancels a coroutine, e.g. with
``signal.add_callback(lambda reason: loop.call_soon_threadsafe(task.cancel))``.

The event behind ``wait()`` is made on first use: a Job is built for every row read, and most
signals are never waited on.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from django_pgboss.exceptions import JobCancelled

logger = logging.getLogger("django_pgboss.worker")

#: A function add_callback() runs with the signal's reason once it is set.
SignalCallback = Callable[[str], object]

#: The reasons the worker sets a signal for (``JobSignal.reason``), as django_pgboss.signals'
#: ``job_cancelled`` names them; ``JobSignal.message`` says it in words.
DEADLINE = "deadline"
CLAIM_LOST = "claim_lost"
SHUTDOWN = "shutdown"

# One lock for every signal's lazy event and callbacks: setting and subscribing are rare (a
# deadline, a stop), so a lock per signal would cost every Job for nothing.
_lock = threading.Lock()


class JobSignal:
    """A one-shot cancellation signal: unset until ``set(reason)``, then set for good.

    ``reason`` is the first reason given (later ones are ignored), or None while unset: for the
    worker's, DEADLINE, CLAIM_LOST or SHUTDOWN. ``message`` says it in words.
    """

    __slots__ = ("_callbacks", "_event", "_message", "_reason")

    def __init__(self) -> None:
        self._reason: str | None = None
        self._message: str | None = None
        self._event: threading.Event | None = None
        self._callbacks: list[SignalCallback] | None = None

    def __repr__(self) -> str:
        return f"<JobSignal {'set: ' + self._reason if self._reason is not None else 'unset'}>"

    @property
    def reason(self) -> str | None:
        """Why the job was cancelled, or None while it is not."""
        return self._reason

    @property
    def message(self) -> str | None:
        """The reason in words (what JobCancelled says), or None while unset."""
        return self._message

    def is_set(self) -> bool:
        """True once the job is cancelled: stop working on it."""
        return self._reason is not None

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the signal is set or ``timeout`` seconds pass; True if it is set.

        A handler's ``time.sleep(n)`` written as ``job.signal.wait(n)`` ends the moment the job is
        cancelled.
        """
        if self._reason is not None:
            return True
        with _lock:
            if self._reason is not None:
                return True
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        return event.wait(timeout)

    def raise_if_set(self) -> None:
        """Raise ``JobCancelled`` (with the reason) if the signal is set; otherwise do nothing."""
        reason = self._reason
        if reason is not None:
            raise JobCancelled(reason, self._message or reason)

    def set(self, reason: str, message: str | None = None) -> bool:
        """Cancel: set the signal with ``reason`` (and ``message``, the reason in words), wake
        every ``wait()`` and run the callbacks.

        Returns True if this call set it, False if it was set already (the first reason stays).
        The worker calls this; a handler has no need to.
        """
        with _lock:
            if self._reason is not None:
                return False
            self._reason = reason
            self._message = message or reason
            event, callbacks = self._event, self._callbacks or []
            self._callbacks = None
        if event is not None:
            event.set()
        for callback in callbacks:
            _run(callback, reason)
        return True

    def add_callback(self, callback: SignalCallback) -> Callable[[], None]:
        """Run ``callback(reason)`` once the signal is set, in the thread that sets it (or now, in
        this thread, if it is set already). Returns a function that removes the callback.

        A callback that raises is logged and does not keep the others from running.
        """
        with _lock:
            reason = self._reason
            if reason is None:
                if self._callbacks is None:
                    self._callbacks = []
                self._callbacks.append(callback)
        if reason is not None:
            _run(callback, reason)

        def remove() -> None:
            with _lock:
                if self._callbacks is not None and callback in self._callbacks:
                    self._callbacks.remove(callback)

        return remove


def _run(callback: SignalCallback, reason: str) -> None:
    try:
        callback(reason)
    except Exception:
        logger.exception("a job signal's callback raised")
