"""manage.py pgboss_monitor: run the monitor's pass on an interval until stopped.

The command parses its arguments and prints the reports; the monitor itself, with its timing loop,
is django_pgboss.monitor.service.Monitor.
"""

from __future__ import annotations

import logging
import signal
import threading
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from django_pgboss.db.installed import ensure_installed
from django_pgboss.exceptions import PgBossError
from django_pgboss.management import metrics_port
from django_pgboss.management.console import configure_logging
from django_pgboss.management.schema_wait import until_installed
from django_pgboss.monitor.flows import FlowReport
from django_pgboss.monitor.service import Monitor
from django_pgboss.monitor.timekeeper import CronReport
from django_pgboss.records import PassReport
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
        metrics_port.add_arguments(parser, "the queue gauges and the monitor's counters")

    def handle(self, *args: Any, **options: Any) -> None:
        interval = options["interval"]
        if interval is not None and interval < 1:
            raise CommandError(f"--interval must be at least 1 second, not {interval}")
        metrics_port.check(options)
        configure_logging(options["verbosity"])
        self._observers = [self._report]
        try:
            monitor = Monitor(
                queues=options["queues"],
                interval_seconds=interval,
                on_pass=self._on_pass,
                on_cron=self._report_cron,
                on_flow=self._report_flow,
            )
        except PgBossError as exc:
            raise CommandError(str(exc)) from exc
        stopped = threading.Event()
        if not options["once"]:

            def on_signal(signum: int, frame: Any) -> None:
                logger.info("%s: stopping after this pass", signal.Signals(signum).name)
                stopped.set()
                monitor.stop()

            for signum in (signal.SIGTERM, signal.SIGINT):
                signal.signal(signum, on_signal)

        def ready() -> Monitor:
            ensure_installed(monitor.context)
            monitor.check_queues()
            return monitor

        try:
            # --once passes over what is there: on a database not migrated yet, it stops with the
            # one line. A long-running monitor waits for the migration instead (schema_wait.py).
            found = ready() if options["once"] else until_installed(ready, stopped, "the monitor")
        except PgBossError as exc:
            raise CommandError(str(exc)) from exc
        if found is None:
            self.stdout.write("stopped before the pgboss schema was installed")
            return
        if metrics_port.start(options, queues=True, context=monitor.context) is not None:
            from django_pgboss.observability.metrics import MonitorMetrics

            self._observers.append(MonitorMetrics(monitor.context).observe)
        if options["once"]:
            monitor.run_once()
            return
        monitor.run()

    def _on_pass(self, report: PassReport) -> None:
        for observe in self._observers:
            observe(report)

    def _report_cron(self, report: CronReport) -> None:
        if report.claimed or report.sent:
            self.stdout.write(f"cron pass: {report.filed} occurrence(s) filed, {report.sent} job(s) sent")

    def _report_flow(self, report: FlowReport) -> None:
        if report.resolved:
            self.stdout.write(f"flow pass: {report.resolved} completed parent(s) resolved")

    def _report(self, report: PassReport) -> None:
        self.stdout.write(
            f"monitor pass: {len(report.counted)} queue(s) counted, {report.expired} expired and "
            f"{report.stalled} stalled job(s) failed for retry, {report.deleted} old job(s) deleted"
        )
