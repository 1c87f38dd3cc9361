"""Crafted requests get a 404, a form error or an admin message from the admin, never a server error.

Also: pages of objects whose id the admin quotes in URLs (a queue named "emails_dlq" or "a/b")
find their object, as Django's own change view does by unquoting the id.
"""

from __future__ import annotations

import json

import pytest
from django.contrib.admin.utils import quote
from django.urls import reverse, reverse_lazy

from django_pgboss import boss
from tests.helpers import rows
from tests.test_admin import messages_of, page_text

pytestmark = pytest.mark.django_db

JOBS = reverse_lazy("admin:pgboss_job_changelist")
QUEUES = reverse_lazy("admin:pgboss_queue_changelist")
ADD_SCHEDULE = reverse_lazy("admin:pgboss_schedule_add")


@pytest.fixture
def job() -> str:
    boss.create_queue("orders")
    return boss.send("orders", {"n": 1})


def dropped(response) -> list[str]:
    """The messages of a page reached by following redirects, which must end in a 200."""
    assert response.status_code == 200
    return messages_of(response)


# -- the job list's query string ----------------------------------------------------------------


@pytest.mark.parametrize("param", ["state", "state__exact", "state__in"])
def test_a_state_that_is_not_one_is_dropped_with_a_message(admin_client, job, param):
    value = "created,bogus" if param == "state__in" else "bogus"
    response = admin_client.get(JOBS, {param: value, "name": "orders"}, follow=True)
    (message,) = dropped(response)
    assert message.startswith(f"The filter {param}={value!r} was dropped: 'bogus' is not a job state")
    # The rest of the query string is kept.
    assert response.redirect_chain == [(f"{JOBS}?name=orders", 302)]
    assert job in page_text(response)


@pytest.mark.parametrize("url", [JOBS, QUEUES])
@pytest.mark.parametrize("param", ["name", "q", "singleton_key"])
def test_a_nul_in_a_filter_is_dropped_with_a_message(admin_client, job, url, param):
    if url == QUEUES and param == "singleton_key":
        param = "policy"
    response = admin_client.get(url, {param: "a\x00b"}, follow=True)
    assert dropped(response) == [
        f"The filter {param!r} was dropped: it holds a NUL character, which no queue name, key or job "
        "column can hold."
    ]


@pytest.mark.parametrize("param", ["id", "source_id", "source_root_id__in"])
def test_a_malformed_id_in_a_filter_is_dropped_with_a_message(admin_client, job, param):
    response = admin_client.get(JOBS, {param: "not-a-uuid"}, follow=True)
    assert dropped(response) == [f"The filter {param}='not-a-uuid' was dropped: a job id is a UUID."]


# -- object ids in URLs ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "/admin/pgboss/queue/%00/change/",
        "/admin/pgboss/job/%00/change/",
        "/admin/pgboss/job/orders_2F%00/change/",
        "/admin/pgboss/job/not-a-uuid/change/",
    ],
)
def test_a_crafted_object_id_is_an_object_that_does_not_exist(admin_client, job, url):
    (message,) = dropped(admin_client.get(url, follow=True))
    assert "doesn\N{RIGHT SINGLE QUOTATION MARK}t exist" in message


@pytest.mark.parametrize("object_id", ["%00", "orders_2F%00", "orders_2Fnot-a-uuid"])
def test_a_crafted_lineage_id_gives_a_message(admin_client, job, object_id):
    (message,) = dropped(admin_client.get(f"/admin/pgboss/job/{object_id}/lineage/", follow=True))
    assert "is not a job id" in message


@pytest.mark.parametrize("selected", ["not-a-uuid", "orders/not-a-uuid", "orders/\x00"])
def test_a_selected_value_that_is_no_job_gives_a_message(admin_client, job, selected):
    response = admin_client.post(
        JOBS, {"action": "cancel_jobs", "_selected_action": [selected], "index": 0}, follow=True
    )
    (message,) = dropped(response)
    assert "names no job" in message and message.endswith("Nothing was done.")
    assert rows("SELECT state FROM {s}.job WHERE id = %s", [job]) == [("created",)]


# -- the schedule form ----------------------------------------------------------------------------


def schedule_form(**changes):
    return {
        "name": "orders",
        "key": "",
        "cron": "5 * * * *",
        "tz": "UTC",
        "data": "",
        "missed": "skip",
        **changes,
    }


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"key": "a\x00b"}, "key"),
        ({"cron": "5 * * * *\x00"}, "cron"),
        ({"tz": "UTC\x00"}, "tz"),
        ({"name": "orders\x00"}, "name"),
        ({"data": json.dumps({"t": "a\x00b"})}, "data"),
        ({"data": "[" * 10_000 + "]" * 10_000}, "data"),
        ({"key": "k" * 4_000}, "key"),
    ],
    ids=["nul-key", "nul-cron", "nul-tz", "nul-queue", "nul-in-json", "deep-json", "long-key"],
)
def test_schedule_form_data_the_database_cannot_hold_is_a_form_error(admin_client, job, changes, field):
    response = admin_client.post(ADD_SCHEDULE, schedule_form(**changes))
    assert response.status_code == 200
    form = response.context["form"]
    assert form.errors.get(field), form.errors
    assert boss.get_schedules() == []


# -- a queue whose name the API refuses ------------------------------------------------------------


@pytest.fixture
def refused_queue(job) -> str:
    """A queue created through the schema's own SQL, as pg-boss Node may, with a name the API refuses."""
    rows("SELECT {s}.create_queue('bad name!', %s)", ['{"policy": "standard"}'])
    rows("INSERT INTO {s}.job (name, data) VALUES ('bad name!', '{}')")
    return "bad name!"


def test_a_queue_the_api_would_refuse_does_not_break_the_queue_list(admin_client, refused_queue):
    response = admin_client.get(QUEUES)
    assert response.status_code == 200
    text = page_text(response)
    assert "bad name!" in text and "orders" in text


def test_the_page_of_a_queue_the_api_would_refuse_says_why_it_has_no_charts(admin_client, refused_queue):
    response = admin_client.get(reverse("admin:pgboss_queue_change", args=[quote(refused_queue)]))
    assert response.status_code == 200
    (message,) = messages_of(response)
    assert message.startswith("No throughput charts for this queue:")
    jobs = admin_client.get(JOBS, {"name": refused_queue})
    assert jobs.status_code == 200 and "1 job" in page_text(jobs)


def test_an_action_on_a_job_of_a_queue_the_api_would_refuse_gives_a_message(admin_client, refused_queue):
    ((job_id,),) = rows("SELECT id::text FROM {s}.job WHERE name = 'bad name!'")
    response = admin_client.post(
        JOBS, {"action": "cancel_jobs", "_selected_action": [f"bad name!/{job_id}"], "index": 0}, follow=True
    )
    assert response.status_code == 200
    assert any(m.startswith("Could not cancel the jobs of queue 'bad name!'") for m in messages_of(response))


# -- ids the admin quotes in URLs (issue 19) -------------------------------------------------------


@pytest.mark.parametrize("name", ["emails_dlq", "a/b", "a_b/c.d"])
def test_a_queue_whose_name_the_admin_quotes_shows_its_charts(admin_client, name):
    boss.create_queue(name)
    job_id = boss.send(name, {"n": 1})
    response = admin_client.get(reverse("admin:pgboss_queue_change", args=[quote(name)]))
    assert response.status_code == 200
    assert "throughput_chart" in response.context and "<svg" in response.context["throughput_chart"]
    job_page = admin_client.get(reverse("admin:pgboss_job_change", args=[quote(f"{name}/{job_id}")]))
    assert job_page.status_code == 200 and job_page.context["original"].name == name
    lineage = admin_client.get(reverse("admin:pgboss_job_lineage", args=[quote(f"{name}/{job_id}")]))
    assert lineage.status_code == 200 and job_id in page_text(lineage)
