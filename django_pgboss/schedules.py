"""A documented import path kept working: schedules and the cron timekeeper.

The schedule API lives in django_pgboss.api.schedules, the timekeeper in
django_pgboss.monitor.timekeeper.
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
