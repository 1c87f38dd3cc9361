"""One LISTEN connection and its liveness: TCP keepalives, and a heartbeat that must be answered in time.

A connection can die without closing: a NAT or a load balancer drops its state, a cable is pulled,
a proxy stops forwarding. Nothing then arrives, no error either, and a listener that only waits for
notifications waits for ever while the jobs sent meanwhile are found by polling alone. So, as
pg-boss 12.38's listener does, every NOTIFY_HEARTBEAT_INTERVAL_SECONDS the connection is asked which
channels it LISTENs on, and an answer that does not come within NOTIFY_HEARTBEAT_TIMEOUT_SECONDS
(or that no longer names the channel) gives the connection up as ``ListenerStalled``. TCP
keepalives (after NOTIFY_KEEPALIVE_INITIAL_DELAY_SECONDS of silence) keep idle NAT entries alive and
let the kernel notice a peer that is gone.

psycopg's blocking calls wait for an answer without a deadline, so every round trip here goes
through the connection's libpq object (``psycopg.pq``) without blocking, waiting on the socket
with the time left. Only this module talks to the connection once it is open.
"""

from __future__ import annotations

import selectors
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import pq

from django_pgboss import arguments
from django_pgboss.conf import pgboss_settings
from django_pgboss.db.context import DatabaseContext

if TYPE_CHECKING:
    from psycopg.pq.abc import PGresult

#: How often a wait looks at the stop event, so that a stopping worker is not held by a heartbeat.
STOP_CHECK_SECONDS = 0.5

#: The shortest connect_timeout libpq honours: it reads anything below as 2 seconds.
MIN_CONNECT_TIMEOUT_SECONDS = 2


class ListenerStalled(psycopg.OperationalError):
    """The LISTEN connection stopped answering (its heartbeat went unanswered within
    NOTIFY_HEARTBEAT_TIMEOUT_SECONDS) or lost its LISTEN: the listener gives it up and reconnects."""


@dataclass(frozen=True)
class ListenerSettings:
    """The listener's liveness settings (pg-boss 12.38's ``notifyHeartbeatIntervalMs``,
    ``notifyHeartbeatTimeoutMs`` and ``notifyKeepAliveInitialDelayMs``, in seconds)."""

    heartbeat_interval_seconds: int = 10
    heartbeat_timeout_seconds: int = 5
    keepalive_initial_delay_seconds: int = 10

    @classmethod
    def from_settings(cls) -> ListenerSettings:
        """settings.PGBOSS's NOTIFY_* values, each refused with InvalidOption unless an integer
        from 1 to 3,600."""

        def checked(key: str, value: object) -> int:
            result = arguments.integer(key, value, minimum=1, maximum=3600)
            assert result is not None
            return result

        return cls(
            heartbeat_interval_seconds=checked(
                "NOTIFY_HEARTBEAT_INTERVAL_SECONDS", pgboss_settings.NOTIFY_HEARTBEAT_INTERVAL_SECONDS
            ),
            heartbeat_timeout_seconds=checked(
                "NOTIFY_HEARTBEAT_TIMEOUT_SECONDS", pgboss_settings.NOTIFY_HEARTBEAT_TIMEOUT_SECONDS
            ),
            keepalive_initial_delay_seconds=checked(
                "NOTIFY_KEEPALIVE_INITIAL_DELAY_SECONDS",
                pgboss_settings.NOTIFY_KEEPALIVE_INITIAL_DELAY_SECONDS,
            ),
        )


class ListenConnection:
    """An open connection that LISTENs on ``context``'s channel; ``receive()`` hands each
    notification's payload to ``deliver`` and beats the heart when it is due.

    Raises psycopg errors (``ListenerStalled`` among them) whenever the connection is no longer
    fit to listen; the caller closes it and opens another.
    """

    def __init__(
        self,
        context: DatabaseContext,
        settings: ListenerSettings,
        stop: threading.Event,
    ) -> None:
        self.context = context
        self.settings = settings
        self.channel = context.notify_channel()
        self._stop = stop
        #: How many heartbeats the connection has answered.
        self.heartbeats = 0
        self._connection = psycopg.connect(autocommit=True, **self._params())
        try:
            self._pgconn = self._connection.pgconn
            self._encoding = self._connection.info.encoding
            self._selector = selectors.DefaultSelector()
            self._selector.register(self._pgconn.socket, selectors.EVENT_READ)
            self._round_trip(context.listen_sql())
        except BaseException:
            self.close()
            raise
        self._next_heartbeat = time.monotonic() + settings.heartbeat_interval_seconds

    def _params(self) -> dict[str, Any]:
        params = self.context.connection_params()
        # Django's own adaptation context and cursor class are for its wrapper, not a raw listener.
        for key in ("cursor_factory", "context", "prepare_threshold"):
            params.pop(key, None)
        # The keepalives are the listener's own, as pg-boss sets its listener's over the pool's
        # configuration. libpq ignores them on a Unix-domain socket.
        params["keepalives"] = 1
        params["keepalives_idle"] = self.settings.keepalive_initial_delay_seconds
        # A server that accepts the connection and never answers must not hold the listener for
        # ever either; the database's own OPTIONS win when they set a timeout.
        params.setdefault(
            "connect_timeout", max(MIN_CONNECT_TIMEOUT_SECONDS, self.settings.heartbeat_timeout_seconds)
        )
        return params

    @property
    def socket(self) -> int:
        """The connection's socket, a file descriptor (for its TCP options, say)."""
        return self._pgconn.socket

    @property
    def backend_pid(self) -> int:
        """The server process of the connection (``pg_stat_activity.pid``)."""
        return self._pgconn.backend_pid

    def receive(self, deliver: Callable[[str], None]) -> None:
        """Wait up to STOP_CHECK_SECONDS for notifications, handing each payload to ``deliver``;
        beat the heart first when it is due."""
        now = time.monotonic()
        if now >= self._next_heartbeat:
            self.heartbeat()
            self._next_heartbeat = time.monotonic() + self.settings.heartbeat_interval_seconds
            now = time.monotonic()
        if self._selector.select(min(STOP_CHECK_SECONDS, self._next_heartbeat - now)):
            self._pgconn.consume_input()
        self._deliver(deliver)

    def heartbeat(self) -> None:
        """Ask the server which channels this session LISTENs on: raises ListenerStalled when no
        answer comes within the timeout, or when the answer does not name the channel."""
        (result,) = self._round_trip(self.context.listening_channels_sql())
        encoding = self._encoding
        channels = {
            value.decode(encoding)
            for row in range(result.ntuples)
            if (value := result.get_value(row, 0)) is not None
        }
        if self.channel not in channels:
            raise ListenerStalled(f"the LISTEN on {self.channel} was lost")
        self.heartbeats += 1

    def _round_trip(self, sql: str) -> list[PGresult]:
        """Run ``sql`` and return its results, or raise ListenerStalled past the heartbeat timeout.

        Notifications that arrive with the answer stay in libpq's queue for the next ``receive()``.
        """
        timeout = self.settings.heartbeat_timeout_seconds
        deadline = time.monotonic() + timeout
        pgconn = self._pgconn
        pgconn.send_query(sql.encode(self._encoding))
        while pgconn.flush():
            self._wait(selectors.EVENT_WRITE, deadline, timeout)
        results = []
        while True:
            pgconn.consume_input()
            if pgconn.is_busy():
                self._wait(selectors.EVENT_READ, deadline, timeout)
                continue
            result = pgconn.get_result()
            if result is None:
                break
            if result.status not in (pq.ExecStatus.TUPLES_OK, pq.ExecStatus.COMMAND_OK):
                message = (result.error_message or b"").decode(self._encoding, "replace").strip()
                raise psycopg.OperationalError(message or f"the statement ended as {result.status!r}")
            results.append(result)
        return results

    def _wait(self, events: int, deadline: float, timeout: int) -> None:
        """Wait for the socket to be ready for ``events`` until ``deadline``; a stop ends the wait."""
        selector = self._selector
        selector.modify(self._pgconn.socket, events)
        try:
            while not self._stop.is_set():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise ListenerStalled(f"no answer to the heartbeat within {timeout} s")
                if selector.select(min(STOP_CHECK_SECONDS, remaining)):
                    return
            raise ListenerStalled("the listener is stopping")
        finally:
            selector.modify(self._pgconn.socket, selectors.EVENT_READ)

    def _deliver(self, deliver: Callable[[str], None]) -> None:
        while (notification := self._pgconn.notifies()) is not None:
            deliver(notification.extra.decode(self._encoding, "replace"))

    def close(self) -> None:
        """Close the connection without waiting for the server: one that stopped answering is
        closed as promptly as one that answers."""
        selector = getattr(self, "_selector", None)
        if selector is not None:
            selector.close()
        # Connection.close() finishes the libpq connection at once (its Terminate message is
        # written without waiting), whatever the state a stalled round trip left it in.
        self._connection.close()
