"""What ``manage.py pgboss_status`` reports and judges: the queues, the registered instances, the
monitor's last pass and the persisted warnings, read in one go and checked.

:func:`read_status` gathers a :class:`Status` (plain data, every moment on the schema's clock, so a
TestClock or a skewed host judges alike); :meth:`Status.as_json` is the command's ``--json``
document, whose shape docs/monitoring.md documents and :data:`JSON_SHAPE_VERSION` numbers. The
checks (:data:`CHECKS`) are judged here too; which of them fail the command is the caller's
choice, so that a worker's liveness probe need not fail because the monitor is down.

Nothing here counts jobs: the queue figures are the ones the monitor's last pass cached in the
queue table (``boss.get_queues()``), and the oldest ready job's age is the index-only probe the
metrics use (observability/queues.py). A status read therefore costs a few statements whatever the
size of the job tables.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django_pgboss.api.instances import InstanceStore
from django_pgboss.api.queues import QueueStore
from django_pgboss.conf import pgboss_settings
from django_pgboss.constants import INTERNAL_QUEUE_PREFIX
from django_pgboss.db.context import DatabaseContext
from django_pgboss.exceptions import InvalidOption, QueueNotFound
from django_pgboss.observability.queues import read_queues
from django_pgboss.plans import maintenance as maintenance_plans
from django_pgboss.records import Instance, QueueInfo

__all__ = [
    "CHECKS",
    "JSON_SHAPE_VERSION",
    "MONITOR_QUIET_PASSES",
    "CheckResult",
    "InstanceStatus",
    "MonitorStatus",
    "QueueStatus",
    "Status",
    "WarningStatus",
    "WarningsStatus",
    "read_status",
]

#: The checks, in the order they are reported.
CHECKS = ("monitor", "queues", "instances")
#: The ``--json`` document's shape; raised only when a key changes meaning or goes away.
JSON_SHAPE_VERSION = 1
#: The monitor check fails once no queue has been counted for this many monitor intervals: one
#: late pass is a slow pass, three in a row is a monitor that is not running them.
MONITOR_QUIET_PASSES = 3
#: At most this many warnings are listed.
WARNINGS_LISTED = 20
#: The instance registry's page size here: the largest get_instances() allows, since the registry
#: keeps at most INSTANCE_DEAD_KEPT dead rows besides the live ones.
_INSTANCE_PAGE = 100_000


@dataclass(frozen=True)
class QueueStatus:
    """One queue as the monitor's last pass counted it, with its oldest ready job's age now."""

    name: str
    queued: int
    ready: int
    deferred: int
    blocked: int
    active: int
    failed: int
    #: The queue this one's failed jobs go to, or None.
    dead_letter: str | None
    #: When another queue names this one as its dead letter queue: the jobs waiting in it.
    dead_letter_depth: int | None
    #: Seconds since the oldest job ready to run was sent; None when none is ready.
    oldest_ready_seconds: float | None
    #: The last counted window's rates, per second; None before a window was counted.
    completed_per_second: float | None
    failed_per_second: float | None
    window_seconds: int | None
    #: The queued count the monitor warns over: the queue's warning_queue_size, else
    #: PGBOSS["WARNING_QUEUE_SIZE"] (the monitor's own rule, monitor/supervisor.py).
    warning_size: int
    #: When the monitor last counted the queue, or None when it never has.
    counted_on: dt.datetime | None
    created_on: dt.datetime

    @property
    def over_warning_size(self) -> bool:
        """Whether more jobs wait than the monitor warns over."""
        return self.queued > self.warning_size


@dataclass(frozen=True)
class InstanceStatus:
    """A registered process and what its row says of it now."""

    instance: Instance
    #: Seconds between the last heartbeat and now.
    heartbeat_age_seconds: float
    #: ``live``; ``stopped`` (a clean stop); ``stale``: not stopped, silent for longer than
    #: INSTANCE_QUIET_BEATS of its own heartbeats, and no later life of it is live; ``replaced``:
    #: silent as a stale one, but a later life of the same process is live (it crashed and was
    #: restarted: same name, or same host when unnamed, same role and queues).
    state: str

    @property
    def role(self) -> str:
        """``monitor`` for a row that supervises, else ``worker``."""
        return "monitor" if self.instance.supervise else "worker"


@dataclass(frozen=True)
class MonitorStatus:
    """The monitor's last pass and the live instances that supervise."""

    #: The newest moment a monitor pass counted one of the queues reported; None when none has.
    last_pass_on: dt.datetime | None
    last_pass_age_seconds: float | None
    #: The monitor interval judged against: the live monitors' recorded MONITOR_INTERVAL_SECONDS
    #: (the longest), else this process's setting.
    interval_seconds: float
    #: The live instances with ``supervise``, by id.
    supervisors: list[str]
    #: Whether REGISTER_INSTANCE is on here: without it no monitor registers, and only the last
    #: pass can be judged.
    registry: bool


@dataclass(frozen=True)
class WarningStatus:
    """One persisted warning."""

    type: str
    message: str
    data: Any
    created_on: dt.datetime


@dataclass(frozen=True)
class WarningsStatus:
    """The warnings persisted within the window, newest first (PERSIST_WARNINGS)."""

    persisted: bool
    window_seconds: int
    items: list[WarningStatus] = field(default_factory=list)


@dataclass(frozen=True)
class CheckResult:
    """One check: whether it passed, a sentence saying what was found, and whether it fails the
    command (``enforced``; a check not enforced is still judged and reported)."""

    name: str
    ok: bool
    detail: str
    enforced: bool


@dataclass(frozen=True)
class Status:
    """Everything ``pgboss_status`` reports, read at ``now`` (the schema's clock)."""

    using: str
    schema: str
    now: dt.datetime
    queues: list[QueueStatus]
    #: How many of pg-boss's internal queues were judged but not listed.
    internal_queues_not_shown: int
    #: The live and stale instances (of the host and queues asked about).
    instances: list[InstanceStatus]
    #: How many stopped or replaced instances the registry still keeps there, not listed.
    instances_not_shown: int
    monitor: MonitorStatus
    warnings: WarningsStatus
    checks: list[CheckResult]

    @property
    def ok(self) -> bool:
        """Whether every enforced check passed."""
        return all(check.ok for check in self.checks if check.enforced)

    @property
    def failed(self) -> list[CheckResult]:
        """The enforced checks that failed."""
        return [check for check in self.checks if check.enforced and not check.ok]

    def as_json(self) -> dict[str, Any]:
        """The ``--json`` document (docs/monitoring.md, "pgboss_status --json")."""
        return {
            "version": JSON_SHAPE_VERSION,
            "database": self.using,
            "schema": self.schema,
            "now": _moment(self.now),
            "ok": self.ok,
            "checks": [
                {"name": c.name, "ok": c.ok, "enforced": c.enforced, "detail": c.detail} for c in self.checks
            ],
            "queues": [_queue_json(q) for q in self.queues],
            "internal_queues_not_shown": self.internal_queues_not_shown,
            "instances": [_instance_json(i) for i in self.instances],
            "instances_not_shown": self.instances_not_shown,
            "monitor": {
                "last_pass_on": _moment(self.monitor.last_pass_on),
                "last_pass_age_seconds": self.monitor.last_pass_age_seconds,
                "interval_seconds": self.monitor.interval_seconds,
                "supervisors": self.monitor.supervisors,
                "registry": self.monitor.registry,
            },
            "warnings": {
                "persisted": self.warnings.persisted,
                "window_seconds": self.warnings.window_seconds,
                "items": [
                    {
                        "type": w.type,
                        "message": w.message,
                        "data": w.data,
                        "created_on": _moment(w.created_on),
                    }
                    for w in self.warnings.items
                ],
            },
        }


def read_status(
    context: DatabaseContext | None = None,
    *,
    queues: Sequence[str] | None = None,
    host: str | None = None,
    enforce: Iterable[str] = CHECKS,
    warnings_window_seconds: int = 3600,
    internal: bool = False,
) -> Status:
    """Read and judge the status of ``context``'s schema (default settings.PGBOSS's).

    ``queues`` narrows the report to those queues (and the instances working them, besides the
    monitors). pg-boss's internal queues (``__pgboss__send-it``) are judged with the others but
    listed only with ``internal`` or when ``queues`` names them. ``host`` narrows the instances to
    that host, and then its instances check also fails when the host has no live instance (a
    liveness probe's question). ``enforce`` names the checks (of :data:`CHECKS`) that count towards
    :attr:`Status.ok`. Raises InvalidOption for an unknown check, QueueNotFound naming a queue of
    ``queues`` that does not exist, SchemaNotInstalled on a database never migrated.
    """
    context = context or DatabaseContext()
    enforced = set(enforce)
    unknown = sorted(enforced - set(CHECKS))
    if unknown:
        raise InvalidOption(f"unknown check(s) {', '.join(unknown)}; the checks are {', '.join(CHECKS)}")
    store = InstanceStore(context)
    now = store.database_now()
    infos = QueueStore(context).all_queues(queues)
    if queues is not None:
        missing = sorted(set(queues) - {info.name for info in infos})
        if missing:
            raise QueueNotFound(f"no queue named {', '.join(repr(name) for name in missing)}")
    queue_rows = _queue_statuses(context, infos, queues is not None)
    hidden_queues = {
        q.name
        for q in queue_rows
        if not internal and queues is None and q.name.startswith(INTERNAL_QUEUE_PREFIX)
    }
    everyone = _all_instances(store)
    supervisors = [i for i in everyone if i.live and i.supervise]
    shown = [
        _instance_status(i, everyone, now)
        for i in everyone
        if (host is None or i.host == host)
        and (queues is None or i.supervise or {w.queue for w in i.workers} & set(queues))
    ]
    monitor = _monitor_status(queue_rows, supervisors, now)
    warnings = _warnings(context, queues, warnings_window_seconds)
    checks = [
        _monitor_check(monitor, queue_rows, now, "monitor" in enforced),
        _queues_check(queue_rows, "queues" in enforced),
        _instances_check(shown, host, "instances" in enforced),
    ]
    return Status(
        using=context.using,
        schema=context.schema,
        now=now,
        queues=[q for q in queue_rows if q.name not in hidden_queues],
        internal_queues_not_shown=len(hidden_queues),
        instances=[i for i in shown if i.state in ("live", "stale")],
        instances_not_shown=sum(1 for i in shown if i.state not in ("live", "stale")),
        monitor=monitor,
        warnings=warnings,
        checks=checks,
    )


# -- gathering -------------------------------------------------------------------------------------


def _queue_statuses(context: DatabaseContext, infos: list[QueueInfo], narrowed: bool) -> list[QueueStatus]:
    # The dead letter targets are looked up over every queue, so a narrowed report still says of a
    # named dead letter queue that it is one.
    targets = {info.dead_letter for info in (infos if not narrowed else QueueStore(context).all_queues())}
    ages = {reading.name: reading.oldest_ready_age_seconds for reading in read_queues(context)}
    return [
        QueueStatus(
            name=info.name,
            queued=info.queued_count,
            ready=info.ready_count,
            deferred=info.deferred_count,
            blocked=info.blocked_count,
            active=info.active_count,
            failed=info.failed_count,
            dead_letter=info.dead_letter,
            dead_letter_depth=info.queued_count if info.name in targets else None,
            oldest_ready_seconds=ages.get(info.name),
            completed_per_second=_rate(info.completed_delta, info.delta_seconds),
            failed_per_second=_rate(info.failed_delta, info.delta_seconds),
            window_seconds=info.delta_seconds or None,
            warning_size=info.warning_queue_size or pgboss_settings.WARNING_QUEUE_SIZE,
            counted_on=info.monitor_on,
            created_on=info.created_on,
        )
        for info in infos
    ]


def _rate(delta: int | None, seconds: int | None) -> float | None:
    return None if not seconds or delta is None else delta / seconds


def _all_instances(store: InstanceStore) -> list[Instance]:
    rows: list[Instance] = []
    while True:
        page = store.get_instances(_INSTANCE_PAGE, rows[-1].id if rows else None)
        rows += page
        if len(page) < _INSTANCE_PAGE:
            return rows


def _same_process(earlier: Instance, later: Instance) -> bool:
    """Whether ``later`` is a later life of the process ``earlier`` was: keyed as the registrar's
    pruning keys a process's lives (its name, or its host when unnamed, since a recreated
    Kubernetes pod comes back under a new host name), with the same role and queues."""
    if earlier.name is not None:
        same_key = later.name == earlier.name
    else:
        same_key = later.name is None and later.host == earlier.host
    return (
        same_key
        and later.id != earlier.id
        and later.started_on > earlier.started_on
        and later.supervise == earlier.supervise
        and {w.queue for w in later.workers} == {w.queue for w in earlier.workers}
    )


def _instance_status(instance: Instance, everyone: list[Instance], now: dt.datetime) -> InstanceStatus:
    if instance.stopped_on is not None:
        state = "stopped"
    elif instance.live:
        state = "live"
    elif any(other.live and _same_process(instance, other) for other in everyone):
        state = "replaced"
    else:
        state = "stale"
    return InstanceStatus(instance, (now - instance.heartbeat_on).total_seconds(), state)


def _monitor_status(
    queues: list[QueueStatus], supervisors: list[Instance], now: dt.datetime
) -> MonitorStatus:
    recorded = [
        float(value)
        for i in supervisors
        if isinstance(value := i.config.get("monitorIntervalSeconds"), int | float) and value > 0
    ]
    interval = max(recorded) if recorded else float(pgboss_settings.MONITOR_INTERVAL_SECONDS)
    counted = [q.counted_on for q in queues if q.counted_on is not None]
    last = max(counted) if counted else None
    return MonitorStatus(
        last_pass_on=last,
        last_pass_age_seconds=None if last is None else (now - last).total_seconds(),
        interval_seconds=interval,
        supervisors=[i.id for i in supervisors],
        registry=bool(pgboss_settings.REGISTER_INSTANCE),
    )


def _warnings(context: DatabaseContext, queues: Sequence[str] | None, window: int) -> WarningsStatus:
    if not pgboss_settings.PERSIST_WARNINGS:
        return WarningsStatus(persisted=False, window_seconds=window)
    rows = context.all(
        maintenance_plans.recent_warnings(context.quoted_schema),
        {"seconds": window, "limit": WARNINGS_LISTED},
    )
    items = []
    for kind, message, data, created_on in rows:
        # Django's PostgreSQL backend hands jsonb back as its text.
        document = json.loads(data) if isinstance(data, str) else data
        name = document.get("name") if isinstance(document, dict) else None
        # A narrowed report leaves out the other queues' warnings, not the ones about no queue.
        if queues is not None and isinstance(name, str) and name not in queues:
            continue
        items.append(WarningStatus(kind, message, document, created_on))
    return WarningsStatus(persisted=True, window_seconds=window, items=items)


# -- judging ---------------------------------------------------------------------------------------


def _monitor_check(
    monitor: MonitorStatus, queues: list[QueueStatus], now: dt.datetime, enforced: bool
) -> CheckResult:
    limit = monitor.interval_seconds * MONITOR_QUIET_PASSES
    every = f"{MONITOR_QUIET_PASSES} monitor intervals of {monitor.interval_seconds:g}s"
    problems = []
    if monitor.registry and not monitor.supervisors:
        problems.append("no live monitor in the instance registry")
    # A queue created since the last pass has not been counted yet; only the others can say the
    # passes stopped.
    judged = [q for q in queues if (now - q.created_on).total_seconds() > limit]
    if judged:
        if monitor.last_pass_on is None:
            problems.append("no monitor pass has counted a queue")
        elif monitor.last_pass_age_seconds is not None and monitor.last_pass_age_seconds > limit:
            problems.append(f"no monitor pass for {human_age(monitor.last_pass_age_seconds)} (over {every})")
    if problems:
        return CheckResult("monitor", False, "; ".join(problems), enforced)
    found = [f"{len(monitor.supervisors)} live monitor(s)"] if monitor.registry else []
    if monitor.last_pass_age_seconds is not None:
        found.append(f"last pass {human_age(monitor.last_pass_age_seconds)} ago")
    return CheckResult("monitor", True, ", ".join(found) or "no queue to count", enforced)


def _queues_check(queues: list[QueueStatus], enforced: bool) -> CheckResult:
    over = [q for q in queues if q.over_warning_size]
    if over:
        detail = "; ".join(
            f"{q.name} has {q.queued} queued, over its warning size of {q.warning_size}" for q in over
        )
        return CheckResult("queues", False, detail, enforced)
    return CheckResult("queues", True, f"{len(queues)} queue(s) within their warning size", enforced)


def _instances_check(instances: list[InstanceStatus], host: str | None, enforced: bool) -> CheckResult:
    stale = [i for i in instances if i.state == "stale"]
    live = [i for i in instances if i.state == "live"]
    problems = [
        f"{_who(i)} is stale: last heartbeat {human_age(i.heartbeat_age_seconds)} ago, every "
        f"{i.instance.heartbeat_seconds}s"
        for i in stale
    ]
    if host is not None and not live:
        problems.append(f"no live instance on host {host}")
    if problems:
        return CheckResult("instances", False, "; ".join(problems), enforced)
    return CheckResult("instances", True, f"{len(live)} live, none stale", enforced)


def _who(status: InstanceStatus) -> str:
    instance = status.instance
    named = f" {instance.name}" if instance.name else ""
    return f"{status.role}{named} (pid {instance.pid} on {instance.host})"


def human_age(seconds: float) -> str:
    """An age to the second, read at a glance: ``42s``, ``3m 05s``, ``2h 10m``, ``4d 03h``."""
    whole = max(0, int(seconds))
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours:02d}h"
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {secs:02d}s"
    return f"{secs}s"


# -- the JSON document -----------------------------------------------------------------------------


def _moment(value: dt.datetime | None) -> str | None:
    return None if value is None else value.astimezone(dt.UTC).isoformat()


def _queue_json(q: QueueStatus) -> dict[str, Any]:
    return {
        "name": q.name,
        "queued": q.queued,
        "ready": q.ready,
        "deferred": q.deferred,
        "blocked": q.blocked,
        "active": q.active,
        "failed": q.failed,
        "dead_letter": q.dead_letter,
        "dead_letter_depth": q.dead_letter_depth,
        "oldest_ready_seconds": q.oldest_ready_seconds,
        "completed_per_second": q.completed_per_second,
        "failed_per_second": q.failed_per_second,
        "window_seconds": q.window_seconds,
        "warning_size": q.warning_size,
        "over_warning_size": q.over_warning_size,
        "counted_on": _moment(q.counted_on),
    }


def _instance_json(status: InstanceStatus) -> dict[str, Any]:
    i = status.instance
    return {
        "id": i.id,
        "name": i.name,
        "host": i.host,
        "pid": i.pid,
        "version": i.version,
        "runtime": i.node_version,
        "role": status.role,
        "queues": [
            {"queue": w.queue, "concurrency": w.local_concurrency, "active": w.active} for w in i.workers
        ],
        "started_on": _moment(i.started_on),
        "heartbeat_on": _moment(i.heartbeat_on),
        "heartbeat_age_seconds": status.heartbeat_age_seconds,
        "heartbeat_seconds": i.heartbeat_seconds,
        "live": i.live,
        "state": status.state,
    }
