"""Item 4 of the Citus work, shown: on the citus-distributed backend each hot statement of one queue
runs as one task on one node.

Each test runs an operation through the public API with Django's execute wrapper recording the
statements it sends, then reads Citus's EXPLAIN of each recorded statement with the same
parameters: one Citus scan, one task, no subplan run first on the coordinator. It needs a Citus
cluster with the schema distributed (PGBOSS["BACKEND"] = "citus-distributed"); on any other backend
there is nothing to route, and the module says so instead of passing.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.db import connection

from django_pgboss import boss
from django_pgboss.api.jobs import JobStore
from django_pgboss.conf import pgboss_settings

pytestmark = [
    pytest.mark.citus,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        pgboss_settings.BACKEND != "citus-distributed",
        reason='routing is a property of the citus-distributed backend (PGBOSS["BACKEND"])',
    ),
]


@contextmanager
def recorded(queue: str) -> Iterator[list[tuple[str, Any]]]:
    """The statements the block sends to ``queue``'s job table, with their parameters."""
    context = boss.context
    table = f"{context.quoted_schema}.{context.route(queue).table}"
    statements: list[tuple[str, Any]] = []

    def record(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        if isinstance(sql, str) and table in sql:
            statements.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        yield statements


def citus_scans(plan: Any) -> Iterator[dict[str, Any]]:
    """Every Citus custom scan of an EXPLAIN (FORMAT JSON) document, at any depth."""
    if isinstance(plan, dict):
        if str(plan.get("Custom Plan Provider", "")).startswith("Citus"):
            yield plan
        for value in plan.values():
            yield from citus_scans(value)
    elif isinstance(plan, list):
        for value in plan:
            yield from citus_scans(value)


def relations(plan: Any) -> set[str]:
    """The relations a (remote) plan reads or writes, by name."""
    found = set()
    if isinstance(plan, dict):
        if "Relation Name" in plan:
            found.add(plan["Relation Name"])
        for value in plan.values():
            found |= relations(value)
    elif isinstance(plan, list):
        for value in plan:
            found |= relations(value)
    return found


def explain(sql: str, params: Any) -> Any:
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
        (document,) = cursor.fetchone()
    return document if isinstance(document, list) else json.loads(document)


def tasks_of(plan: Any) -> list[tuple[str, set[str]]]:
    """Every task Citus would run for the statement, subplans included: its node and the
    relations (shards) it touches."""
    return [
        (task["Node"], relations(task.get("Remote Plan")))
        for scan in citus_scans(plan)
        for task in scan.get("Distributed Query", {}).get("Job", {}).get("Tasks", [])
    ]


def assert_single_task(statements: list[tuple[str, Any]]) -> None:
    """Each statement is one Citus scan of one task, with no subplan run before it."""
    assert statements, "the operation sent no statement on the queue's job table"
    for sql, params in statements:
        scans = list(citus_scans(explain(sql, params)))
        shape = [
            (
                scan["Custom Plan Provider"],
                scan["Distributed Query"]["Job"]["Task Count"],
                len(scan["Distributed Query"].get("Subplans", [])),
            )
            for scan in scans
        ]
        assert shape == [("Citus Adaptive", 1, 0)], f"{shape} for\n{sql}"


def assert_written_from_the_coordinator(statements: list[tuple[str, Any]], table: str) -> None:
    """Each statement is an INSERT ... SELECT whose rows Citus computes on the coordinator from the
    queue row alone (one task, reading the reference table's copy, no job shard) and then writes
    to the shard of their one queue name."""
    assert statements
    for sql, params in statements:
        plan = explain(sql, params)
        (top,) = [
            scan for scan in citus_scans(plan) if scan["Custom Plan Provider"] == "Citus INSERT ... SELECT"
        ]
        assert top["INSERT/SELECT method"] == "pull to coordinator", sql
        tasks = tasks_of(plan)
        assert len(tasks) == 1, f"{tasks} for\n{sql}"
        ((_node, touched),) = tasks
        assert touched and all(name.startswith("queue_") for name in touched), (touched, sql)
        assert not any(is_shard_of(name, table) for name in touched)


def assert_job_shards_on_one_node(statements: list[tuple[str, Any]], table: str) -> None:
    """Every task of the statement that touches a shard of the queue's job table runs on one node."""
    assert statements
    for sql, params in statements:
        nodes = {
            node
            for node, touched in tasks_of(explain(sql, params))
            if any(is_shard_of(name, table) for name in touched)
        }
        assert len(nodes) == 1, f"{nodes} for\n{sql}"


def is_shard_of(relation: str, table: str) -> bool:
    """Whether ``relation`` is a shard of job table ``table``: Citus names a shard after its table
    and the shard id, shortening a long name (a queue's own table) to its first characters."""
    return relation.startswith(table[:40])


def table_of(queue: str) -> str:
    return boss.context.route(queue).table


@pytest.fixture(params=[False, True], ids=["job_common", "own table"])
def routed_queue(request) -> str:
    name = f"routed-{uuid.uuid4().hex[:8]}"
    boss.create_queue(name, partition=request.param)
    return name


def test_send_runs_on_one_node(routed_queue):
    with recorded(routed_queue) as statements:
        boss.send(routed_queue, {"n": 1})
        boss.send(routed_queue, {"n": 2}, priority=3, retry_limit=4)
        boss.send(routed_queue, {"n": 3}, id=str(uuid.uuid4()))
    assert len(statements) == 3
    assert_written_from_the_coordinator(statements, table_of(routed_queue))


def test_insert_runs_on_one_node(routed_queue):
    with recorded(routed_queue) as statements:
        boss.insert(routed_queue, [{"data": {"n": 1}}, {"data": {"n": 2}}])
        boss.insert(routed_queue, [{"data": {"n": 3}, "priority": 2}, {"data": {"n": 4}, "retry_limit": 1}])
    assert len(statements) == 2
    assert_written_from_the_coordinator(statements, table_of(routed_queue))


def test_fetch_runs_on_one_node(routed_queue):
    boss.insert(routed_queue, [{"data": {"n": n}} for n in range(3)])
    with recorded(routed_queue) as statements:
        assert len(boss.fetch(routed_queue, batch_size=2)) == 2
    assert_single_task(statements)


def test_complete_runs_as_one_task_and_fail_on_one_node(routed_queue):
    boss.insert(routed_queue, [{"data": {"n": n}} for n in range(2)])
    first, second = boss.fetch(routed_queue, batch_size=2)
    with recorded(routed_queue) as completing:
        assert boss.complete(routed_queue, first.id, {"done": True}) == 1
    assert_single_task(completing)
    with recorded(routed_queue) as failing:
        assert boss.fail(routed_queue, second.id, {"error": "no"}) == 1
    assert len(failing) == 1
    assert_job_shards_on_one_node(failing, table_of(routed_queue))


def test_the_settle_batch_runs_on_one_node(routed_queue):
    boss.insert(routed_queue, [{"data": {"n": n}} for n in range(3)])
    jobs = boss.fetch(routed_queue, batch_size=3)
    with recorded(routed_queue) as statements:
        completed = JobStore(boss.context).complete_each(routed_queue, [(job, {"n": 1}) for job in jobs])
    assert sorted(completed) == sorted(job.id for job in jobs)
    assert_single_task(statements)
