"""The admin's SVG charts (admin/charts.py), tested on their own: no database is touched here.

The queue page that shows them is tested in test_admin_charts.py. pytest-django refuses database
access to a test without a django_db marker, so a test in this module that reached PostgreSQL
would fail rather than quietly depend on it.
"""

from __future__ import annotations

import datetime as dt
import html
import re

import pytest
from django.utils import timezone

from django_pgboss.admin import charts

START = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)


def tooltips(svg: str) -> list[str]:
    return [html.unescape(t) for t in re.findall(r"<title>([^<]*)</title>", svg)]


def chart(*series: charts.Series, hours: float = 1, **options) -> str:
    options = {"title": "Throughput", "y_label": "jobs", **options}
    return charts.line_chart(series, start=START, end=START + dt.timedelta(hours=hours), **options)


def test_nice_ticks_end_on_a_round_number_at_or_above_the_maximum():
    assert charts.nice_ticks(0) == [0.0, 1.0]
    assert charts.nice_ticks(-3) == [0.0, 1.0]
    assert charts.nice_ticks(7) == [0, 2, 4, 6, 8]
    assert charts.nice_ticks(10) == [0, 5, 10]
    assert charts.nice_ticks(100) == [0, 50, 100]
    assert charts.nice_ticks(1001) == [0, 500, 1000, 1500]
    assert charts.nice_ticks(0.3) == [0, 0.1, 0.2, 0.3]


def test_ticks_never_step_below_one_job_once_the_maximum_reaches_one():
    assert charts.nice_ticks(1) == [0.0, 1.0]
    assert charts.nice_ticks(3) == [0.0, 1.0, 2.0, 3.0]


@pytest.mark.parametrize(
    ("value", "text"),
    [(0, "0"), (7.0, "7"), (1234, "1,234"), (2.5, "2.5"), (3.10, "3.1"), (1234567.891, "1,234,567.89")],
)
def test_numbers_read_without_needless_decimals_and_with_thousands_separators(value, text):
    assert charts.format_number(value) == text


def test_time_labels_carry_the_date_only_when_the_chart_spans_more_than_a_day():
    moment = START.replace(minute=5)
    assert charts.format_time(moment, dt.timedelta(hours=1)) == "12:05"
    assert charts.format_time(moment, dt.timedelta(days=1)) == "12:05"
    assert charts.format_time(moment, dt.timedelta(days=2)) == "01 Jan 12:05"


def test_time_labels_are_in_the_current_time_zone():
    with timezone.override("Asia/Tokyo"):
        assert charts.format_time(START, dt.timedelta(hours=1)) == "21:00"


def test_a_missing_value_breaks_the_line_instead_of_dropping_to_zero():
    points = [(START + dt.timedelta(minutes=i), v) for i, v in enumerate([1, 2, None, 4, 5])]
    svg = chart(charts.Series("Completed", points, charts.GREEN), hours=4 / 60)
    assert svg.count("<polyline") == 2
    assert [t for t in tooltips(svg) if t.startswith("Completed")] == [
        "Completed: 1 job at 12:00",
        "Completed: 2 jobs at 12:01",
        "Completed: 4 jobs at 12:03",
        "Completed: 5 jobs at 12:04",
    ]


def test_every_point_has_a_tooltip_with_its_value_unit_and_time():
    series = charts.Series(
        "Rate", [(START, 2.5), (START + dt.timedelta(minutes=30), 10)], charts.BLUE, "jobs/min"
    )
    assert tooltips(chart(series)) == [
        "Throughput",
        "Rate: 2.5 jobs/min at 12:00",
        "Rate: 10 jobs/min at 12:30",
    ]


def test_the_y_axis_runs_from_zero_to_a_round_number_above_the_largest_value():
    svg = chart(charts.Series("Queued", [(START, 7), (START + dt.timedelta(minutes=10), 3)], charts.BLUE))
    labels = re.findall(r'text-anchor="end" fill="#333">([^<]*)</text>', svg)
    assert labels[:5] == ["0", "2", "4", "6", "8"]


def test_series_are_told_apart_by_colour_dash_and_marker_shape_in_the_lines_and_the_legend():
    styles = [charts.BLUE, charts.GREEN, charts.VERMILLION, charts.PURPLE]
    assert (
        len({s.colour for s in styles})
        == len({s.dash for s in styles})
        == len({s.marker for s in styles})
        == 4
    )
    series = [charts.Series(f"s{i}", [(START, i + 1)], style) for i, style in enumerate(styles)]
    svg = chart(*series)
    for item in series:
        group = re.search(rf'<g class="pgboss-series" data-series="{item.label}">(.*?)</g>', svg).group(1)
        assert item.style.colour in group
        assert f'fill="#222">{item.label}</text>' in svg  # its legend entry
        if item.style.dash:
            assert f'stroke-dasharray="{item.style.dash}"' in svg
    # One marker per point in the plot, and one per series in the legend, in each series' shape.
    assert svg.count("<circle") == 2
    assert svg.count("<rect") == 2
    assert svg.count("<path") == 4  # triangles and diamonds are paths


def test_a_point_outside_the_range_is_pinned_to_the_edge_not_drawn_off_the_chart():
    series = charts.Series(
        "Queued", [(START - dt.timedelta(hours=1), 1), (START + dt.timedelta(hours=5), 1)], charts.BLUE
    )
    svg = chart(series)
    (points,) = re.findall(r'<polyline points="([^"]*)"', svg)
    xs = [float(p.split(",")[0]) for p in points.split()]
    assert xs == [charts.LEFT, charts.WIDTH - charts.RIGHT]


def test_an_empty_chart_says_so_and_keeps_its_axes():
    svg = chart(empty_message="No data in this range.")
    assert "No data in this range." in svg
    assert "<polyline" not in svg
    # The y axis labels 0 and 1 (and the last time label, also anchored at its end).
    assert re.findall(r'text-anchor="end" fill="#333">([^<]*)</text>', svg) == ["0", "1", "13:00"]


def test_chart_text_is_escaped():
    svg = chart(charts.Series("<b>", [(START, 1)], charts.BLUE), title="a & b", y_label="<y>")
    assert "<b>" not in svg and "&lt;b&gt;" in svg and "a &amp; b" in svg and "&lt;y&gt;" in svg


def test_the_chart_scales_with_its_container():
    svg = chart()
    assert f'viewBox="0 0 {charts.WIDTH} {charts.HEIGHT}"' in svg
    assert not re.search(r"<svg[^>]* width=", svg)


def test_sparkline_draws_the_values_with_a_tooltip():
    svg = charts.sparkline([0, 5, None, 10], label="completed: 0, 5, -, 10")
    # 0 and 5 are a line; 10, alone between a gap and the end, is a dot (a one-point line draws nothing).
    assert svg.count("<polyline") == 1 and svg.count("<circle") == 1
    assert "<title>completed: 0, 5, -, 10</title>" in svg


def test_a_sparkline_of_nothing_measured_is_just_its_baseline():
    svg = charts.sparkline([None, None], label="<none>")
    assert "<polyline" not in svg
    assert "<line" in svg
    assert 'aria-label="&lt;none&gt;"' in svg
