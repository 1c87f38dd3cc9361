"""What a scrape is answered with, and the HTTP server of ``--metrics-port``.

One process, or many: with PROMETHEUS_MULTIPROC_DIR set (prometheus-client's multi-process mode,
for workers run as several processes), the process metrics are read back from every process's
files in that folder by prometheus-client's MultiProcessCollector; otherwise from this process's
registry. The queue gauges are read from the database either way, once per scrape.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, start_http_server
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead

from django_pgboss.db.context import DatabaseContext
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


def serve(
    port: int, addr: str = "0.0.0.0", *, queues: bool = False, context: DatabaseContext | None = None
) -> Any:
    """Serve /metrics on ``addr``:``port`` from a daemon thread; returns the server (``server_port``
    is the port bound, when ``port`` was 0). With ``queues`` the queue gauges are read at each
    scrape, on a connection closed after it."""
    collector = QueueCollector(context, close_connection=True) if queues else None
    server, _thread = start_http_server(
        port, addr, registry=Exposition(queues=collector, process_defaults=True)
    )
    logger.info("metrics on http://%s:%d/metrics", addr, server.server_port)
    return server


def process_exited() -> None:
    """In multi-process mode, tell prometheus-client this process's live gauges are gone."""
    directory = multiprocess_dir()
    if directory:
        mark_process_dead(os.getpid(), directory)
