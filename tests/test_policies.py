"""Queue policies, each enforced by its partial unique index, on job_common and on a partition."""

from __future__ import annotations

import re

import pytest
from django.db import connection

from django_pgboss import boss
from django_pgboss.plans.fragments import routable
from django_pgboss.plans.jobs import fetch_jobs
from tests.helpers import job_row, rows

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.parametrize("partition", [False, True], ids=["shared", "own-table"]),
]


def make(policy: str, partition: bool, **options) -> str:
    name = f"{policy}-queue"
    boss.create_queue(name, policy=policy, partition=partition, **options)
    return name


def test_standard_allows_everything(partition):
    q = make("standard", partition)
    assert all(boss.send(q, singleton_key="k") for _ in range(3))
    assert len(boss.fetch(q, batch_size=3)) == 3


def test_short_keeps_one_queued_job_per_key(partition):
    q = make("short", partition)
    first = boss.send(q, {"n": 1}, singleton_key="k", priority=1)
    assert first is not None
    assert boss.send(q, {"n": 2}, singleton_key="k") is None
    assert boss.send(q, {"n": 3}, singleton_key="other") is not None
    assert boss.send(q, {"n": 4}) is not None
    assert boss.send(q, {"n": 5}) is None  # keyless jobs share one slot
    (job,) = boss.fetch(q)
    assert job.id == first
    # Once the queued job is active, the key may queue another.
    assert boss.send(q, {"n": 6}, singleton_key="k") is not None


def test_singleton_runs_one_job_per_key_at_a_time(partition):
    q = make("singleton", partition)
    a1 = boss.send(q, {"n": 1}, singleton_key="a")
    a2 = boss.send(q, {"n": 2}, singleton_key="a")
    assert a1 and a2  # queueing is not limited
    (first,) = boss.fetch(q, batch_size=10)
    assert boss.fetch(q, batch_size=10) == []
    boss.complete(q, first)
    (second,) = boss.fetch(q, batch_size=10)
    assert {first.id, second.id} == {a1, a2}


def test_stately_keeps_one_job_per_state_and_key(partition):
    q = make("stately", partition, retry_limit=3)
    created = boss.send(q, {"n": 1}, singleton_key="k")
    assert boss.send(q, {"n": 2}, singleton_key="k") is None
    (active,) = boss.fetch(q)
    assert active.id == created
    queued = boss.send(q, {"n": 3}, singleton_key="k")
    assert queued is not None  # one created beside the active one
    assert boss.send(q, {"n": 4}, singleton_key="k") is None
    assert boss.fetch(q) == []  # the key is active
    boss.fail(q, active)  # goes to retry: one retry, one created, none active
    assert job_row(created, "state") == ("retry",)
    assert boss.send(q, {"n": 5}, singleton_key="k") is None


def test_exclusive_keeps_one_unfinished_job_per_key(partition):
    q = make("exclusive", partition)
    first = boss.send(q, singleton_key="k")
    assert boss.send(q, singleton_key="k") is None
    (job,) = boss.fetch(q)
    assert boss.send(q, singleton_key="k") is None  # active still counts
    boss.complete(q, job)
    assert boss.send(q, singleton_key="k") is not None
    assert first == job.id


def test_key_strict_fifo_runs_each_key_in_order(partition):
    q = make("key_strict_fifo", partition, retry_limit=0)
    ids = [boss.send(q, {"i": i}, singleton_key="k") for i in range(3)]
    order = []
    for _ in range(3):
        (job,) = boss.fetch(q, batch_size=5, ignore_start_after=True)
        assert boss.fetch(q, batch_size=5) == []  # nothing else of the key while one runs
        order.append(job.id)
        boss.complete(q, job)
    assert set(order) == set(ids)


def test_key_strict_fifo_runs_the_jobs_of_one_insert_in_the_order_of_the_list(partition):
    q = make("key_strict_fifo", partition, retry_limit=0)
    boss.insert(q, [{"data": {"i": i}, "singleton_key": "k"} for i in range(20)])
    order = []
    for _ in range(20):
        (job,) = boss.fetch(q, batch_size=5)
        order.append(job.data["i"])
        boss.complete(q, job)
    # Their ids are random: ordered by id they would run in any order (1 chance in 20! of this).
    assert order == list(range(20))


def test_key_strict_fifo_failure_blocks_the_key_until_retried_or_deleted(partition):
    q = make("key_strict_fifo", partition, retry_limit=0)
    boss.send(q, singleton_key="k")
    boss.send(q, singleton_key="k")
    (head,) = boss.fetch(q)
    boss.fail(q, head)
    assert job_row(head.id, "state") == ("failed",)
    assert boss.fetch(q) == []
    boss.delete_job(q, head.id)
    assert len(boss.fetch(q)) == 1


def test_key_strict_fifo_refuses_a_job_without_key_at_the_table_too(partition):
    from django.db import IntegrityError, transaction

    q = make("key_strict_fifo", partition)
    with pytest.raises(IntegrityError, match="key_strict_fifo_singleton_key_check"), transaction.atomic():
        rows("INSERT INTO {s}.job (name, policy) VALUES (%s, 'key_strict_fifo')", [q])


def test_key_strict_fifo_retry_state_blocks_the_key_and_the_retry_comes_first(partition):
    q = make("key_strict_fifo", partition, retry_limit=2)
    boss.send(q, {"i": 1}, singleton_key="k")
    boss.send(q, {"i": 2}, singleton_key="k")
    (first,) = boss.fetch(q)
    boss.fail(q, first)
    assert job_row(first.id, "state") == ("retry",)
    # The job waiting to retry is its key's head: it comes back before its sibling.
    (again,) = boss.fetch(q, batch_size=5)
    assert (again.id, again.retry_count) == (first.id, 1)


def test_key_strict_fifo_failed_key_does_not_block_other_keys(partition):
    q = make("key_strict_fifo", partition, retry_limit=0)
    boss.send(q, singleton_key="a", priority=1)
    boss.send(q, singleton_key="a", priority=1)
    b = boss.send(q, singleton_key="b")
    (a_head,) = boss.fetch(q)
    boss.fail(q, a_head)
    assert [j.id for j in boss.fetch(q, batch_size=5)] == [b]
    assert boss.fetch(q, batch_size=5) == []


def test_key_strict_fifo_unblocks_when_the_failed_job_is_retried(partition):
    q = make("key_strict_fifo", partition, retry_limit=0)
    boss.send(q, singleton_key="k")
    boss.send(q, singleton_key="k")
    (head,) = boss.fetch(q)
    boss.fail(q, head)
    assert boss.fetch(q) == []
    assert boss.retry(q, head.id) == 1
    (again,) = boss.fetch(q, batch_size=5)
    assert again.id == head.id
    boss.complete(q, again)
    assert len(boss.fetch(q, batch_size=5)) == 1


def test_throttle_slot_stays_taken_after_the_job_completes(partition):
    q = make("standard", partition)
    assert boss.send(q, singleton_key="a", singleton_seconds=300) is not None
    (job,) = boss.fetch(q)
    boss.complete(q, job)
    assert boss.send(q, singleton_key="a", singleton_seconds=300) is None


def test_singleton_batch_claims_one_job_per_key(partition):
    q = make("singleton", partition)
    boss.send(q)
    boss.send(q, singleton_key="a")
    boss.send(q, singleton_key="a")
    boss.send(q, singleton_key="b")
    batch = boss.fetch(q, batch_size=4, include_metadata=True)
    assert sorted(str(j.singleton_key) for j in batch) == ["None", "a", "b"]
    boss.complete(q, batch)
    (last,) = boss.fetch(q, batch_size=4)
    assert boss.get_job_by_id(q, last.id).singleton_key == "a"


def test_exclusive_retry_blocks_new_sends_until_terminal(partition):
    q = make("exclusive", partition, retry_limit=1)
    first = boss.send(q)
    (job,) = boss.fetch(q)
    boss.fail(q, job)
    assert job_row(first, "state") == ("retry",)
    assert boss.send(q) is None
    (job,) = boss.fetch(q, ignore_start_after=True)
    boss.fail(q, job)
    assert job_row(first, "state") == ("failed",)
    assert boss.send(q) is not None


@pytest.mark.parametrize(("policy", "index"), [("singleton", "i2"), ("stately", "i3")])
def test_a_keyed_claim_finds_active_keys_through_the_policy_index(partition, policy, index):
    """The claim's "does this key have an active job" probe can use the policy's partial index
    (job_i2, job_i3); spelled as a.policy = j.policy it could not, and read the whole table for
    each candidate. Sequential and bitmap scans are switched off, and the table holds 300 active keys with
    fresh statistics, so the plan shows what the probe can use: on an empty table never analyzed,
    every partial index on (name, state) costs the same to the planner, and which one it takes
    then varies with the database (a fresh migrate, a Citus coordinator)."""
    q = make(policy, partition)
    boss.insert(q, [{"singleton_key": f"k{n}"} for n in range(300)])
    assert len(boss.fetch(q, batch_size=300)) == 300
    boss.send(q, singleton_key="a")
    table = boss.context.route(q).table
    sql = fetch_jobs(boss.context.quoted_schema, table, policy=policy)
    if boss.context.distributed:
        # As the statement cursor sends it on Citus: the name compared as Citus routes it.
        sql = routable(sql)
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {boss.context.quoted_schema}.{table}")
        if boss.context.distributed:
            # The settings below must reach the worker node that plans the claim.
            cursor.execute("SET LOCAL citus.propagate_set_commands = 'local'")
        cursor.execute("SET LOCAL enable_seqscan = off")
        # Read through a plain index scan, which names its index on the probe's own line.
        cursor.execute("SET LOCAL enable_bitmapscan = off")
        cursor.execute("EXPLAIN " + sql, {"name": q, "batch_size": 10})
        plan = "\n".join(row[0] for row in cursor.fetchall())
    probes = [line for line in plan.splitlines() if re.search(r" on \S+ a\s+\(", line)]
    used = [re.search(r" using (\S+) on ", line).group(1) for line in probes]  # type: ignore[union-attr]
    assert used and all(name == policy_index(table, index, name) for name in used), plan


def policy_index(table: str, index: str, used: str) -> str:
    """The name under which the plan shows ``table``'s index ``index``: on Citus the plan is a
    shard's, whose copy of the index Citus names after the shard (ending in the shard id of
    ``used``, the name the plan shows, with a hash in place of a name too long for it)."""
    name = f"{table}_{index}"
    if not boss.context.distributed:
        return name
    shard_id = int(used.rsplit("_", 1)[1])
    (shard_index,) = rows(
        "SELECT shard_name(%s::regclass, %s)", [f"{boss.context.quoted_schema}.{name}", shard_id]
    )[0]
    return shard_index.rsplit(".", 1)[1]
