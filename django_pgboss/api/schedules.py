"""Schedules: the schedule(), unschedule(), get_schedule(s)() and preview_schedule() part of the API.

A schedule is a row of pg-boss's ``schedule`` table: a queue, a key, an expression and its kind
(a cron expression, or an RFC 5545 recurrence rule), a time zone, the data and send() options of
the jobs it sends (stored under pg-boss's option names, so a pg-boss (Node) timekeeper reads them
too). The timekeeper that sends the jobs is the monitor's, django_pgboss.monitor.timekeeper.

How an expression is read (kinds, DTSTART, time zones, DST) is django_pgboss.recurrence's, which
touches no database: this module adds what needs one (the queue, the clock, the row).
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError

from django_pgboss import arguments
from django_pgboss.api.queues import QueueStore
from django_pgboss.arguments import job_payload
from django_pgboss.arguments import queue_name as validate_queue_name
from django_pgboss.db.context import DatabaseContext
from django_pgboss.exceptions import InvalidOption, InvalidSchedule, QueueNotFound
from django_pgboss.plans import schedules as schedule_plans
from django_pgboss.recurrence import PREVIEW_DEFAULT_COUNT, RRULE, Recurrence, parse_cron, preview
from django_pgboss.wire import SEND_OPTIONS, schedule_options_from_wire, schedule_options_to_wire, to_json

__all__ = [
    "MISSED_POLICIES",
    "Schedule",
    "ScheduleStore",
    "get_schedules",
    "parse_cron",
    "schedule",
    "send_options",
]

MISSED_POLICIES = ("skip", "once")


@dataclass(frozen=True)
class Schedule:
    """A schedule as stored: queue, key, kind ("cron" or "rrule"), its expression (``cron``, as
    pg-boss names the column, whichever the kind), time zone, data and options."""

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
        # The one place an expression's kind is decided (pg-boss's rule): every reader takes it
        # from the row, so a schedule is never validated as one format and evaluated as the other.
        recurrence = Recurrence.parse(cron, tz)
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
        if recurrence.kind == RRULE:
            # A rule, unlike a cron expression, can have nothing left to send (a spent COUNT, a
            # passed UNTIL): stored, it would be evaluated every pass and never send a job. Judged
            # by the schema's clock, the one the pass reads.
            now = self.database_now()
            if recurrence.next_after(now) is None:
                raise InvalidSchedule(
                    f"rrule {cron!r} has no occurrence after {now.isoformat()}, so the schedule would "
                    "never send a job",
                    field="cron",
                )
        try:
            self.context.execute(
                schedule_plans.upsert_schedule(self.context.quoted_schema),
                {
                    "name": name,
                    "key": key or "",
                    "kind": recurrence.kind,
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
        self.context.execute(
            schedule_plans.delete_schedule(self.context.quoted_schema), {"name": name, "key": key or ""}
        )

    def get_schedules(
        self,
        name: str | None = None,
        key: str | None = None,
        *,
        limit: int | None = None,
        after: Schedule | None = None,
    ) -> list[Schedule]:
        """See Boss.get_schedules()."""
        page = arguments.page_limit("get_schedules()", limit)
        cursor_row = arguments.page_after_row("get_schedules()", after, ("name", "key"))
        return self._read(name, key, page, cursor_row)

    def all_schedules(self) -> list[Schedule]:
        """Every schedule, however many: what the cron pass reads."""
        return self._read(None, None, None, ())

    def _read(
        self, name: str | None, key: str | None, limit: int | None, after: tuple[str, ...]
    ) -> list[Schedule]:
        schema = self.context.quoted_schema
        if key is not None and not isinstance(key, str):
            raise InvalidOption(f"key must be a string, not {key!r}")
        params: dict[str, Any] = {"limit": limit}
        if after:
            params["after_name"], params["after_key"] = after
        if name is not None:
            params["name"] = validate_queue_name(name)
        # A name with a key reads one schedule: no page, as pg-boss reads it.
        one = name is not None and key is not None
        if one:
            params["key"] = key
        sql = schedule_plans.get_schedules(
            schema,
            by_name=name is not None,
            by_key=one,
            paged=limit is not None and not one,
            after=bool(after) and not one,
        )
        rows = self.context.all(sql, params)
        schedules = []
        for row in rows:
            values = list(row)
            values[5] = json.loads(values[5]) if isinstance(values[5], str) else values[5]
            values[6] = json.loads(values[6]) if isinstance(values[6], str) else (values[6] or {})
            values[9] = str(values[9]) if values[9] is not None else None
            schedules.append(Schedule(*values))
        return schedules

    def get_schedule(self, name: str, key: str = "") -> Schedule | None:
        """See Boss.get_schedule()."""
        found = self._read(name, key or "", None, ())
        return found[0] if found else None

    def preview_schedule(
        self,
        expression: str,
        *,
        tz: str = "UTC",
        start: dt.datetime | None = None,
        count: int = PREVIEW_DEFAULT_COUNT,
    ) -> list[dt.datetime]:
        """See Boss.preview_schedule()."""
        if start is not None and (not isinstance(start, dt.datetime) or start.tzinfo is None):
            raise InvalidSchedule(f"start must be a timezone-aware datetime, not {start!r}", field="start")
        return preview(expression, tz=tz, start=start or self.database_now(), count=count)

    def database_now(self) -> dt.datetime:
        """The schema's clock, job_now(): what the timekeeper evaluates schedules against."""
        (now,) = self.context.one(schedule_plans.database_now(self.context.quoted_schema))
        return now


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


def get_schedules(boss: Any, name: str | None = None, key: str | None = None) -> list[Schedule]:
    """Every schedule of ``boss`` (a Boss or a DatabaseContext), the named queue's, or the one
    (name, key), in name and key order."""
    return ScheduleStore(DatabaseContext.of(boss)).get_schedules(name, key)


def send_options(options: dict[str, Any]) -> dict[str, Any]:
    """A schedule's stored options (pg-boss's names) as send() options."""
    return schedule_options_from_wire(options)
