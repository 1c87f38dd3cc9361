"""The cron timekeeper: sends the jobs of due schedules (pg-boss 12.35's design).

A pass runs at most once per CRON_INTERVAL_SECONDS across every monitor: it claims
``version.cron_on`` by the server's clock. It reads each schedule, finds the occurrence that came
due in the last minute (and, with ``missed="once"``, the latest one missed since the previous
pass), and files it in pg-boss's ``__pgboss__send-it`` queue under a throttle slot named after the
occurrence's own minute and the schedule: two passes (or two systems) seeing the same occurrence
insert the same slot, and the unique throttle index keeps one. Working the send-it queue then sends
each job to its target queue with the schedule's data and options. A pg-boss (Node) timekeeper on
the same schema uses the same claim, queue and slots, so the two never double-send.

Schedules themselves (schedule(), get_schedules(), cron parsing) are the API's,
django_pgboss.api.schedules. A schedule of pg-boss's RFC 5545 rules (kind "rrule") is skipped with
a warning.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from zoneinfo import ZoneInfo

from croniter import croniter
from django.db import DatabaseError

from django_pgboss.api.jobs import JobStore
from django_pgboss.api.queues import QueueStore
from django_pgboss.api.schedules import Schedule, ScheduleStore, parse_cron, send_options
from django_pgboss.api.sending import JobSender
from django_pgboss.db.context import DatabaseContext
from django_pgboss.exceptions import InvalidOption, QueueNotFound
from django_pgboss.monitor.loop import run_periodically
from django_pgboss.monitor.supervisor import warn
from django_pgboss.plans import schedules as schedule_plans

logger = logging.getLogger("django_pgboss.schedules")

#: The queue occurrences are filed in before they are sent, shared with pg-boss.
SEND_IT_QUEUE = "__pgboss__send-it"
#: How often a cron pass may run (by the server's clock), and the window it looks back over.
CRON_INTERVAL_SECONDS = 30
OCCURRENCE_WINDOW = dt.timedelta(seconds=60)


@dataclass
class CronReport:
    """What one timekeeper pass did."""

    claimed: bool = False
    filed: int = 0
    sent: int = 0
    warnings: list[str] = field(default_factory=list)


class Timekeeper:
    """The cron timekeeper over one database context: tick() runs one pass, run() one every
    CRON_INTERVAL_SECONDS until stop(). Any number may run: the claim makes extra ones idle."""

    def __init__(self, context: DatabaseContext | None = None) -> None:
        self.context = context or DatabaseContext()
        self._queues = QueueStore(self.context)
        self._jobs = JobStore(self.context)
        self._sender = JobSender(self.context)
        self._schedules = ScheduleStore(self.context)
        self._stop = threading.Event()

    def run(self, on_report: Callable[[CronReport], None] | None = None) -> None:
        """Run a pass now and every CRON_INTERVAL_SECONDS until stop(); a database error backs
        off and retries (see monitor/loop.py). ``on_report`` gets each pass's report."""
        self._stop.clear()

        def tick() -> None:
            report = self.tick()
            if on_report is not None:
                on_report(report)

        run_periodically([(tick, CRON_INTERVAL_SECONDS)], self._stop, what="cron pass", log=logger)

    def stop(self) -> None:
        """Make run() return after the pass in progress (safe from a signal handler or thread)."""
        self._stop.set()

    def tick(self, *, now: dt.datetime | None = None) -> CronReport:
        """One cron pass: claim it, file every due occurrence, then send the filed jobs.

        ``now`` replaces the database's clock for evaluating schedules (tests); the claim always
        uses the server's clock.
        """
        report = CronReport()
        with self.context.cursor() as cursor:
            cursor.execute(
                schedule_plans.claim_cron(self.context.quoted_schema), {"seconds": CRON_INTERVAL_SECONDS}
            )
            prior_pass, claimed, database_now = cursor.fetchone()
        report.claimed = claimed
        if claimed:
            moment = now or database_now
            jobs = []
            for item in self._schedules.get_schedules():
                try:
                    slots = _due_slots(item, moment, prior_pass)
                except (InvalidOption, ValueError, KeyError) as exc:
                    message = (
                        f'Warning: schedule for queue "{item.name}" (key "{item.key}") could not be '
                        f"evaluated and was skipped: {exc}"
                    )
                    warn(
                        self.context,
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
                            "singleton_key": item.name.replace("_", "\\_") + "__" + item.key,
                            "singleton_slot": slot,
                        }
                    )
            if jobs:
                self._queues.create_queue(SEND_IT_QUEUE)
                report.filed = self._sender.insert_slotted(SEND_IT_QUEUE, jobs)
        report.sent = self.send_filed_jobs()
        return report

    def send_filed_jobs(self, batch_size: int = 50) -> int:
        """Work the send-it queue: send each filed occurrence to its queue; returns how many were sent."""
        if self._queues.get_queue(SEND_IT_QUEUE) is None:
            return 0
        sent = 0
        # Batch after batch while they come back full; a short batch means the queue is drained,
        # and stopping there keeps a job that just failed from being retried in the same pass.
        jobs = self._jobs.fetch(SEND_IT_QUEUE, batch_size=batch_size)
        while jobs:
            last: dict[tuple[str, str], tuple[str, str]] = {}
            for job in jobs:
                payload = job.data or {}
                try:
                    job_id = self._sender.send(
                        payload["name"], payload.get("data"), **send_options(payload.get("options") or {})
                    )
                except (DatabaseError, InvalidOption, QueueNotFound, KeyError) as exc:
                    logger.warning("scheduled job for %r could not be sent: %s", payload.get("name"), exc)
                    self._jobs.fail(SEND_IT_QUEUE, job, exc)
                    continue
                self._jobs.complete(SEND_IT_QUEUE, job)
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
                with self.context.cursor() as cursor:
                    cursor.execute(
                        schedule_plans.set_last_job_ids(self.context.quoted_schema),
                        {"records": json.dumps(records)},
                    )
            jobs = self._jobs.fetch(SEND_IT_QUEUE, batch_size=batch_size) if len(jobs) == batch_size else []
        return sent


def run_timekeeper(boss: Any = None, *, now: dt.datetime | None = None) -> CronReport:
    """One cron pass through ``boss`` (a Boss or a DatabaseContext; default settings.PGBOSS's):
    claim it, file every due occurrence, then send the filed jobs. See Timekeeper.tick()."""
    context = DatabaseContext() if boss is None else DatabaseContext.of(boss)
    return Timekeeper(context).tick(now=now)


def send_filed_jobs(boss: Any = None, batch_size: int = 50) -> int:
    """Work the send-it queue of ``boss`` (a Boss or a DatabaseContext); see Timekeeper.send_filed_jobs()."""
    context = DatabaseContext() if boss is None else DatabaseContext.of(boss)
    return Timekeeper(context).send_filed_jobs(batch_size)


def _previous(expression: str, zone: ZoneInfo, before: dt.datetime) -> dt.datetime:
    """The latest occurrence at or before ``before`` (aware), in UTC."""
    six = not expression.startswith("@") and len(expression.split()) == 6
    # croniter's get_prev is strictly before its start; a microsecond later includes ``before``.
    start = (before + dt.timedelta(microseconds=1)).astimezone(zone)
    return croniter(expression, start, second_at_beginning=six).get_prev(dt.datetime).astimezone(dt.UTC)


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
