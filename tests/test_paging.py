"""Paging of the list reads (pg-boss 12.38): ``limit`` and ``after`` on get_queues(),
get_blocked_keys(), get_dependencies(), get_dependents(), get_schedules() and find_jobs(), and
``limit`` on preview_redrive(). ``limit=None`` is 1,000 rows, the cap 100,000; ``after`` is what
the previous page ended with; a short page is the last; bad values are refused before any SQL."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from django_pgboss import DependencyRef, InvalidOption, boss
from django_pgboss.exceptions import InvalidQueueName
from tests.helpers import rows

pytestmark = pytest.mark.django_db


def every_page(read: Callable[..., list[Any]], limit: int, cursor: Callable[[Any], Any]) -> list[list[Any]]:
    """Read page after page with ``limit``, each after the last item of the one before (as
    ``cursor`` of it), until a short page; the pages."""
    pages = [read(limit=limit)]
    while len(pages[-1]) == limit:
        pages.append(read(limit=limit, after=cursor(pages[-1][-1])))
    return pages


def test_get_queues_pages_by_name():
    names = sorted(f"q{n:02}" for n in range(7))
    for name in reversed(names):
        boss.create_queue(name)
    pages = every_page(boss.get_queues, 3, lambda queue: queue.name)
    assert [[q.name for q in page] for page in pages] == [names[0:3], names[3:6], names[6:7]]
    # With names, the page applies to those named.
    assert [q.name for q in boss.get_queues(names[::2], limit=2, after=names[0])] == [names[2], names[4]]


def test_get_queues_reads_1000_without_a_limit_and_up_to_100_000_with_one():
    # One statement of 1,001 queues through the schema's own create_queue(), cheaper than 1,001 calls.
    rows(
        "SELECT {s}.create_queue('bulk' || lpad(n::text, 4, '0'), '{\"policy\": \"standard\"}'::jsonb) "
        "FROM generate_series(1, 1001) n"
    )
    assert len(boss.get_queues()) == 1000
    assert len(boss.get_queues(limit=100_000)) == 1001
    assert [q.name for q in boss.get_queues(after="bulk1000")] == ["bulk1001"]


def test_get_blocked_keys_pages_by_key():
    boss.create_queue("fifo", policy="key_strict_fifo", retry_limit=0)
    keys = [f"k{n}" for n in range(5)]
    for key in keys:
        boss.send("fifo", singleton_key=key)
    for job in boss.fetch("fifo", batch_size=10):
        boss.fail("fifo", job)
    pages = every_page(lambda **page: boss.get_blocked_keys("fifo", **page), 2, lambda key: key)
    assert pages == [keys[0:2], keys[2:4], keys[4:5]]


def test_get_dependencies_and_dependents_page_by_the_last_ref():
    for name in ("a", "b"):
        boss.create_queue(name)
    parents = [{"ref": f"p{n}", "name": "ab"[n % 2]} for n in range(5)]
    ids = boss.flow([*parents, {"ref": "child", "name": "a", "depends_on": [p["ref"] for p in parents]}])
    expected = sorted(
        (DependencyRef("ab"[n % 2], ids[f"p{n}"]) for n in range(5)), key=lambda ref: (ref.name, ref.id)
    )
    pages = every_page(lambda **page: boss.get_dependencies("a", ids["child"], **page), 2, lambda ref: ref)
    assert [len(page) for page in pages] == [2, 2, 1]
    assert [ref for page in pages for ref in page] == expected
    first = expected[0]
    assert boss.get_dependents(first.name, first.id, limit=1) == [DependencyRef("a", ids["child"])]
    assert boss.get_dependents(first.name, first.id, after=DependencyRef("a", ids["child"])) == []


def test_get_schedules_pages_by_the_last_schedule():
    for name in ("a", "b"):
        boss.create_queue(name)
    for name, key in [("a", ""), ("a", "x"), ("a", "y"), ("b", ""), ("b", "x")]:
        boss.schedule(name, "* * * * *", key=key)
    pages = every_page(boss.get_schedules, 2, lambda schedule: schedule)
    assert [[(s.name, s.key) for s in page] for page in pages] == [
        [("a", ""), ("a", "x")],
        [("a", "y"), ("b", "")],
        [("b", "x")],
    ]
    # One queue's schedules page the same way; a name with a key reads that one schedule.
    (first,) = boss.get_schedules("a", limit=1)
    assert [s.key for s in boss.get_schedules("a", after=first)] == ["x", "y"]
    assert [s.key for s in boss.get_schedules("a", "y", limit=1, after=first)] == ["y"]


def test_find_jobs_pages_oldest_first_after_a_job_or_its_id(queue):
    ids = boss.insert(queue, [{"data": {"n": n}} for n in range(5)], return_ids=True)
    pages = every_page(lambda **page: boss.find_jobs(queue, **page), 2, lambda job: job)
    assert [[job.id for job in page] for page in pages] == [ids[0:2], ids[2:4], ids[4:5]]
    assert [job.id for job in boss.find_jobs(queue, after=ids[3])] == [ids[4]]
    assert [job.id for job in boss.find_jobs(queue, after=uuid.UUID(ids[0]), limit=1)] == [ids[1]]
    # Filters apply within the page.
    assert [job.data for job in boss.find_jobs(queue, data={"n": 4}, after=ids[1])] == [{"n": 4}]


def test_find_jobs_after_a_job_deleted_since_is_refused(queue):
    ids = boss.insert(queue, [{"data": {"n": n}} for n in range(3)], return_ids=True)
    boss.delete_job(queue, ids[1])
    with pytest.raises(InvalidOption, match=f"after names job {ids[1]}"):
        boss.find_jobs(queue, after=ids[1])


def test_preview_redrive_reads_at_most_limit_jobs_of_each_kind():
    boss.create_queue("dlq")
    boss.create_queue("a", retry_limit=0, dead_letter="dlq")
    for n in range(4):
        boss.fail("a", boss.send("a", {"n": n}), {"error": "boom"})
    for n in range(3):
        boss.send("dlq", {"direct": n})  # no source: unroutable
    full = boss.preview_redrive("dlq")
    assert (full.total, full.unroutable, [(d.name, d.count) for d in full.destinations]) == (7, 3, [("a", 4)])
    capped = boss.preview_redrive("dlq", limit=2)
    assert (capped.total, capped.unroutable, [(d.name, d.count) for d in capped.destinations]) == (
        4,
        2,
        [("a", 2)],
    )


BAD_LIMITS = [0, -1, 100_001, True, 2.0, "10"]
BAD_AFTER_TEXT = ["", "a\x00b", 7, b"q"]
BAD_AFTER_ID = ["not-a-uuid", "", 7, "0000"]
BAD_AFTER_REF = [
    "a",
    ("a", str(uuid.uuid4())),
    DependencyRef("a", "not-a-uuid"),
    DependencyRef("a\x00", str(uuid.uuid4())),
]


def refused_before_sql(call: Callable[[], Any], match: str) -> None:
    with CaptureQueriesContext(connection) as queries, pytest.raises(InvalidOption, match=match):
        call()
    assert queries.captured_queries == []


@pytest.mark.parametrize("limit", BAD_LIMITS)
def test_a_bad_limit_is_refused_before_any_sql(limit):
    job_id = str(uuid.uuid4())
    for method, call in [
        ("get_queues", lambda: boss.get_queues(limit=limit)),
        ("get_blocked_keys", lambda: boss.get_blocked_keys("q", limit=limit)),
        ("get_dependencies", lambda: boss.get_dependencies("q", job_id, limit=limit)),
        ("get_dependents", lambda: boss.get_dependents("q", job_id, limit=limit)),
        ("get_schedules", lambda: boss.get_schedules(limit=limit)),
        ("find_jobs", lambda: boss.find_jobs("q", limit=limit)),
        ("preview_redrive", lambda: boss.preview_redrive("q", limit=limit)),
    ]:
        refused_before_sql(call, rf"^{method}\(\): limit must be")


@pytest.mark.parametrize("after", BAD_AFTER_TEXT)
def test_a_bad_name_or_key_cursor_is_refused_before_any_sql(after):
    refused_before_sql(lambda: boss.get_queues(after=after), r"^get_queues\(\): after")
    refused_before_sql(lambda: boss.get_blocked_keys("q", after=after), r"^get_blocked_keys\(\): after")


@pytest.mark.parametrize("after", BAD_AFTER_ID)
def test_a_bad_job_cursor_is_refused_before_any_sql(after):
    refused_before_sql(lambda: boss.find_jobs("q", after=after), r"^find_jobs\(\): after must be a uuid")


@pytest.mark.parametrize("after", BAD_AFTER_REF)
def test_a_bad_record_cursor_is_refused_before_any_sql(after):
    job_id = str(uuid.uuid4())
    refused_before_sql(
        lambda: boss.get_dependencies("q", job_id, after=after), r"^get_dependencies\(\): after"
    )
    refused_before_sql(lambda: boss.get_dependents("q", job_id, after=after), r"^get_dependents\(\): after")
    if not isinstance(after, DependencyRef):
        refused_before_sql(lambda: boss.get_schedules(after=after), r"^get_schedules\(\): after")


def test_the_queue_name_is_checked_before_the_page():
    with pytest.raises(InvalidQueueName):
        boss.find_jobs("bad name!", limit=0)
