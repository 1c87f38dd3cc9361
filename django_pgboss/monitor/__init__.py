"""The monitor: supervise() passes (counts, throughput, expiry, retention, warnings).

``django_pgboss.monitor`` is a documented path (its logger shares the name); what it exported before
the package was split stays importable from here.
"""

from __future__ import annotations

from django_pgboss.monitor.supervisor import PassReport, supervise, warn

__all__ = ["PassReport", "supervise", "warn"]
