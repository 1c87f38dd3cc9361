"""The timekeeper: sends the jobs of due schedules, cron and RFC 5545 rules (pg-boss 12.35's design).

A pass runs at most once per PGBOSS["CRON_INTERVAL_SECONDS"] across every monitor: it claims
``version.cron_on`` by the server's clock. It reads each schedule, finds the occurrences that came
due in the last minute (for a cron expression the latest one; a rule can put two in a minute and
both are due) and, with ``missed="once"``, the latest one missed since the previous pass, and
files each in pg-boss's ``__pgboss__send-it`` queue under a throttle slot named after the
occurrence's own minute and the schedule: two passes (or two systems) seeing the same occurrence
insert the same slot, and the unique throttle index keeps one. Working the send-it queue then sends
each job to its target queue with the schedule's data and options. A pg-boss (Node) timekeeper on
the same schema uses the same claim, queue and slots, so the two never double-send.

A row that cannot be evaluated (written by hand, or by another release) is skipped with an
``invalid_schedule`` warning, once per row rather than once per pass: a broken row
never heals on its own, and warning every pass would persist one warning every 30 seconds. (Once
per Timekeeper: the monitor keeps one; run_timekeeper() keeps the memory per database and schema
for the life of the process, so calling it on a timer warns once too.)

Schedules themselves (schedule(), get_schedules(), previews) are the API's,
django_pgboss.api.schedules; reading an expression is django_pgboss.recurrence's.
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

from django.db import DatabaseError

from django_pgboss.api.jobs import JobStore
from django_pgboss.api.queues import QueueStore
from django_pgboss.api.schedules import Schedule, ScheduleStore, send_options
from django_pgboss.api.sending import JobSender
from django_pgboss.conf import pgboss_settings
from django_pgboss.db.context import DatabaseContext
from django_pgboss.exceptions import InvalidOption, QueueNotFound
from django_pgboss.monitor.loop import run_periodically
from django_pgboss.monitor.supervisor import warn
from django_pgboss.plans import schedules as schedule_plans
from django_pgboss.recurrence import CRON, Recurrence, read_stored

logger = logging.getLogger("django_pgboss.schedules")

#: The queue occurrences are filed in before they are sent, shared with pg-boss.
SEND_IT_QUEUE = "__pgboss__send-it"
#: How often a cron pass may run (by the server's clock) unless PGBOSS["CRON_INTERVAL_SECONDS"]
#: says otherwise, and the range pg-boss allows (cronMonitorIntervalSeconds): the window a pass
#: looks back over is a minute, so passes further apart than 45 s could both miss an occurrence.
CRON_INTERVAL_SECONDS = 30
CRON_INTERVAL_RANGE = (1, 45)
# What a timekeeper remembers of a row it warned about.
_RowKey = tuple[str, str, str, str, Any]

#: How long an occurrence stays due, and the width of the throttle slot it is filed in. One value,
#: as in pg-boss: a wider window than slot would file one occurrence in two slots.
OCCURRENCE_WINDOW = dt.timedelta(seconds=60)


@dataclass
class CronReport:
    """What one timekeeper pass did."""

    claimed: bool = False
    filed: int = 0
    sent: int = 0
    warnings: list[str] = field(default_factory=list)


class Timekeeper:
    """The timekeeper over one database context: tick() runs one pass, run() one every
    ``interval_seconds`` (default PGBOSS["CRON_INTERVAL_SECONDS"], 1 to 45) until stop(). Any
    number may run: the claim makes extra ones idle."""

    def __init__(
        self, context: DatabaseContext | None = None, *, interval_seconds: int | None = None
    ) -> None:
        self.context = context or DatabaseContext()
        interval = interval_seconds if interval_seconds is not None else pgboss_settings.CRON_INTERVAL_SECONDS
        low, high = CRON_INTERVAL_RANGE
        if isinstance(interval, bool) or not isinstance(interval, int) or not low <= interval <= high:
            raise InvalidOption(
                f"the cron interval must be an integer from {low} to {high} seconds, not {interval!r}"
            )
        self.interval_seconds = interval
        # The rows this timekeeper has warned about, keyed on (name, key, expression, zone, when
        # the row was created): rebuilt each pass from the rows still broken, so a fixed or
        # deleted row drops out and would warn again if it came back. Per timekeeper, as pg-boss
        # keeps it per instance, so a restarted monitor surfaces a row nobody fixed.
        self._warned: set[_RowKey] = set()
        self._queues = QueueStore(self.context)
        self._jobs = JobStore(self.context)
        self._sender = JobSender(self.context)
        self._schedules = ScheduleStore(self.context)
        self._stop = threading.Event()

    def run(self, on_report: Callable[[CronReport], None] | None = None) -> None:
        """Run a pass now and every ``interval_seconds`` until stop(); a database error backs
        off and retries (see monitor/loop.py). ``on_report`` gets each pass's report. As for
        Monitor.run(), a stop() that came before run() is kept, and run() then returns at once."""

        def tick() -> None:
            report = self.tick()
            if on_report is not None:
                on_report(report)

        run_periodically([(tick, self.interval_seconds)], self._stop, what="cron pass", log=logger)

    def stop(self) -> None:
        """Make run() return after the pass in progress (safe from a signal handler or thread)."""
        self._stop.set()

    def tick(self, *, now: dt.datetime | None = None) -> CronReport:
        """One cron pass: claim it, file every due occurrence, then send the filed jobs.

        ``now`` replaces the database's clock for evaluating schedules (tests); the claim always
        uses the server's clock.
        """
        report = CronReport()
        prior_pass, claimed, database_now = self.context.one(
            schedule_plans.claim_cron(self.context.quoted_schema), {"seconds": self.interval_seconds}
        )
        report.claimed = claimed
        if claimed:
            self._file_due(report, now or database_now, prior_pass)
        report.sent = self.send_filed_jobs()
        return report

    def _file_due(self, report: CronReport, moment: dt.datetime, prior_pass: dt.datetime | None) -> None:
        warned = self._warned
        still_broken: set[_RowKey] = set()
        jobs = []
        relabelled = []
        for item in self._schedules.all_schedules():
            row = (item.name, item.key, item.cron, item.timezone, item.created_on)

            def complain(message: str, row: _RowKey = row, item: Schedule = item) -> None:
                still_broken.add(row)
                if row not in warned:
                    warn(
                        self.context,
                        report,
                        "invalid_schedule",
                        message,
                        {"queue": item.name, "key": item.key, "cron": item.cron, "timezone": item.timezone},
                        sender=type(self),
                    )

            try:
                recurrence = _read(item)
                slots = [_slot(o) for o in recurrence.between(moment - OCCURRENCE_WINDOW, moment)]
            except (InvalidOption, ValueError, KeyError, OverflowError) as exc:
                complain(
                    f'Warning: schedule for queue "{item.name}" (key "{item.key}", time zone '
                    f'"{item.timezone}") could not be evaluated and was skipped: {exc}'
                )
                continue
            if recurrence.kind != item.kind:
                relabelled.append(
                    {"name": item.name, "key": item.key, "kind": recurrence.kind, "cron": item.cron}
                )
            try:
                missed = _missed_occurrence(item, recurrence, moment, prior_pass)
            except (InvalidOption, ValueError, KeyError, OverflowError) as exc:
                # Its own try, so a catch-up that cannot be read does not cost the occurrence due now.
                missed = None
                complain(
                    f'Warning: schedule for queue "{item.name}" (key "{item.key}", time zone '
                    f'"{item.timezone}") could not be caught up on the gap since the last cron pass: {exc}'
                )
            if missed is not None and _slot(missed) not in slots:
                slots.insert(0, _slot(missed))
            for slot in dict.fromkeys(slots):
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
        self._warned = still_broken
        if jobs:
            self._queues.create_queue(SEND_IT_QUEUE)
            report.filed = self._sender.insert_slotted(SEND_IT_QUEUE, jobs)
        if relabelled:
            # After the sends, so a failed relabel cannot cost an occurrence: the row fires either
            # way; the relabel makes get_schedules() tell the truth about its format.
            self.context.execute(
                schedule_plans.set_schedule_kinds(self.context.quoted_schema),
                {"records": json.dumps(relabelled)},
            )

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
                self.context.execute(
                    schedule_plans.set_last_job_ids(self.context.quoted_schema),
                    {"records": json.dumps(records)},
                )
            jobs = self._jobs.fetch(SEND_IT_QUEUE, batch_size=batch_size) if len(jobs) == batch_size else []
        return sent


def run_timekeeper(boss: Any = None, *, now: dt.datetime | None = None) -> CronReport:
    """One cron pass through ``boss`` (a Boss or a DatabaseContext; default settings.PGBOSS's):
    claim it, file every due occurrence, then send the filed jobs. See Timekeeper.tick()."""
    context = DatabaseContext() if boss is None else DatabaseContext.of(boss)
    timekeeper = Timekeeper(context)
    # The rows already warned about, per database and schema, so that a caller running this on a
    # timer (a cron job, a Celery beat) warns about a broken row once, as the monitor does.
    place = (context.using, context.schema)
    with _warned_lock:
        timekeeper._warned = set(_warned_by_place.get(place, ()))
    try:
        return timekeeper.tick(now=now)
    finally:
        with _warned_lock:
            _warned_by_place[place] = timekeeper._warned


_warned_by_place: dict[tuple[str, str], set[_RowKey]] = {}
_warned_lock = threading.Lock()


def send_filed_jobs(boss: Any = None, batch_size: int = 50) -> int:
    """Work the send-it queue of ``boss`` (a Boss or a DatabaseContext); see Timekeeper.send_filed_jobs()."""
    context = DatabaseContext() if boss is None else DatabaseContext.of(boss)
    return Timekeeper(context).send_filed_jobs(batch_size)


def _slot(occurrence: dt.datetime) -> str:
    """The throttle slot an occurrence is filed in: its minute as UTC wall time, so the same
    occurrence always names the same slot, whoever files it and however often."""
    return occurrence.astimezone(dt.UTC).replace(second=0, microsecond=0).strftime("%Y-%m-%d %H:%M:%S")


def _read(item: Schedule) -> Recurrence:
    """The row's expression as its kind says, or as written when the two disagree."""
    return read_stored(item.cron, item.timezone, item.kind)


def _missed_occurrence(
    item: Schedule, recurrence: Recurrence, moment: dt.datetime, prior_pass: dt.datetime | None
) -> dt.datetime | None:
    """With ``missed="once"``, the latest occurrence in the gap no pass covered: after the last
    pass (and the row's creation), up to where the due window opens."""
    if (item.options or {}).get("missed") != "once" or prior_pass is None:
        return None
    window_start = moment - OCCURRENCE_WINDOW
    since = max(prior_pass, item.created_on)
    if since >= window_start:
        return None
    return recurrence.latest(since, window_start)


def _previous(expression: str, zone: ZoneInfo, before: dt.datetime) -> dt.datetime:
    """The latest occurrence of a cron expression at or before ``before`` (aware), in UTC."""
    found = Recurrence(CRON, expression, zone).latest(dt.datetime.min.replace(tzinfo=dt.UTC), before)
    assert found is not None  # a valid cron expression always has an earlier occurrence
    return found


def _due_slots(item: Schedule, moment: dt.datetime, prior_pass: dt.datetime | None) -> list[str]:
    """The slots one pass at ``moment`` files for ``item`` (the pure core of a pass)."""
    recurrence = _read(item)
    slots = [_slot(o) for o in recurrence.between(moment - OCCURRENCE_WINDOW, moment)]
    missed = _missed_occurrence(item, recurrence, moment, prior_pass)
    if missed is not None and _slot(missed) not in slots:
        slots.insert(0, _slot(missed))
    return list(dict.fromkeys(slots))
