"""get_lineage(): a dead-letter chain by source_root_id, from any id in it, across queues."""

from __future__ import annotations

import re
import uuid

import pytest
from django.db import connection

from django_pgboss import InvalidJobReference, boss
from django_pgboss.plans import redrive as redrive_plans
from tests.conftest import DISTRIBUTED
from tests.helpers import rows, schema_sql

pytestmark = pytest.mark.django_db


def fail_for_good(queue: str, job_id: str) -> str:
    """Fail a job terminally (its queue has retry_limit 0) and return its dead-letter copy's id."""
    assert boss.fail(queue, job_id, {"error": f"failed {job_id}"}) == 1
    ((copy_id,),) = rows("SELECT id::text FROM {s}.job WHERE source_id = %s", [job_id])
    return copy_id


def stagger(*ids: str) -> None:
    """Give the jobs increasing created_on, in the order given (a test runs in one transaction,
    where job_now() does not move)."""
    for offset, job_id in enumerate(ids):
        rows(
            "UPDATE {s}.job SET created_on = now() - interval '1 hour' + %s * interval '1 minute' WHERE id = %s",
            [offset, job_id],
        )


def two_round_trips(partition: bool = False) -> dict[str, str]:
    """send -> dead letter -> redrive -> dead letter -> redrive, returning every id on the way."""
    boss.create_queue("dlq", partition=partition)
    boss.create_queue("orders", retry_limit=0, dead_letter="dlq", partition=partition)
    ids = {"root": boss.send("orders", {"order": 1})}
    ids["copy1"] = fail_for_good("orders", ids["root"])
    stagger(ids["root"], ids["copy1"])
    result = boss.redrive("dlq")
    ((_, ids["redriven1"]),) = result.moved_ids
    ids["copy2"] = fail_for_good("orders", ids["redriven1"])
    stagger(ids["root"], ids["redriven1"], ids["copy2"])
    ((_, ids["redriven2"]),) = boss.redrive("dlq").moved_ids
    stagger(ids["root"], ids["redriven1"], ids["redriven2"])
    return ids


@pytest.mark.parametrize("partition", [False, True])
def test_lineage_across_two_round_trips_is_the_same_from_any_id(partition):
    ids = two_round_trips(partition)
    # The copies left the dead-letter queue when they were redriven; the chain is what remains.
    expected = [ids["root"], ids["redriven1"], ids["redriven2"]]
    for start in ("root", "redriven1", "redriven2"):
        chain = boss.get_lineage(ids[start])
        assert [job.id for job in chain] == expected
    root, first, second = boss.get_lineage(ids["root"])
    assert (root.name, root.state, root.source_root_id) == ("orders", "failed", None)
    assert (first.name, first.state, first.source_root_id) == ("orders", "failed", ids["root"])
    assert (second.name, second.state, second.source_root_id) == ("orders", "created", ids["root"])
    assert first.output == {"error": f"failed {ids['redriven1']}"}


def test_lineage_includes_dead_letter_copies_still_waiting():
    boss.create_queue("dlq")
    boss.create_queue("orders", retry_limit=0, dead_letter="dlq")
    root = boss.send("orders")
    copy = fail_for_good("orders", root)
    stagger(root, copy)
    for start in (root, copy):
        chain = boss.get_lineage(start)
        assert [(job.id, job.name) for job in chain] == [(root, "orders"), (copy, "dlq")]
    assert chain[1].source_output == {"error": f"failed {root}"}
    assert chain[1].source_id == root


def test_lineage_when_the_root_was_deleted():
    ids = two_round_trips()
    assert boss.delete_job("orders", ids["root"]) == 1
    for start in ("root", "redriven1", "redriven2"):
        assert [job.id for job in boss.get_lineage(ids[start])] == [ids["redriven1"], ids["redriven2"]]


def test_lineage_crosses_queues_through_a_destination_override():
    boss.create_queue("dlq")
    boss.create_queue("orders", retry_limit=0, dead_letter="dlq")
    boss.create_queue("repairs", partition=True, retry_limit=0, dead_letter="dlq")
    root = boss.send("orders")
    fail_for_good("orders", root)
    ((_, repaired),) = boss.redrive("dlq", destination="repairs").moved_ids
    copy = fail_for_good("repairs", repaired)
    stagger(root, repaired, copy)
    chain = boss.get_lineage(copy)
    assert [(job.name, job.id) for job in chain] == [("orders", root), ("repairs", repaired), ("dlq", copy)]


def test_a_job_never_dead_lettered_is_a_chain_of_one_and_an_unknown_id_gives_nothing():
    boss.create_queue("orders")
    job_id = boss.send("orders", {"n": 1})
    (job,) = boss.get_lineage(job_id)
    assert (job.id, job.data, job.state) == (job_id, {"n": 1}, "created")
    assert boss.get_lineage(str(uuid.uuid4())) == []
    # A Job and a UUID name the same job as its id does.
    assert boss.get_lineage(job) == boss.get_lineage(uuid.UUID(job_id)) == [job]


def test_other_chains_are_left_out():
    boss.create_queue("dlq")
    boss.create_queue("orders", retry_limit=0, dead_letter="dlq")
    first, second = boss.send("orders"), boss.send("orders")
    first_copy = fail_for_good("orders", first)
    fail_for_good("orders", second)
    assert {job.id for job in boss.get_lineage(first_copy)} == {first, first_copy}


@pytest.mark.parametrize("bad", ["not-a-uuid", "", None, 42, ["0" * 32], {"id": "x"}])
def test_a_malformed_id_raises_invalid_job_reference(bad):
    with pytest.raises(InvalidJobReference):
        boss.get_lineage(bad)


def test_the_chain_is_read_through_job_i12():
    """The lookup's shape lets PostgreSQL use the partial index on source_root_id (with sequential
    scans off, as a large table would make them too dear)."""
    ids = two_round_trips()
    with connection.cursor() as cursor:
        if DISTRIBUTED:
            # The shards' plans are made on the worker nodes, which see the setting below only
            # when Citus passes it on; and each shard's plan is shown, not one of them.
            cursor.execute("SET LOCAL citus.propagate_set_commands = 'local'")
            cursor.execute("SET LOCAL citus.explain_all_tasks = on")
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(
            "EXPLAIN " + redrive_plans.lineage(schema_sql()), {"id": ids["redriven2"], "name": None}
        )
        plan = "\n".join(row[0] for row in cursor.fetchall())
    # Each job table carries its own copy of job_i12, named after the table (job_common_i12, ...,
    # and on Citus each shard's copy after the shard, job_common_i12_102044); the planner reads it
    # with a plain or a bitmap index scan, depending on its statistics.
    assert re.search(r"(Index Scan using|Bitmap Index Scan on) \w+_i12(_\d+)?\b", plan), plan


# -- one id in two queues (the key is (name, id)) ----------------------------------------------


def two_chains_from_one_id() -> dict[str, str]:
    """Queues a and b each hold a job with one id; both fail for good into one dead-letter queue,
    and a's copy is redriven back to a and fails again."""
    boss.create_queue("dlq")
    boss.create_queue("a", retry_limit=0, dead_letter="dlq")
    boss.create_queue("b", retry_limit=0, dead_letter="dlq")
    shared = str(uuid.uuid4())
    assert boss.send("a", {"q": "a"}, id=shared) == shared
    assert boss.send("b", {"q": "b"}, id=shared) == shared
    ids = {"shared": shared, "copy_a": fail_for_good("a", shared)}
    assert boss.fail("b", shared, {"error": "b failed"}) == 1
    ((ids["copy_b"],),) = rows(
        "SELECT id::text FROM {s}.job WHERE source_id = %s AND source_name = 'b'", [shared]
    )
    stagger(shared, ids["copy_a"], ids["copy_b"])
    ((_, ids["redriven_a"]),) = boss.redrive("dlq", source_name="a").moved_ids
    ids["copy_a2"] = fail_for_good("a", ids["redriven_a"])
    return ids


def test_lineage_of_an_id_two_queues_hold_is_each_queues_own_chain():
    ids = two_chains_from_one_id()
    chain_a = [(job.name, job.id) for job in boss.get_lineage(ids["shared"], name="a")]
    chain_b = [(job.name, job.id) for job in boss.get_lineage(ids["shared"], name="b")]
    assert sorted(chain_a) == sorted(
        [("a", ids["shared"]), ("a", ids["redriven_a"]), ("dlq", ids["copy_a2"])]
    )
    assert sorted(chain_b) == sorted([("b", ids["shared"]), ("dlq", ids["copy_b"])])
    # From any other job of a chain, the same chain.
    assert sorted((j.name, j.id) for j in boss.get_lineage(ids["copy_a2"])) == sorted(chain_a)
    assert sorted((j.name, j.id) for j in boss.get_lineage(ids["copy_b"])) == sorted(chain_b)
    # A Job names its own queue.
    (b_root,) = [job for job in boss.get_lineage(ids["copy_b"]) if job.name == "b"]
    assert sorted((j.name, j.id) for j in boss.get_lineage(b_root)) == sorted(chain_b)


def test_lineage_of_an_id_two_queues_hold_needs_the_queue():
    ids = two_chains_from_one_id()
    with pytest.raises(InvalidJobReference, match="held by several queues"):
        boss.get_lineage(ids["shared"])
    assert boss.get_lineage(ids["shared"], name="dlq") == []


def test_lineage_of_a_deleted_root_two_queues_held_is_told_apart_by_its_queue():
    ids = two_chains_from_one_id()
    rows("DELETE FROM {s}.job WHERE id = %s", [ids["shared"]])
    assert sorted(j.id for j in boss.get_lineage(ids["shared"], name="b")) == [ids["copy_b"]]
    assert sorted(j.id for j in boss.get_lineage(ids["shared"], name="a")) == sorted(
        [ids["redriven_a"], ids["copy_a2"]]
    )


def redriven_into_the_other_queue(b_fails: bool) -> dict[str, str]:
    """Queues a and b each hold a job with one id; a's fails for good and its copy is redriven into
    b (a destination override), so the copy is gone. With ``b_fails``, b's job failed for good too,
    and its copy still waits in the dead-letter queue."""
    boss.create_queue("dlq")
    boss.create_queue("a", retry_limit=0, dead_letter="dlq")
    boss.create_queue("b", retry_limit=0, dead_letter="dlq")
    shared = str(uuid.uuid4())
    boss.send("a", {"q": "a"}, id=shared)
    boss.send("b", {"q": "b"}, id=shared)
    ids = {"shared": shared, "copy_a": fail_for_good("a", shared)}
    ((_, ids["redriven"]),) = boss.redrive("dlq", ids=[ids["copy_a"]], destination="b").moved_ids
    if b_fails:
        assert boss.fail("b", shared, {"error": "b failed"}) == 1
        ((ids["copy_b"],),) = rows(
            "SELECT id::text FROM {s}.job WHERE source_id = %s AND name = 'dlq'", [shared]
        )
    stagger(*(ids[key] for key in ("shared", "redriven", "copy_b") if key in ids))
    return ids


@pytest.mark.parametrize("b_fails", [False, True])
def test_a_failed_roots_lineage_keeps_its_job_redriven_into_the_queue_of_the_other_root(b_fails):
    """Its copy is gone, so nothing but source_root_id names the redriven job, and the other root
    shares that id: the redriven job belongs to the chain that lost a copy, not to the other root's
    (which never failed, or whose one copy still waits), though it sits in that root's queue."""
    ids = redriven_into_the_other_queue(b_fails)
    chain_a = [(job.name, job.id) for job in boss.get_lineage(ids["shared"], name="a")]
    assert chain_a == [("a", ids["shared"]), ("b", ids["redriven"])]
    assert [(job.name, job.id) for job in boss.get_lineage(ids["redriven"])] == chain_a
    chain_b = [(job.name, job.id) for job in boss.get_lineage(ids["shared"], name="b")]
    assert chain_b == ([("b", ids["shared"]), ("dlq", ids["copy_b"])] if b_fails else [("b", ids["shared"])])
