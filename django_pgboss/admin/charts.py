"""Server-rendered SVG charts for the admin: no JavaScript, no CDN, no build step.

Every chart is a plain SVG string built here from the numbers ``get_queue_stats`` returns. The
SVGs scale with their container (a viewBox and no fixed size), so one drawing serves a desktop
and a phone. Series are told apart by more than colour: each has a colour from the Okabe-Ito
palette (chosen to stay distinct under the common colour-vision deficiencies), its own dash
pattern and its own marker shape, and the legend shows all three next to the series' name. Every
marker carries a ``<title>``, which browsers show as a tooltip, with the exact number and time.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe


@dataclass(frozen=True, slots=True)
class SeriesStyle:
    """How one series is drawn: colour, dash pattern (SVG stroke-dasharray) and marker shape."""

    colour: str
    dash: str
    marker: str  # "circle", "square", "triangle" or "diamond"


# Okabe-Ito colours, each paired with a dash pattern and a marker so that no series depends on
# colour alone.
BLUE = SeriesStyle("#0072B2", "", "circle")
GREEN = SeriesStyle("#009E73", "8 4", "square")
VERMILLION = SeriesStyle("#D55E00", "2 3", "triangle")
PURPLE = SeriesStyle("#CC79A7", "8 3 2 3", "diamond")


@dataclass(frozen=True, slots=True)
class Series:
    """A named line: points as (time, value), value None where nothing was measured."""

    label: str
    points: Sequence[tuple[dt.datetime, float | None]]
    style: SeriesStyle
    unit: str = "jobs"


# The drawing's coordinate system. The SVG is scaled to its container, so text set in these units
# shrinks with it: 15 units read as about 11 px in a desktop column. static/pgboss/admin.css sets
# 20 units on narrow screens (about 11 px on a phone), and the margins and legend leave room for it.
WIDTH = 600
HEIGHT = 300
LEFT, RIGHT, TOP, BOTTOM = 64, 20, 16, 82
FONT = 15
#: Room the legend leaves per character of a series name, enough for the narrow-screen text size.
LEGEND_CHAR = 11.5


def nice_ticks(maximum: float, count: int = 5) -> list[float]:
    """Round tick values from 0 up to at least ``maximum`` (1, 2 or 5 times a power of ten apart)."""
    if maximum <= 0:
        return [0.0, 1.0]
    raw = maximum / max(count - 1, 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    if step < 1 and maximum >= 1:
        step = 1.0
    top = math.ceil(maximum / step - 1e-9) * step
    return [round(i * step, 10) for i in range(round(top / step) + 1)]


def format_number(value: float) -> str:
    """A tick or tooltip number: integers without decimals, others with up to two."""
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.2f}".rstrip("0").rstrip(".")


def format_time(moment: dt.datetime, span: dt.timedelta) -> str:
    """A time label in the current time zone: with the date when the chart spans more than a day."""
    local = timezone.localtime(moment) if timezone.is_aware(moment) else moment
    return local.strftime("%d %b %H:%M") if span > dt.timedelta(days=1) else local.strftime("%H:%M")


def _marker(shape: str, x: float, y: float, colour: str, tip: str = "") -> str:
    """One marker; with ``tip``, a ``<title>`` inside it that browsers show as a tooltip."""
    size = 5.0
    if shape == "square":
        tag, attrs = (
            "rect",
            (f'x="{x - size:.1f}" y="{y - size:.1f}" width="{2 * size:.1f}" height="{2 * size:.1f}"'),
        )
    elif shape == "triangle":
        tag, attrs = (
            "path",
            (
                f'd="M{x:.1f},{y - size - 1:.1f} L{x + size + 0.5:.1f},{y + size:.1f} '
                f'L{x - size - 0.5:.1f},{y + size:.1f} Z"'
            ),
        )
    elif shape == "diamond":
        tag, attrs = (
            "path",
            (
                f'd="M{x:.1f},{y - size - 1:.1f} L{x + size + 1:.1f},{y:.1f} L{x:.1f},{y + size + 1:.1f} '
                f'L{x - size - 1:.1f},{y:.1f} Z"'
            ),
        )
    else:
        tag, attrs = "circle", f'cx="{x:.1f}" cy="{y:.1f}" r="{size:.1f}"'
    inner = f"<title>{escape(tip)}</title>" if tip else ""
    return f'<{tag} {attrs} fill="{colour}">{inner}</{tag}>'


def _segments(points: list[tuple[float, float | None]]) -> list[list[tuple[float, float]]]:
    """Split a line where a value is missing, so a gap shows as a gap and not as a zero."""
    segments: list[list[tuple[float, float]]] = [[]]
    for x, y in points:
        if y is None:
            if segments[-1]:
                segments.append([])
        else:
            segments[-1].append((x, y))
    return [s for s in segments if s]


def line_chart(
    series: Sequence[Series],
    *,
    start: dt.datetime,
    end: dt.datetime,
    title: str,
    y_label: str,
    empty_message: str = "No data in this range.",
) -> SafeString:
    """An SVG line chart of ``series`` over [start, end], with axes, a legend and tooltips.

    The y axis starts at 0 and ends on a round number at or above the largest value. Each point
    gets a marker whose ``<title>`` reads "<series>: <value> <unit> at <time>".
    """
    span = end - start
    seconds = max(span.total_seconds(), 1.0)
    plot_w = WIDTH - LEFT - RIGHT
    plot_h = HEIGHT - TOP - BOTTOM
    values = [v for s in series for _, v in s.points if v is not None]
    ticks = nice_ticks(max(values, default=0))
    top = ticks[-1] or 1.0

    def x_of(moment: dt.datetime) -> float:
        return LEFT + plot_w * min(max((moment - start).total_seconds() / seconds, 0.0), 1.0)

    def y_of(value: float) -> float:
        return TOP + plot_h * (1 - value / top)

    parts = [
        f'<svg class="pgboss-chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg" '
        f'font-family="system-ui, sans-serif" font-size="{FONT}">',
        f"<title>{escape(title)}</title>",
    ]
    # Grid and y axis labels.
    for tick in ticks:
        y = y_of(tick)
        parts.append(
            f'<line x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" stroke="#d0d0d0" stroke-width="1"/>'
        )
        parts.append(
            f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" fill="#333">{format_number(tick)}</text>'
        )
    parts.append(
        f'<text x="16" y="{TOP + plot_h / 2:.1f}" text-anchor="middle" fill="#333" '
        f'transform="rotate(-90 16 {TOP + plot_h / 2:.1f})">{escape(y_label)}</text>'
    )
    # x axis with five evenly spaced time labels.
    axis_y = TOP + plot_h
    parts.append(
        f'<line x1="{LEFT}" y1="{axis_y:.1f}" x2="{WIDTH - RIGHT}" y2="{axis_y:.1f}" stroke="#333" stroke-width="1"/>'
    )
    for i in range(5):
        moment = start + span * (i / 4)
        x = x_of(moment)
        anchor = "start" if i == 0 else "end" if i == 4 else "middle"
        parts.append(
            f'<line x1="{x:.1f}" y1="{axis_y:.1f}" x2="{x:.1f}" y2="{axis_y + 4:.1f}" stroke="#333"/>'
        )
        parts.append(
            f'<text x="{x:.1f}" y="{axis_y + 22:.1f}" text-anchor="{anchor}" fill="#333">'
            f"{escape(format_time(moment, span))}</text>"
        )
    if not values:
        parts.append(
            f'<text x="{LEFT + plot_w / 2:.1f}" y="{TOP + plot_h / 2:.1f}" text-anchor="middle" '
            f'fill="#555">{escape(empty_message)}</text>'
        )
    # The series: a (possibly broken) line, then a marker with a tooltip on every point. Each
    # series is drawn narrower than the one before, so where two coincide (as many created as
    # completed) the earlier still shows on both sides of the later one.
    for index, item in enumerate(series):
        style = item.style
        placed = [(x_of(t), None if v is None else y_of(v)) for t, v in item.points]
        dash = f' stroke-dasharray="{style.dash}"' if style.dash else ""
        width = 2.5 + 2.5 * (len(series) - 1 - index)
        parts.append(f'<g class="pgboss-series" data-series="{escape(item.label)}">')
        for segment in _segments(placed):
            coordinates = " ".join(f"{x:.1f},{y:.1f}" for x, y in segment)
            parts.append(
                f'<polyline points="{coordinates}" fill="none" stroke="{style.colour}" '
                f'stroke-width="{width:g}"{dash} stroke-linejoin="round"/>'
            )
        for (moment, value), (x, point_y) in zip(item.points, placed, strict=True):
            if value is None or point_y is None:
                continue
            tip = f"{item.label}: {format_number(value)} {_unit(item.unit, value)} at {format_time(moment, span)}"
            parts.append(_marker(style.marker, x, point_y, style.colour, tip))
        parts.append("</g>")
    # Legend under the axis: a line sample with its marker, then the name.
    legend_y = HEIGHT - 22
    x = LEFT
    for item in series:
        style = item.style
        dash = f' stroke-dasharray="{style.dash}"' if style.dash else ""
        parts.append(
            f'<line x1="{x}" y1="{legend_y}" x2="{x + 34}" y2="{legend_y}" stroke="{style.colour}" '
            f'stroke-width="2.5"{dash}/>'
        )
        parts.append(_marker(style.marker, x + 17, legend_y, style.colour))
        parts.append(f'<text x="{x + 40}" y="{legend_y + 4}" fill="#222">{escape(item.label)}</text>')
        x += 40 + LEGEND_CHAR * len(item.label) + 20
    parts.append("</svg>")
    return mark_safe("".join(parts))  # every interpolated text is escaped above


def _unit(unit: str, value: float) -> str:
    """``unit`` for ``value`` of it: "1 job", "2 jobs"."""
    return unit[:-1] if value == 1 and unit.endswith("s") else unit


def sparkline(values: Sequence[float | None], *, label: str) -> SafeString:
    """A small inline SVG line of ``values`` (oldest first), with ``label`` as its tooltip."""
    width, height, pad = 90, 24, 3
    known = [v for v in values if v is not None]
    top = max(known, default=0) or 1
    count = max(len(values) - 1, 1)
    placed = [
        (
            pad + (width - 2 * pad) * i / count,
            None if v is None else height - pad - (height - 2 * pad) * v / top,
        )
        for i, v in enumerate(values)
    ]
    # A bucket with no neighbour (the monitor's passes on either side missing) is a dot: a
    # polyline of one point draws nothing.
    lines = "".join(
        '<polyline points="{}" fill="none" stroke="#0072B2" stroke-width="2"/>'.format(
            " ".join(f"{x:.1f},{y:.1f}" for x, y in segment)
        )
        if len(segment) > 1
        else f'<circle cx="{segment[0][0]:.1f}" cy="{segment[0][1]:.1f}" r="2" fill="#0072B2"/>'
        for segment in _segments(placed)
    )
    baseline = f'<line x1="{pad}" y1="{height - pad}" x2="{width - pad}" y2="{height - pad}" stroke="#bbb"/>'
    return mark_safe(  # the label is escaped
        f'<svg class="pgboss-sparkline" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'role="img" aria-label="{escape(label)}" xmlns="http://www.w3.org/2000/svg">'
        f"<title>{escape(label)}</title>{baseline}{lines}</svg>"
    )
