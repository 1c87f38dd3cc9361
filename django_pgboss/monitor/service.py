"""The Monitor: supervise() passes on their interval, and the cron timekeeper, until stopped.

``manage.py pgboss_monitor`` builds one and calls run(); any number may run at once (claims and
advisory locks make extra copies harmless). The timing and the survival of database restarts are
monitor/loop.py's.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable

from django_pgboss import arguments, signals
from django_pgboss.api.instances import InstanceRegistrar, InstanceRole
from django_pgboss.api.queues import QueueStore
from django_pgboss.api.warnings import start_retry
from django_pgboss.arguments import queue_name as validate_queue_name
from django_pgboss.conf import pgboss_settings
from django_pgboss.db.context import DatabaseContext
from django_pgboss.exceptions import QueueNotFound
from django_pgboss.monitor.bam import BamReport, BamRunner
from django_pgboss.monitor.flows import FlowReport, FlowResolver
from django_pgboss.monitor.health import Health
from django_pgboss.monitor.loop import run_periodically
from django_pgboss.monitor.slow_queries import timed_statements
from django_pgboss.monitor.supervisor import supervise, warn
from django_pgboss.monitor.timekeeper import CronReport, Timekeeper
from django_pgboss.observability import tracing
from django_pgboss.records import PassReport

logger = logging.getLogger("django_pgboss.monitor")

#: The shortest interval between passes a Monitor accepts.
MIN_INTERVAL_SECONDS = 1.0


class Monitor:
    """Runs the monitor's pass every ``interval_seconds`` (default
    PGBOSS["MONITOR_INTERVAL_SECONDS"]) over ``queues`` (default every queue), and, unless
    ``cron`` is False, the timekeeper every PGBOSS["CRON_INTERVAL_SECONDS"], on one database context;
    also the flow pass and the bam pass (the index builds pg-boss's migrations queued) on theirs.

    ``on_pass`` and ``on_cron`` get each pass's PassReport and CronReport (the command prints
    them). Raises InvalidOption for an interval under a second, and QueueNotFound from
    check_queues() for a named queue that does not exist.
    """

    def __init__(
        self,
        context: DatabaseContext | None = None,
        *,
        queues: Iterable[str] | None = None,
        interval_seconds: float | None = None,
        cron: bool = True,
        on_pass: Callable[[PassReport], None] | None = None,
        on_cron: Callable[[CronReport], None] | None = None,
        on_flow: Callable[[FlowReport], None] | None = None,
    ) -> None:
        self.context = context or DatabaseContext()
        self.queues = None if not queues else [validate_queue_name(q, "queue") for q in queues]
        interval = (
            interval_seconds if interval_seconds is not None else pgboss_settings.MONITOR_INTERVAL_SECONDS
        )
        self.interval_seconds = float(
            arguments.number("interval_seconds", interval, minimum=MIN_INTERVAL_SECONDS, unit="second")
        )
        self.timekeeper = Timekeeper(self.context) if cron else None
        flow_interval = float(
            arguments.number(
                "FLOW_INTERVAL_SECONDS",
                pgboss_settings.FLOW_INTERVAL_SECONDS,
                minimum=MIN_INTERVAL_SECONDS,
                unit="second",
            )
        )
        self.flows = FlowResolver(self.context, self.queues, flow_interval, sender=type(self), instance=self)
        self.on_flow = on_flow
        self._stop = threading.Event()
        bam_interval = float(
            arguments.number(
                "BAM_INTERVAL_SECONDS", pgboss_settings.BAM_INTERVAL_SECONDS, minimum=10, unit="second"
            )
        )
        self.bam = BamRunner(
            self.context, bam_interval, sender=type(self), instance=self, stopping=self._stop.is_set
        )
        self.health = Health(self.context, sender=type(self))
        self.on_pass = on_pass
        self.on_cron = on_cron
        #: The monitor's row in the instance registry, kept while run() runs.
        self.instance = InstanceRegistrar(
            self.context,
            role=InstanceRole(
                supervise=True,
                schedule=cron,
                persist_queue_stats=pgboss_settings.PERSIST_QUEUE_STATS,
                persist_warnings=pgboss_settings.PERSIST_WARNINGS,
            ),
            sender=type(self),
            owner=self,
        )

    def check_queues(self) -> None:
        """Raise QueueNotFound naming every queue of ``queues`` that does not exist."""
        if not self.queues:
            return
        existing = {q.name for q in QueueStore(self.context).all_queues(self.queues)}
        missing = sorted(set(self.queues) - existing)
        if missing:
            raise QueueNotFound(
                f"queue(s) {', '.join(map(repr, missing))} do not exist in schema {self.context.schema!r}"
            )

    def supervise(self) -> PassReport:
        """One monitor pass now (see monitor/supervisor.py); the report goes to ``on_pass`` too."""
        with tracing.monitor_span() as span:
            report = supervise(
                self.context, self.queues, interval_seconds=self.interval_seconds, sender=type(self)
            )
            # Index and vacuum health, on the whole schema: its readings are kept between passes. Its
            # statements are timed for slow_query as the pass's are (supervise() times its own).
            with timed_statements(self.context, report, type(self), warn):
                self.health.run(report)
            tracing.monitored(span, report)
        if self.on_pass is not None:
            self.on_pass(report)
        return report

    def tick_cron(self) -> CronReport | None:
        """One timekeeper pass now (None without cron); the report goes to ``on_cron`` too."""
        if self.timekeeper is None:
            return None
        report = self.timekeeper.tick()
        if self.on_cron is not None:
            self.on_cron(report)
        return report

    def resolve_flows(self, *, gated: bool = True) -> FlowReport:
        """One flow pass now (see monitor/flows.py); the report goes to ``on_flow`` too."""
        report = self.flows.run_pass(gated=gated)
        if self.on_flow is not None:
            self.on_flow(report)
        return report

    def build_indexes(self, *, gated: bool = True) -> BamReport:
        """One bam pass now (see monitor/bam.py): build the indexes pg-boss's migrations queued."""
        return self.bam.run_pass(gated=gated)

    def run_once(self) -> tuple[PassReport, CronReport | None]:
        """One monitor pass, one flow pass (without the flow cadence gate: it was asked for now),
        one bam pass (gated: a build may take long, and other instances may be on it) and one
        timekeeper pass; what ``pgboss_monitor --once`` does."""
        report = self.supervise()
        self.resolve_flows(gated=False)
        self.build_indexes()
        return report, self.tick_cron()

    def run(self) -> None:
        """Pass after pass until stop(): the monitor's pass every ``interval_seconds``, cron every
        PGBOSS["CRON_INTERVAL_SECONDS"]; a database error backs off and retries instead of ending the run.

        A stop() that came first, even before run() was called (a signal during start-up), is
        kept: run() then returns at once. A stopped Monitor stays stopped.
        """
        passes: list[tuple[Callable[[], object], float]] = [
            (self.supervise, self.interval_seconds),
            (self.resolve_flows, self.flows.interval_seconds),
            (self.build_indexes, self.bam.interval_seconds),
        ]
        if self.timekeeper is not None:
            passes.append((self.tick_cron, self.timekeeper.interval_seconds))
        cron = (
            f", cron every {self.timekeeper.interval_seconds}s"
            if self.timekeeper is not None
            else " (no cron)"
        )
        logger.info("monitor started: a pass every %ss%s", self.interval_seconds, cron)
        if self._stop.is_set():
            return
        self.instance.start()
        try:
            run_periodically(
                passes,
                self._stop,
                what="monitor pass",
                log=logger,
                on_error=self._survived,
                on_start_failure=lambda exc: start_retry(
                    self.context, exc, doing="the monitor", sender=type(self)
                ),
            )
        finally:
            self.instance.stop()

    def _survived(self, exc: BaseException) -> None:
        signals.send(signals.error_raised, type(self), error=exc, doing="a monitor pass", instance=self)

    def stop(self) -> None:
        """Make run() return after the pass in progress (safe from a signal handler or thread)."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        """True once stop() was called."""
        return self._stop.is_set()
