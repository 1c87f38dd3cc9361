"""The queue page's purge actions (confirmation with counts, a permission each, a LogEntry) and the
blocked keys of a key_strict_fifo queue."""

from __future__ import annotations

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.admin.utils import quote
from django.urls import reverse

from django_pgboss import boss
from tests.helpers import rows
from tests.test_admin import messages_of, page_text

pytestmark = pytest.mark.django_db

QUEUE = "reports/daily"  # a "/" in the name: the URLs must still find the queue


def purge_url(which: str, name: str = QUEUE) -> str:
    return reverse("admin:pgboss_queue_purge", args=[quote(name), which])


def queue_url(name: str = QUEUE) -> str:
    return reverse("admin:pgboss_queue_change", args=[quote(name)])


@pytest.fixture
def filled():
    """A queue with 3 queued, 1 active, 2 completed and 1 failed job, and a neighbour with 2."""
    boss.create_queue(QUEUE, retry_limit=0)
    boss.create_queue("neighbour")
    boss.insert(QUEUE, [{"data": {"n": n}} for n in range(7)])
    boss.insert("neighbour", [{"data": {"n": n}} for n in range(2)])
    active = boss.fetch(QUEUE, batch_size=4)
    boss.complete(QUEUE, active[:2])
    boss.fail(QUEUE, active[2])
    return QUEUE


def states(name: str) -> dict[str, int]:
    return dict(rows("SELECT state::text, count(*) FROM {s}.job WHERE name = %s GROUP BY 1", [name]))


@pytest.mark.parametrize(
    ("which", "permission", "deleted", "left"),
    [
        ("queued", "purge_queued_jobs", 3, {"active": 1, "completed": 2, "failed": 1}),
        ("stored", "purge_stored_jobs", 3, {"created": 3, "active": 1}),
        ("all", "purge_all_jobs", 7, {}),
    ],
)
def test_a_purge_shows_the_counts_then_deletes_and_logs(
    staff_client, filled, which, permission, deleted, left
):
    client = staff_client("view_queue", permission)
    page = client.get(purge_url(which))
    assert page.status_code == 200
    text = page_text(page)
    assert "queued (created or retry) 3" in text
    assert "active 1" in text
    assert "finished (completed, cancelled or failed) 3" in text
    assert "all 7" in text
    assert f"Yes, delete {deleted} jobs" in text
    # The page alone deletes nothing.
    assert sum(states(filled).values()) == 7
    done = client.post(purge_url(which), {"post": "yes"}, follow=True)
    assert done.redirect_chain[-1][0] == queue_url()
    assert messages_of(done) == [f"Deleted {deleted} jobs from {QUEUE!r}."]
    assert states(filled) == left
    assert states("neighbour") == {"created": 2}
    (entry,) = LogEntry.objects.filter(object_id=QUEUE)
    assert (entry.action_flag, entry.change_message) == (
        CHANGE,
        f"{page.context['purge'].label}: {deleted} deleted",
    )


@pytest.mark.parametrize("which", ["queued", "stored", "all"])
def test_each_purge_needs_its_own_permission(staff_client, filled, which):
    others = {"queued": "purge_stored_jobs", "stored": "purge_all_jobs", "all": "purge_queued_jobs"}
    client = staff_client("view_queue", others[which])
    assert client.get(purge_url(which)).status_code == 403
    assert client.post(purge_url(which), {"post": "yes"}).status_code == 403
    assert sum(states(filled).values()) == 7
    assert not LogEntry.objects.exists()


def test_the_queue_page_links_only_the_purges_the_user_may_run(staff_client, filled):
    client = staff_client("view_queue", "purge_stored_jobs")
    page = client.get(queue_url())
    assert page.status_code == 200
    assert [link["url"] for link in page.context["purge_links"]] == [purge_url("stored")]
    assert "Delete finished jobs" in page_text(page)
    assert "Delete queued jobs" not in page_text(page)


def test_a_purge_of_an_unknown_queue_or_kind_is_a_404(staff_client, filled):
    client = staff_client("view_queue", "purge_all_jobs")
    assert client.get(purge_url("all", "nope")).status_code == 404
    assert client.get(purge_url("everything")).status_code == 404


def test_a_purge_is_not_run_by_a_get_or_without_confirming(staff_client, filled):
    client = staff_client("view_queue", "purge_all_jobs")
    client.get(purge_url("all") + "?post=yes")
    client.post(purge_url("all"), {})
    assert sum(states(filled).values()) == 7


def test_a_key_strict_fifo_queue_page_lists_its_blocked_keys(staff_client):
    boss.create_queue("fifo", policy="key_strict_fifo", retry_limit=0)
    for key in ("b", "a", "ok"):
        boss.send("fifo", {"key": key}, singleton_key=key)
        boss.send("fifo", {"key": key, "n": 2}, singleton_key=key)
    heads = {job.data["key"]: job for job in boss.fetch("fifo", batch_size=10)}
    boss.fail("fifo", [heads["a"], heads["b"]])
    client = staff_client("view_queue")
    page = client.get(queue_url("fifo"))
    blocked = page.context["blocked_keys"]
    assert [(b["key"], b["job_id"]) for b in blocked] == [("a", heads["a"].id), ("b", heads["b"].id)]
    assert blocked[0]["url"] == reverse("admin:pgboss_job_change", args=[quote(heads["a"].id)])
    assert f"Key Failed job a {heads['a'].id} b {heads['b'].id}" in page_text(page)
    assert f'href="{blocked[0]["url"]}"' in page.content.decode()
    boss.retry("fifo", [heads["a"].id, heads["b"].id])
    assert "No key is blocked." in page_text(client.get(queue_url("fifo")))
    # A queue of another policy has no such section.
    boss.create_queue("plain")
    assert "Blocked keys" not in page_text(client.get(queue_url("plain")))
