"""The admin's queue and job pages: what an operator sees, and the job actions that go through Boss."""

from __future__ import annotations

import datetime as dt
import html
import re
import time

import pytest
from django.contrib.admin.models import CHANGE, DELETION, LogEntry
from django.contrib.admin.utils import quote
from django.test import Client
from django.urls import reverse, reverse_lazy
from django.utils import timezone

from django_pgboss import boss
from django_pgboss.admin.views.throughput import THROUGHPUT_BUCKET_SECONDS
from tests.helpers import rows

pytestmark = pytest.mark.django_db

JOBS = reverse_lazy("admin:pgboss_job_changelist")


def page_text(response) -> str:
    """The response body with tags removed and whitespace collapsed: roughly what a reader sees."""
    body = re.sub(r"<(script|style)[^>]*>.*?</\1>", " ", response.content.decode(), flags=re.S)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", body)))


def messages_of(response) -> list[str]:
    return [str(m) for m in response.context["messages"]] if response.context else []


def ensure_stats_partition(moment: dt.datetime) -> None:
    """queue_stats is partitioned by UTC day and only today's and tomorrow's exist after migrate."""
    day = moment.astimezone(dt.UTC).date()
    rows(
        f'CREATE TABLE IF NOT EXISTS {{s}}."queue_stats_{day:%Y%m%d}" PARTITION OF {{s}}.queue_stats '
        f"FOR VALUES FROM ('{day:%Y-%m-%d} 00:00:00+00') TO ('{day + dt.timedelta(days=1):%Y-%m-%d} 00:00:00+00')"
    )


def add_snapshot(name: str, captured_on: dt.datetime, **values: int) -> None:
    """One monitor snapshot as the monitor writes it, with chosen numbers and time."""
    ensure_stats_partition(captured_on)
    columns = {
        "queued_count": 0,
        "active_count": 0,
        "failed_count": 0,
        "created_delta": 0,
        "completed_delta": 0,
        "failed_delta": 0,
        "delta_seconds": 60,
        **values,
    }
    rows(
        f"INSERT INTO {{s}}.queue_stats (name, {', '.join(columns)}, delta_on, captured_on) "
        f"VALUES (%s, {', '.join(['%s'] * len(columns))}, %s, %s)",
        [name, *columns.values(), captured_on - dt.timedelta(seconds=10), captured_on],
    )


@pytest.fixture
def dead_lettered():
    """Queue 'orders' (dead letter 'orders-dlq'); two of its jobs failed for good, one waits."""
    boss.create_queue("orders-dlq")
    boss.create_queue("orders", dead_letter="orders-dlq", retry_limit=0)
    first = boss.send("orders", {"order": 1})
    second = boss.send("orders", {"order": 2}, singleton_key="customer-7")
    boss.fetch("orders", batch_size=2)
    boss.fail("orders", [first, second], {"message": "card declined", "code": 402})
    waiting = boss.send("orders", {"order": 3}, singleton_key="customer-9")
    copies = [str(r[0]) for r in rows("SELECT id FROM {s}.job WHERE name = 'orders-dlq' ORDER BY created_on")]
    return {"failed": [first, second], "waiting": waiting, "copies": copies}


# -- pages ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["queue", "job", "queuestats", "warning"])
def test_changelists_render(admin_client, dead_lettered, model):
    response = admin_client.get(reverse(f"admin:pgboss_{model}_changelist"))
    assert response.status_code == 200


def test_queue_list_shows_policy_counts_dead_letters_and_last_hour_throughput(admin_client, dead_lettered):
    boss.create_queue("mail", policy="singleton")
    # The pass's counters are placed by the end of its window, 10 s before its capture: in the
    # first 10 s of a 5-minute bucket they would land in the bucket before (and be folded into an
    # older one), leaving the current bucket without its 0. The pass waits out those seconds.
    into_bucket = timezone.now().timestamp() % THROUGHPUT_BUCKET_SECONDS
    if into_bucket < 15:
        time.sleep(15 - into_bucket)
    # The monitor caches the counts the list shows, and its snapshot is the sparkline's current
    # bucket (the 0 below). Due or not: a queue another test's monitor counted a moment ago would
    # otherwise wait out the interval.
    assert "mail" in boss.supervise(interval_seconds=0).counted
    now = timezone.now()
    # The middle of the current 5-minute bucket: a snapshot's window ends 10 s before its capture,
    # and both must fall in one bucket whatever the clock says when the test runs.
    middle = now.replace(minute=now.minute - now.minute % 5, second=0, microsecond=0) + dt.timedelta(
        seconds=150
    )
    # Last hour: 30 completed over 600 s and 6 over 300 s -> 36 / 900 s = 2.4 per minute.
    add_snapshot("mail", middle - dt.timedelta(minutes=40), completed_delta=30, delta_seconds=600)
    add_snapshot("mail", middle - dt.timedelta(minutes=20), completed_delta=6, delta_seconds=300)
    # Older than an hour: not counted.
    add_snapshot("mail", now - dt.timedelta(minutes=90), completed_delta=1000, delta_seconds=60)
    response = admin_client.get(reverse("admin:pgboss_queue_changelist"))
    text = page_text(response)
    # Columns: name, policy, queued, active, failed, dead-lettered, completed per minute (1 h), dead letter.
    assert "Name Policy Queued Active Failed Dead-lettered Completed/min, last hour Dead letter" in text
    assert re.search(r"orders Standard 1 0 2 2 - ", text), text
    assert re.search(r"orders-dlq Standard 2 0 0 0 - ", text), text
    # The rate is over the 15 minutes the monitor counted, and says so.
    assert re.search(
        r"mail Singleton 0 0 0 0 2\.4 mail: completed per 5 minutes, oldest first: [-0-9, ]+ over the 15 min counted ",
        text,
    ), text
    spark = re.search(r'<svg class="pgboss-sparkline"[^>]*aria-label="([^"]*)"', response.content.decode())
    assert spark is not None
    label = html.unescape(spark.group(1))
    assert label.startswith("mail: completed per 5 minutes, oldest first: ")
    shown = label.split(":", 2)[2].split(", ")
    assert sorted(int(n) for n in shown if n.strip() != "-") == [0, 6, 30]
    # Each bucket in its place on the hour: 40 and 20 minutes ago, and now, with gaps between.
    assert len(shown) in (12, 13) and shown.count(" -") + shown.count("-") >= 9
    assert [n.strip() for n in shown].index("30") < [n.strip() for n in shown].index("6")
    assert THROUGHPUT_BUCKET_SECONDS == 300


def test_dead_lettered_count_links_to_the_waiting_copies(admin_client, dead_lettered):
    body = admin_client.get(reverse("admin:pgboss_queue_changelist")).content.decode()
    link = re.search(r'<a href="([^"]+)">2</a>', body)
    assert link is not None
    copies = page_text(admin_client.get(html.unescape(link.group(1))))
    assert all(copy in copies for copy in dead_lettered["copies"])
    assert "2 jobs" in copies and dead_lettered["waiting"] not in copies


def test_job_list_says_why_a_job_failed_and_where_it_came_from(admin_client, dead_lettered):
    text = page_text(admin_client.get(JOBS, {"name": "orders-dlq"}))
    assert "Retries Output Came from" in text
    # The copies wait in orders-dlq, came from orders, and have no output of their own yet.
    for copy in dead_lettered["copies"]:
        assert re.search(
            rf"{copy} orders-dlq Created 0 - orders \d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d UTC - ", text
        ), text
    # The failed jobs say why.
    failed = page_text(admin_client.get(JOBS, {"state__exact": "failed"}))
    for job in dead_lettered["failed"]:
        assert re.search(rf"{job} orders Failed 0 card declined - ", failed), failed


def test_job_list_filters_by_queue_state_and_policy(admin_client, dead_lettered):
    boss.create_queue("reports", policy="short")
    report = boss.send("reports", {"r": 1}, singleton_key="daily")
    listing = admin_client.get(JOBS, {"name": "orders", "state__exact": "failed"})
    shown = page_text(listing)
    assert all(job in shown for job in dead_lettered["failed"])
    assert dead_lettered["waiting"] not in shown and report not in shown
    by_policy = page_text(admin_client.get(JOBS, {"policy": "short"}))
    assert report in by_policy and dead_lettered["waiting"] not in by_policy
    # The queue and policy filters list the queues and the policies.
    listing = admin_client.get(JOBS).content.decode()
    assert "?name=reports" in listing and "?policy=key_strict_fifo" in listing


def test_job_search_by_id_and_singleton_key(admin_client, dead_lettered):
    first, second = dead_lettered["failed"]
    by_id = page_text(admin_client.get(JOBS, {"q": first}))
    assert first in by_id and second not in by_id
    by_key = page_text(admin_client.get(JOBS, {"q": "customer-9"}))
    assert dead_lettered["waiting"] in by_key and first not in by_key
    nothing = admin_client.get(JOBS, {"q": "not-a-uuid-nor-a-key"})
    assert nothing.status_code == 200
    assert "0 results" in page_text(nothing)


def test_job_page_pretty_prints_data_output_and_source_output(admin_client, dead_lettered):
    failed = dead_lettered["failed"][0]
    page = admin_client.get(reverse("admin:pgboss_job_change", args=[failed]))
    body = page.content.decode()
    assert '<pre class="pgboss-json" tabindex="0">{\n  &quot;order&quot;: 1\n}</pre>' in body
    assert "&quot;code&quot;: 402,\n  &quot;message&quot;: &quot;card declined&quot;" in body
    copy = dead_lettered["copies"][0]
    copy_page = admin_client.get(reverse("admin:pgboss_job_change", args=[copy])).content.decode()
    # The copy's source output is the failed job's output.
    assert copy_page.count("&quot;message&quot;: &quot;card declined&quot;") == 1
    assert reverse("admin:pgboss_job_lineage", args=[quote(f"orders-dlq/{copy}")]) in copy_page


def test_job_page_offers_only_the_actions_that_apply(admin_client, dead_lettered):
    failed_page = page_text(
        admin_client.get(reverse("admin:pgboss_job_change", args=[dead_lettered["failed"][0]]))
    )
    assert "Act on this job: Retry Delete" in failed_page
    waiting_page = page_text(
        admin_client.get(reverse("admin:pgboss_job_change", args=[dead_lettered["waiting"]]))
    )
    assert "Act on this job: Cancel Delete" in waiting_page
    copy_page = page_text(
        admin_client.get(reverse("admin:pgboss_job_change", args=[dead_lettered["copies"][0]]))
    )
    assert "Act on this job: Cancel Redrive… Delete" in copy_page


# -- actions --------------------------------------------------------------------------------------


def key(job_id: str) -> str:
    """The admin's name for a job, "<queue>/<id>" (admin/job_keys.py)."""
    ((name,),) = rows("SELECT name FROM {s}.job WHERE id = %s", [job_id])
    return f"{name}/{job_id}"


def post_action(client: Client, action: str, ids: list[str], **extra):
    return client.post(JOBS, {"action": action, "_selected_action": ids, "index": 0, **extra}, follow=True)


def state_of(job_id: str) -> str | None:
    found = rows("SELECT state FROM {s}.job WHERE id = %s", [job_id])
    return found[0][0] if found else None


def test_retry_action_retries_failed_jobs_through_boss_and_logs_it(admin_client, dead_lettered):
    first, second = dead_lettered["failed"]
    response = post_action(admin_client, "retry_jobs", [first, second, dead_lettered["waiting"]])
    assert messages_of(response) == [
        "Retried 2 of 3 selected jobs; retry applies only to failed jobs, so the others are unchanged."
    ]
    assert state_of(first) == state_of(second) == "retry"
    assert state_of(dead_lettered["waiting"]) == "created"
    entries = LogEntry.objects.filter(action_flag=CHANGE, object_id__in=[key(first), key(second)])
    assert entries.count() == 2
    assert all("retry through django_pgboss" in e.change_message for e in entries)
    history = page_text(admin_client.get(reverse("admin:pgboss_job_history", args=[quote(key(first))])))
    assert "admin retry through django_pgboss (2 of 3 changed)" in history


def test_cancel_then_resume_through_boss(admin_client, dead_lettered):
    waiting = dead_lettered["waiting"]
    assert messages_of(post_action(admin_client, "cancel_jobs", [waiting])) == [
        "Cancelled 1 of 1 selected jobs."
    ]
    assert state_of(waiting) == "cancelled"
    assert messages_of(post_action(admin_client, "resume_jobs", [waiting])) == [
        "Resumed 1 of 1 selected jobs."
    ]
    assert state_of(waiting) == "created"
    assert LogEntry.objects.filter(object_id=key(waiting), action_flag=CHANGE).count() == 2


def test_delete_action_deletes_through_boss_and_logs_a_deletion(admin_client, dead_lettered):
    first = dead_lettered["failed"][0]
    first_key = key(first)
    response = post_action(admin_client, "delete_jobs", [first_key])
    assert messages_of(response) == ["Deleted 1 of 1 selected jobs."]
    assert state_of(first) is None
    assert LogEntry.objects.get(object_id=first_key).action_flag == DELETION


def test_the_job_page_buttons_run_the_action_and_come_back(admin_client, dead_lettered):
    first = dead_lettered["failed"][0]
    page = reverse("admin:pgboss_job_change", args=[quote(key(first))])
    form = {"action": "retry_jobs", "_selected_action": [key(first)], "_return_to_job": key(first)}
    assert f'name="_return_to_job" value="{key(first)}"' in admin_client.get(page).content.decode()
    # The button form carries no "index": the changelist runs the action all the same.
    response = admin_client.post(JOBS, form, follow=True)
    assert response.redirect_chain == [(page, 302)]
    assert messages_of(response) == ["Retried 1 of 1 selected jobs."]
    assert state_of(first) == "retry"
    # A deleted job has no page to come back to: the list it is.
    gone = admin_client.post(JOBS, {**form, "action": "delete_jobs"}, follow=True)
    assert gone.redirect_chain == [(str(JOBS), 302)]
    assert state_of(first) is None


def test_django_add_change_and_delete_views_stay_closed(admin_client, dead_lettered):
    job = dead_lettered["waiting"]
    assert admin_client.get(reverse("admin:pgboss_job_add")).status_code == 403
    assert admin_client.get(reverse("admin:pgboss_job_delete", args=[job])).status_code == 403
    assert (
        admin_client.post(reverse("admin:pgboss_job_change", args=[job]), {"state": "completed"}).status_code
        == 403
    )
    assert "delete_selected" not in admin_client.get(JOBS).content.decode()
    assert state_of(job) == "created"


# -- permissions and CSRF -------------------------------------------------------------------------


def test_staff_without_view_permission_gets_403_on_every_page(staff_client, dead_lettered):
    client = staff_client()
    job = dead_lettered["waiting"]
    for url in (
        reverse("admin:pgboss_queue_changelist"),
        reverse("admin:pgboss_queue_change", args=["orders"]),
        JOBS,
        reverse("admin:pgboss_job_change", args=[job]),
        reverse("admin:pgboss_job_lineage", args=[job]),
        reverse("admin:pgboss_warning_changelist"),
    ):
        assert client.get(url).status_code == 403, url


@pytest.mark.parametrize(
    ("action", "permission"),
    [
        ("retry_jobs", "retry_job"),
        ("cancel_jobs", "cancel_job"),
        ("resume_jobs", "resume_job"),
        ("delete_jobs", "delete_job"),
        ("redrive_jobs", "redrive_job"),
    ],
)
def test_each_action_needs_its_own_permission(staff_client, dead_lettered, action, permission):
    client = staff_client("view_job")
    ids = [*dead_lettered["failed"], dead_lettered["waiting"], *dead_lettered["copies"]]
    before = rows("SELECT id, state FROM {s}.job ORDER BY id")
    assert action not in client.get(JOBS).content.decode()
    assert client.post(JOBS, {"action": action, "_selected_action": ids, "index": 0}).status_code == 403
    assert rows("SELECT id, state FROM {s}.job ORDER BY id") == before
    assert not LogEntry.objects.exists()


def test_staff_with_the_permission_can_run_the_action(staff_client, dead_lettered):
    client = staff_client("view_job", "retry_job")
    first = dead_lettered["failed"][0]
    page = client.get(JOBS).content.decode()
    assert "retry_jobs" in page and "cancel_jobs" not in page
    assert messages_of(post_action(client, "retry_jobs", [first])) == ["Retried 1 of 1 selected jobs."]
    assert state_of(first) == "retry"


def test_actions_need_a_csrf_token(django_user_model, dead_lettered):
    user = django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    first = dead_lettered["failed"][0]
    response = client.post(JOBS, {"action": "retry_jobs", "_selected_action": [first], "index": 0})
    assert response.status_code == 403
    assert state_of(first) == "failed"


def test_the_models_refuse_orm_writes(dead_lettered):
    from django_pgboss.exceptions import ReadOnlyModelError
    from django_pgboss.models import Job

    job = Job.objects.get(id=dead_lettered["waiting"])
    with pytest.raises(ReadOnlyModelError):
        job.save()
    assert state_of(dead_lettered["waiting"]) == "created"
