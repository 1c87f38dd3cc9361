"""Compatibility module: ``django_pgboss.schedules``, the path 0.1 documented for schedules and
the cron timekeeper, kept working.

New code calls the schedule methods on ``boss`` (``boss.schedule()``, ``boss.get_schedules()``)
and imports the timekeeper from ``django_pgboss.monitor`` (``Timekeeper``, ``run_timekeeper``),
where django_pgboss.monitor.timekeeper's code is exported; the schedule helpers live in
django_pgboss.api.schedules. Nothing inside the package imports this module (an import contract
checks it). The cron logger keeps its name, ``django_pgboss.schedules``.
"""

from __future__ import annotations

from django_pgboss.api.schedules import Schedule, get_schedules, parse_cron, schedule, send_options
from django_pgboss.monitor.timekeeper import (
    CRON_INTERVAL_SECONDS,
    SEND_IT_QUEUE,
    CronReport,
    Timekeeper,
    run_timekeeper,
    send_filed_jobs,
)

__all__ = [
    "CRON_INTERVAL_SECONDS",
    "SEND_IT_QUEUE",
    "CronReport",
    "Schedule",
    "Timekeeper",
    "get_schedules",
    "parse_cron",
    "run_timekeeper",
    "schedule",
    "send_filed_jobs",
    "send_options",
]
