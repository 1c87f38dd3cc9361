"""The worker's LISTEN connection: wakes a queue's fetch loop the moment a job is sent to it.

A LISTEN must stay on one connection for as long as it listens, so it cannot share Django's
per-thread connections (which close_old_connections() may recycle). It holds a plain psycopg
connection built from the same DATABASES settings (worker/listen_connection.py), whose heartbeat
and TCP keepalives notice a connection that died without closing.

The fetch loops read one thing here, ``connected``: set while notifications arrive, so that a
notify queue may poll at its relaxed ``notify_polling_interval_seconds``. When the connection is
lost (closed, or stalled past NOTIFY_HEARTBEAT_TIMEOUT_SECONDS) ``connected`` is cleared and every
notify queue is woken, so that each loop fetches at once and then polls at its
``polling_interval_seconds`` until the listener is back. The listener then reconnects, LISTENs
again, wakes every queue once more (notifications sent while it was away are lost), and says so
once: a log line and ``signals.listener_reconnected``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable

import psycopg

from django_pgboss import signals
from django_pgboss.db.context import DatabaseContext
from django_pgboss.worker.backoff import UNREACHABLE_MAX_SECONDS, one_line, worth_logging
from django_pgboss.worker.listen_connection import ListenConnection, ListenerSettings, ListenerStalled

__all__ = ["LISTEN_UNAVAILABLE_MESSAGE", "ListenerSettings", "ListenerStalled", "NotifyListener"]

logger = logging.getLogger("django_pgboss.worker")

#: pg-boss's listen_notify_unavailable warning, word for word.
LISTEN_UNAVAILABLE_MESSAGE = "Failed to start LISTEN/NOTIFY listener. Continuing with polling only."


class NotifyListener:
    """Listens on the schema's channel and calls ``wake(queue)`` for each notification.

    ``context`` is the DatabaseContext (or a Boss) whose database and schema it listens on;
    ``settings`` its heartbeat and keepalives (default: settings.PGBOSS's NOTIFY_* values, refused
    here with InvalidOption when out of range).
    """

    def __init__(
        self,
        context: DatabaseContext,
        queues: Iterable[str],
        wake: Callable[[str], None],
        *,
        settings: ListenerSettings | None = None,
    ) -> None:
        self.context = DatabaseContext.of(context)
        self.queues = set(queues)
        self.wake = wake
        self.settings = settings if settings is not None else ListenerSettings.from_settings()
        self.channel = self.context.notify_channel()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pgboss-listener", daemon=True)
        #: Set while the connection LISTENs and answers its heartbeat; what the fetch loops read.
        self.connected = threading.Event()
        #: Whether LISTEN ever started: a first failure is listen_notify_unavailable, a later one a
        #: lost connection.
        self.ever_connected = False
        #: The open LISTEN connection, None between connections.
        self.connection: ListenConnection | None = None
        #: How many times the listener has listened again after losing its connection.
        self.reconnects = 0

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _deliver(self, payload: str) -> None:
        if payload in self.queues:
            self.wake(payload)

    def _wake_all(self) -> None:
        for name in self.queues:
            self.wake(name)

    def _run(self) -> None:
        failures = 0
        # When the last working connection was lost, and why: reported once LISTEN is back.
        lost: tuple[float, str] | None = None
        while not self._stop.is_set():
            # Whether the connection answered a heartbeat before it was lost: one that never did
            # (a pooler that hands the heartbeat to another backend) counts as one more failure
            # in a row, so that it is not reported afresh at every reconnection.
            proven = False
            try:
                self.connection = ListenConnection(self.context, self.settings, self._stop)
                try:
                    self.connected.set()
                    self.ever_connected = True
                    if lost is not None:
                        self._listening_again(*lost)
                        lost = None
                    while not self._stop.is_set():
                        self.connection.receive(self._deliver)
                finally:
                    proven = self.connection.heartbeats > 0
                    self.connection.close()
                    self.connection = None
            except (psycopg.Error, OSError) as exc:
                if self._stop.is_set():
                    break
                failures = 1 if proven else failures + 1
                was_connected = self.connected.is_set()
                # Cleared before the loops are woken, so that each one, once it has fetched, waits
                # its polling_interval_seconds rather than its relaxed notify interval.
                self.connected.clear()
                if was_connected:
                    lost = (time.monotonic(), one_line(exc))
                    self._wake_all()
                self._stop.wait(self._report_failure(exc, failures))

    def _listening_again(self, lost_at: float, reason: str) -> None:
        """Say once that LISTEN is back, and wake every notify queue: what was sent meanwhile
        sent its notification to nobody."""
        self.reconnects += 1
        lost_for = time.monotonic() - lost_at
        logger.info(
            "listening again on %s after %.1fs without LISTEN (%s); waking every notify queue",
            self.channel,
            lost_for,
            reason,
            extra={"channel": self.channel, "reason": reason},
        )
        self._wake_all()
        signals.send(
            signals.listener_reconnected,
            type(self),
            instance=self,
            channel=self.channel,
            reason=reason,
            lost_for_seconds=lost_for,
            using=self.context.using,
            schema=self.context.schema,
        )

    def _report_failure(self, exc: Exception, failures: int) -> float:
        """Log and send failure number ``failures`` in a row; return how long to wait before the
        next connection."""
        # Every error here is about the connection itself, so the listener probes at least once a
        # second: the moment the server answers, it listens again.
        delay = min(UNREACHABLE_MAX_SECONDS, 0.2 * 2**failures)
        if failures == 1 and not self.ever_connected:
            # pg-boss's listen_notify_unavailable: LISTEN could not start (a pooler in transaction
            # mode refuses it, say). Fetching goes on by polling; the listener keeps trying, and
            # wakes every notify queue once it is up.
            logger.warning(
                "%s (%s)",
                LISTEN_UNAVAILABLE_MESSAGE,
                exc,
                extra={"pgboss_warning": "listen_notify_unavailable", "error": str(exc)},
            )
            # Sent, not stored: pg-boss's notifier emits this warning without persisting it.
            signals.send(
                signals.warning_raised,
                type(self),
                type="listen_notify_unavailable",
                message=LISTEN_UNAVAILABLE_MESSAGE,
                data={"type": "listen_notify_unavailable", "error": str(exc)},
                using=self.context.using,
                schema=self.context.schema,
            )
        elif worth_logging(failures):
            logger.warning("LISTEN connection lost (%s); reconnecting in %.1fs", one_line(exc), delay)
            # An error the worker survives, as a failed fetch is: sent as often as it is logged, so
            # an error tracker hears of an outage without a report a second.
            signals.send(
                signals.error_raised,
                type(self),
                error=exc,
                doing=f"listening on {self.channel}",
                instance=self,
            )
        return delay
