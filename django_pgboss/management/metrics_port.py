"""The --metrics-port and --metrics-addr options that pgboss_work and pgboss_monitor share."""

from __future__ import annotations

import os
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import CommandError, CommandParser

from django_pgboss.db.context import DatabaseContext


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
        default="0.0.0.0",
        metavar="ADDR",
        help="the address --metrics-port listens on (default 0.0.0.0, every interface)",
    )


def check(options: dict[str, Any]) -> None:
    """Refuse a port out of range before anything starts."""
    port = options["metrics_port"]
    if port is not None and not 0 <= port <= 65535:
        raise CommandError(f"--metrics-port must be between 0 and 65535, not {port}")


def start(options: dict[str, Any], *, queues: bool, context: DatabaseContext | None = None) -> Any:
    """Start the metrics server when --metrics-port was given; returns it, or None."""
    port = options["metrics_port"]
    if port is None:
        return None
    try:
        from django_pgboss.observability import exposition
    except ImproperlyConfigured as exc:
        raise CommandError(str(exc)) from exc
    try:
        return exposition.serve(port, options["metrics_addr"], queues=queues, context=context)
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
