"""manage.py pgboss_monitor: run the monitor's pass on an interval until stopped."""

from __future__ import annotations

import logging
import signal
import threading
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError, connections

from django_pgboss.api.boss import Boss
from django_pgboss.api.schedules import CRON_INTERVAL_SECONDS, run_timekeeper
from django_pgboss.conf import pgboss_settings
from django_pgboss.management.console import configure_logging
from django_pgboss.version import version_text

logger = logging.getLogger("django_pgboss.monitor")


class Command(BaseCommand):
    help = (
        "Run the monitor: count queues and keep their stats history, fail expired and stalled jobs so they "
        "retry, delete old jobs, and send cron schedules' jobs."
    )

    def get_version(self) -> str:
        """What --version prints: django_pgboss's version and the pg-boss release it ports."""
        return version_text()

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--once", action="store_true", help="run one pass and exit")
        parser.add_argument(
            "--interval",
            type=float,
            help='seconds between passes, and how often each queue is counted and swept (default PGBOSS["MONITOR_INTERVAL_SECONDS"], at least 1)',
        )
        parser.add_argument(
            "--queue", action="append", dest="queues", metavar="Q", help="only this queue (repeatable)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        interval = options["interval"]
        if interval is None:
            interval = float(pgboss_settings.MONITOR_INTERVAL_SECONDS)
        if interval < 1:
            raise CommandError(f"--interval must be at least 1 second, not {interval}")
        configure_logging(options["verbosity"])
        boss = Boss()
        queues = options["queues"]
        if queues:
            missing = sorted(set(queues) - {q.name for q in boss.get_queues(queues)})
            if missing:
                raise CommandError(
                    f"queue(s) {', '.join(map(repr, missing))} do not exist in schema {boss.schema!r}"
                )
        if options["once"]:
            self._report(boss.supervise(queues, interval_seconds=interval))
            self._report_cron(run_timekeeper(boss))
            return
        stop = threading.Event()

        def on_signal(signum: int, frame: Any) -> None:
            logger.info("%s: stopping after this pass", signal.Signals(signum).name)
            stop.set()

        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, on_signal)
        logger.info("monitor started: a pass every %ss, cron every %ss", interval, CRON_INTERVAL_SECONDS)
        next_pass = next_cron = time.monotonic()
        failures = 0
        while not stop.is_set():
            try:
                if time.monotonic() >= next_pass:
                    self._report(boss.supervise(queues, interval_seconds=interval))
                    next_pass = time.monotonic() + interval
                if time.monotonic() >= next_cron:
                    self._report_cron(run_timekeeper(boss))
                    next_cron = time.monotonic() + CRON_INTERVAL_SECONDS
                failures = 0
            except DatabaseError as exc:
                # A database restart must not end the monitor: drop the connection, back off, retry.
                failures += 1
                delay = min(60.0, 2.0**failures)
                logger.warning("monitor pass failed (%s); retrying in %.0fs", exc, delay)
                connections.close_all()
                stop.wait(delay)
                continue
            stop.wait(max(min(next_pass, next_cron) - time.monotonic(), 0))
        connections.close_all()

    def _report_cron(self, report: Any) -> None:
        if report.claimed or report.sent:
            self.stdout.write(f"cron pass: {report.filed} occurrence(s) filed, {report.sent} job(s) sent")

    def _report(self, report: Any) -> None:
        self.stdout.write(
            f"monitor pass: {len(report.counted)} queue(s) counted, {report.expired} expired and "
            f"{report.stalled} stalled job(s) failed for retry, {report.deleted} old job(s) deleted"
        )
