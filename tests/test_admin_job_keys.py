"""The admin names a job by (queue, id): two queues may each hold a job with one id.

``send(id=...)`` accepts an id another queue already uses (the job table's key is (name, id)), so
every page, link, action and log entry must say which queue's job it means.
"""

from __future__ import annotations

import re
import uuid

import pytest
from django.contrib.admin.models import CHANGE, DELETION, LogEntry
from django.contrib.admin.utils import quote
from django.urls import reverse, reverse_lazy

from django_pgboss import boss
from tests.helpers import rows
from tests.test_admin import messages_of, page_text

pytestmark = pytest.mark.django_db

JOBS = reverse_lazy("admin:pgboss_job_changelist")


@pytest.fixture
def shared() -> str:
    """Queues a and b (retry_limit 0, dead letters into dlq) each hold a job with one id."""
    boss.create_queue("dlq")
    boss.create_queue("a", retry_limit=0, dead_letter="dlq")
    boss.create_queue("b", retry_limit=0, dead_letter="dlq")
    job_id = str(uuid.uuid4())
    assert boss.send("a", {"queue": "a"}, id=job_id) == job_id
    assert boss.send("b", {"queue": "b"}, id=job_id) == job_id
    return job_id


def state(name: str, job_id: str) -> str | None:
    found = rows("SELECT state FROM {s}.job WHERE name = %s AND id = %s", [name, job_id])
    return found[0][0] if found else None


def change_url(name: str, job_id: str) -> str:
    return reverse("admin:pgboss_job_change", args=[quote(f"{name}/{job_id}")])


def act(client, action: str, selected: list[str], **extra):
    return client.post(
        JOBS, {"action": action, "_selected_action": selected, "index": 0, **extra}, follow=True
    )


def test_the_unfiltered_job_list_links_and_selects_each_queues_job(admin_client, shared):
    body = admin_client.get(JOBS).content.decode()
    for name in ("a", "b"):
        assert f'href="{change_url(name, shared)}"' in body
        assert f'name="_selected_action" value="{name}/{shared}"' in body


def test_each_job_page_shows_its_own_queues_job(admin_client, shared):
    for name in ("a", "b"):
        response = admin_client.get(change_url(name, shared))
        assert response.status_code == 200
        assert response.context["original"].name == name
        assert (
            f'<pre class="pgboss-json" tabindex="0">{{\n  &quot;queue&quot;: &quot;{name}&quot;\n}}</pre>'
            in (response.content.decode())
        )
        assert f'name="_selected_action" value="{name}/{shared}"' in response.content.decode()


def test_a_bare_id_two_queues_hold_asks_which_job(admin_client, shared):
    response = admin_client.get(reverse("admin:pgboss_job_change", args=[shared]), follow=True)
    assert response.redirect_chain[-1][0] == f"{JOBS}?q={shared}"
    assert messages_of(response) == [f"Queues 'a', 'b' each hold a job with id {shared}: pick one."]
    assert "2 results" in page_text(response) or "2 jobs" in page_text(response)


def test_cancelling_one_row_of_the_unfiltered_list_cancels_that_job_only(admin_client, shared):
    response = act(admin_client, "cancel_jobs", [f"a/{shared}"])
    assert messages_of(response) == ["Cancelled 1 of 1 selected jobs."]
    assert (state("a", shared), state("b", shared)) == ("cancelled", "created")
    (entry,) = LogEntry.objects.filter(action_flag=CHANGE)
    assert entry.object_id == f"a/{shared}"
    history = admin_client.get(reverse("admin:pgboss_job_history", args=[quote(f"a/{shared}")]))
    assert "cancel through django_pgboss" in page_text(history)


def test_deleting_one_queues_job_leaves_the_other(admin_client, shared):
    response = act(admin_client, "delete_jobs", [f"b/{shared}"])
    assert messages_of(response) == ["Deleted 1 of 1 selected jobs."]
    assert (state("a", shared), state("b", shared)) == ("created", None)
    assert LogEntry.objects.get(action_flag=DELETION).object_id == f"b/{shared}"


def test_a_bare_id_two_queues_hold_is_refused_by_an_action(admin_client, shared):
    response = act(admin_client, "cancel_jobs", [shared])
    assert messages_of(response) == [
        f"Several queues hold a job with id {shared}: select the one you mean from the job list. "
        "Nothing was done."
    ]
    assert (state("a", shared), state("b", shared)) == ("created", "created")


def test_the_job_page_buttons_act_on_that_job_and_come_back_to_it(admin_client, shared):
    page = change_url("b", shared)
    form = {"action": "cancel_jobs", "_selected_action": [f"b/{shared}"], "_return_to_job": f"b/{shared}"}
    response = admin_client.post(JOBS, form, follow=True)
    assert response.redirect_chain == [(page, 302)]
    assert (state("a", shared), state("b", shared)) == ("created", "cancelled")


def test_the_lineage_page_shows_the_chain_of_that_queues_job(admin_client, shared):
    assert boss.fail("a", shared, {"message": "a failed"}) == 1
    assert boss.fail("b", shared, {"message": "b failed"}) == 1
    ((copy_a,),) = rows("SELECT id::text FROM {s}.job WHERE source_name = 'a'")
    ((copy_b,),) = rows("SELECT id::text FROM {s}.job WHERE source_name = 'b'")
    for name, copy, other in (("a", copy_a, copy_b), ("b", copy_b, copy_a)):
        response = admin_client.get(reverse("admin:pgboss_job_lineage", args=[quote(f"{name}/{shared}")]))
        assert response.status_code == 200
        body = response.content.decode()
        # One transaction: job_now() does not move, so the two share created_on; the order is by id.
        assert sorted(re.findall(r'data-job-id="([^"]+)"', body)) == sorted([shared, copy])
        assert other not in body
        assert f'href="{change_url(name, shared)}"' in body and f'href="{change_url("dlq", copy)}"' in body
        assert f"Original in {name} this job" in page_text(response)
    # A bare id two queues hold names no one chain.
    bare = admin_client.get(reverse("admin:pgboss_job_lineage", args=[shared]), follow=True)
    assert messages_of(bare)[0].startswith(
        f"No lineage for {shared}: job id {shared} is held by several queues"
    )


def test_the_redrive_confirmation_carries_each_job_by_queue_and_id(admin_client, shared):
    assert boss.fail("a", shared) == 1
    ((copy,),) = rows("SELECT id::text FROM {s}.job WHERE source_name = 'a'")
    page = act(admin_client, "redrive_jobs", [f"dlq/{copy}"]).content.decode()
    assert f'name="_selected_action" value="dlq/{copy}"' in page
    done = admin_client.post(
        JOBS, {"action": "redrive_jobs", "_selected_action": [f"dlq/{copy}"], "post": "yes"}, follow=True
    )
    assert messages_of(done)[0].startswith("Redrive of 1 selected job(s): 1 moved, 0 conflicted. New jobs: ")
    ((new_id,),) = rows("SELECT id::text FROM {s}.job WHERE name = 'a' AND source_root_id IS NOT NULL")
    # The log entry names the job the redrive made in "a", which exists; the copy is gone.
    assert LogEntry.objects.get(action_flag=CHANGE).object_id == f"a/{new_id}"
