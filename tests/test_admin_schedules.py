"""Schedules in the admin: listed, created and deleted through Boss; warnings read-only."""

from __future__ import annotations

import pytest
from django.contrib.admin.models import ADDITION, DELETION, LogEntry
from django.test import Client
from django.urls import reverse, reverse_lazy

from django_pgboss import boss
from tests.helpers import rows
from tests.test_admin import messages_of, page_text

pytestmark = pytest.mark.django_db

LIST = reverse_lazy("admin:pgboss_queue_schedules")
ADD = reverse_lazy("admin:pgboss_queue_schedule_add")
DELETE = reverse_lazy("admin:pgboss_queue_schedule_delete")


@pytest.fixture
def reports():
    boss.create_queue("reports")
    boss.schedule("reports", "0 3 * * *", {"kind": "nightly"}, tz="Europe/Paris", key="nightly")


def schedules() -> list[tuple]:
    return [(s.name, s.key, s.cron, s.timezone, s.data) for s in boss.get_schedules()]


def test_schedules_are_listed_and_linked_from_the_queue_pages(admin_client, reports):
    text = page_text(admin_client.get(LIST))
    assert 'reports nightly 0 3 * * * Europe/Paris skip { "kind": "nightly" } - ' in text
    assert "Add schedule" in text
    for page in (
        reverse("admin:pgboss_queue_changelist"),
        reverse("admin:pgboss_queue_change", args=["reports"]),
    ):
        assert f'href="{LIST}"' in admin_client.get(page).content.decode()


def test_a_schedule_is_created_through_boss_and_logged(admin_client, reports):
    response = admin_client.post(
        ADD,
        {
            "name": "reports",
            "key": "hourly",
            "cron": "5 * * * *",
            "tz": "UTC",
            "data": '{"n": 1}',
            "missed": "once",
        },
        follow=True,
    )
    assert messages_of(response) == ["Scheduled 'reports hourly': 5 * * * * (UTC)."]
    assert ("reports", "hourly", "5 * * * *", "UTC", {"n": 1}) in schedules()
    entry = LogEntry.objects.get(action_flag=ADDITION)
    assert entry.object_repr == "reports hourly" and entry.change_message == "schedule '5 * * * *' in UTC"


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("cron", "61 * * * *", "cron '61 * * * *' is not a valid cron expression"),
        ("cron", "* * *", "cron '* * *' must have 5 fields, or 6 with seconds first"),
        ("tz", "Mars/Olympus", "unknown or unsupported time zone: 'Mars/Olympus'"),
    ],
)
def test_invalid_schedules_show_form_errors_and_change_nothing(admin_client, reports, field, value, message):
    values = {"name": "reports", "key": "bad", "cron": "0 * * * *", "tz": "UTC", "data": "", "missed": "skip"}
    response = admin_client.post(ADD, {**values, field: value})
    assert response.status_code == 200
    assert response.context["form"].errors == {field: [message]}
    assert message.replace("'", "&#x27;") in response.content.decode()
    assert len(schedules()) == 1
    assert not LogEntry.objects.exists()


def test_a_form_with_bad_json_or_an_unknown_queue_is_refused(admin_client, reports):
    response = admin_client.post(
        ADD, {"name": "nope", "cron": "0 * * * *", "tz": "UTC", "data": "{", "missed": "skip"}
    )
    errors = response.context["form"].errors
    assert errors["data"] == [
        "Not valid JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)."
    ]
    assert errors["name"] == ["Select a valid choice. nope is not one of the available choices."]
    assert len(schedules()) == 1


def test_send_options_of_a_schedule_are_listed(admin_client, reports):
    boss.schedule("reports", "*/5 * * * *", None, key="often", priority=3, retry_limit=1)
    text = page_text(admin_client.get(LIST))
    assert 'reports often */5 * * * * UTC skip - { "priority": 3, "retryLimit": 1 }' in text


def test_an_empty_data_field_schedules_no_data_and_shows_empty(admin_client, reports):
    form = admin_client.get(ADD).content.decode()
    assert "null" not in form
    values = {"name": "reports", "key": "k", "cron": "0 * * * *", "tz": "UTC", "data": "", "missed": "skip"}
    admin_client.post(ADD, values)
    assert ("reports", "k", "0 * * * *", "UTC", None) in schedules()


def test_a_schedule_is_deleted_after_confirming(admin_client, reports):
    confirm = admin_client.get(DELETE, {"name": "reports", "key": "nightly"})
    assert "Delete the schedule of queue reports with key nightly ( 0 3 * * * , Europe/Paris)?" in page_text(
        confirm
    )
    assert len(schedules()) == 1
    done = admin_client.post(DELETE, {"name": "reports", "key": "nightly"}, follow=True)
    assert messages_of(done) == ["Deleted the schedule 'reports nightly'."]
    assert schedules() == []
    assert LogEntry.objects.get().action_flag == DELETION


def test_deleting_a_schedule_that_is_not_there_says_so(admin_client, reports):
    response = admin_client.post(DELETE, {"name": "reports", "key": "weekly"}, follow=True)
    assert messages_of(response) == ["No schedule 'reports' with key 'weekly'."]
    assert len(schedules()) == 1


def test_schedule_pages_need_their_permissions(staff_client, reports):
    viewer = staff_client("view_schedule")
    assert viewer.get(LIST).status_code == 200
    assert "Add schedule" not in page_text(viewer.get(LIST))
    assert viewer.get(ADD).status_code == 403
    assert (
        viewer.post(ADD, {"name": "reports", "cron": "0 * * * *", "tz": "UTC", "missed": "skip"}).status_code
        == 403
    )
    assert viewer.post(DELETE, {"name": "reports", "key": "nightly"}).status_code == 403
    assert len(schedules()) == 1


def test_staff_without_view_schedule_gets_403(staff_client, reports):
    assert staff_client("view_queue").get(LIST).status_code == 403


def test_schedule_writes_need_a_csrf_token(django_user_model, reports):
    client = Client(enforce_csrf_checks=True)
    client.force_login(django_user_model.objects.create_superuser("root", "root@example.com", "pw"))
    assert client.post(DELETE, {"name": "reports", "key": "nightly"}).status_code == 403
    assert len(schedules()) == 1


def test_warnings_are_read_only(admin_client):
    rows(
        "INSERT INTO {s}.warning (id, type, message, data, created_on) "
        "VALUES (gen_random_uuid(), 'queue_backlog', 'queue reports has 20000 jobs waiting', '{\"queue\": \"reports\"}', now())"
    )
    listing = admin_client.get(reverse("admin:pgboss_warning_changelist"))
    assert "queue reports has 20000 jobs waiting" in page_text(listing)
    assert admin_client.get(reverse("admin:pgboss_warning_add")).status_code == 403
    (warning_id,) = rows("SELECT id FROM {s}.warning")[0]
    detail = admin_client.get(reverse("admin:pgboss_warning_change", args=[warning_id])).content.decode()
    assert '<pre class="pgboss-json">{\n  &quot;queue&quot;: &quot;reports&quot;\n}</pre>' in detail
