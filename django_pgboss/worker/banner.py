"""The worker's start banner: what it runs, where, and how, as ``celery worker`` and
``procrastinate worker`` say it when they start.

An operator reading a worker's log after a deploy wants to know, before anything else, which
version runs, on which database and pg-boss schema, which queues it works with which handler, and
with how many slots each; a worker started on the wrong settings module or with a queue missing
is seen at once. The banner is one INFO record (``manage.py pgboss_work`` shows it at the default
verbosity), its facts also in ``extra`` for structured handlers.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from typing import Any

from django.db import connections

from django_pgboss.worker.registry import Registration


def database_text(using: str) -> str:
    """The database alias with its name, host and port (never its credentials)."""
    settings = connections[using].settings_dict
    host = settings.get("HOST") or "local socket"
    port = settings.get("PORT")
    where = f"{host}:{port}" if port else host
    return f"{using!r} ({settings.get('NAME')} on {where})"


def registration_text(registration: Registration) -> str:
    """One queue's line: its handler and how the worker runs it."""
    traits = [f"concurrency {registration.concurrency}", f"batch size {registration.batch_size}"]
    if registration.batch:
        traits.append("batch handler")
    if registration.is_async:
        traits.append("async")
    if registration.transactional:
        traits.append("transactional")
    return f"{registration.queue} -> {registration.label} ({', '.join(traits)})"


def banner(
    registrations: Sequence[Registration],
    *,
    using: str,
    schema: str,
    burst: bool,
    max_jobs: int | None,
    grace_seconds: float,
) -> tuple[str, dict[str, Any]]:
    """The banner's text and its ``extra`` fields."""
    # Imported here: django_pgboss/__init__.py imports the worker before it sets __version__,
    # which version.py reads.
    from django_pgboss.version import version_text

    mode = "burst: drains its queues, then exits" if burst else "runs until stopped"
    if max_jobs is not None:
        mode += f", stops after {max_jobs} job(s)"
    lines = [
        f"worker started: {version_text()}, pid {os.getpid()} on {socket.gethostname()}",
        f"  database {database_text(using)}, schema {schema}",
        f"  {mode}; a stop gives running jobs {grace_seconds:g}s",
        f"  {len(registrations)} queue(s):",
        *(f"    {registration_text(r)}" for r in registrations),
    ]
    extra = {
        "queues": [r.queue for r in registrations],
        "concurrency": {r.queue: r.concurrency for r in registrations},
        "database": using,
        "schema": schema,
    }
    return "\n".join(lines), extra
