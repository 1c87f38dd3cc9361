"""Observability: Prometheus metrics, OpenTelemetry traces, and the log records' extra fields.

Each part is optional and imports its library only in its own module: ``metrics``, ``queues``'
collector, ``exposition`` and ``views`` need the ``metrics`` extra (prometheus-client), and
``tracing`` works with or without the ``otel`` extra (opentelemetry-api), doing nothing without
it. ``logs`` needs nothing. docs/observability.md is the guide.
"""

from __future__ import annotations
