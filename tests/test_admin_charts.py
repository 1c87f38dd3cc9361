"""The queue page's charts: server-rendered SVG with the real numbers, and the range picker."""

from __future__ import annotations

import datetime as dt
import html
import re

import pytest
from django.urls import reverse
from django.utils import timezone

from django_pgboss import boss
from django_pgboss.admin import charts
from tests.helpers import rows
from tests.test_admin import add_snapshot, messages_of, page_text

pytestmark = pytest.mark.django_db


def tooltips(svg: str) -> list[str]:
    return [html.unescape(t) for t in re.findall(r"<title>([^<]*)</title>", svg)]


def figure(body: str, figure_id: str) -> str:
    match = re.search(rf'<figure class="pgboss-figure" id="{figure_id}">(.*?)</figure>', body, flags=re.S)
    assert match is not None, figure_id
    return match.group(1)


@pytest.fixture
def history():
    """Queue 'billing' with three monitor snapshots in the last hour, one a day ago, one 3 days ago."""
    boss.create_queue("billing")
    now = timezone.now().replace(second=30, microsecond=0)
    points = {
        now - dt.timedelta(minutes=50): {"created_delta": 12, "completed_delta": 9, "failed_delta": 1},
        now - dt.timedelta(minutes=30): {"created_delta": 20, "completed_delta": 18, "failed_delta": 2},
        now - dt.timedelta(minutes=10): {"created_delta": 4, "completed_delta": 6, "failed_delta": 0},
    }
    for moment, deltas in points.items():
        add_snapshot("billing", moment, queued_count=7, active_count=3, failed_count=5, **deltas)
    add_snapshot("billing", now - dt.timedelta(hours=23), completed_delta=600, queued_count=40)
    add_snapshot("billing", now - dt.timedelta(days=3), completed_delta=9000, queued_count=900)
    return {"now": now, "points": points}


def queue_page(client, name: str = "billing", **params):
    return client.get(reverse("admin:pgboss_queue_change", args=[name]), params)


def test_queue_page_charts_show_the_counts_per_interval_with_tooltips(admin_client, history):
    response = queue_page(admin_client)
    assert response.status_code == 200
    body = response.content.decode()
    throughput = figure(body, "pgboss-throughput-chart")
    tips = tooltips(throughput)
    assert tips[0] == "Jobs created, completed and failed per 1 min, last 1 hour"
    for moment, deltas in history["points"].items():
        label = charts.format_time(moment.replace(second=0), dt.timedelta(hours=1))
        assert f"Created: {deltas['created_delta']} jobs at {label}" in tips
        assert f"Completed: {deltas['completed_delta']} jobs at {label}" in tips
        failed = deltas["failed_delta"]
        assert f"Failed: {failed} job{'' if failed == 1 else 's'} at {label}" in tips
    # Nothing outside the range is drawn.
    assert not any("600" in tip or "9,000" in tip for tip in tips)
    gauges = tooltips(figure(body, "pgboss-gauge-chart"))
    assert gauges.count("Queued: 7 jobs at " + label) == 1
    assert "Active: 3 jobs at " + label in gauges
    assert "Failed: 5 jobs at " + label in gauges
    # Three series in each chart, each with its own colour, dash pattern and marker shape.
    assert throughput.count('stroke="#0072B2"') >= 1 and 'stroke-dasharray="8 4"' in throughput
    assert 'stroke-dasharray="2 3"' in throughput
    assert "<rect " in throughput and "<circle " in throughput and "<path " in throughput
    # It scales with the page: a viewBox and no fixed width.
    svg_tag = re.search(r"<svg[^>]*>", throughput).group(0)
    assert 'viewBox="0 0 600 300"' in svg_tag and "width=" not in svg_tag


def test_queue_page_rates_are_sum_of_deltas_over_sum_of_seconds(admin_client, history):
    text = page_text(queue_page(admin_client))
    # 36 created, 33 completed, 3 failed over 3 x 60 s.
    assert "Created per minute 12.0 Completed per minute 11.0 Failed per minute 1.0" in text
    assert "Points are 1 min buckets, times in UTC;" in text


def test_range_picker_widens_the_charts(admin_client, history):
    response = queue_page(admin_client, range="24h")
    body = response.content.decode()
    assert '<a href="?range=24h" class="selected" aria-current="true">24 hours</a>' in body
    tips = tooltips(figure(body, "pgboss-throughput-chart"))
    assert tips[0] == "Jobs created, completed and failed per 30 min, last 24 hours"
    assert any(tip.startswith("Completed: 600 jobs at ") for tip in tips)
    assert not any("9,000" in tip for tip in tips)
    week = tooltips(figure(queue_page(admin_client, range="7d").content.decode(), "pgboss-gauge-chart"))
    assert any(tip.startswith("Queued: 900 jobs at ") for tip in week)


def test_the_fifteen_minute_range_shows_fifteen_second_buckets(admin_client, history):
    body = queue_page(admin_client, range="15m").content.decode()
    assert '<a href="?range=15m" class="selected" aria-current="true">15 minutes</a>' in body
    tips = tooltips(figure(body, "pgboss-throughput-chart"))
    assert tips[0] == "Jobs created, completed and failed per 15 s, last 15 minutes"
    # Only the snapshot of 10 minutes ago is inside the range.
    assert any(tip.startswith("Completed: 6 jobs at ") for tip in tips)
    assert not any(tip.startswith(("Completed: 18 jobs", "Completed: 9 jobs")) for tip in tips)


def test_a_range_not_offered_falls_back_with_a_message_and_changes_nothing(admin_client, history):
    before = rows("SELECT count(*) FROM {s}.queue_stats")
    response = queue_page(admin_client, range="2w")
    assert response.status_code == 200
    assert messages_of(response) == [
        "The chart range '2w' is not offered (choose one of 15m, 1h, 6h, 24h, 7d); showing the last 1 hour."
    ]
    assert '<a href="?range=1h" class="selected" aria-current="true">1 hour</a>' in response.content.decode()
    assert rows("SELECT count(*) FROM {s}.queue_stats") == before


def test_a_queue_without_history_says_so(admin_client):
    boss.create_queue("fresh")
    body = queue_page(admin_client, "fresh").content.decode()
    assert "No history in this range yet: the monitor (manage.py pgboss_monitor) records it." in body
    assert "Created per minute -" in page_text(queue_page(admin_client, "fresh"))


def test_a_queue_name_with_a_slash_has_its_page(admin_client):
    boss.create_queue("billing/eu")
    response = admin_client.get(reverse("admin:pgboss_queue_change", args=["billing_2Feu"]))
    assert response.status_code == 200
    assert "billing/eu" in page_text(response)


def test_staff_needs_view_queue_for_the_charts(staff_client, history):
    assert queue_page(staff_client("view_job")).status_code == 403


def test_tooltips_pluralise_and_coinciding_series_stay_visible(admin_client):
    boss.create_queue("steady")
    now = timezone.now().replace(second=30, microsecond=0)
    # As many created as completed: the two lines lie on each other.
    for minutes in (20, 10):
        add_snapshot("steady", now - dt.timedelta(minutes=minutes), created_delta=1, completed_delta=1)
    throughput = figure(queue_page(admin_client, "steady").content.decode(), "pgboss-throughput-chart")
    tips = tooltips(throughput)
    assert any(tip.startswith("Created: 1 job at ") for tip in tips)
    assert any(tip.startswith("Completed: 1 job at ") for tip in tips)
    assert any(tip.startswith("Failed: 0 jobs at ") for tip in tips)
    # Drawn in order, each narrower than the one before: Created shows around Completed.
    widths = {
        series: float(re.search(r'<polyline [^>]*stroke-width="([\d.]+)"', group).group(1))
        for series, group in re.findall(
            r'<g class="pgboss-series" data-series="(\w+)">(.*?)</g>', throughput, re.S
        )
    }
    assert widths["Created"] > widths["Completed"] > widths["Failed"]


def test_a_mostly_empty_range_starts_its_axis_where_the_history_starts(admin_client):
    boss.create_queue("young")
    now = timezone.now().replace(second=30, microsecond=0)
    add_snapshot("young", now - dt.timedelta(minutes=20), completed_delta=5)
    add_snapshot("young", now - dt.timedelta(minutes=10), completed_delta=7)
    response = queue_page(admin_client, "young", range="6h")
    text = page_text(response)
    assert "the time axis begins there rather than at the start of the range" in text
    # The axis's first label is near the first point, not six hours back.
    first_label = re.findall(
        r'text-anchor="start" fill="#333">([^<]+)</text>',
        figure(response.content.decode(), "pgboss-throughput-chart"),
    )
    assert first_label and first_label[0] != charts.format_time(
        now - dt.timedelta(hours=6), dt.timedelta(hours=6)
    )
    # A range the history fills keeps its axis, without the note.
    assert "the time axis begins there" not in page_text(queue_page(admin_client, "young", range="15m"))


def test_the_numbers_behind_the_charts_show_seconds_oldest_first(admin_client, history):
    body = queue_page(admin_client).content.decode()
    table = re.search(r'<details class="pgboss-data">(.*?)</details>', body, re.S).group(1)
    moments = re.findall(r"<tr><td>(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) UTC</td>", table)
    assert len(moments) == 3 and moments == sorted(moments)
    assert "Oldest first, as the charts read" in table


def test_the_queue_rows_fields_are_grouped_with_the_monitor_stamps_folded(admin_client, history):
    body = queue_page(admin_client).content.decode()
    text = page_text_of_body(body)
    settings_at = text.index("Settings Name:")
    counts_at = text.index("Counts (the monitor's cache, as of its last pass)")
    stamps_at = text.index("Monitor stamps")
    assert settings_at < counts_at < stamps_at
    assert text.index("Queued count:") > counts_at and text.index("Monitor on:") > stamps_at
    # The stamps' fieldset is the collapsible one.
    (stamps,) = [f for f in re.findall(r"<fieldset[^>]*>.*?</fieldset>", body, re.S) if "Monitor stamps" in f]
    assert re.match(r'<fieldset class="[^"]*\bcollapse\b', stamps)


def page_text_of_body(body: str) -> str:
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", body)))


def test_the_queue_page_charts_wait_and_run_percentiles(admin_client):
    boss.create_queue("billing")
    now = timezone.now().replace(second=30, microsecond=0)
    moment = now - dt.timedelta(minutes=20)
    # Four jobs waited in slot 16 (1.81 s to 2.56 s) and ran in slot 10 (0.23 s to 0.32 s), but one
    # of them waited in slot 30 (about 4 min): p50 and p95 part ways.
    wait = [0] * 48
    wait[16], wait[30] = 19, 1
    run = [0] * 48
    run[10] = 20
    add_snapshot("billing", moment, wait_bins=wait, run_bins=run)
    add_snapshot("billing", now - dt.timedelta(minutes=40))  # no histograms: a gap, not a zero
    body = queue_page(admin_client).content.decode()
    label = charts.format_time(moment.replace(second=0), dt.timedelta(hours=1))
    waits = tooltips(figure(body, "pgboss-wait-chart"))
    assert (
        waits[0] == "Wait before starting of the jobs that finished, p50, p95 and p99 per 1 min, last 1 hour"
    )
    p50 = charts.format_number(0.01 * 2 ** (15 / 2) * 2 ** ((10 / 19) / 2))
    assert f"p50: {p50} seconds at {label}" in waits
    assert (
        f"p95: {charts.format_number(0.01 * 2 ** (15 / 2) * 2 ** ((19 / 19) / 2))} seconds at {label}"
        in waits
    )
    assert (
        f"p99: {charts.format_number(0.01 * 2 ** (29 / 2) * 2 ** ((19.8 - 19) / 2))} seconds at {label}"
        in waits
    )
    assert len([tip for tip in waits if tip.startswith("p50:")]) == 1  # the older bucket is a gap
    runs = tooltips(figure(body, "pgboss-run-chart"))
    assert (
        f"p99: {charts.format_number(0.01 * 2 ** (9 / 2) * 2 ** ((19.8 / 20) / 2))} seconds at {label}"
        in runs
    )
