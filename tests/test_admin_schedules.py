"""Schedules in the admin: on the index, listed with their next run and last job, created and
edited (cron or RRULE, previewed first) and deleted through Boss; warnings read-only."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.admin.models import ADDITION, DELETION, LogEntry
from django.contrib.admin.models import CHANGE as CHANGED
from django.contrib.admin.utils import quote
from django.test import Client
from django.urls import reverse, reverse_lazy

from django_pgboss import boss
from django_pgboss.monitor.timekeeper import run_timekeeper
from tests.helpers import rows
from tests.test_admin import messages_of, page_text

pytestmark = pytest.mark.django_db

LIST = reverse_lazy("admin:pgboss_schedule_changelist")
ADD = reverse_lazy("admin:pgboss_schedule_add")
CHANGE = reverse_lazy("admin:pgboss_schedule_change")
DELETE = reverse_lazy("admin:pgboss_schedule_delete")


@pytest.fixture
def reports():
    boss.create_queue("reports")
    boss.schedule("reports", "0 3 * * *", {"kind": "nightly"}, tz="Europe/Paris", key="nightly")


def schedules() -> list[tuple]:
    return [(s.name, s.key, s.cron, s.timezone, s.data) for s in boss.get_schedules()]


def test_schedules_are_listed_and_linked_from_the_queue_pages(admin_client, reports, clock):
    clock.set_time(dt.datetime(2027, 1, 5, 12, tzinfo=dt.UTC))
    text = page_text(admin_client.get(LIST))
    # 03:00 in Paris is 02:00 UTC in winter; no job sent yet.
    assert (
        'reports nightly cron 0 3 * * * Europe/Paris 2027-01-06 02:00:00 UTC - skip { "kind": "nightly" } - '
        in text
    )
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
    assert 'skip - { "priority": 3, "retryLimit": 1 }' in text


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
    assert (
        '<pre class="pgboss-json" tabindex="0">{\n  &quot;queue&quot;: &quot;reports&quot;\n}</pre>' in detail
    )


def test_schedules_have_their_own_row_on_the_admin_index(admin_client, staff_client):
    index = admin_client.get(reverse("admin:index"))
    page = index.content.decode()
    assert f'href="{LIST}"' in page and f'href="{ADD}"' in page
    (app,) = [a for a in index.context["app_list"] if a["app_label"] == "pgboss"]
    assert "Schedules" in [m["name"] for m in app["models"]]
    viewer = staff_client("view_schedule").get(reverse("admin:index")).content.decode()
    assert f'href="{LIST}"' in viewer and f'href="{ADD}"' not in viewer
    # Without a schedule permission there is no row (the stand-in model has none of its own).


def test_without_a_schedule_permission_the_index_has_no_schedules_row(staff_client):
    client = staff_client("view_queue")
    assert f'href="{LIST}"' not in client.get(reverse("admin:index")).content.decode()
    assert client.get(LIST).status_code == 403


def test_schedules_are_registered_through_the_admin_sites_public_api():
    # AdminSite.register() refuses Schedule's composite key; the stand-in model is registered
    # as any model is, holds no rows and runs no SQL.
    from django.contrib import admin

    from django_pgboss.exceptions import ReadOnlyModelError
    from django_pgboss.models import Schedule, Schedules

    assert admin.site.is_registered(Schedules) and not admin.site.is_registered(Schedule)
    assert str(LIST) == "/admin/pgboss/schedules/"
    assert list(Schedules.objects.all()) == [] and Schedules.objects.count() == 0
    with pytest.raises(ReadOnlyModelError):
        Schedules().save()


def test_the_old_schedule_urls_under_queues_redirect(admin_client):
    response = admin_client.get(reverse("admin:pgboss_queue_schedule_delete") + "?name=reports&key=nightly")
    assert response.status_code == 302 and response["Location"] == f"{DELETE}?name=reports&key=nightly"
    assert admin_client.get(reverse("admin:pgboss_queue_schedules"))["Location"] == str(LIST)


def test_the_list_links_each_schedules_last_job(admin_client, reports, clock):
    boss.schedule("reports", "FREQ=MINUTELY", key="minutely")
    clock.set_time(dt.datetime(2027, 1, 5, 12, 0, 20, tzinfo=dt.UTC))
    run_timekeeper(boss)
    (job,) = boss.find_jobs("reports")
    page = admin_client.get(LIST).content.decode()
    url = reverse("admin:pgboss_job_change", args=[quote(f"{job.name}/{job.id}")])
    assert f'<a href="{url}">{job.id}</a>' in page
    assert admin_client.get(url).status_code == 200  # the job's own page
    assert "2027-01-05 12:01:00" in page_text(admin_client.get(LIST))


def test_a_row_that_cannot_run_says_why_in_the_list(admin_client, reports):
    rows(
        "INSERT INTO {s}.schedule (name, key, kind, cron) VALUES ('reports', 'broken', 'rrule', 'FREQ=DAILY;BYHOUR=99')"
    )
    assert 'cannot be evaluated: unsupported value in rrule part "BYHOUR=99"' in page_text(
        admin_client.get(LIST)
    )


RULE = {
    "name": "reports",
    "key": "month-end",
    "cron": "FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=17",
    "tz": "Europe/Paris",
    "data": "",
    "missed": "skip",
}


def test_a_rule_is_previewed_before_it_is_saved(admin_client, reports, clock):
    clock.set_time(dt.datetime(2027, 1, 1, tzinfo=dt.UTC))
    preview = admin_client.post(ADD, {**RULE, "_preview": "1"})
    assert preview.status_code == 200
    text = page_text(preview)
    assert "The next 10 runs" in text
    assert "Fri 2027-01-29 17:00:00 CET 2027-01-29 16:00:00" in text
    assert "Fri 2027-04-30 17:00:00 CEST 2027-04-30 15:00:00" in text
    assert len(schedules()) == 1  # a preview saves nothing
    saved = admin_client.post(ADD, {**RULE, "_save": "1"}, follow=True)
    assert messages_of(saved) == [
        "Scheduled 'reports month-end': FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=17 (Europe/Paris)."
    ]
    assert boss.get_schedule("reports", "month-end").kind == "rrule"


def test_a_finite_rule_previews_what_is_left(admin_client, reports, clock):
    clock.set_time(dt.datetime(2027, 1, 1, tzinfo=dt.UTC))
    values = {**RULE, "cron": "DTSTART:20270101T090000\nRRULE:FREQ=DAILY;COUNT=3", "_preview": "1"}
    assert "The next 3 runs (all that are left)" in page_text(admin_client.post(ADD, values))


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("cron", "FREQ=DAILY;BYHOURS=9", 'unsupported part "BYHOURS=9" in rrule expression'),
        (
            "cron",
            "FREQ=WEEKLY;BYDAY=-1FR",
            "rrule BYDAY with an ordinal (such as -1FR) needs FREQ=MONTHLY or FREQ=YEARLY",
        ),
        ("cron", "FREQ=DAILY;UNTIL=20200101T000000Z", "has no occurrence after"),
        ("tz", "Europe/Pariss", "unknown or unsupported time zone: 'Europe/Pariss'"),
    ],
)
@pytest.mark.parametrize("button", ["_preview", "_save"])
def test_a_bad_rule_shows_its_error_under_the_field(admin_client, reports, field, value, message, button):
    response = admin_client.post(ADD, {**RULE, field: value, button: "1"})
    assert response.status_code == 200
    errors = response.context["form"].errors
    if button == "_preview" and "no occurrence" in message:
        # A finished rule previews as nothing; only saving it is refused.
        assert errors == {} and "This rule has no occurrence left." in page_text(response)
    else:
        assert list(errors) == [field] and message in errors[field][0]
        page = response.content.decode()
        assert f'<div class="form-row field-{field} errors">' in page
        assert page.index('class="errorlist') < page.index(f'name="{field}"')
    assert len(schedules()) == 1


def test_a_schedule_is_changed_keeping_its_send_options(admin_client, reports, clock):
    clock.set_time(dt.datetime(2027, 1, 1, tzinfo=dt.UTC))
    boss.schedule("reports", "0 9 * * *", {"n": 1}, key="daily", priority=4)
    form = admin_client.get(CHANGE, {"name": "reports", "key": "daily"})
    assert form.context["form"].initial["cron"] == "0 9 * * *"
    assert "2027-01-01 09:00:00" in page_text(form)  # the current schedule's next runs
    url = f"{CHANGE}?name=reports&key=daily"
    # The queue and key are disabled fields: whatever a crafted request sends for them is ignored.
    done = admin_client.post(
        url,
        {
            "name": "other",
            "key": "x",
            "cron": "FREQ=DAILY;BYHOUR=10",
            "tz": "UTC",
            "data": '{"n": 2}',
            "missed": "skip",
            "_save": "1",
        },
        follow=True,
    )
    assert messages_of(done) == ["Scheduled 'reports daily': FREQ=DAILY;BYHOUR=10 (UTC)."]
    changed = boss.get_schedule("reports", "daily")
    assert (changed.kind, changed.cron, changed.data, changed.options["priority"]) == (
        "rrule",
        "FREQ=DAILY;BYHOUR=10",
        {"n": 2},
        4,
    )
    assert LogEntry.objects.get().action_flag == CHANGED
    assert len(schedules()) == 2


def test_changing_a_schedule_needs_change_permission_and_an_existing_schedule(
    admin_client, staff_client, reports
):
    adder = staff_client("view_schedule", "add_schedule")
    assert adder.get(CHANGE, {"name": "reports", "key": "nightly"}).status_code == 403
    for query in ({"name": "reports", "key": "weekly"}, {"name": "no such queue!"}, {}):
        response = admin_client.get(CHANGE, query, follow=True)
        assert messages_of(response)[0].startswith("No schedule")
