"""Prometheus metrics (the ``metrics`` extra, prometheus-client): the queue gauges, the monitor's
and the workers' own counters and histograms.

Three kinds, by who can tell:

- The queue gauges (``pgboss_queue_*``) are read from the database at each scrape by
  :class:`QueueCollector`: one statement on the queue table, whose counts each monitor pass keeps,
  plus an index-only probe for the oldest ready job (observability/queues.py). Any process can
  serve them; serve them from one place (the view, or the monitor's --metrics-port), not from
  every worker, or each queue is reported once per worker.
- The throughput counters (``pgboss_queue_{created,completed,failed}_jobs_total``) are counted by
  the monitor that counted each window (:class:`MonitorMetrics`): several monitors split the
  queues between them, so ``sum by (queue) (rate(...))`` over their series is the queue's rate.
- The worker's (``pgboss_worker_*``) are counted in the worker process, from the django_pgboss
  signals it sends (:class:`WorkerMetrics`).

The process metrics live in :data:`PGBOSS_REGISTRY`, not prometheus-client's default registry, so
the view exposes django_pgboss's metrics and nothing of the web process's own. With
PROMETHEUS_MULTIPROC_DIR set, prometheus-client keeps every process's values in files there, and
the exposition (observability/exposition.py) reads them back as its documentation says.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

from django.db import DatabaseError, connections

from django_pgboss.db.context import DatabaseContext
from django_pgboss.latency import slot_upper_bounds
from django_pgboss.observability.queues import QueueReading, read_deltas, read_queues

try:
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
    from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily
    from prometheus_client.utils import floatToGoString
except ImportError as exc:  # pragma: no cover - the metric tests run with the extra installed
    from django.core.exceptions import ImproperlyConfigured

    from django_pgboss.observability.extras import METRICS_MISSING

    raise ImproperlyConfigured(METRICS_MISSING) from exc

logger = logging.getLogger("django_pgboss.observability")

#: django_pgboss's process metrics (the monitor's and the worker's).
PGBOSS_REGISTRY = CollectorRegistry(auto_describe=False)

#: Buckets for handler durations and send-to-start delays, in seconds: jobs run from milliseconds
#: to an hour, which the default buckets (up to 10 s) would lump together.
DURATION_BUCKETS = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1,
    2.5,
    5,
    10,
    30,
    60,
    120,
    300,
    600,
    1800,
    3600,
)

#: The queue gauges: metric name, help text, QueueReading field.
QUEUE_GAUGES = (
    ("pgboss_queue_queued_jobs", "Jobs waiting (created or retry), deferred ones included.", "queued"),
    (
        "pgboss_queue_ready_jobs",
        "Jobs waiting whose start_after has passed and no flow parent holds.",
        "ready",
    ),
    ("pgboss_queue_deferred_jobs", "Jobs waiting whose start_after is still to come.", "deferred"),
    ("pgboss_queue_blocked_jobs", "Jobs waiting on a flow parent that has not completed.", "blocked"),
    ("pgboss_queue_active_jobs", "Jobs a worker is running.", "active"),
    ("pgboss_queue_failed_jobs", "Jobs that failed for good and are still kept.", "failed"),
    ("pgboss_queue_total_jobs", "Jobs of every state still kept.", "total"),
    (
        "pgboss_queue_window_created_jobs",
        "Jobs created in the last throughput window the monitor counted.",
        "window_created",
    ),
    (
        "pgboss_queue_window_completed_jobs",
        "Jobs completed in the last throughput window the monitor counted.",
        "window_completed",
    ),
    (
        "pgboss_queue_window_failed_jobs",
        "Jobs failed for good in the last throughput window the monitor counted.",
        "window_failed",
    ),
)


class QueueCollector:
    """The queue gauges, read from the database at each collect().

    ``close_connection`` closes the calling thread's connection afterwards: the port server answers
    each scrape on a thread of its own, which would otherwise keep one connection per scrape open.
    A database error is logged and reported as ``pgboss_queue_metrics_up 0``, not raised, so the
    process's other metrics are still served.
    """

    def __init__(
        self, context: DatabaseContext | None = None, *, oldest: bool = True, close_connection: bool = False
    ) -> None:
        self.context = context or DatabaseContext()
        self.oldest = oldest
        self.close_connection = close_connection

    def describe(self) -> list[Any]:
        # Registering a collector without describe() makes prometheus-client collect() it once at
        # registration, which would run the queries before any scrape.
        return []

    def collect(self) -> Iterator[Any]:
        up = GaugeMetricFamily(
            "pgboss_queue_metrics_up", "1 when the queue gauges could be read from the database, else 0."
        )
        try:
            readings = read_queues(self.context, oldest=self.oldest)
        except DatabaseError as exc:
            logger.warning("reading the queue metrics failed: %s", exc)
            up.add_metric([], 0)
            yield up
            return
        finally:
            if self.close_connection:
                connections[self.context.using].close()
        up.add_metric([], 1)
        yield up
        for metric, text, attribute in QUEUE_GAUGES:
            family = GaugeMetricFamily(metric, text, labels=["queue"])
            for reading in readings:
                family.add_metric([reading.name], getattr(reading, attribute))
            yield family
        window = GaugeMetricFamily(
            "pgboss_queue_window_seconds",
            "Length of the last throughput window the monitor counted.",
            labels=["queue"],
        )
        counted = GaugeMetricFamily(
            "pgboss_queue_counted_age_seconds",
            "Seconds since a monitor pass last counted the queue.",
            labels=["queue"],
        )
        oldest = GaugeMetricFamily(
            "pgboss_queue_oldest_ready_job_age_seconds",
            "Seconds since the oldest job ready to run was sent (0 when none is ready).",
            labels=["queue"],
        )
        for reading in readings:
            if reading.window_seconds is not None:
                window.add_metric([reading.name], reading.window_seconds)
            if reading.counted_age_seconds is not None:
                counted.add_metric([reading.name], reading.counted_age_seconds)
            if self.oldest:
                oldest.add_metric([reading.name], max(reading.oldest_ready_age_seconds or 0.0, 0.0))
        yield window
        yield counted
        if self.oldest:
            yield oldest
        # A dead-letter queue is any queue another one names; its depth is its waiting jobs.
        targets = sorted({r.dead_letter for r in readings if r.dead_letter})
        by_name = {r.name: r for r in readings}
        dead = GaugeMetricFamily(
            "pgboss_dead_letter_queued_jobs",
            "Jobs waiting in a queue that is some queue's dead_letter.",
            labels=["queue"],
        )
        for target in targets:
            if target in by_name:
                dead.add_metric([target], by_name[target].queued)
        yield dead
        retained = GaugeMetricFamily(
            "pgboss_queue_retained_jobs",
            "Completed and cancelled jobs still kept (absent before the queue's first maintenance pass).",
            labels=["queue"],
        )
        for reading in readings:
            if reading.retained is not None:
                retained.add_metric([reading.name], reading.retained)
        yield retained
        yield from latency_histograms(readings)


#: The latency histograms' bucket bounds, as Prometheus spells them: the slots' upper edges, to six
#: significant digits (10 ms·√2^16 reads "2.56", not "2.5600000000000027"), which keeps them apart.
_LATENCY_BUCKETS = [floatToGoString(float(f"{bound:.6g}")) for bound in slot_upper_bounds()]


def latency_histograms(readings: Iterable[QueueReading]) -> Iterator[Any]:
    """A histogram per queue of the wait and of the run times of the jobs that finished in the
    last window the monitor counted, built from its bins: one bucket per slot, bounded by the
    slot's upper edge (django_pgboss.latency.slot_upper_bounds()), the counts cumulative as
    Prometheus wants them. The bins hold no sum, so the histograms have no _sum or _count: the
    +Inf bucket is the count. A queue not counted since schema 46 has no bins, and no histogram.
    """
    families = {
        "wait_bins": HistogramMetricFamily(
            "pgboss_queue_wait_seconds",
            "How long the jobs that finished in the last counted window waited to start.",
            labels=["queue"],
        ),
        "run_bins": HistogramMetricFamily(
            "pgboss_queue_run_seconds",
            "How long the jobs that finished in the last counted window ran.",
            labels=["queue"],
        ),
    }
    for reading in readings:
        for attribute, family in families.items():
            bins = getattr(reading, attribute)
            if bins is None:
                continue
            running = 0
            buckets = []
            for bound, count in zip(_LATENCY_BUCKETS, bins, strict=True):
                running += count
                buckets.append((bound, float(running)))
            family.add_metric([reading.name], buckets, None)
    yield from families.values()


class MonitorMetrics:
    """The monitor process's metrics: passes, their duration, the jobs they swept and deleted, and
    the throughput counters of the windows this monitor counted. ``observe()`` is an ``on_pass``
    hook (monitor/service.py's Monitor)."""

    def __init__(self, context: DatabaseContext, registry: CollectorRegistry = PGBOSS_REGISTRY) -> None:
        self.context = context
        self.passes = _metric(Counter, "pgboss_monitor_passes", "Monitor passes run.", [], registry)
        self.duration = _metric(
            Histogram, "pgboss_monitor_pass_duration_seconds", "How long a monitor pass took.", [], registry
        )
        self.swept = _metric(
            Counter,
            "pgboss_monitor_swept_jobs",
            "Active jobs the monitor failed past their expiry or heartbeat.",
            ["reason"],
            registry,
        )
        self.deleted = _metric(
            Counter, "pgboss_monitor_deleted_jobs", "Jobs the monitor's retention deleted.", [], registry
        )
        self.throughput = {
            kind: _metric(
                Counter,
                f"pgboss_queue_{kind}_jobs",
                f"Jobs {kind} on the queue, counted by the monitor pass that counted each window.",
                ["queue"],
                registry,
            )
            for kind in ("created", "completed", "failed")
        }

    def observe(self, report: Any) -> None:
        """Count one pass (a PassReport), and add the windows it counted to the throughput counters."""
        self.passes.inc()
        self.duration.observe(getattr(report, "seconds", 0.0))
        self.swept.labels("expired").inc(report.expired)
        self.swept.labels("stalled").inc(report.stalled)
        self.deleted.inc(report.deleted)
        try:
            deltas = read_deltas(self.context, list(report.counted))
        except DatabaseError as exc:
            logger.warning("reading the throughput of the pass failed: %s", exc)
            return
        for name, values in deltas.items():
            for kind, value in zip(("created", "completed", "failed"), values, strict=True):
                self.throughput[kind].labels(name).inc(value)


def _metric(kind: type, name: str, text: str, labels: Iterable[str], registry: CollectorRegistry) -> Any:
    """The metric ``name`` of ``registry``, made on first use: a second Monitor or Worker in one
    process (the tests make many) shares the first one's series instead of failing to register."""
    key = (id(registry), name)
    with _made_lock:
        existing = _made.get(key)
        if existing is None:
            _made[key] = existing = _make(kind, name, text, labels, registry)
    return existing


def _make(kind: type, name: str, text: str, labels: Iterable[str], registry: CollectorRegistry) -> Any:
    options: dict[str, Any] = {"registry": registry}
    if kind is Histogram:
        options["buckets"] = DURATION_BUCKETS
    if kind is Gauge:
        # Under PROMETHEUS_MULTIPROC_DIR, the sum over the processes that are alive.
        options["multiprocess_mode"] = "livesum"
    return kind(name, text, list(labels), **options)


_made: dict[tuple[int, str], Any] = {}
_made_lock = threading.Lock()


class _Series:
    """A labelled metric's children, each looked up once.

    ``labels()`` checks its values and takes the metric's lock on every call, which the worker
    would pay five times per job (about 25 us of CPU per job, bench/README.md). The child is the
    object ``labels()`` returns, so a cached one counts exactly as a fresh lookup would. A dict's
    ``get`` and ``setdefault`` are atomic under the GIL: two threads that miss at once keep one
    child, and ``labels()`` itself hands both the same one anyway.
    """

    __slots__ = ("_children", "_metric")

    def __init__(self, metric: Any) -> None:
        self._metric = metric
        self._children: dict[tuple[str, ...], Any] = {}

    def labels(self, *values: str) -> Any:
        child = self._children.get(values)
        if child is None:
            child = self._children.setdefault(values, self._metric.labels(*values))
        return child


class WorkerMetrics:
    """A worker process's metrics: jobs by outcome, handler duration, send-to-start delay, and the
    handlers running and abandoned.

    The outcomes and the delay hang off django_pgboss's signals (``connect()``): ``job_started``
    (the delay from the job's start_after to its handler's start, on this machine's clock against
    the database's), ``job_completed``, ``job_failed`` (``failed`` when for good, ``retried``
    when it goes back to retry) and ``job_dead_lettered`` (also counted as ``failed``). The worker
    calls ``handler_started()`` and ``handler_finished()`` around each handler call itself, for
    what no signal carries: the call's duration and how many run at once.
    """

    def __init__(self, registry: CollectorRegistry = PGBOSS_REGISTRY) -> None:
        self.jobs = _metric(
            Counter,
            "pgboss_worker_jobs",
            "Jobs this worker settled, by outcome: completed, failed (for good), retried, dead_lettered.",
            ["queue", "outcome"],
            registry,
        )
        self.duration = _metric(
            Histogram,
            "pgboss_worker_handler_duration_seconds",
            "How long one handler call took (a batch handler's call counts once).",
            ["queue"],
            registry,
        )
        self.delay = _metric(
            Histogram,
            "pgboss_worker_send_to_start_seconds",
            "From a job's start_after (its send, delay or retry back-off) to its handler's start.",
            ["queue"],
            registry,
        )
        self.running = _metric(
            Gauge, "pgboss_worker_running_handlers", "Handler calls running now.", ["queue"], registry
        )
        self.abandoned = _metric(
            Gauge,
            "pgboss_worker_abandoned_handlers",
            "Handler calls the worker stopped waiting for (their jobs went back), still running.",
            ["queue"],
            registry,
        )
        # The per-queue children the worker updates for every job, looked up once each.
        self._jobs = _Series(self.jobs)
        self._duration = _Series(self.duration)
        self._delay = _Series(self.delay)
        self._running = _Series(self.running)
        self._abandoned = _Series(self.abandoned)

    def connect(self) -> WorkerMetrics:
        """Connect the signal receivers (weakly held by Django: keep this object); returns self."""
        from django_pgboss import signals

        signals.job_started.connect(self._started, dispatch_uid=("pgboss-metrics-started", id(self)))
        signals.job_completed.connect(self._completed, dispatch_uid=("pgboss-metrics-completed", id(self)))
        signals.job_failed.connect(self._failed, dispatch_uid=("pgboss-metrics-failed", id(self)))
        signals.job_dead_lettered.connect(self._dead_lettered, dispatch_uid=("pgboss-metrics-dlq", id(self)))
        return self

    def disconnect(self) -> None:
        """Disconnect the receivers connect() connected."""
        from django_pgboss import signals

        signals.job_started.disconnect(dispatch_uid=("pgboss-metrics-started", id(self)))
        signals.job_completed.disconnect(dispatch_uid=("pgboss-metrics-completed", id(self)))
        signals.job_failed.disconnect(dispatch_uid=("pgboss-metrics-failed", id(self)))
        signals.job_dead_lettered.disconnect(dispatch_uid=("pgboss-metrics-dlq", id(self)))

    # -- what the worker calls around a handler --------------------------------------------------

    def handler_started(self, queue: str) -> None:
        self._running.labels(queue).inc()

    def handler_finished(self, queue: str, seconds: float) -> None:
        self._running.labels(queue).dec()
        self._duration.labels(queue).observe(seconds)

    def handler_abandoned(self, queue: str, count: int = 1) -> None:
        self._abandoned.labels(queue).inc(count)

    # -- signal receivers ------------------------------------------------------------------------

    def _started(self, sender: Any, *, queue: str, job: Any, **kwargs: Any) -> None:
        if job.start_after is not None:
            self._delay.labels(queue).observe(max(time.time() - job.start_after.timestamp(), 0.0))

    def _completed(self, sender: Any, *, queue: str, **kwargs: Any) -> None:
        self._jobs.labels(queue, "completed").inc()

    def _failed(self, sender: Any, *, queue: str, will_retry: bool, **kwargs: Any) -> None:
        self._jobs.labels(queue, "retried" if will_retry else "failed").inc()

    def _dead_lettered(self, sender: Any, *, queue: str, **kwargs: Any) -> None:
        self._jobs.labels(queue, "dead_lettered").inc()
