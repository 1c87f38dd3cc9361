"""The --metrics-port and --metrics-addr options that pgboss_work and pgboss_monitor share.

The port listens on PGBOSS["METRICS_ADDR"] (127.0.0.1) unless --metrics-addr names another
address, and answers only ``Authorization: Bearer <PGBOSS["METRICS_TOKEN"]>`` when a token is set.
"""

from __future__ import annotations

import os
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import CommandError, CommandParser

from django_pgboss.conf import pgboss_settings
from django_pgboss.db.context import DatabaseContext
from django_pgboss.observability.extras import METRICS_MISSING, metrics_available


def add_arguments(parser: CommandParser, what: str) -> None:
    """Add the two options; ``what`` says what the port serves, for the help text."""
    parser.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        help=f"serve Prometheus metrics ({what}) on this port at /metrics (needs django-pgboss[metrics])",
    )
    parser.add_argument(
        "--metrics-addr",
        metavar="ADDR",
        help=(
            "the address --metrics-port listens on (default settings.PGBOSS['METRICS_ADDR'], "
            "127.0.0.1: this machine only; 0.0.0.0 for every interface)"
        ),
    )


def check(options: dict[str, Any]) -> None:
    """Refuse a port out of range, an empty address, or a port without prometheus-client, before
    anything starts."""
    port = options["metrics_port"]
    if port is not None and not 0 <= port <= 65535:
        raise CommandError(f"--metrics-port must be between 0 and 65535, not {port}")
    addr = options.get("metrics_addr")
    if addr is not None and (not addr.strip() or "\x00" in addr):
        raise CommandError(f"--metrics-addr must be a host name or an IP address, not {addr!r}")
    if port is not None and not metrics_available():
        raise CommandError(METRICS_MISSING)


def address(options: dict[str, Any]) -> str:
    """The address to listen on: --metrics-addr, else PGBOSS["METRICS_ADDR"]."""
    addr = options.get("metrics_addr")
    return str(addr if addr is not None else pgboss_settings.METRICS_ADDR)


def start(options: dict[str, Any], *, queues: bool, context: DatabaseContext | None = None) -> Any:
    """Start the metrics server when --metrics-port was given; returns it, or None."""
    port = options["metrics_port"]
    if port is None:
        return None
    try:
        from django_pgboss.observability import exposition
    except (ImproperlyConfigured, ImportError) as exc:
        # check() found prometheus-client; this is a part of it that does not import.
        raise CommandError(f"{METRICS_MISSING} ({exc})") from exc
    try:
        return exposition.serve(
            port, address(options), queues=queues, context=context, token=pgboss_settings.METRICS_TOKEN
        )
    except OSError as exc:
        raise CommandError(f"--metrics-port {port}: {exc}") from exc


def worker_metrics(options: dict[str, Any]) -> Any:
    """The worker's metrics, their signal receivers connected, when they have somewhere to go:
    --metrics-port, or prometheus-client's multi-process folder (PROMETHEUS_MULTIPROC_DIR), from
    which another process serves them. None otherwise, so a worker without either counts nothing."""
    if options["metrics_port"] is None and not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        return None
    try:
        from django_pgboss.observability.metrics import WorkerMetrics
    except ImproperlyConfigured as exc:
        if options["metrics_port"] is None:
            return None  # the folder is another library's; without prometheus-client, nothing to write
        raise CommandError(str(exc)) from exc
    return WorkerMetrics().connect()


def process_exited() -> None:
    """In prometheus-client's multi-process mode, mark this process's live gauges dead."""
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        return
    try:
        from django_pgboss.observability import exposition
    except ImproperlyConfigured:
        return
    exposition.process_exited()
