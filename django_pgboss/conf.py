"""settings.PGBOSS, read through one object with defaults.

``pgboss_settings.SCHEMA`` and friends always reflect the current Django settings: the cache is
dropped whenever ``setting_changed`` fires for PGBOSS (``override_settings`` in tests).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.dispatch import receiver

from django_pgboss.constants import DEFAULT_SCHEMA

DEFAULTS: dict[str, Any] = {
    # The PostgreSQL schema that holds pg-boss's tables. A pg-boss (Node) instance shares the queue
    # when it is configured with the same schema.
    "SCHEMA": DEFAULT_SCHEMA,
    # The database engine behind DATABASE, as pg-boss's `backend` option names it: "postgres"
    # (PostgreSQL), "citus" (a Citus coordinator holding pg-boss's tables on itself, as pg-boss's
    # citus profile does), or "citus-distributed" (a Citus coordinator with the job table
    # distributed by queue name over its workers). docs/citus.md says what each changes.
    "BACKEND": "postgres",
    # The Django database alias whose connection runs every statement, so sends join the caller's
    # transaction.
    "DATABASE": "default",
    # Run django_pgboss's own statements as server-side prepared statements (after their second
    # use on a connection), which halves the cost of a send. Django's own queries are unaffected.
    # Set False behind a pooler that cannot keep prepared statements (PgBouncer before 1.21 in
    # transaction mode).
    "PREPARED_STATEMENTS": True,
    # The monitor (supervise(), manage.py pgboss_monitor): how often each queue is counted, how often
    # its old jobs are deleted, and whether counts are kept as history (queue_stats) with throughput.
    "MONITOR_INTERVAL_SECONDS": 60,
    "MAINTENANCE_INTERVAL_SECONDS": 24 * 60 * 60,
    "PERSIST_QUEUE_STATS": True,
    "QUEUE_STATS_RETENTION_DAYS": 7,
    # A queue with more jobs waiting than this (or than its own warning_queue_size) raises a warning.
    "WARNING_QUEUE_SIZE": 10_000,
    # A monitor statement that takes longer than this many seconds raises a slow_query warning
    # (pg-boss's warningSlowQuerySeconds).
    "WARNING_SLOW_QUERY_SECONDS": 30,
    # Warnings are logged; with this they are also kept in the warning table, for this many days.
    "PERSIST_WARNINGS": False,
    "WARNING_RETENTION_DAYS": 365,
    # How often the timekeeper's pass may run, across every monitor (pg-boss's
    # cronMonitorIntervalSeconds): 1 to 45 seconds, since an occurrence stays due for a minute.
    "CRON_INTERVAL_SECONDS": 30,
    # How often the monitor's flow pass may run, across every monitor (pg-boss's
    # flowIntervalSeconds, at least 1): a flow's children are unblocked within about this long of
    # their last parent completing.
    "FLOW_INTERVAL_SECONDS": 5,
    # How often the monitor's bam pass may run, across every monitor and pg-boss instance (pg-boss's
    # bamIntervalSeconds, at least 10): it builds the indexes pg-boss's migrations queued in bam.
    "BAM_INTERVAL_SECONDS": 60,
    # Defer the stats aggregate after one long enough to hold back autovacuum; and warn when the job
    # tables' dead rows are not being reclaimed (xmin_horizon, autovacuum_disabled).
    "MONITOR_VACUUM": True,
    # Rebuild bloated job indexes (REINDEX INDEX CONCURRENTLY) in the monitor's maintenance, once per
    # interval across every monitor, as pg-boss's reindex option does. False only reports them
    # (index_bloat warnings; boss.get_reindex_commands() gives the statements).
    "REINDEX": True,
    "REINDEX_INTERVAL_SECONDS": 24 * 60 * 60,
    # The worker: how many handler threads that ignored their job's cancellation signal (past its
    # deadline) may go on running before the worker stops and exits with status 75, for its
    # process supervisor to start a fresh one (manage.py pgboss_work --max-abandoned-threads).
    "MAX_ABANDONED_THREADS": 5,
    # The worker's LISTEN connection (pg-boss 12.38's notifyHeartbeatIntervalMs,
    # notifyHeartbeatTimeoutMs and notifyKeepAliveInitialDelayMs, in seconds): every so many seconds
    # it must answer a heartbeat within the timeout, or it is given up and reconnected (the notify
    # queues poll at their polling_interval_seconds meanwhile); TCP keepalives start after the
    # initial delay of silence. Each an integer from 1 to 3,600.
    "NOTIFY_HEARTBEAT_INTERVAL_SECONDS": 10,
    "NOTIFY_HEARTBEAT_TIMEOUT_SECONDS": 5,
    "NOTIFY_KEEPALIVE_INITIAL_DELAY_SECONDS": 10,
    # The metrics view (django_pgboss.observability.views.metrics) answers staff users, and any
    # request whose Authorization header is "Bearer <this token>" (Prometheus's scrape config
    # `authorization: {credentials: ...}`). None: staff only. The commands' metrics ports answer
    # only that header too when it is set, and anyone who reaches them when it is not.
    "METRICS_TOKEN": None,
    # The address the commands' metrics ports (pgboss_work / pgboss_monitor --metrics-port) listen
    # on unless --metrics-addr says otherwise: this machine only, since a port answers anyone who
    # reaches it when no METRICS_TOKEN is set. "0.0.0.0" (or "::") listens on every interface.
    "METRICS_ADDR": "127.0.0.1",
    # The instance registry (pg-boss 12.36's registerInstance, instanceName, instanceHeartbeatSeconds):
    # every pgboss_work and pgboss_monitor process, and an in-process Worker or Monitor, writes a row
    # in the instance table (boss.get_instances(), the admin's Instances page), under this name when
    # one is set, refreshed every so many seconds (1 to 3,600); it reads as gone after three missed.
    "REGISTER_INSTANCE": True,
    "INSTANCE_NAME": None,
    "INSTANCE_HEARTBEAT_SECONDS": 30,
    # A job sent inside an OpenTelemetry span stores that span's trace context in its
    # trace_context column, as pg-boss 12.38 does with propagateContext, so the worker's process
    # span continues the sender's trace (whichever language sent or works the job). Nothing is
    # written until a tracer provider is set; False writes nothing even then.
    "PROPAGATE_TRACE_CONTEXT": True,
}
"""Every key settings.PGBOSS understands, with its default."""


class PgBossSettings:
    """Attribute access to settings.PGBOSS with ``DEFAULTS`` filled in."""

    def __init__(self) -> None:
        self._cache: dict[str, Any] | None = None

    def _load(self) -> dict[str, Any]:
        user = getattr(settings, "PGBOSS", None) or {}
        if not isinstance(user, dict):
            raise ImproperlyConfigured(f"settings.PGBOSS must be a dict, not {type(user).__name__}.")
        unknown = sorted(set(user) - set(DEFAULTS))
        if unknown:
            raise ImproperlyConfigured(
                f"settings.PGBOSS has unknown key(s) {', '.join(unknown)}; "
                f"known keys are {', '.join(sorted(DEFAULTS))}."
            )
        return {**DEFAULTS, **user}

    def __getattr__(self, name: str) -> Any:
        # Reached only for a name not yet in the instance's __dict__: the first read after a
        # (re)load. The values are then copied into __dict__, so every later read is a plain
        # attribute lookup: a send reads three of them, and this method cost 0.6 us a read.
        if name not in DEFAULTS:
            raise AttributeError(f"settings.PGBOSS has no key {name!r}")
        cache = self._cache
        if cache is None:
            cache = self._cache = self._load()
            self.__dict__.update(cache)
        return cache[name]

    def reload(self) -> None:
        """Forget the cached values; the next read sees the current settings."""
        for name in DEFAULTS:
            self.__dict__.pop(name, None)
        self._cache = None


pgboss_settings = PgBossSettings()
"""settings.PGBOSS as the package reads it: ``pgboss_settings.SCHEMA``, ``pgboss_settings.DATABASE``
..., each the project's value or its default."""


@receiver(setting_changed)
def _reload_on_setting_changed(*, setting: str, **kwargs: Any) -> None:
    if setting == "PGBOSS":
        pgboss_settings.reload()
