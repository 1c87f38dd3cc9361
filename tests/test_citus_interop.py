"""pg-boss 12.38.0 itself (Node) with its own `backend: 'citus'` profile, beside django_pgboss with
PGBOSS["BACKEND"] = "citus", on the coordinator of a real Citus cluster: one schema, jobs both ways.

Runs only on the cluster (scripts/test.sh with PGBOSS_TEST_BACKEND=citus, which sets the backend);
tests/conftest.py hands pg-boss the matching profile. The tests commit for real, since pg-boss
connects on its own.
"""

from __future__ import annotations

import json

import pytest
from django.db import connection

from django_pgboss import boss
from django_pgboss.conf import pgboss_settings
from django_pgboss.schema.backend import read_citus_facts
from tests.conftest import node_backend

pytestmark = [pytest.mark.citus, pytest.mark.node, pytest.mark.django_db(transaction=True)]


def distributed_tables_of_the_schema() -> list[str]:
    """The schema's tables Citus knows (distributed, reference or Citus-managed local): none,
    while pg-boss's tables stay plain coordinator tables as the citus profile keeps them."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_dist_partition p JOIN pg_class c ON c.oid = p.logicalrelid "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s",
            [pgboss_settings.SCHEMA],
        )
        return [row[0] for row in cursor.fetchall()]


def test_the_suite_runs_on_a_citus_coordinator_in_the_citus_mode():
    facts = read_citus_facts(boss.context)
    assert facts.extension is not None and facts.extension.startswith("13.")
    assert (facts.coordinator, facts.workers) == (True, 2)
    assert pgboss_settings.BACKEND == "citus"
    assert node_backend() == {"PGBOSS_NODE_BACKEND": "citus"}


def test_pg_boss_with_its_citus_profile_works_jobs_django_sends(run_pgboss):
    boss.create_queue("to-node")
    boss.create_queue("to-node-partitioned", partition=True)
    ids = {
        "to-node": boss.send("to-node", {"n": 1}, priority=3, singleton_key="k"),
        "to-node-partitioned": boss.send("to-node-partitioned", {"n": 2}, retry_limit=4),
    }
    for name, job_id in ids.items():
        (job,) = run_pgboss("work", pgboss_settings.SCHEMA, name, json.dumps({"by": "node"}))["jobs"]
        assert job["id"] == job_id
        done = boss.get_job_by_id(name, job_id)
        assert (done.state, done.output) == ("completed", {"by": "node"})
    assert distributed_tables_of_the_schema() == []


def test_django_works_jobs_pg_boss_with_its_citus_profile_sends(run_pgboss):
    boss.create_queue("dlq")
    boss.create_queue("from-node", dead_letter="dlq", retry_limit=0)
    sent = run_pgboss(
        "send",
        pgboss_settings.SCHEMA,
        "from-node",
        json.dumps([{"data": {"n": 1}, "options": {"priority": 1}}, {"data": {"n": 2}}]),
    )["ids"]
    first, second = boss.fetch("from-node", batch_size=2)
    assert (first.id, first.data, second.id) == (sent[0], {"n": 1}, sent[1])
    assert boss.complete("from-node", first, {"by": "django"}) == 1
    assert boss.fail("from-node", second, {"why": "django says no"}) == 1
    (seen_by_node,) = run_pgboss("get", pgboss_settings.SCHEMA, "from-node", sent[0])["jobs"]
    assert (seen_by_node["state"], seen_by_node["output"]) == ("completed", {"by": "django"})
    # The dead letter Django wrote is a job pg-boss works.
    (copy,) = run_pgboss("work", pgboss_settings.SCHEMA, "dlq", json.dumps({"by": "node"}))["jobs"]
    assert (copy["data"], copy["sourceId"]) == ({"n": 2}, sent[1])


def test_both_monitors_count_the_queues_they_share(run_pgboss):
    # pg-boss's pass with the citus profile claims queues without SKIP LOCKED, as ours does in
    # this mode; each pass counts what the other side sent.
    boss.create_queue("counted")
    boss.send("counted", {"from": "django"})
    run_pgboss("send", pgboss_settings.SCHEMA, "counted", json.dumps([{"data": {"from": "node"}}]))
    queue = run_pgboss("supervise", pgboss_settings.SCHEMA, "counted")["queue"]
    assert queue["queuedCount"] == 2
    boss.send("counted", {"from": "django, later"})
    # At once, not a monitor interval after pg-boss's pass claimed the queue.
    report = boss.supervise(["counted"], interval_seconds=0)
    assert report.counted == ["counted"]
    (info,) = [q for q in boss.get_queues() if q.name == "counted"]
    assert info.queued_count == 3
