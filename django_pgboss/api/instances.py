"""The instance registry (pg-boss 12.38's registrar): a process's own row, and the list of rows.

:class:`InstanceRegistrar` keeps one process's row in ``<schema>.instance``: written when it
starts, refreshed every INSTANCE_HEARTBEAT_SECONDS on a thread of its own, marked stopped by a clean
stop. The worker (worker/engine.py) and the monitor (monitor/service.py) each own one, through a
hook of a few lines; nothing on their paths waits for it. A failed write is logged and sent as
``signals.error_raised``, and the next beat tries again: a beat is an upsert, so it also restores a
row a failed registration or the retention prune left missing. Registering also counts the
process's crash restarts and prunes its own name's dead rows, as pg-boss does at start.

:class:`InstanceStore` reads the rows back (``boss.get_instances()``), Node's and Python's alike.
The SQL is plans/instances.py's.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import platform
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from django.db import DatabaseError, connections

from django_pgboss import arguments, signals
from django_pgboss.conf import pgboss_settings
from django_pgboss.db.context import DatabaseContext
from django_pgboss.exceptions import InvalidOption
from django_pgboss.observability.process import ProcessVitals, process_started_at
from django_pgboss.plans import instances as plans
from django_pgboss.plans.instances import INSTANCE_QUIET_BEATS
from django_pgboss.records import Instance, InstanceMetrics, InstanceWorker
from django_pgboss.wire import (
    INSTANCE_METRICS_KEYS,
    INSTANCE_WORKER_KEYS,
    RECORDED_SETTINGS,
    renamed,
    reversed_keys,
    to_json,
)

__all__ = ["INSTANCE_QUIET_BEATS", "InstanceRegistrar", "InstanceRole", "InstanceStore", "node_version"]

logger = logging.getLogger("django_pgboss.api.instances")

_WORKER_FIELDS = reversed_keys(INSTANCE_WORKER_KEYS)
_METRICS_FIELDS = reversed_keys(INSTANCE_METRICS_KEYS)
_MOMENTS = ("last_fetched_on", "last_job_ended_on", "last_error_on")


def node_version() -> str:
    """What a Python process writes in pg-boss's ``node_version`` column: ``"python 3.11.7"``."""
    return f"python {platform.python_version()}"


@dataclass(frozen=True)
class InstanceRole:
    """What a registering process does, as its row's flags say it: a worker does none of it, a
    monitor supervises, runs the schedules unless its cron is off, and keeps queue stats and
    warnings as the settings say. No django_pgboss process migrates (``migrate pgboss`` does)."""

    supervise: bool = False
    schedule: bool = False
    persist_queue_stats: bool = False
    persist_warnings: bool = False


class InstanceRegistrar:
    """One process's row in the instance registry: ``start()`` registers it and heartbeats on a
    thread (``pgboss-instance``); ``stop()`` ends the beats and marks the row stopped.

    ``workers`` returns the queues the process works, read at every beat (a monitor has none);
    ``sender`` and ``owner`` are the signals' sender and ``instance`` (the Worker or Monitor).
    Settings: REGISTER_INSTANCE (without it start() does nothing), INSTANCE_NAME and
    INSTANCE_HEARTBEAT_SECONDS, refused here with InvalidOption when out of range.
    """

    def __init__(
        self,
        context: DatabaseContext,
        *,
        role: InstanceRole,
        workers: Callable[[], Sequence[InstanceWorker]] | None = None,
        sender: Any = None,
        owner: Any = None,
    ) -> None:
        self.context = context
        self.role = role
        self.enabled = arguments.boolean("REGISTER_INSTANCE", pgboss_settings.REGISTER_INSTANCE)
        name = pgboss_settings.INSTANCE_NAME
        self.name = None if name is None else arguments.text("INSTANCE_NAME", name, allow_empty=False)
        beat = arguments.integer(
            "INSTANCE_HEARTBEAT_SECONDS", pgboss_settings.INSTANCE_HEARTBEAT_SECONDS, minimum=1, maximum=3600
        )
        assert beat is not None
        self.heartbeat_seconds = beat
        #: The row's id, new for every registrar (pg-boss: one per PgBoss object).
        self.id = str(uuid.uuid4())
        self.started_on: dt.datetime | None = None
        self._workers = workers or (lambda: [])
        self._sender = sender
        self._owner = owner
        self._vitals: ProcessVitals | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._recount_at: float | None = None

    # -- the process's row ---------------------------------------------------------------------

    def start(self) -> None:
        """Register and start the heartbeat thread (once; nothing without REGISTER_INSTANCE)."""
        if not self.enabled or self._thread is not None:
            return
        self._vitals = ProcessVitals()
        self._thread = threading.Thread(target=self._run, name="pgboss-instance", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """End the beats and mark the row stopped, waiting for both (at most 30 seconds). Best
        effort, and never raises: a stop that cannot reach the database leaves a row that goes
        quiet after three missed heartbeats, which is the ending a crash gets."""
        thread = self._thread
        if thread is None:
            return
        self._stop.set()
        thread.join(timeout=30)

    def _run(self) -> None:
        try:
            self._attempt("registering in the instance registry", self._register)
            next_beat = time.monotonic() + self.heartbeat_seconds
            while True:
                due = min(next_beat, self._recount_at or next_beat)
                if self._stop.wait(max(0.0, due - time.monotonic())):
                    break
                if self._recount_at is not None and time.monotonic() >= self._recount_at:
                    self._recount_at = None
                    self._attempt("counting crash restarts", self._count_crash_restarts)
                if time.monotonic() >= next_beat:
                    next_beat = time.monotonic() + self.heartbeat_seconds
                    if self.started_on is None:
                        # The registration failed: a beat would have no started_on to write, so
                        # the registration is tried again instead.
                        self._attempt("registering in the instance registry", self._register)
                    else:
                        self._attempt("heartbeating in the instance registry", self._beat)
            # On this thread, after any beat in progress, so the stop is the row's last write.
            self._mark_stopped()
        finally:
            connections[self.context.using].close()

    def _mark_stopped(self) -> None:
        try:
            self.context.execute(plans.stop_instance(self.context.quoted_schema), {"id": self.id})
        except DatabaseError as exc:
            logger.info("instance %s: could not mark its row stopped (%s)", self.id, exc)

    def _attempt(self, doing: str, step: Callable[[], None]) -> None:
        """Run ``step``; a failure is logged and sent, never raised into the process."""
        try:
            step()
        except Exception as exc:
            logger.warning("instance %s: %s failed (%s); the next beat tries again", self.id, doing, exc)
            signals.send(signals.error_raised, self._sender, error=exc, doing=doing, instance=self._owner)
            if isinstance(exc, DatabaseError):
                # A broken connection must be thrown away: Django reconnects on the next statement.
                connections[self.context.using].close()

    def _register(self) -> None:
        schema = self.context.quoted_schema
        (self.started_on,) = self.context.one(plans.register_instance(schema), self._values())
        # Counted before the pruning, which keeps the earliest rows' counts only if they are right.
        self._count_crash_restarts()
        self.context.execute(
            plans.prune_instance_lives(schema),
            {"id": self.id, "name": self.name, "host": socket.gethostname()},
        )

    def _beat(self) -> None:
        self.context.execute(
            plans.heartbeat_instance(self.context.quoted_schema),
            {**self._values(), "started_on": self.started_on},
        )

    def _count_crash_restarts(self) -> None:
        """Count this process's crash restarts; when a row of its name and host still reads live
        without having beaten since this process started, count again once that row goes quiet."""
        schema = self.context.quoted_schema
        values = {
            "id": self.id,
            "name": self.name,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "process_started_on": dt.datetime.fromtimestamp(process_started_at(), dt.UTC),
        }
        self.context.execute(plans.count_crash_restarts(schema), values)
        (recount_at,) = self.context.one(plans.crash_recount_at(schema), values)
        (now,) = self.context.one(plans.database_now(schema))
        if recount_at is not None:
            # At least a second on, measured on the database's clock, which the rows are stamped by.
            wait = max(1.0, (recount_at - now).total_seconds() + 1.0)
            self._recount_at = time.monotonic() + wait

    def _values(self) -> dict[str, Any]:
        role = self.role
        metrics = self._vitals.check() if self._vitals is not None else None
        return {
            "id": self.id,
            "name": self.name,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "version": _package_version(),
            "node_version": node_version(),
            "heartbeat_seconds": self.heartbeat_seconds,
            "supervise": role.supervise,
            "schedule": role.schedule,
            "migrate": False,
            "persist_queue_stats": role.persist_queue_stats,
            "persist_warnings": role.persist_warnings,
            # Django's connections are not a pool django_pgboss made and can count, which is what
            # pg-boss writes NULL for.
            "pool_max": None,
            "pool_total": None,
            "pool_idle": None,
            "pool_waiting": None,
            "workers": to_json([_worker_document(entry) for entry in self._workers()], "workers"),
            "metrics": None
            if metrics is None
            else to_json(renamed(asdict(metrics), INSTANCE_METRICS_KEYS), "metrics"),
            "config": to_json(self._config(), "config"),
        }

    def _config(self) -> dict[str, Any]:
        """The settings this process runs with, under pg-boss's option names (an allowlist)."""
        config: dict[str, Any] = {"adapter": "django", "backend": "postgres"}
        for setting, option in RECORDED_SETTINGS.items():
            config[option] = getattr(pgboss_settings, setting)
        config["supervise"] = self.role.supervise
        config["schedule"] = self.role.schedule
        config["migrate"] = False
        return config


def _package_version() -> str:
    # Read from the loaded package rather than imported: the package's __init__ imports the API
    # (and the worker), so an import here would point up the layers and run before __version__ is set.
    return str(getattr(sys.modules.get("django_pgboss"), "__version__", "unknown"))


def _worker_document(entry: InstanceWorker) -> dict[str, Any]:
    values = asdict(entry)
    for key in _MOMENTS:
        moment = values[key]
        # pg-boss writes toISOString(): UTC, milliseconds, "Z".
        values[key] = (
            None
            if moment is None
            else moment.astimezone(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        )
    return renamed(values, INSTANCE_WORKER_KEYS)


def _moment(text: Any) -> dt.datetime | None:
    if not isinstance(text, str):
        return None
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def _worker_from_document(document: dict[str, Any]) -> InstanceWorker:
    values = renamed(document, _WORKER_FIELDS)
    for key in _MOMENTS:
        values[key] = _moment(values.get(key))
    values.setdefault("options", {})
    defaults = {
        "id": "",
        "queue": "",
        "local_concurrency": 0,
        "batch_size": 1,
        "polling_interval_seconds": None,
        "active": 0,
    }
    return InstanceWorker(**{**defaults, **values})


def _metrics_from_document(document: Any) -> InstanceMetrics | None:
    if not isinstance(document, dict):
        return None
    values = renamed(document, _METRICS_FIELDS)
    return InstanceMetrics(**{field: values.get(field) for field in INSTANCE_METRICS_KEYS})


class InstanceStore:
    """Reads the instance registry: ``get_instances()``."""

    def __init__(self, context: DatabaseContext) -> None:
        self.context = context

    def get_instances(self, limit: int | None = None, after: Any = None) -> list[Instance]:
        """See Boss.get_instances()."""
        page = arguments.list_limit("get_instances", limit)
        cursor_id = arguments.instance_after(after)
        schema = self.context.quoted_schema
        rows = self.context.records(
            plans.get_instances(schema, after=cursor_id is not None), {"limit": page, "after": cursor_id}
        )
        # An empty page is the end of the list, unless the instance ``after`` names was pruned
        # since the previous page: then the list cannot go on from it.
        if (
            cursor_id is not None
            and not rows
            and self.context.one_or_none(plans.instance_exists(schema), {"id": cursor_id}) is None
        ):
            raise InvalidOption(
                f"get_instances: after names instance {cursor_id}, which no longer exists "
                "(pruned since the previous page); start again from the first page"
            )
        return [_instance(row) for row in rows]

    def database_now(self) -> dt.datetime:
        """The schema's clock, which liveness is judged against."""
        (now,) = self.context.one(plans.database_now(self.context.quoted_schema))
        return now


def is_live(
    stopped_on: dt.datetime | None, heartbeat_on: dt.datetime, heartbeat_seconds: int, now: dt.datetime
) -> bool:
    """pg-boss's ``live`` in Python, for a row read without it (the admin's): not stopped, and heard
    from within INSTANCE_QUIET_BEATS of its own heartbeats of ``now`` (the schema's clock)."""
    return stopped_on is None and heartbeat_on >= now - dt.timedelta(
        seconds=heartbeat_seconds * INSTANCE_QUIET_BEATS
    )


def _document(value: Any) -> Any:
    # Django's PostgreSQL backend hands jsonb back as its text.
    return json.loads(value) if isinstance(value, str) else value


def _instance(row: dict[str, Any]) -> Instance:
    workers, config = _document(row["workers"]), _document(row["config"])
    return Instance(
        **{
            **row,
            "id": str(row["id"]),
            "workers": [_worker_from_document(w) for w in workers or [] if isinstance(w, dict)],
            "metrics": _metrics_from_document(_document(row["metrics"])),
            "config": config if isinstance(config, dict) else {},
        }
    )
