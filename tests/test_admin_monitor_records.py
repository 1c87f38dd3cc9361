"""The monitor's records in the admin: queue stats and warnings shown to the second, and the
Warnings page saying how to turn persistence on while it is off."""

from __future__ import annotations

import datetime as dt

import pytest
from django.urls import reverse
from django.utils import timezone

from tests.helpers import pgboss_settings_with, rows
from tests.test_admin import add_snapshot, page_text

pytestmark = pytest.mark.django_db


def shown(moment: dt.datetime) -> str:
    """A time as the admin shows it: to the second, in the current zone (UTC in the suite)."""
    return timezone.localtime(moment).strftime("%Y-%m-%d %H:%M:%S %Z")


def one_minute() -> tuple[dt.datetime, dt.datetime]:
    """Two moments 30 seconds apart within one minute, a few minutes ago."""
    first = (timezone.now() - dt.timedelta(minutes=5)).replace(second=5, microsecond=0)
    return first, first + dt.timedelta(seconds=30)


def test_two_queue_stats_snapshots_of_one_minute_are_told_apart_by_their_seconds(admin_client):
    first, second = one_minute()
    add_snapshot("mail", first, queued_count=3)
    add_snapshot("mail", second, queued_count=4)
    text = page_text(admin_client.get(reverse("admin:pgboss_queuestats_changelist")))
    assert f"mail {shown(second)} 4 " in text
    assert f"mail {shown(first)} 3 " in text
    (snapshot_id,) = rows("SELECT id FROM {s}.queue_stats WHERE queued_count = 4")[0]
    page = page_text(admin_client.get(reverse("admin:pgboss_queuestats_change", args=[snapshot_id])))
    assert f"Captured on: {shown(second)}" in page
    assert f"Delta on: {shown(second - dt.timedelta(seconds=10))}" in page


def test_two_warnings_of_one_minute_are_told_apart_by_their_seconds(admin_client):
    first, second = one_minute()
    for moment, message in ((first, "first backlog"), (second, "second backlog")):
        rows(
            "INSERT INTO {s}.warning (id, type, message, data, created_on) "
            "VALUES (gen_random_uuid(), 'queue_backlog', %s, NULL, %s)",
            [message, moment],
        )
    text = page_text(admin_client.get(reverse("admin:pgboss_warning_changelist")))
    assert f"{shown(second)} queue_backlog second backlog" in text
    assert f"{shown(first)} queue_backlog first backlog" in text
    (warning_id,) = rows("SELECT id FROM {s}.warning WHERE message = 'second backlog'")[0]
    page = page_text(admin_client.get(reverse("admin:pgboss_warning_change", args=[warning_id])))
    assert f"Created on: {shown(second)}" in page


def test_the_warnings_page_says_how_to_turn_persistence_on_while_it_is_off(admin_client):
    url = reverse("admin:pgboss_warning_changelist")
    with pgboss_settings_with(PERSIST_WARNINGS=False):
        off = page_text(admin_client.get(url))
    assert 'The monitor keeps no warnings here: PGBOSS["PERSIST_WARNINGS"] is off (the default)' in off
    assert 'Set PGBOSS = {..., "PERSIST_WARNINGS": True} in your settings to keep them' in off
    with pgboss_settings_with(PERSIST_WARNINGS=True):
        on = page_text(admin_client.get(url))
    assert "PERSIST_WARNINGS" not in on
