"""pg-boss 12.38.0 itself (Node) accepts the schema django_pgboss migrates, with no drift.

These tests run pg-boss's published package: scripts/test.sh installs it and sets
PGBOSS_NODE_DIR. They commit for real (pg-boss connects on its own), hence transaction=True.
"""

from __future__ import annotations

import json
import subprocess
import threading

import pytest
from django.db import connection, connections, transaction

from django_pgboss import boss
from django_pgboss.conf import pgboss_settings
from django_pgboss.constants import QueuePolicy
from django_pgboss.db.identifiers import quote_identifier
from tests.catalog import read_catalog
from tests.conftest import _node_dir, database_url, pgboss_schema_option

pytestmark = [pytest.mark.node, pytest.mark.django_db(transaction=True)]

REFERENCE_SCHEMA = "pgboss_reference"


@pytest.fixture
def reference_schema(run_pgboss):
    """A schema pg-boss 12.38.0 installed itself, dropped after the test."""
    with connection.cursor() as cursor:
        cursor.execute(f"DROP SCHEMA IF EXISTS {REFERENCE_SCHEMA} CASCADE")
    run_pgboss("install", REFERENCE_SCHEMA)
    yield REFERENCE_SCHEMA
    with connection.cursor() as cursor:
        cursor.execute(f"DROP SCHEMA IF EXISTS {REFERENCE_SCHEMA} CASCADE")


def create_queue(schema: str, name: str, **options) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {quote_identifier(schema)}.create_queue(%s, %s::jsonb)", [name, json.dumps(options)]
        )


def assert_same_catalog(ours, theirs) -> None:
    # Compared part by part so a failure names the part that differs.
    assert ours.tables == theirs.tables
    assert ours.partitions == theirs.partitions
    # Columns as sets: pg-boss 12.38 installs the columns of schemas 44 to 46 where its create()
    # lists them, while its own migration from 43 appends them, as ours does. Neither pg-boss nor
    # django_pgboss reads a column by position, so a schema either way is the same schema.
    assert {t: sorted(c) for t, c in ours.columns.items()} == {
        t: sorted(c) for t, c in theirs.columns.items()
    }
    assert ours.indexes == theirs.indexes
    assert ours.constraints == theirs.constraints
    assert ours.functions == theirs.functions
    assert ours.enum == theirs.enum


def test_catalog_matches_the_schema_pg_boss_installs_itself(reference_schema):
    assert_same_catalog(read_catalog(pgboss_settings.SCHEMA), read_catalog(reference_schema))
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT version FROM {quote_identifier(pgboss_settings.SCHEMA)}.version")
        ours = cursor.fetchall()
        cursor.execute(f"SELECT version FROM {reference_schema}.version")
        assert ours == cursor.fetchall() == [(46,)]


def test_partitions_from_our_create_queue_match_pg_boss(reference_schema):
    for schema in (pgboss_settings.SCHEMA, reference_schema):
        create_queue(schema, "dead-letters", policy="standard")
        for policy in QueuePolicy:
            create_queue(schema, f"p-{policy}", policy=policy, partition=True, deadLetter="dead-letters")
    assert_same_catalog(read_catalog(pgboss_settings.SCHEMA), read_catalog(reference_schema))


def test_pg_boss_finds_no_drift_after_migrate(run_pgboss):
    report = run_pgboss("drift", pgboss_settings.SCHEMA)["drift"]
    assert report["ok"], json.dumps(report, indent=2)


def test_pg_boss_doctor_finds_no_drift_after_migrate():
    # `pg-boss doctor`, the command line a pg-boss user runs, on the schema our migrations made.
    cli = _node_dir() / "node_modules" / "pg-boss" / "dist" / "cli.js"
    result = subprocess.run(
        [
            "node",
            str(cli),
            "doctor",
            "--connection-string",
            database_url(),
            "--schema",
            pgboss_schema_option(pgboss_settings.SCHEMA),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "version 46 (latest: 46)" in result.stdout
    assert "No drift detected" in result.stdout


def test_pg_boss_finds_no_drift_with_a_queue_of_each_policy_partitioned(run_pgboss):
    queues = [{"name": "shared-dlq", "options": {"policy": "standard"}}] + [
        {
            "name": f"{policy}.partitioned",
            "options": {"policy": policy, "partition": True, "deadLetter": "shared-dlq"},
        }
        for policy in QueuePolicy
    ]
    report = run_pgboss("drift", pgboss_settings.SCHEMA, json.dumps(queues))["drift"]
    assert report["ok"], json.dumps(report, indent=2)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*) FROM {quote_identifier(pgboss_settings.SCHEMA)}.queue WHERE partition"
        )
        assert cursor.fetchone() == (len(QueuePolicy),)


# -- jobs flow both ways ------------------------------------------------------------------------


def test_jobs_sent_from_django_are_fetched_and_completed_by_pg_boss(run_pgboss):
    boss.create_queue("to-node", partition=True)
    ids = [
        boss.send("to-node", {"n": 1, "text": "héllo"}, priority=5, singleton_key="k1"),
        boss.send("to-node", {"n": 2}, retry_limit=7),
    ]
    (low_priority_id,) = boss.insert("to-node", [{"data": {"n": 3}}], return_ids=True)
    jobs = run_pgboss("work", pgboss_settings.SCHEMA, "to-node", json.dumps({"by": "node"}))["jobs"]
    by_id = {job["id"]: job for job in jobs}
    assert set(by_id) == {*ids, low_priority_id}
    assert by_id[ids[0]]["priority"] == 5
    assert by_id[ids[0]]["data"] == {"n": 1, "text": "héllo"}
    assert (by_id[ids[0]]["singletonKey"], by_id[ids[1]]["retryLimit"]) == ("k1", 7)
    for job_id in ids:
        job = boss.get_job_by_id("to-node", job_id)
        assert (job.state, job.output) == ("completed", {"by": "node"})


def test_jobs_sent_by_pg_boss_are_fetched_and_completed_by_django(run_pgboss):
    boss.create_queue("dlq")
    boss.create_queue("from-node", dead_letter="dlq", retry_limit=0)
    sent = run_pgboss(
        "send",
        pgboss_settings.SCHEMA,
        "from-node",
        json.dumps(
            [
                {"data": {"n": 1}, "options": {"priority": 1}},
                {"data": {"n": 2}, "options": {"singletonKey": "k"}},
            ]
        ),
    )["ids"]
    first, second = boss.fetch("from-node", batch_size=2)
    assert (first.id, first.data) == (sent[0], {"n": 1})
    assert boss.complete("from-node", first, {"by": "django"}) == 1
    assert boss.fail("from-node", second, {"why": "django says no"}) == 1
    (seen_by_node,) = run_pgboss("get", pgboss_settings.SCHEMA, "from-node", sent[0])["jobs"]
    assert (seen_by_node["state"], seen_by_node["output"]) == ("completed", {"by": "django"})
    (copy,) = boss.find_jobs("dlq")
    assert (copy.source_id, copy.source_root_id, copy.source_output) == (
        sent[1],
        sent[1],
        {"why": "django says no"},
    )
    (copy_seen_by_node,) = run_pgboss("get", pgboss_settings.SCHEMA, "dlq", copy.id)["jobs"]
    assert copy_seen_by_node["sourceId"] == sent[1]


# -- update() and upsert() on jobs either side sent ---------------------------------------------

#: One edit of every option update() takes, spelled for Python and for pg-boss.
EDIT = {
    "priority": 7,
    "start_after": "2031-05-01T10:00:00+00:00",
    "retry_limit": 4,
    "retry_delay": 9,
    "retry_backoff": True,
    "retry_delay_max": 60,
    "expire_in_seconds": 120,
    "retention_seconds": 3600,
    "delete_after_seconds": 30,
    "heartbeat_seconds": 40,
    "dead_letter": "twins-dlq",
    "group_id": "g",
    "group_tier": "gold",
}
NODE_EDIT = {
    "priority": 7,
    "startAfter": "2031-05-01T10:00:00+00:00",
    "retryLimit": 4,
    "retryDelay": 9,
    "retryBackoff": True,
    "retryDelayMax": 60,
    "expireInSeconds": 120,
    "retentionSeconds": 3600,
    "deleteAfterSeconds": 30,
    "heartbeatSeconds": 40,
    "deadLetter": "twins-dlq",
    "group": {"id": "g", "tier": "gold"},
}
#: Every job column but those that tell two twins apart.
TWIN_COLUMNS = (
    "name, data, priority, state, retry_limit, retry_count, retry_delay, retry_backoff, retry_delay_max, "
    "expire_seconds, deletion_seconds, keep_until, start_after, singleton_on, group_id, group_tier, "
    "heartbeat_seconds, dead_letter, policy, blocked, blocking, pending_dependencies, output"
)
#: pg-boss's reading of a job, less what tells twins apart.
NODE_DIFFERENT = {"id", "singletonKey", "createdOn"}


def twin_rows(*ids: str) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {TWIN_COLUMNS} FROM {quote_identifier(pgboss_settings.SCHEMA)}.job WHERE id = ANY(%s::uuid[]) "
            "ORDER BY singleton_key",
            [list(ids)],
        )
        return cursor.fetchall()


def node_view(run_pgboss, job_id: str) -> dict:
    (job,) = run_pgboss("get", pgboss_settings.SCHEMA, "twins", job_id)["jobs"]
    return {key: value for key, value in job.items() if key not in NODE_DIFFERENT}


@pytest.mark.parametrize("sender", ["node", "django"])
def test_update_from_django_and_from_pg_boss_edit_twin_jobs_alike(run_pgboss, sender):
    boss.create_queue("twins-dlq")
    boss.create_queue("twins", retry_limit=1)
    if sender == "node":
        requests = [
            {"data": {"n": 0}, "options": {"priority": 1, "singletonKey": k}} for k in ("a-py", "b-node")
        ]
        py_id, node_id = run_pgboss("send", pgboss_settings.SCHEMA, "twins", json.dumps(requests))["ids"]
    else:
        py_id, node_id = (
            boss.send("twins", {"n": 0}, priority=1, singleton_key=k) for k in ("a-py", "b-node")
        )
    assert boss.update("twins", {"n": 1}, id=py_id, **EDIT).updated == 1
    (node_result,) = run_pgboss(
        "update",
        pgboss_settings.SCHEMA,
        "twins",
        json.dumps([{"data": {"n": 1}, "options": {"id": node_id, **NODE_EDIT}}]),
    )["results"]
    assert node_result == {"jobs": [node_id], "updated": 1}
    python_row, node_row = twin_rows(py_id, node_id)
    assert python_row == node_row
    assert node_view(run_pgboss, py_id) == node_view(run_pgboss, node_id)
    # An edit by key, data left out, on each side; then the data cleared.
    boss.update("twins", singleton_key="a-py", priority=2, start_after=0)
    run_pgboss(
        "update",
        pgboss_settings.SCHEMA,
        "twins",
        json.dumps([{"options": {"singletonKey": "b-node", "priority": 2}}]),
    )
    python_row, node_row = twin_rows(py_id, node_id)
    assert (python_row[1], python_row[2]) == (node_row[1], node_row[2]) == ('{"n": 1}', 2)
    boss.update("twins", None, id=py_id)
    run_pgboss(
        "update", pgboss_settings.SCHEMA, "twins", json.dumps([{"data": None, "options": {"id": node_id}}])
    )
    # Stored as SQL NULL here and JSON null by pg-boss: both sides read null.
    assert node_view(run_pgboss, py_id)["data"] is None
    assert node_view(run_pgboss, node_id)["data"] is None
    assert boss.get_job_by_id("twins", py_id).data is None
    assert boss.get_job_by_id("twins", node_id).data is None


def test_upsert_from_django_and_from_pg_boss_insert_then_edit_alike(run_pgboss):
    boss.create_queue("twins-dlq")
    boss.create_queue("twins", policy="short", retry_limit=1)
    py = boss.upsert("twins", {"u": 1}, singleton_key="a-py", **EDIT)
    (node,) = run_pgboss(
        "upsert",
        pgboss_settings.SCHEMA,
        "twins",
        json.dumps([{"data": {"u": 1}, "options": {"singletonKey": "b-node", **NODE_EDIT}}]),
    )["results"]
    assert (py.inserted, py.updated) == (node["inserted"], node["updated"]) == (1, 0)
    python_row, node_row = twin_rows(py.jobs[0], node["jobs"][0])
    assert python_row == node_row
    # Each side upserts the other's key: an edit of the job the other inserted.
    again_py = boss.upsert("twins", {"u": 2}, singleton_key="b-node", priority=3)
    (again_node,) = run_pgboss(
        "upsert",
        pgboss_settings.SCHEMA,
        "twins",
        json.dumps([{"data": {"u": 2}, "options": {"singletonKey": "a-py", "priority": 3}}]),
    )["results"]
    assert (again_py.jobs, again_py.updated, again_py.inserted) == (node["jobs"], 1, 0)
    assert again_node == {"jobs": py.jobs, "updated": 1, "inserted": 0}
    python_row, node_row = twin_rows(py.jobs[0], node["jobs"][0])
    assert python_row == node_row
    assert node_view(run_pgboss, py.jobs[0]) == node_view(run_pgboss, node["jobs"][0])
    assert node_view(run_pgboss, py.jobs[0])["data"] == {"u": 2}
    # Both marked by key (12.38's upsert_by_key), so job_i13 holds each to one waiting job.
    assert rows_marked(py.jobs[0], node["jobs"][0]) == [True, True]


def rows_marked(*ids: str) -> list[bool | None]:
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT upsert_by_key FROM {quote_identifier(pgboss_settings.SCHEMA)}.job "
            "WHERE id = ANY(%s::uuid[]) ORDER BY singleton_key",
            [list(ids)],
        )
        return [row[0] for row in cursor.fetchall()]


@pytest.mark.parametrize("policy", ["standard", "key_strict_fifo", "short"])
def test_pg_boss_upserting_a_key_django_is_upserting_edits_django_s_job(run_pgboss, policy):
    """The race, made certain: Django's upsert inserted the key's job and has not committed when
    pg-boss 12.38.0 upserts the key. pg-boss finds nothing to edit, its insert waits on job_i13 for
    Django's commit, conflicts, and edits Django's job: one waiting job, as two Node upserts."""
    boss.create_queue("race", policy=policy)
    node_result: list[dict] = []
    node_errors: list[BaseException] = []

    def node_upsert() -> None:
        try:
            node_result.extend(
                run_pgboss(
                    "upsert",
                    pgboss_settings.SCHEMA,
                    "race",
                    json.dumps([{"data": {"by": "node"}, "options": {"singletonKey": "k"}}]),
                )["results"]
            )
        except BaseException as exc:  # reported to the test thread below
            node_errors.append(exc)

    node = threading.Thread(target=node_upsert)
    with transaction.atomic():
        py = boss.upsert("race", {"by": "django"}, singleton_key="k")
        node.start()
        # pg-boss needs a second or so to start; then it waits on this transaction's index entry.
        node.join(timeout=6)
        assert node.is_alive(), node_errors or node_result
    node.join(timeout=60)
    assert node_errors == []
    assert py.inserted == 1
    assert node_result == [{"jobs": py.jobs, "updated": 1, "inserted": 0}]
    waiting_jobs = boss.find_jobs("race", key="k", queued=True)
    assert [(job.id, job.data) for job in waiting_jobs] == [(py.jobs[0], {"by": "node"})]


def test_django_and_pg_boss_racing_upserts_of_many_keys_leave_one_job_each(run_pgboss):
    boss.create_queue("race")
    keys = [f"k{n}" for n in range(40)]
    errors: list[BaseException] = []
    done = threading.Event()

    def django_upserts() -> None:
        try:
            while not done.is_set():
                for key in keys:
                    boss.upsert("race", {"by": "django"}, singleton_key=key)
        except BaseException as exc:  # reported to the test thread below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=django_upserts) for _ in range(3)]
    for thread in threads:
        thread.start()
    try:
        requests = [{"data": {"by": "node"}, "options": {"singletonKey": key}} for key in keys * 3]
        results = run_pgboss("upsert", pgboss_settings.SCHEMA, "race", json.dumps(requests))["results"]
    finally:
        done.set()
        for thread in threads:
            thread.join(timeout=60)
    assert errors == []
    assert all(result["updated"] + result["inserted"] == 1 for result in results)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT singleton_key, count(*) FROM {quote_identifier(pgboss_settings.SCHEMA)}.job "
            "WHERE name = 'race' GROUP BY 1 ORDER BY 1"
        )
        assert cursor.fetchall() == sorted((key, 1) for key in keys)
