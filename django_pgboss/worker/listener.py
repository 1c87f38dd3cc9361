"""The worker's LISTEN connection: wakes a queue's fetch loop the moment a job is sent to it.

A LISTEN must stay on one connection for as long as it listens, so it cannot share Django's
per-thread connections (which close_old_connections() may recycle). It holds a plain psycopg
connection built from the same DATABASES settings, and re-listens after any disconnect, then
wakes every queue once, since notifications sent while it was away are lost.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable

import psycopg

from django_pgboss import signals
from django_pgboss.db.context import DatabaseContext
from django_pgboss.worker.backoff import UNREACHABLE_MAX_SECONDS, one_line, worth_logging

logger = logging.getLogger("django_pgboss.worker")

#: pg-boss's listen_notify_unavailable warning, word for word.
LISTEN_UNAVAILABLE_MESSAGE = "Failed to start LISTEN/NOTIFY listener. Continuing with polling only."


class NotifyListener:
    """Listens on the schema's channel and calls ``wake(queue)`` for each notification.

    ``context`` is the DatabaseContext (or a Boss) whose database and schema it listens on.
    """

    def __init__(self, context: DatabaseContext, queues: Iterable[str], wake: Callable[[str], None]) -> None:
        self.context = DatabaseContext.of(context)
        self.queues = set(queues)
        self.wake = wake
        self.channel = self.context.notify_channel()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pgboss-listener", daemon=True)
        self.connected = threading.Event()
        #: Whether LISTEN ever started: a first failure is listen_notify_unavailable, a later one a
        #: lost connection.
        self.ever_connected = False

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _connect(self) -> psycopg.Connection:
        params = self.context.connection_params()
        # Django's own adaptation context and cursor class are for its wrapper, not a raw listener.
        for key in ("cursor_factory", "context", "prepare_threshold"):
            params.pop(key, None)
        connection = psycopg.connect(autocommit=True, **params)
        connection.execute(self.context.listen_sql())
        return connection

    def _run(self) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                with self._connect() as connection:
                    self.connected.set()
                    self.ever_connected = True
                    if failures:
                        logger.info("listening again on %s; waking every notify queue", self.channel)
                        for name in list(self.queues):
                            self.wake(name)
                    failures = 0
                    while not self._stop.is_set():
                        for notification in connection.notifies(timeout=0.5):
                            if notification.payload in self.queues:
                                self.wake(notification.payload)
            except psycopg.Error as exc:
                failures += 1
                # Every error here is about the connection itself, so the listener probes at
                # least once a second: the moment the server answers, it listens again.
                delay = min(UNREACHABLE_MAX_SECONDS, 0.2 * 2**failures)
                if not self.connected.is_set() and failures == 1 and not self.ever_connected:
                    # pg-boss's listen_notify_unavailable: LISTEN could not start (a pooler in
                    # transaction mode refuses it, say). Fetching goes on by polling; the listener
                    # keeps trying, and wakes every notify queue once it is up.
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
                    # An error the worker survives, as a failed fetch is: sent as often as it is
                    # logged, so an error tracker hears of an outage without a report a second.
                    signals.send(
                        signals.error_raised,
                        type(self),
                        error=exc,
                        doing=f"listening on {self.channel}",
                        instance=self,
                    )
                self.connected.clear()
                self._stop.wait(delay)
