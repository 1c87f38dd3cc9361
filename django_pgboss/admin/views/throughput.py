"""The queue pages' numbers: the changelist's throughput column and the queue page's charts.

The queue page offers a few time ranges (?range=), each with its bucket width; the charts
themselves are drawn by admin/charts.py from boss.get_queue_stats(): throughput, counts, and the
wait and run percentiles (p50, p95, p99) read from each bucket's histograms.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.http import HttpRequest
from django.utils import timezone

from django_pgboss.admin import charts
from django_pgboss.api.boss import boss
from django_pgboss.records import StatsPoint


@dataclass(frozen=True, slots=True)
class ChartRange:
    """A time range the queue page offers, and the bucket width its charts use."""

    key: str
    label: str
    span: dt.timedelta
    bucket_seconds: int


#: The ranges offered, in the order the picker shows them. The buckets give 48 to 60 points, one
#: monitor pass (60 s by default) per point on the shortest range.
CHART_RANGES = {
    r.key: r
    for r in (
        # A monitor passes once a minute by default; a shorter interval (a demo, a busy queue
        # being watched) fills 15-second buckets.
        ChartRange("15m", "15 minutes", dt.timedelta(minutes=15), 15),
        ChartRange("1h", "1 hour", dt.timedelta(hours=1), 60),
        ChartRange("6h", "6 hours", dt.timedelta(hours=6), 6 * 60),
        ChartRange("24h", "24 hours", dt.timedelta(hours=24), 30 * 60),
        ChartRange("7d", "7 days", dt.timedelta(days=7), 3 * 60 * 60),
    )
}
DEFAULT_RANGE = "1h"
#: The changelist's throughput window: the last hour, in 5-minute buckets for the sparkline.
THROUGHPUT_WINDOW = dt.timedelta(hours=1)
THROUGHPUT_BUCKET_SECONDS = 300
#: The percentiles the latency charts draw, each with its line's style.
LATENCY_PERCENTILES = ((50, charts.BLUE), (95, charts.GREEN), (99, charts.VERMILLION))


def pick_range(request: HttpRequest) -> ChartRange:
    """The range the request asks for (?range=), or the default with a message when it is not offered."""
    key = request.GET.get("range", DEFAULT_RANGE)
    if key in CHART_RANGES:
        return CHART_RANGES[key]
    offered = ", ".join(CHART_RANGES)
    messages.warning(
        request,
        f"The chart range {key!r} is not offered (choose one of {offered}); "
        f"showing the last {CHART_RANGES[DEFAULT_RANGE].label}.",
    )
    return CHART_RANGES[DEFAULT_RANGE]


def bucket_label(seconds: int) -> str:
    """A bucket's width as the charts name it: "15 s", "1 min", "3 h"."""
    if seconds < 60:
        return f"{seconds} s"
    minutes = seconds // 60
    return f"{minutes} min" if minutes < 60 else f"{minutes // 60} h"


def per_minute(points: Sequence[StatsPoint], counter: str) -> float | None:
    """A counter's rate per minute over ``points``: sum(delta) / sum(delta_seconds), as pg-boss charts it.

    Only points that a counting pass covered take part; None when there is none.
    """
    counted = [p for p in points if getattr(p, counter) is not None and p.delta_seconds]
    seconds = sum(p.delta_seconds or 0 for p in counted)
    if not seconds:
        return None
    return 60 * sum(getattr(p, counter) for p in counted) / seconds


@dataclass(frozen=True, slots=True)
class Throughput:
    """A queue's completions over the changelist's window: the rate, the seconds the monitor's
    counting passes covered (what the rate is over), and the completions per bucket, one slot per
    bucket of the window, oldest first (None where no snapshot fell)."""

    completed_per_minute: float | None
    completed: list[int | None]
    covered_seconds: int = 0


def queue_throughput(name: str, now: dt.datetime | None = None) -> Throughput:
    """Completed jobs per minute over the last hour, and per 5-minute bucket for the sparkline."""
    now = now or timezone.now()
    start = now - THROUGHPUT_WINDOW
    points = boss.get_queue_stats(name, start=start, end=now, bucket_seconds=THROUGHPUT_BUCKET_SECONDS)
    counted = [p for p in points if p.completed_delta is not None and p.delta_seconds]
    # Each bucket in its place on the hour, so the line has the hour's shape: buckets without a
    # snapshot are gaps, not squeezed out (three busy buckets are not a line across the hour).
    first = _bucket_start(start)
    slots: list[int | None] = [None] * (int((now - first).total_seconds()) // THROUGHPUT_BUCKET_SECONDS + 1)
    for point in points:
        index = int((_bucket_start(point.captured_on) - first).total_seconds()) // THROUGHPUT_BUCKET_SECONDS
        if 0 <= index < len(slots):
            slots[index] = point.completed_delta
    return Throughput(
        per_minute(points, "completed_delta"), slots, sum(p.delta_seconds or 0 for p in counted)
    )


def _bucket_start(moment: dt.datetime) -> dt.datetime:
    epoch = int(moment.timestamp()) // THROUGHPUT_BUCKET_SECONDS * THROUGHPUT_BUCKET_SECONDS
    return dt.datetime.fromtimestamp(epoch, tz=dt.UTC)


def covered_label(seconds: int) -> str:
    """How long the rate was measured over, when the monitor counted less than the whole window."""
    if seconds >= THROUGHPUT_WINDOW.total_seconds() * 0.9:
        return ""
    minutes = max(1, round(seconds / 60))
    return f"over the {minutes} min counted"


def queue_charts_context(request: HttpRequest, name: str) -> dict[str, Any]:
    """What the queue page shows above its settings: the range picker, the rates and two charts."""
    chosen = pick_range(request)
    end = timezone.now()
    start = end - chosen.span
    points = list(
        reversed(
            boss.get_queue_stats(
                name,
                start=start,
                end=end,
                bucket_seconds=chosen.bucket_seconds,
                percentiles=[p for p, _style in LATENCY_PERCENTILES],
            )
        )
    )
    bucket = bucket_label(chosen.bucket_seconds)
    # A range that is mostly empty (a queue whose history began ten minutes ago, seen over six
    # hours) would squeeze every point against the right edge: the axis then starts one bucket
    # before the first point, and the page says so.
    axis_note = ""
    if points:
        first = points[0].captured_on - dt.timedelta(seconds=chosen.bucket_seconds)
        if first - start > chosen.span * 0.5:
            start = first
            axis_note = (
                f"The history starts at {timezone.localtime(points[0].captured_on):%Y-%m-%d %H:%M:%S %Z}: "
                "the time axis begins there rather than at the start of the range."
            )
    empty = "No history in this range yet: the monitor (manage.py pgboss_monitor) records it."
    throughput_chart = charts.line_chart(
        [
            charts.Series("Created", [(p.captured_on, p.created_delta) for p in points], charts.BLUE),
            charts.Series("Completed", [(p.captured_on, p.completed_delta) for p in points], charts.GREEN),
            charts.Series("Failed", [(p.captured_on, p.failed_delta) for p in points], charts.VERMILLION),
        ],
        start=start,
        end=end,
        title=f"Jobs created, completed and failed per {bucket}, last {chosen.label}",
        y_label=f"jobs per {bucket}",
        empty_message=empty,
    )
    gauge_chart = charts.line_chart(
        [
            charts.Series("Queued", [(p.captured_on, p.queued_count) for p in points], charts.BLUE),
            charts.Series("Active", [(p.captured_on, p.active_count) for p in points], charts.PURPLE),
            charts.Series("Failed", [(p.captured_on, p.failed_count) for p in points], charts.VERMILLION),
        ],
        start=start,
        end=end,
        title=f"Jobs queued, active and failed (largest count per {bucket}), last {chosen.label}",
        y_label="jobs",
        empty_message=empty,
    )
    wait_chart, run_chart = (
        charts.line_chart(
            [
                charts.Series(
                    f"p{p}",
                    [(point.captured_on, _percentile_of(point, index, which)) for point in points],
                    style,
                    unit="seconds",
                )
                for index, (p, style) in enumerate(LATENCY_PERCENTILES)
            ],
            start=start,
            end=end,
            title=f"{title} of the jobs that finished, p50, p95 and p99 per {bucket}, last {chosen.label}",
            y_label="seconds",
            empty_message=empty,
        )
        for which, title in (("wait_seconds", "Wait before starting"), ("run_seconds", "Run time"))
    )
    rates = [
        (label, per_minute(points, counter))
        for label, counter in (
            ("Created", "created_delta"),
            ("Completed", "completed_delta"),
            ("Failed", "failed_delta"),
        )
    ]
    return {
        "chart_ranges": list(CHART_RANGES.values()),
        "chart_range": chosen,
        "chart_bucket": bucket,
        "chart_timezone": timezone.get_current_timezone_name(),
        # Oldest first, as the charts read left to right.
        "chart_points": points,
        "chart_axis_note": axis_note,
        "throughput_chart": throughput_chart,
        "gauge_chart": gauge_chart,
        "wait_chart": wait_chart,
        "run_chart": run_chart,
        "rates": [(label, None if rate is None else round(rate, 2)) for label, rate in rates],
    }


def _percentile_of(point: StatsPoint, index: int, which: str) -> float | None:
    """The ``index``-th percentile asked of ``point``, its wait or run seconds (``which``); None
    where the bucket has no histograms (no counting pass measured it) or they hold no job."""
    if not point.percentiles:
        return None
    value: float | None = getattr(point.percentiles[index], which)
    return value
