"""The monitor: supervise() passes (counts, throughput, expiry, retention, warnings), the cron
timekeeper, and the Monitor that runs both on their intervals.

``django_pgboss.monitor`` is a documented path (its logger shares the name); what it exported before
the package was split stays importable from here.
"""

from __future__ import annotations

from django_pgboss.monitor.service import Monitor
from django_pgboss.monitor.supervisor import PassReport, supervise, warn
from django_pgboss.monitor.timekeeper import CronReport, Timekeeper, run_timekeeper

__all__ = ["CronReport", "Monitor", "PassReport", "Timekeeper", "run_timekeeper", "supervise", "warn"]
