"""Cron schedules and the timekeeper that sends their jobs (pg-boss 12.35's design).

A pass runs at most once per CRON_INTERVAL_SECONDS across every monitor: it claims
``version.cron_on`` by the server's clock. It reads each schedule, finds the occurrence that came
due in the last minute (and, with ``missed="once"``, the latest one missed since the previous
pass), and files it in pg-boss's ``__pgboss__send-it`` queue under a throttle slot named after the
occurrence's own minute and the schedule: two passes (or two systems) seeing the same occurrence
insert the same slot, and the unique throttle index keeps one. Working the send-it queue then sends
each job to its target queue with the schedule's data and options. A pg-boss (Node) timekeeper on
the same schema uses the same claim, queue and slots, so the two never double-send.

Schedules use cron expressions (croniter): 5 fields, or 6 with seconds first, as pg-boss reads
them; day-of-month and day-of-week match with OR; evaluated in the schedule's time zone (DST
included). pg-boss's RFC 5545 rules (kind "rrule") are not evaluated here: such a row is skipped
with a warning.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter
from django.db import DatabaseError, IntegrityError

from django_pgboss.exceptions import InvalidOption, QueueNotFound
from django_pgboss.options import QUEUE_NAME_PATTERN, SHARED_OPTIONS, to_json, validate_queue_name
from django_pgboss.payloads import SEND_OPTIONS, job_payload
from django_pgboss.plans import schedules as schedule_plans

if TYPE_CHECKING:
    from django_pgboss.api.boss import Boss

logger = logging.getLogger("django_pgboss.schedules")

#: The queue occurrences are filed in before they are sent, shared with pg-boss.
SEND_IT_QUEUE = "__pgboss__send-it"
#: How often a cron pass may run (by the server's clock), and the window it looks back over.
CRON_INTERVAL_SECONDS = 30
OCCURRENCE_WINDOW = dt.timedelta(seconds=60)
MISSED_POLICIES = ("skip", "once")

#: send() option -> the name pg-boss stores in a schedule's options (and reads back to send).
_TO_PGBOSS = {
    **SHARED_OPTIONS,
    "priority": "priority",
    "start_after": "startAfter",
    "singleton_key": "singletonKey",
    "singleton_seconds": "singletonSeconds",
    "singleton_next_slot": "singletonNextSlot",
    "id": "id",
}
_FROM_PGBOSS = {value: key for key, value in _TO_PGBOSS.items()}


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


@dataclass
class CronReport:
    """What one timekeeper pass did."""

    claimed: bool = False
    filed: int = 0
    sent: int = 0
    warnings: list[str] = field(default_factory=list)


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


def _previous(expression: str, zone: ZoneInfo, before: dt.datetime) -> dt.datetime:
    """The latest occurrence at or before ``before`` (aware), in UTC."""
    six = not expression.startswith("@") and len(expression.split()) == 6
    # croniter's get_prev is strictly before its start; a microsecond later includes ``before``.
    start = (before + dt.timedelta(microseconds=1)).astimezone(zone)
    return croniter(expression, start, second_at_beginning=six).get_prev(dt.datetime).astimezone(dt.UTC)


def schedule(
    boss: Boss,
    name: str,
    cron: str,
    data: Any = None,
    *,
    tz: str = "UTC",
    key: str = "",
    missed: str = "skip",
    **send_options: Any,
) -> None:
    """Create or replace the schedule (name, key); see Boss.schedule()."""
    validate_queue_name(name)
    parse_cron(cron, tz)
    if key and (not isinstance(key, str) or not QUEUE_NAME_PATTERN.match(key)):
        raise InvalidOption(
            f"key {key!r} can only contain letters, digits, underscores, hyphens, periods or slashes"
        )
    if missed not in MISSED_POLICIES:
        raise InvalidOption(f"missed must be one of: {', '.join(MISSED_POLICIES)}")
    unknown = sorted(set(send_options) - SEND_OPTIONS)
    if unknown:
        raise InvalidOption(f"schedule(): unknown option(s) {', '.join(unknown)}")
    job_payload(data, dict(send_options), where="schedule()")  # validates data and every option
    options = {"tz": tz, "key": key, "missed": missed}
    for option, value in send_options.items():
        if option in ("group_id", "group_tier"):
            options.setdefault("group", {})["id" if option == "group_id" else "tier"] = value
        elif value is not None:
            options[_TO_PGBOSS[option]] = value
    if boss.get_queue(name) is None:
        raise QueueNotFound(f"queue {name!r} does not exist; create it before scheduling jobs to it")
    with boss.cursor() as cursor:
        try:
            cursor.execute(
                schedule_plans.upsert_schedule(boss.quoted_schema),
                [name, key or "", "cron", cron, tz, to_json(data, "data"), to_json(options, "options")],
            )
        except IntegrityError as exc:  # the queue went away in between
            raise QueueNotFound(f"queue {name!r} does not exist") from exc


def get_schedules(boss: Boss, name: str | None = None) -> list[Schedule]:
    """Every schedule, or the named queue's, in name and key order."""
    with boss.cursor() as cursor:
        if name is None:
            cursor.execute(schedule_plans.get_schedules(boss.quoted_schema, by_name=False))
        else:
            cursor.execute(
                schedule_plans.get_schedules(boss.quoted_schema, by_name=True), [validate_queue_name(name)]
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


def run_timekeeper(boss: Boss, *, now: dt.datetime | None = None) -> CronReport:
    """One cron pass: claim it, file every due occurrence, then send the filed jobs.

    ``now`` replaces the database's clock for evaluating schedules (tests); the claim always uses
    the server's clock.
    """
    from django_pgboss.monitor.supervisor import warn

    report = CronReport()
    with boss.cursor() as cursor:
        cursor.execute(schedule_plans.claim_cron(boss.quoted_schema), [CRON_INTERVAL_SECONDS])
        prior_pass, claimed, database_now = cursor.fetchone()
    report.claimed = claimed
    if claimed:
        moment = now or database_now
        jobs = []
        for item in get_schedules(boss):
            try:
                slots = _due_slots(item, moment, prior_pass)
            except (InvalidOption, ValueError, KeyError) as exc:
                message = (
                    f'Warning: schedule for queue "{item.name}" (key "{item.key}") could not be evaluated '
                    f"and was skipped: {exc}"
                )
                warn(
                    boss,
                    report,
                    "invalid_schedule",
                    message,
                    {"queue": item.name, "key": item.key, "cron": item.cron},
                )
                continue
            for slot in slots:
                jobs.append(
                    {
                        "data": {
                            "name": item.name,
                            "key": item.key,
                            "data": item.data,
                            "options": item.options,
                            "slot": slot,
                        },
                        "singletonKey": item.name.replace("_", "\\_") + "__" + item.key,
                        "__singletonSlot": slot,
                    }
                )
        if jobs:
            boss.create_queue(SEND_IT_QUEUE)
            report.filed = boss.insert_slotted(SEND_IT_QUEUE, jobs)
    report.sent = send_filed_jobs(boss)
    return report


def _due_slots(item: Schedule, moment: dt.datetime, prior_pass: dt.datetime | None) -> list[str]:
    if item.kind != "cron":
        raise InvalidOption(f"kind {item.kind!r} (an RFC 5545 rule) is not evaluated by django_pgboss")
    expression, zone = parse_cron(item.cron, item.timezone)
    window_start = moment - OCCURRENCE_WINDOW
    occurrences = []
    due = _previous(expression, zone, moment)
    if due > window_start:
        occurrences.append(due)
    if (item.options or {}).get("missed") == "once" and prior_pass is not None:
        since = max(prior_pass, item.created_on)
        if since < window_start:
            missed = _previous(expression, zone, window_start)
            if missed > since:
                occurrences.insert(0, missed)
    # One slot per occurrence minute, as UTC wall time: the same occurrence always names the same
    # slot, whoever files it and however often.
    slots = []
    for occurrence in occurrences:
        slot = occurrence.replace(second=0, microsecond=0).strftime("%Y-%m-%d %H:%M:%S")
        if slot not in slots:
            slots.append(slot)
    return slots


def send_filed_jobs(boss: Boss, batch_size: int = 50) -> int:
    """Work the send-it queue: send each filed occurrence to its queue; returns how many were sent."""
    if boss.get_queue(SEND_IT_QUEUE) is None:
        return 0
    sent = 0
    # Batch after batch while they come back full; a short batch means the queue is drained, and
    # stopping there keeps a job that just failed from being retried in the same pass.
    jobs = boss.fetch(SEND_IT_QUEUE, batch_size=batch_size)
    while jobs:
        last: dict[tuple[str, str], tuple[str, str]] = {}
        for job in jobs:
            payload = job.data or {}
            try:
                job_id = boss.send(
                    payload["name"], payload.get("data"), **send_options(payload.get("options") or {})
                )
            except (DatabaseError, InvalidOption, QueueNotFound, KeyError) as exc:
                logger.warning("scheduled job for %r could not be sent: %s", payload.get("name"), exc)
                boss.fail(SEND_IT_QUEUE, job, exc)
                continue
            boss.complete(SEND_IT_QUEUE, job)
            if job_id is not None:
                sent += 1
                slot = payload.get("slot", "")
                key = (payload["name"], payload.get("key", ""))
                if key not in last or last[key][1] <= slot:
                    last[key] = (job_id, slot)
        if last:
            records = [
                {"name": name, "key": key, "jobId": job_id} for (name, key), (job_id, _) in last.items()
            ]
            with boss.cursor() as cursor:
                cursor.execute(schedule_plans.set_last_job_ids(boss.quoted_schema), [json.dumps(records)])
        jobs = boss.fetch(SEND_IT_QUEUE, batch_size=batch_size) if len(jobs) == batch_size else []
    return sent


def send_options(options: dict[str, Any]) -> dict[str, Any]:
    """A schedule's stored options (pg-boss's names) as send() options."""
    result = {_FROM_PGBOSS[key]: value for key, value in options.items() if key in _FROM_PGBOSS}
    group = options.get("group")
    if isinstance(group, dict):
        result["group_id"] = group.get("id")
        result["group_tier"] = group.get("tier")
    return result
