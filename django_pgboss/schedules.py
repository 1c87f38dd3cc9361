"""A documented import path kept working: schedules and the cron timekeeper. The code lives in django_pgboss.api.schedules."""

from __future__ import annotations

from django_pgboss.api.schedules import (
    CRON_INTERVAL_SECONDS,
    CronReport,
    Schedule,
    get_schedules,
    parse_cron,
    run_timekeeper,
    schedule,
)

__all__ = [
    "CRON_INTERVAL_SECONDS",
    "CronReport",
    "Schedule",
    "get_schedules",
    "parse_cron",
    "run_timekeeper",
    "schedule",
]
