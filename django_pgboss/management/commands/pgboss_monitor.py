"""manage.py pgboss_monitor: run the monitor's pass on an interval until stopped."""

from __future__ import annotations

import logging
import signal
import threading
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError, connections

from django_pgboss.manager import Boss

logger = logging.getLogger("django_pgboss.monitor")


class Command(BaseCommand):
    help = "Supervise the queues: fail jobs past their expiry or heartbeat so they retry, on an interval."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--once", action="store_true", help="run one pass and exit")
        parser.add_argument(
            "--interval", type=float, default=60.0, help="seconds between passes (default 60, at least 1)"
        )
        parser.add_argument(
            "--queue", action="append", dest="queues", metavar="Q", help="only this queue (repeatable)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        interval = options["interval"]
        if interval < 1:
            raise CommandError(f"--interval must be at least 1 second, not {interval}")
        boss = Boss()
        queues = options["queues"]
        if queues:
            missing = sorted(set(queues) - {q.name for q in boss.get_queues(queues)})
            if missing:
                raise CommandError(
                    f"queue(s) {', '.join(map(repr, missing))} do not exist in schema {boss.schema!r}"
                )
        if options["once"]:
            self._report(boss.supervise(queues))
            return
        stop = threading.Event()

        def on_signal(signum: int, frame: Any) -> None:
            logger.info("%s: stopping after this pass", signal.Signals(signum).name)
            stop.set()

        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, on_signal)
        logger.info("monitor started: a pass every %ss", interval)
        while not stop.is_set():
            try:
                self._report(boss.supervise(queues))
            except DatabaseError as exc:
                # A database restart must not end the monitor: drop the connection, try next time.
                logger.warning("monitor pass failed (%s); retrying next interval", exc)
                connections.close_all()
            stop.wait(interval)
        connections.close_all()

    def _report(self, report: Any) -> None:
        self.stdout.write(
            f"monitor pass: {len(report.counted)} queue(s) counted, {report.expired} expired and "
            f"{report.stalled} stalled job(s) failed for retry, {report.deleted} old job(s) deleted"
        )
