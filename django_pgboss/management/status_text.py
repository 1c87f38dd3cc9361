"""``pgboss_status``'s plain-text report: a Status (monitor/status.py) as tables and sentences.

Times are shown to the second in the project's time zone (two passes can fall in one minute), ages
as ``3m 05s``; a figure that does not exist yet (a queue never counted, a rate before its first
window) is shown as ``-``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from django.utils import timezone

from django_pgboss.monitor.status import Status, human_age

EMPTY = "-"


def render(status: Status) -> list[str]:
    """The report's lines, in the order they are printed."""
    lines = [f'pg-boss schema "{status.schema}" in database {status.using!r} at {moment(status.now)}', ""]
    lines += _queues(status)
    lines += ["", *_instances(status)]
    lines += ["", *_monitor(status)]
    lines += ["", *_warnings(status)]
    lines += ["", "Checks"]
    width = max(len(check.name) for check in status.checks)
    for check in status.checks:
        verdict = "ok" if check.ok else "FAIL"
        ignored = "" if check.enforced else " (not enforced)"
        lines.append(f"  {check.name:<{width}}  {verdict:<4}  {check.detail}{ignored}")
    return lines


def moment(value: dt.datetime | None) -> str:
    """A moment to the second, in the current time zone, with its zone's name."""
    if value is None:
        return EMPTY
    if timezone.is_aware(value):
        value = timezone.localtime(value)
    return value.strftime("%Y-%m-%d %H:%M:%S %Z").rstrip()


def _age(seconds: float | None) -> str:
    return EMPTY if seconds is None else human_age(seconds)


def _rate(value: float | None) -> str:
    return EMPTY if value is None else f"{value:.2f}"


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    """Columns padded to their widest cell, two spaces apart, indented by two."""
    cells = [[str(cell) for cell in row] for row in [header, *rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return ["  " + "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in cells]


def _queues(status: Status) -> list[str]:
    hidden = status.internal_queues_not_shown
    internal = f" ({hidden} of pg-boss's internal queues not shown: --internal)" if hidden else ""
    if not status.queues:
        return [f"Queues: none{internal}"]
    header = (
        "QUEUE",
        "QUEUED",
        "READY",
        "DEFERRED",
        "BLOCKED",
        "ACTIVE",
        "FAILED",
        "DLQ DEPTH",
        "OLDEST READY",
        "DONE/S",
        "FAILED/S",
        "WARN OVER",
        "COUNTED",
    )
    rows = [
        (
            q.name,
            q.queued,
            q.ready,
            q.deferred,
            q.blocked,
            q.active,
            q.failed,
            EMPTY if q.dead_letter_depth is None else q.dead_letter_depth,
            _age(q.oldest_ready_seconds),
            _rate(q.completed_per_second),
            _rate(q.failed_per_second),
            f"{q.warning_size} !" if q.over_warning_size else q.warning_size,
            EMPTY
            if q.counted_on is None
            else f"{human_age((status.now - q.counted_on).total_seconds())} ago",
        )
        for q in status.queues
    ]
    dead_letters = [f"  {q.name} -> {q.dead_letter}" for q in status.queues if q.dead_letter]
    lines = [f"Queues{internal}", *table(header, rows)]
    if dead_letters:
        lines += ["Dead letter queues (failed jobs go to)", *dead_letters]
    return lines


def _instances(status: Status) -> list[str]:
    hidden = (
        f" ({status.instances_not_shown} stopped or replaced not shown)" if status.instances_not_shown else ""
    )
    if not status.instances:
        registry = "" if status.monitor.registry else ' (PGBOSS["REGISTER_INSTANCE"] is off here)'
        return [f"Instances: none running{registry}{hidden}"]
    header = ("HOST", "PID", "NAME", "VERSION", "ROLE", "QUEUES (CONCURRENCY)", "LAST HEARTBEAT", "STATE")
    rows = [
        (
            s.instance.host,
            s.instance.pid,
            s.instance.name or EMPTY,
            s.instance.version,
            s.role,
            ", ".join(f"{w.queue} ({w.local_concurrency})" for w in s.instance.workers) or EMPTY,
            f"{moment(s.instance.heartbeat_on)} ({human_age(s.heartbeat_age_seconds)} ago)",
            s.state,
        )
        for s in status.instances
    ]
    return [f"Instances{hidden}", *table(header, rows)]


def _monitor(status: Status) -> list[str]:
    monitor = status.monitor
    if monitor.last_pass_on is None:
        last = "no pass has counted a queue yet"
    else:
        last = f"last pass {moment(monitor.last_pass_on)} ({_age(monitor.last_pass_age_seconds)} ago)"
    if not monitor.registry:
        supervised = 'the instance registry is off here (PGBOSS["REGISTER_INSTANCE"])'
    else:
        supervised = f"{len(monitor.supervisors)} live monitor(s) in the instance registry"
    return [f"Monitor: {last}, a pass every {monitor.interval_seconds:g}s; {supervised}"]


def _warnings(status: Status) -> list[str]:
    warnings = status.warnings
    window = human_age(warnings.window_seconds)
    if not warnings.persisted:
        return [
            'Warnings: not persisted (PGBOSS["PERSIST_WARNINGS"] is off); the monitor logs them. '
            'Set PGBOSS["PERSIST_WARNINGS"] = True to keep and list them.'
        ]
    if not warnings.items:
        return [f"Warnings: none in the last {window}"]
    lines = [f"Warnings (the last {window}, newest first)"]
    lines += [f"  {moment(w.created_on)}  {w.type}: {w.message}" for w in warnings.items]
    return lines
