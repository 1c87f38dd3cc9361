"""What a scrape is answered with, and the HTTP server of ``--metrics-port``.

One process, or many: with PROMETHEUS_MULTIPROC_DIR set (prometheus-client's multi-process mode,
for workers run as several processes), the process metrics are read back from every process's
files in that folder by prometheus-client's MultiProcessCollector; otherwise from this process's
registry. The queue gauges are read from the database either way, once per scrape.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Iterator
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import REGISTRY, CollectorRegistry, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead

from django_pgboss.db.context import DatabaseContext
from django_pgboss.observability.auth import bearer_matches
from django_pgboss.observability.metrics import PGBOSS_REGISTRY, QueueCollector

logger = logging.getLogger("django_pgboss.observability")


def multiprocess_dir() -> str | None:
    """PROMETHEUS_MULTIPROC_DIR, when prometheus-client's multi-process mode is on."""
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None


class Exposition:
    """Everything one scrape reports: the process metrics and, with ``queues``, the queue gauges.

    ``process_defaults`` adds prometheus-client's default registry (the process's CPU and memory,
    and any metric a handler registered there): the commands' servers do, the view does not, since
    a web process's own metrics are not django_pgboss's to publish.
    """

    def __init__(
        self,
        *,
        queues: QueueCollector | None = None,
        process_defaults: bool = False,
    ) -> None:
        self.sources: list[Any] = []
        directory = multiprocess_dir()
        if directory:
            collected = CollectorRegistry(auto_describe=False)
            MultiProcessCollector(collected, path=directory)
            self.sources.append(collected)
        else:
            self.sources.append(PGBOSS_REGISTRY)
            if process_defaults:
                self.sources.append(REGISTRY)
        if queues is not None:
            self.sources.append(queues)

    def collect(self) -> Iterator[Any]:
        for source in self.sources:
            yield from source.collect()


class _QuietHandler(WSGIRequestHandler):
    """Logs no request line to stderr (prometheus-client's own server does not either)."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _guarded(app: Any, token: str) -> Any:
    """``app`` answering only requests whose Authorization header carries ``token``; 401 otherwise,
    before the metrics (and the queue gauges' statement) are read."""

    def guarded(environ: dict[str, Any], start_response: Any) -> Any:
        if bearer_matches(environ.get("HTTP_AUTHORIZATION"), token):
            return app(environ, start_response)
        start_response(
            "401 Unauthorized",
            [("Content-Type", "text/plain"), ("WWW-Authenticate", 'Bearer realm="pgboss metrics"')],
        )
        return [b"authentication required\n"]

    return guarded


def serve(
    port: int,
    addr: str = "127.0.0.1",
    *,
    queues: bool = False,
    context: DatabaseContext | None = None,
    token: str | None = None,
) -> Any:
    """Serve /metrics on ``addr``:``port`` from a daemon thread; returns the server (``server_port``
    is the port bound, when ``port`` was 0). With ``queues`` the queue gauges are read at each
    scrape, on a connection closed after it. With ``token``, only a request whose Authorization
    header is ``Bearer <token>`` is answered (observability/auth.py); the others get 401.

    prometheus-client's start_http_server(), but for the token check around its WSGI app.
    """
    collector = QueueCollector(context, close_connection=True) if queues else None
    app = make_wsgi_app(Exposition(queues=collector, process_defaults=True))
    if token:
        app = _guarded(app, token)
    family, _, _, _, sockaddr = socket.getaddrinfo(
        addr, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]

    class Server(ThreadingWSGIServer):
        address_family = family

    server = make_server(str(sockaddr[0]), port, app, Server, handler_class=_QuietHandler)
    threading.Thread(target=server.serve_forever, name="pgboss-metrics", daemon=True).start()
    logger.info(
        "metrics on http://%s:%d/metrics (%s)",
        addr,
        server.server_port,
        "token required" if token else "no token: anyone who reaches the port",
    )
    return server


def process_exited() -> None:
    """In multi-process mode, tell prometheus-client this process's live gauges are gone."""
    directory = multiprocess_dir()
    if directory:
        mark_process_dead(os.getpid(), directory)
