"""A queue the table's statistics do not know yet (created or filled since the last ANALYZE) is
claimed and settled through the primary key's (name, id) probes (the claim's update: through
the tuple ids its candidates' scan locked), not by reading the whole queue.

For a name missing from the statistics PostgreSQL expects about one row, and with the name
compared as a plain parameter it then preferred one index descent by the name alone, filtering
the ids: every claim and settle of such a queue read all of its jobs (plans.fragments.queue_jobs
says why the name is compared as an InitPlan's output instead). Each statement here runs under
EXPLAIN ANALYZE, in a savepoint that is rolled back, and the test reads how many rows its scan of
the job table visited.
"""

from __future__ import annotations

import json

import pytest
from django.db import connection, transaction

from django_pgboss import boss
from django_pgboss.plans import editing as editing_plans
from django_pgboss.plans import settle as settle_plans
from django_pgboss.plans.jobs import fetch_jobs

pytestmark = pytest.mark.django_db

FRESH_JOBS = 2000
BATCH = 20


@pytest.fixture
def fresh_queue():
    """A queue of FRESH_JOBS waiting jobs, created after job_common was analyzed with another
    queue's jobs in it (ANALYZE runs in the test's transaction, so its statistics roll back with
    it), and BATCH of them claimed."""
    boss.create_queue("known")
    boss.insert("known", [{"data": {"n": n}} for n in range(3000)])
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {boss.context.quoted_schema}.job_common")
    boss.create_queue("fresh")
    boss.insert("fresh", [{"data": {"n": n}} for n in range(FRESH_JOBS)])
    claimed = boss.fetch("fresh", batch_size=BATCH)
    assert len(claimed) == BATCH
    return claimed


def rows_visited(sql: str, params: dict) -> dict[str, int]:
    """Run ``sql`` under EXPLAIN ANALYZE and roll it back: for each scan of a job table, the rows
    it visited (returned plus removed by its filter), keyed by "<the table's alias> <the scan's
    index>" (or "<alias> seq" for a sequential scan, "<alias> tid" for a TID scan)."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params)
        (plan,) = cursor.fetchone()
        transaction.set_rollback(True)
    if isinstance(plan, str):
        plan = json.loads(plan)
    visited: dict[str, int] = {}

    def walk(node: dict) -> None:
        if node.get("Relation Name") == "job_common" and "Scan" in node["Node Type"]:
            kind = "tid" if node["Node Type"] == "Tid Scan" else "seq"
            key = f"{node.get('Alias')} {node.get('Index Name', kind)}"
            seen = node["Actual Rows"] + node.get("Rows Removed by Filter", 0)
            visited[key] = visited.get(key, 0) + seen * node["Actual Loops"]
        for child in node.get("Plans", []):
            walk(child)

    walk(plan[0]["Plan"])
    return visited


def test_the_claim_of_an_unanalyzed_queue_updates_its_rows_by_tuple_id(fresh_queue):
    sql = fetch_jobs(boss.context.quoted_schema, "job_common", policy="standard")
    visited = rows_visited(sql, {"name": "fresh", "batch_size": BATCH})
    # The claim finds its candidates through job_i11 (the fetch index) and updates them by the
    # tuple ids it locked: BATCH rows each, not the queue's FRESH_JOBS.
    assert visited.get("j job_common_i11") == BATCH, visited
    assert visited.get("j_1 tid") == BATCH, visited
    assert all(seen <= BATCH for seen in visited.values()), visited
    assert not any(key.endswith(" seq") for key in visited), visited


SETTLES = {
    "complete": (settle_plans.complete_jobs, {"fenced": True}, {"output": None}),
    "complete each": (settle_plans.complete_jobs_with_outputs, {}, {}),
    "fail": (settle_plans.fail_jobs, {"fenced": True}, {"output": None}),
    "cancel": (settle_plans.cancel_jobs, {"fenced": False}, {}),
    "delete": (settle_plans.delete_jobs, {"fenced": True}, {}),
    "touch": (settle_plans.touch_jobs, {"fenced": True}, {}),
    "heartbeat": (settle_plans.touch_attempts, {}, {}),
    "requeue": (settle_plans.requeue_jobs, {"started": True}, {"output": None}),
    "resume": (settle_plans.resume_jobs, {}, {}),
    "retry": (settle_plans.retry_jobs, {}, {}),
}


@pytest.mark.parametrize("kind", list(SETTLES))
def test_a_settle_of_an_unanalyzed_queue_reads_only_the_jobs_it_names(fresh_queue, kind):
    plan, options, extra = SETTLES[kind]
    sql = plan(boss.context.quoted_schema, "job_common", **options)
    attempts = [f"{job.id}:{job.retry_count}" for job in fresh_queue]
    params = {
        "name": "fresh",
        "ids": [job.id for job in fresh_queue],
        "attempts": attempts,
        "records": json.dumps(dict.fromkeys(attempts)),
        **extra,
    }
    visited = rows_visited(sql, params)
    assert visited, f"{kind} scanned no job table"
    # Each scan reads the named jobs (a settle that re-inserts, like fail, may scan twice), never
    # the queue's other jobs.
    assert all(seen <= BATCH for seen in visited.values()), visited
    assert not any(key.endswith(" seq") for key in visited), visited


def test_the_purge_of_an_unanalyzed_queue_deletes_by_primary_key(fresh_queue):
    boss.complete("fresh", fresh_queue)
    sql = editing_plans.purge_batch(boss.context.quoted_schema, "job_common", which="stored", first=True)
    visited = rows_visited(sql, {"name": "fresh", "batch_size": BATCH})
    # The batch walks the queue's primary key to find BATCH completed jobs (it reads each row
    # once over the whole purge); the DELETE then finds those by primary key, not by the name.
    assert visited.get("j job_common_pkey", 0) <= BATCH, visited
    assert not any(key.endswith(" seq") for key in visited), visited
