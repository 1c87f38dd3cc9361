"""Telling apart two dead-letter chains whose first jobs share an id (django_pgboss.api.lineage),
on Jobs built in Python: no database. get_lineage() over real chains is tests/test_lineage.py's.
"""

from __future__ import annotations

from django_pgboss.api.lineage import one_chain
from django_pgboss.records import Job

ROOT = "5b0a4e0c-8f5e-4d47-9a55-3f0d3a1e2b6c"


def job(name: str, job_id: str, **columns: object) -> Job:
    return Job(id=job_id, name=name, data=None, retry_count=0, expire_in_seconds=900, **columns)


def failed_root(queue: str) -> Job:
    """A chain's first job, failed for good into its queue's dead-letter queue."""
    return job(queue, ROOT, state="failed", dead_letter=f"{queue}_dlq")


def dead_letter_copy(queue: str, copy_id: str) -> Job:
    """The dead-letter copy of ``queue``'s root, waiting in ``queue``_dlq."""
    return job(
        f"{queue}_dlq", copy_id, state="created", source_name=queue, source_id=ROOT, source_root_id=ROOT
    )


def test_a_single_chain_is_returned_whole():
    chain = [failed_root("a"), dead_letter_copy("a", "c1")]
    assert one_chain(chain, "a", ROOT) == chain
    assert one_chain(chain, "a_dlq", "c1") == chain


def test_two_roots_sharing_an_id_give_each_its_own_chain():
    a_root, b_root = failed_root("a"), failed_root("b")
    a_copy, b_copy = dead_letter_copy("a", "c1"), dead_letter_copy("b", "c2")
    candidates = [a_root, b_root, a_copy, b_copy]
    assert one_chain(candidates, "a", ROOT) == [a_root, a_copy]
    assert one_chain(candidates, "b", ROOT) == [b_root, b_copy]
    # Asked from a copy, the chain is the one that copy's links lead to.
    assert one_chain(candidates, "b_dlq", "c2") == [b_root, b_copy]


def test_a_copy_of_a_copy_follows_its_links_back_to_its_root_s_queue():
    a_root, b_root = failed_root("a"), failed_root("b")
    a_copy = job(
        "a_dlq",
        "c1",
        state="failed",
        dead_letter="a_dlq2",
        source_name="a",
        source_id=ROOT,
        source_root_id=ROOT,
    )
    a_second = job("a_dlq2", "c3", source_name="a_dlq", source_id="c1", source_root_id=ROOT)
    b_copy = dead_letter_copy("b", "c2")
    candidates = [a_root, b_root, a_copy, b_copy, a_second]
    assert one_chain(candidates, "a_dlq2", "c3") == [a_root, a_copy, a_second]
