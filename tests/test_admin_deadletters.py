"""Redrive through the admin (preview, confirm, conflicts, unroutable jobs) and the lineage view."""

from __future__ import annotations

import re

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.admin.utils import quote
from django.urls import reverse

from django_pgboss import boss
from tests.helpers import job_row, rows
from tests.test_admin import JOBS, messages_of, page_text, state_of

pytestmark = pytest.mark.django_db


def dead_letter(name: str, data: dict, **options) -> str:
    """Send a job to ``name``, fetch it and fail it for good; return its dead-letter copy's id."""
    job_id = boss.send(name, data, **options)
    (job,) = boss.fetch(name)
    assert job.id == job_id
    boss.fail(name, job, {"message": f"failed {data}"})
    return str(rows("SELECT id FROM {s}.job WHERE source_id = %s", [job_id])[0][0])


@pytest.fixture
def queues():
    boss.create_queue("dlq")
    boss.create_queue("orders", dead_letter="dlq", retry_limit=0)
    boss.create_queue("invoices", dead_letter="dlq", retry_limit=0, policy="short")


def redrive(client, ids: list[str], **extra):
    return client.post(JOBS, {"action": "redrive_jobs", "_selected_action": ids, **extra}, follow=True)


def test_redrive_shows_a_preview_then_moves_the_jobs(admin_client, queues):
    copies = [
        dead_letter("orders", {"n": 1}),
        dead_letter("orders", {"n": 2}),
        dead_letter("invoices", {"n": 3}),
    ]
    preview = redrive(admin_client, copies, index=0)
    assert preview.status_code == 200
    text = page_text(preview)
    assert "From dead-letter queue dlq" in text
    assert "3 selected; 3 can be redriven now." in text
    assert "Destination queue Jobs orders 2 invoices 1" in text
    assert "Yes, redrive 3 jobs" in text
    # The preview changed nothing.
    assert [state_of(c) for c in copies] == ["created"] * 3
    done = redrive(admin_client, copies, post="yes")
    (message,) = messages_of(done)
    assert message.startswith("Redrive of 3 selected job(s): 3 moved, 0 conflicted. New jobs: ")
    assert [state_of(c) for c in copies] == [None] * 3
    assert rows("SELECT name, count(*) FROM {s}.job WHERE state = 'created' GROUP BY name ORDER BY name") == [
        ("invoices", 1),
        ("orders", 2),
    ]
    new_jobs = rows(
        "SELECT name, id::text FROM {s}.job WHERE source_id IS NULL AND source_root_id IS NOT NULL"
    )
    # The message links to each new job's page, and each link opens it.
    links = re.findall(r'<a href="([^"]+)">([^<]+)</a>', message)
    assert sorted(text for _, text in links) == sorted(f"{name}/{job_id}" for name, job_id in new_jobs)
    for url, _ in links:
        assert admin_client.get(url).status_code == 200
    # "Recent actions" names the new jobs, which exist, not the dead-letter copies the redrive removed.
    entries = LogEntry.objects.filter(action_flag=CHANGE)
    assert sorted(e.object_id for e in entries) == sorted(f"{name}/{job_id}" for name, job_id in new_jobs)
    assert all(
        re.search(r"redrive from dlq to (orders|invoices): moved, now job ", e.change_message)
        for e in entries
    )
    index = admin_client.get(reverse("admin:index")).content.decode()
    for entry in entries:
        url = entry.get_admin_url()
        assert url and f'href="{url}"' in index
        assert admin_client.get(url).status_code == 200


def test_the_preview_lists_each_job_with_its_failure_and_a_link(admin_client, queues):
    copies = [dead_letter("orders", {"n": 1}), dead_letter("invoices", {"n": 2})]
    preview = redrive(admin_client, copies, index=0)
    text = page_text(preview)
    assert "The selected jobs in dlq Job Came from State Failure message" in text
    assert f"{copies[0]} orders created failed {{'n': 1}}" in text
    assert f"{copies[1]} invoices created failed {{'n': 2}}" in text
    page = preview.content.decode()
    for copy in copies:
        url = reverse("admin:pgboss_job_change", args=[quote(f"dlq/{copy}")])
        assert f'href="{url}"' in page
        assert admin_client.get(url).status_code == 200


def test_redrive_to_another_destination_previews_and_moves_there(admin_client, queues):
    boss.create_queue("orders-v2")
    copy = dead_letter("orders", {"n": 1})
    text = page_text(redrive(admin_client, [copy], destination="orders-v2"))
    assert "Destination queue Jobs orders-v2 1" in text
    (message,) = messages_of(redrive(admin_client, [copy], destination="orders-v2", post="yes"))
    ((new_id,),) = rows("SELECT id::text FROM {s}.job WHERE source_root_id IS NOT NULL AND source_id IS NULL")
    assert message.startswith("Redrive of 1 selected job(s): 1 moved, 0 conflicted. New jobs: ")
    assert f">orders-v2/{new_id}</a>" in message
    assert LogEntry.objects.get(action_flag=CHANGE).object_id == f"orders-v2/{new_id}"


def test_a_conflicting_job_is_failed_in_place_and_reported(admin_client, queues):
    copy = dead_letter("invoices", {"n": 1}, singleton_key="acct-7")
    other = dead_letter("invoices", {"n": 2}, singleton_key="acct-8")
    # A new invoice with the same key waits in the short queue: the redriven copy collides with it.
    boss.send("invoices", {"n": 3}, singleton_key="acct-7")
    done = redrive(admin_client, [copy, other], post="yes")
    (message,) = messages_of(done)
    assert message.startswith(
        "Redrive of 2 selected job(s): 1 moved, 1 conflicted (failed in place in the dead-letter queue; "
        "their output names the conflict). New jobs: "
    )
    state, output = job_row(copy, "state", "output")
    assert state == "failed"
    assert output["reason"] == "redrive_conflict" and output["destination"] == "invoices"
    assert state_of(other) is None
    # The conflict shows on the copy's page, pretty-printed.
    page = admin_client.get(reverse("admin:pgboss_job_change", args=[copy])).content.decode()
    assert "&quot;reason&quot;: &quot;redrive_conflict&quot;" in page
    log = LogEntry.objects.get(object_id=f"dlq/{copy}")
    assert log.change_message == "redrive from dlq to invoices: conflict: failed in place"


def test_unroutable_jobs_are_previewed_and_stay(admin_client, queues):
    boss.create_queue("legacy", dead_letter="dlq", retry_limit=0)
    stranded = dead_letter("legacy", {"n": 1})
    movable = dead_letter("orders", {"n": 2})
    boss.delete_queue("legacy")
    text = page_text(redrive(admin_client, [stranded, movable]))
    assert (
        "2 selected; 2 can be redriven now, of which 1 unroutable (no destination queue: they will stay)."
        in text
    )
    assert "Destination queue Jobs orders 1" in text and "Yes, redrive 1 job" in text
    done = redrive(admin_client, [stranded, movable], post="yes")
    (message,) = messages_of(done)
    assert message.startswith(
        "Redrive of 2 selected job(s): 1 moved, 0 conflicted, 1 not taken (not waiting, or no destination "
        "queue). New jobs: "
    )
    assert state_of(stranded) == "created" and state_of(movable) is None


def test_only_dead_letter_copies_can_be_redriven(admin_client, queues):
    copy = dead_letter("orders", {"n": 2})
    plain = boss.send("orders", {"n": 1})
    response = redrive(admin_client, [plain, copy])
    (message,) = messages_of(response)
    assert message == (
        f"1 selected job(s) are not dead-letter copies (they came from no other queue): {plain}. "
        "Nothing was redriven."
    )
    assert state_of(plain) == "created" and state_of(copy) == "created"


def test_a_destination_that_does_not_exist_changes_nothing(admin_client, queues):
    copy = dead_letter("orders", {"n": 1})
    for extra in ({}, {"post": "yes"}):
        response = redrive(admin_client, [copy], destination="nowhere", **extra)
        assert messages_of(response) == [
            "Cannot redrive from 'dlq': destination queue 'nowhere' does not exist. Nothing was redriven"
            + (" from it." if extra else ".")
        ]
    assert state_of(copy) == "created"
    assert not LogEntry.objects.exists()


def test_redrive_needs_its_permission(staff_client, queues):
    copy = dead_letter("orders", {"n": 1})
    client = staff_client("view_job", "retry_job")
    assert redrive(client, [copy], post="yes").status_code == 403
    assert state_of(copy) == "created"


# -- lineage --------------------------------------------------------------------------------------


@pytest.fixture
def two_round_trips(queues):
    """A job that failed, was redriven, failed again, and was redriven again."""
    root = boss.send("orders", {"order": 42})
    chain = [root]
    for trip in (1, 2):
        (job,) = boss.fetch("orders")
        boss.fail("orders", job, {"message": f"trip {trip} failed"})
        copy = str(rows("SELECT id FROM {s}.job WHERE source_id = %s", [job.id])[0][0])
        result = boss.redrive("dlq", ids=[copy])
        ((_, new),) = result.moved_ids
        chain += [copy, new]
    stagger(chain)
    return chain


def stagger(ids: list[str]) -> None:
    """Space created_on out in chain order: a test is one transaction, where job_now() stands still."""
    for offset, job_id in enumerate(ids):
        rows(
            "UPDATE {s}.job SET created_on = now() + %s * interval '1 second' WHERE id = %s",
            [offset, job_id],
        )


def test_lineage_shows_every_hop_across_two_round_trips(admin_client, two_round_trips):
    root, copy1, redriven1, copy2, redriven2 = two_round_trips
    response = admin_client.get(reverse("admin:pgboss_job_lineage", args=[redriven2]))
    assert response.status_code == 200
    body = response.content.decode()
    hops = re.findall(r'<li class="pgboss-hop[^"]*" data-job-id="([^"]+)">', body)
    # The dead-letter copies were moved out by the redrives: what is left is each job that ran.
    assert hops == [root, redriven1, redriven2]
    assert copy1 not in body and copy2 not in body
    text = page_text(response)
    assert "1. Original in orders" in text
    assert "2. Redriven in orders" in text
    assert "3. Redriven in orders this job" in text
    assert re.search(r"State failed Retry count 0 .*trip 1 failed", text)
    assert re.search(r"3\. Redriven in orders this job Job \S+ State created Retry count 0", text)
    for job_id in (root, redriven1, redriven2):
        assert reverse("admin:pgboss_job_change", args=[quote(f"orders/{job_id}")]) in body
    assert reverse("admin:pgboss_queue_change", args=["orders"]) in body


def test_lineage_includes_dead_letter_copies_still_waiting(admin_client, two_round_trips):
    root, *_, redriven2 = two_round_trips
    (job,) = boss.fetch("orders")
    boss.fail("orders", job, {"message": "trip 3 failed"})
    copy3 = str(rows("SELECT id FROM {s}.job WHERE source_id = %s", [redriven2])[0][0])
    stagger([*two_round_trips, copy3])
    for start in (root, copy3):
        body = admin_client.get(reverse("admin:pgboss_job_lineage", args=[start])).content.decode()
        hops = re.findall(r'data-job-id="([^"]+)"', body)
        assert hops[-1] == copy3 and hops[0] == root and len(hops) == 4
    text = page_text(admin_client.get(reverse("admin:pgboss_job_lineage", args=[copy3])))
    assert f"4. Dead-letter copy in dlq this job Job {copy3} State created" in text
    assert f"Copied from orders / {redriven2} after 0 retries" in text
    assert 'Source output { "message": "trip 3 failed" }' in text


def test_every_job_page_links_to_its_lineage(admin_client, two_round_trips):
    root = two_round_trips[0]
    page = admin_client.get(reverse("admin:pgboss_job_change", args=[root])).content.decode()
    lineage = reverse("admin:pgboss_job_lineage", args=[quote(f"orders/{root}")])
    assert f'href="{lineage}" id="pgboss-lineage-link"' in page


@pytest.mark.parametrize("bad", ["not-a-uuid", "123", "0000"])
def test_a_malformed_lineage_id_gives_a_message_not_an_error(admin_client, bad):
    response = admin_client.get(reverse("admin:pgboss_job_lineage", args=[bad]), follow=True)
    assert response.status_code == 200
    assert messages_of(response) == [
        f"'{bad}' is not a job id: a job is named <queue>/<job id>, the id a UUID."
    ]


def test_an_unknown_lineage_id_says_so(admin_client):
    missing = "00000000-0000-4000-8000-000000000000"
    response = admin_client.get(reverse("admin:pgboss_job_lineage", args=[missing]), follow=True)
    assert messages_of(response) == [f"No job with id {missing} (retention may have deleted it)."]


def test_a_failed_roots_lineage_page_shows_the_job_its_redriven_copy_became(admin_client):
    """Queues a and b each hold a job with one id; a's failed for good, and its copy was redriven
    into b (and is gone): a's chain page shows the redriven job, b's does not."""
    boss.create_queue("dlq")
    boss.create_queue("a", retry_limit=0, dead_letter="dlq")
    boss.create_queue("b", retry_limit=0, dead_letter="dlq")
    shared = boss.send("a", {"q": "a"})
    assert boss.send("b", {"q": "b"}, id=shared) == shared
    copy = dead_letter_of("a", shared)
    ((_, redriven),) = boss.redrive("dlq", ids=[copy], destination="b").moved_ids
    stagger([shared, redriven])
    page = admin_client.get(reverse("admin:pgboss_job_lineage", args=[quote(f"a/{shared}")]))
    assert page.status_code == 200
    assert re.findall(r'data-job-id="([^"]+)"', page.content.decode()) == [shared, redriven]
    text = page_text(page)
    assert "1. Original in a this job" in text and "2. Redriven in b" in text
    assert reverse("admin:pgboss_job_change", args=[quote(f"b/{redriven}")]) in page.content.decode()
    other = admin_client.get(reverse("admin:pgboss_job_lineage", args=[quote(f"b/{shared}")]))
    assert re.findall(r'data-job-id="([^"]+)"', other.content.decode()) == [shared]


def dead_letter_of(name: str, job_id: str) -> str:
    """Fail job (name, job_id) for good; return its dead-letter copy's id."""
    assert boss.fail(name, job_id, {"message": "failed"}) == 1
    return str(rows("SELECT id FROM {s}.job WHERE source_id = %s AND source_name = %s", [job_id, name])[0][0])
