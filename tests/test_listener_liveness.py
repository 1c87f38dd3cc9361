"""The worker's LISTEN connection notices when it dies (issue 35, item 4): a connection that stops
answering without closing, through a proxy that stops forwarding, is given up within the heartbeat
timeout; the notify queues poll at their fast interval until the listener is back; it reconnects,
LISTENs again and says so once; and a notification after that, from Python or from pg-boss 12.38.0
(Node), wakes the worker again."""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import threading
import time
from typing import Any

import pytest
from django.conf import settings
from django.db import connection

from django_pgboss import boss, signals
from django_pgboss.api.boss import Boss
from django_pgboss.conf import pgboss_settings
from django_pgboss.db.context import DatabaseContext
from django_pgboss.exceptions import InvalidOption
from django_pgboss.worker.listen_connection import ListenConnection, ListenerSettings, ListenerStalled
from django_pgboss.worker.listener import NotifyListener
from django_pgboss.worker.registry import Registration
from django_pgboss.worker.runner import Worker
from tests.helpers import pgboss_settings_with
from tests.processes import wait_for
from tests.tcp_proxy import StallingProxy

pytestmark = pytest.mark.django_db(transaction=True)

#: A notify queue's relaxed interval in these tests: far longer than any wait below, so a job done
#: within one was found by a notification or by the fast poll, never by the relaxed one.
RELAXED_SECONDS = 600.0
#: The fast poll, while the LISTEN connection is lost.
FAST_SECONDS = 0.2


@pytest.fixture
def proxy():
    database = settings.DATABASES["default"]
    running = StallingProxy((database["HOST"], int(database["PORT"])))
    yield running
    running.close()


def through(proxy: StallingProxy) -> Boss:
    """A Boss whose worker LISTENs through ``proxy``; every other statement goes straight to the
    database, as Django's connections do."""

    class Proxied(DatabaseContext):
        def connection_params(self) -> dict[str, Any]:
            return {**super().connection_params(), "host": "127.0.0.1", "port": proxy.port}

    return Boss(context=Proxied())


class Received:
    """Every call of a signal, kept while the block runs."""

    def __init__(self, signal: Any) -> None:
        self.signal = signal
        self.calls: list[dict[str, Any]] = []

    def __call__(self, sender: Any, **kwargs: Any) -> None:
        self.calls.append({"sender": sender, **kwargs})

    def __enter__(self) -> Received:
        self.signal.connect(self, weak=False)
        return self

    def __exit__(self, *exc: object) -> None:
        self.signal.disconnect(self)


def _worker(queue: str, done: list[str], boss_: Boss | None = None) -> Worker:
    registration = Registration(
        queue,
        lambda job: done.append(job.id),
        polling_interval_seconds=FAST_SECONDS,
        notify_polling_interval_seconds=RELAXED_SECONDS,
    )
    return Worker([registration], boss=boss_)


def _start(worker: Worker) -> threading.Thread:
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    wait_for(lambda: worker._listener is not None and worker._listener.connected.is_set(), timeout=15)
    # The first fetch (at start) comes back empty and the loop settles into its relaxed wait.
    time.sleep(1)
    return thread


@pytest.mark.node
def test_a_silent_connection_is_noticed_the_queue_polls_fast_meanwhile_and_listens_again(
    proxy, caplog, run_pgboss
):
    boss.create_queue("silent", notify=True)
    done: list[str] = []
    with (
        pgboss_settings_with(
            NOTIFY_HEARTBEAT_INTERVAL_SECONDS=1,
            NOTIFY_HEARTBEAT_TIMEOUT_SECONDS=2,
            NOTIFY_KEEPALIVE_INITIAL_DELAY_SECONDS=1,
        ),
        Received(signals.error_raised) as errors,
        Received(signals.listener_reconnected) as reconnections,
        caplog.at_level(logging.INFO, logger="django_pgboss.worker"),
    ):
        worker = _worker("silent", done, through(proxy))
        thread = _start(worker)
        listener = worker._listener
        assert listener is not None
        try:
            # Through the proxy, a notification wakes the loop out of its relaxed wait.
            first = boss.send("silent", {})
            wait_for(lambda: first in done, timeout=10)

            proxy.stall()
            # The heartbeat goes unanswered: the connection is given up within interval + timeout.
            wait_for(lambda: not listener.connected.is_set(), timeout=10)
            # The listener cannot reconnect while the network is silent (its new connection is
            # swallowed too), and meanwhile the queue polls at its fast interval: each job sent
            # now is done although no notification can reach the worker.
            wait_for(lambda: proxy.accepted >= 2, timeout=10)
            for _ in range(3):
                time.sleep(0.5)  # past any wake-up fetch: only the poll can find this job
                during = boss.send("silent", {})
                wait_for(lambda: during in done, timeout=10)  # noqa: B023 (waited for at once)
            assert not listener.connected.is_set()
            assert reconnections.calls == []

            proxy.resume()
            wait_for(lambda: reconnections.calls, timeout=15)
            wait_for(listener.connected.is_set, timeout=5)
            time.sleep(1)  # the loop's wake-up fetch is done; it waits its relaxed interval again
            after = boss.send("silent", {})
            wait_for(lambda: after in done, timeout=10)
            # pg-boss 12.38.0's own send notifies the channel the listener listens on again.
            sent = run_pgboss("send", pgboss_settings.SCHEMA, "silent", json.dumps([{"data": {}}]))
            (from_node,) = sent["ids"]
            wait_for(lambda: from_node in done, timeout=10)
        finally:
            worker.stop()
            thread.join(30)

    stalls = [call["error"] for call in errors.calls if call["sender"].__name__ == "NotifyListener"]
    assert isinstance(stalls[0], ListenerStalled)
    assert "no answer to the heartbeat within 2 s" in str(stalls[0])
    (reconnected,) = reconnections.calls
    assert reconnected["instance"] is listener and reconnected["channel"] == listener.channel
    assert "no answer to the heartbeat within 2 s" in reconnected["reason"]
    assert reconnected["lost_for_seconds"] > 0
    assert (reconnected["using"], reconnected["schema"]) == (boss.using, boss.schema)
    again = [r for r in caplog.records if r.getMessage().startswith("listening again on")]
    assert len(again) == 1 and "no answer to the heartbeat" in again[0].getMessage()
    lost = [r for r in caplog.records if r.getMessage().startswith("LISTEN connection lost")]
    assert lost and "no answer to the heartbeat within 2 s" in lost[0].getMessage()
    assert listener.reconnects == 1
    # The first connection, the attempts the silent network swallowed, and the one that came back.
    assert proxy.accepted >= 3


def test_a_connection_the_server_closes_is_reconnected_without_waiting_for_a_heartbeat():
    boss.create_queue("closed", notify=True)
    done: list[str] = []
    # No heartbeat within the test: only the close itself can tell the listener.
    with (
        pgboss_settings_with(NOTIFY_HEARTBEAT_INTERVAL_SECONDS=3600),
        Received(signals.listener_reconnected) as reconnections,
    ):
        worker = _worker("closed", done)
        thread = _start(worker)
        listener = worker._listener
        assert listener is not None and listener.connection is not None
        try:
            pid = listener.connection.backend_pid
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
            wait_for(lambda: reconnections.calls, timeout=15)
            assert listener.connection is not None and listener.connection.backend_pid != pid
            time.sleep(1)
            after = boss.send("closed", {})
            wait_for(lambda: after in done, timeout=10)
        finally:
            worker.stop()
            thread.join(30)
    (reconnected,) = reconnections.calls
    assert "terminat" in reconnected["reason"]


class Forgetful(DatabaseContext):
    """A connection whose LISTEN is gone by its heartbeat, as when a pooler in transaction mode
    runs the LISTEN on one server session and the heartbeat on another."""

    def listen_sql(self) -> str:
        return "SELECT 1"


def test_a_connection_whose_listen_is_gone_fails_its_heartbeat():
    listen = ListenConnection(Forgetful(), ListenerSettings(), threading.Event())
    try:
        with pytest.raises(ListenerStalled, match=r"the LISTEN on pgboss_[0-9a-f]{24} was lost"):
            listen.heartbeat()
    finally:
        listen.close()
    answered = ListenConnection(DatabaseContext(), ListenerSettings(), threading.Event())
    try:
        answered.heartbeat()
        assert answered.heartbeats == 1
    finally:
        answered.close()


def test_a_listener_whose_every_connection_loses_its_listen_reports_it_ever_more_rarely(caplog):
    # Each connection LISTENs, then fails its first heartbeat: the losses count as one outage in a
    # row (logged the 1st, 2nd, 4th ... time), not as a fresh one at each reconnection.
    listener = NotifyListener(
        Forgetful(),
        ["q"],
        wake=lambda name: None,
        settings=ListenerSettings(heartbeat_interval_seconds=1, heartbeat_timeout_seconds=1),
    )
    with caplog.at_level(logging.WARNING, logger="django_pgboss.worker"):
        listener.start()
        try:
            wait_for(lambda: listener.reconnects >= 4, timeout=30)
        finally:
            listener.stop()
    reported = [r for r in caplog.records if r.getMessage().startswith("LISTEN connection lost")]
    assert reported and "was lost" in reported[0].getMessage()
    assert len(reported) < listener.reconnects


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="TCP_KEEPIDLE is Linux's option name")
def test_the_listen_connection_has_tcp_keepalives_after_the_initial_delay(proxy):
    # Through the proxy, so that the connection is TCP whatever DATABASES says.
    boss.create_queue("kept", notify=True)
    with pgboss_settings_with(NOTIFY_KEEPALIVE_INITIAL_DELAY_SECONDS=7):
        worker = _worker("kept", [], through(proxy))
        thread = _start(worker)
        try:
            listener = worker._listener
            assert listener is not None and listener.connection is not None
            sock = socket.socket(fileno=os.dup(listener.connection.socket))
            try:
                keepalive = sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE)
                idle = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE)
            finally:
                sock.close()
        finally:
            worker.stop()
            thread.join(30)
    assert keepalive and idle == 7


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("NOTIFY_HEARTBEAT_INTERVAL_SECONDS", 0),
        ("NOTIFY_HEARTBEAT_TIMEOUT_SECONDS", 2.5),
        ("NOTIFY_KEEPALIVE_INITIAL_DELAY_SECONDS", 3601),
    ],
)
def test_a_bad_listener_setting_is_refused_before_the_worker_starts(setting, value):
    boss.create_queue("refused", notify=True)
    before = set(threading.enumerate())
    with pgboss_settings_with(**{setting: value}), pytest.raises(InvalidOption, match=setting):
        Worker([Registration("refused", lambda job: None)])
    assert set(threading.enumerate()) == before
