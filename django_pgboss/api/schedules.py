"""Cron schedules: the schedule(), unschedule() and get_schedules() part of the API.

A schedule is a row of pg-boss's ``schedule`` table: a queue, a key, a cron expression, a time
zone, the data and send() options of the jobs it sends (stored under pg-boss's option names, so a
pg-boss (Node) timekeeper reads them too). The timekeeper that sends the jobs is the monitor's,
django_pgboss.monitor.timekeeper.

Schedules use cron expressions (croniter): 5 fields, or 6 with seconds first, as pg-boss reads
them; day-of-month and day-of-week match with OR; evaluated in the schedule's time zone (DST
included). pg-boss's RFC 5545 rules (kind "rrule") are not evaluated here.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter
from django.db import IntegrityError

from django_pgboss import arguments
from django_pgboss.api.queues import QueueStore
from django_pgboss.arguments import job_payload
from django_pgboss.arguments import queue_name as validate_queue_name
from django_pgboss.db.context import DatabaseContext
from django_pgboss.exceptions import InvalidOption, QueueNotFound
from django_pgboss.plans import schedules as schedule_plans
from django_pgboss.wire import SEND_OPTIONS, schedule_options_from_wire, schedule_options_to_wire, to_json

MISSED_POLICIES = ("skip", "once")


@dataclass(frozen=True)
class Schedule:
    """A schedule as stored: queue, key, cron expression, time zone, data and options."""

    name: str
    key: str
    kind: str
    cron: str
    timezone: str
    data: Any
    options: dict[str, Any]
    created_on: dt.datetime
    updated_on: dt.datetime
    last_job_id: str | None


def parse_cron(expression: object, timezone: object) -> tuple[str, ZoneInfo]:
    """Validate a cron expression and a time zone as schedule() takes them; raise InvalidOption."""
    if not isinstance(timezone, str) or not timezone:
        raise InvalidOption(f"tz must be an IANA time zone name, not {timezone!r}")
    try:
        zone = ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidOption(f"unknown or unsupported time zone: {timezone!r}") from None
    if not isinstance(expression, str) or not expression.strip():
        raise InvalidOption(f"cron must be a cron expression, not {expression!r}")
    fields = expression.split()
    if not expression.startswith("@") and len(fields) not in (5, 6):
        raise InvalidOption(f"cron {expression!r} must have 5 fields, or 6 with seconds first")
    if not croniter.is_valid(expression, second_at_beginning=len(fields) == 6):
        raise InvalidOption(f"cron {expression!r} is not a valid cron expression")
    return expression, zone


class ScheduleStore:
    """Boss's schedule methods over one database context (see Boss for what each does)."""

    def __init__(self, context: DatabaseContext) -> None:
        self.context = context

    def schedule(
        self,
        name: str,
        cron: str,
        data: Any = None,
        *,
        tz: str = "UTC",
        key: str = "",
        missed: str = "skip",
        **send_options: Any,
    ) -> None:
        """See Boss.schedule()."""
        validate_queue_name(name)
        parse_cron(cron, tz)
        key = arguments.schedule_key(key)
        if missed not in MISSED_POLICIES:
            raise InvalidOption(f"missed must be one of: {', '.join(MISSED_POLICIES)}")
        unknown = sorted(set(send_options) - SEND_OPTIONS)
        if unknown:
            raise InvalidOption(f"schedule(): unknown option(s) {', '.join(unknown)}")
        job_payload(data, dict(send_options), where="schedule()")  # validates data and every option
        options = {"tz": tz, "key": key, "missed": missed, **schedule_options_to_wire(send_options)}
        if QueueStore(self.context).get_queue(name) is None:
            raise QueueNotFound(f"queue {name!r} does not exist; create it before scheduling jobs to it")
        with self.context.cursor() as cursor:
            try:
                cursor.execute(
                    schedule_plans.upsert_schedule(self.context.quoted_schema),
                    {
                        "name": name,
                        "key": key or "",
                        "kind": "cron",
                        "cron": cron,
                        "timezone": tz,
                        "data": to_json(data, "data"),
                        "options": to_json(options, "options"),
                    },
                )
            except IntegrityError as exc:  # the queue went away in between
                raise QueueNotFound(f"queue {name!r} does not exist") from exc

    def unschedule(self, name: str, key: str = "") -> None:
        """See Boss.unschedule()."""
        validate_queue_name(name)
        with self.context.cursor() as cursor:
            cursor.execute(
                schedule_plans.delete_schedule(self.context.quoted_schema), {"name": name, "key": key or ""}
            )

    def get_schedules(self, name: str | None = None) -> list[Schedule]:
        """See Boss.get_schedules()."""
        schema = self.context.quoted_schema
        with self.context.cursor() as cursor:
            if name is None:
                cursor.execute(schedule_plans.get_schedules(schema, by_name=False))
            else:
                cursor.execute(
                    schedule_plans.get_schedules(schema, by_name=True), {"name": validate_queue_name(name)}
                )
            rows = cursor.fetchall()
        schedules = []
        for row in rows:
            values = list(row)
            values[5] = json.loads(values[5]) if isinstance(values[5], str) else values[5]
            values[6] = json.loads(values[6]) if isinstance(values[6], str) else (values[6] or {})
            values[9] = str(values[9]) if values[9] is not None else None
            schedules.append(Schedule(*values))
        return schedules


def schedule(
    boss: Any,
    name: str,
    cron: str,
    data: Any = None,
    *,
    tz: str = "UTC",
    key: str = "",
    missed: str = "skip",
    **send_options: Any,
) -> None:
    """Create or replace the schedule (name, key) through ``boss`` (a Boss or a DatabaseContext);
    see Boss.schedule()."""
    ScheduleStore(DatabaseContext.of(boss)).schedule(
        name, cron, data, tz=tz, key=key, missed=missed, **send_options
    )


def get_schedules(boss: Any, name: str | None = None) -> list[Schedule]:
    """Every schedule of ``boss`` (a Boss or a DatabaseContext), or the named queue's, in name and
    key order."""
    return ScheduleStore(DatabaseContext.of(boss)).get_schedules(name)


def send_options(options: dict[str, Any]) -> dict[str, Any]:
    """A schedule's stored options (pg-boss's names) as send() options."""
    return schedule_options_from_wire(options)
