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


def routing_of(sql: str, params: Any) -> dict[str, Any]:
    """What Citus's EXPLAIN says of a statement: its scans, their task counts, their subplans."""
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
        (document,) = cursor.fetchone()
    plan = document if isinstance(document, list) else json.loads(document)
    scans = list(citus_scans(plan))
    return {
        "scans": len(scans),
        "tasks": [scan["Distributed Query"]["Job"]["Task Count"] for scan in scans],
        "subplans": sum(len(scan["Distributed Query"].get("Subplans", [])) for scan in scans),
        "nodes": {
            task.get("Node") for scan in scans for task in scan["Distributed Query"]["Job"].get("Tasks", [])
        },
    }


def assert_single_task(statements: list[tuple[str, Any]]) -> None:
    assert statements, "the operation sent no statement on a job table"
    for sql, params in statements:
        routing = routing_of(sql, params)
        assert routing == {"scans": 1, "tasks": [1], "subplans": 0, "nodes": routing["nodes"]}, (
            f"{routing} for\n{sql}"
        )
        assert len(routing["nodes"]) == 1


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
    assert_single_task(statements)


def test_insert_runs_on_one_node(routed_queue):
    with recorded(routed_queue) as statements:
        boss.insert(routed_queue, [{"data": {"n": 1}}, {"data": {"n": 2}}])
        boss.insert(routed_queue, [{"data": {"n": 3}, "priority": 2}, {"data": {"n": 4}, "retry_limit": 1}])
    assert_single_task(statements)


def test_fetch_runs_on_one_node(routed_queue):
    boss.insert(routed_queue, [{"data": {"n": n}} for n in range(3)])
    with recorded(routed_queue) as statements:
        assert len(boss.fetch(routed_queue, batch_size=2)) == 2
    assert_single_task(statements)


def test_complete_and_fail_run_on_one_node(routed_queue):
    boss.insert(routed_queue, [{"data": {"n": n}} for n in range(2)])
    first, second = boss.fetch(routed_queue, batch_size=2)
    with recorded(routed_queue) as statements:
        boss.complete(routed_queue, first.id, {"done": True})
        boss.fail(routed_queue, second.id, {"error": "no"})
    assert_single_task(statements)


def test_the_settle_batch_runs_on_one_node(routed_queue):
    boss.insert(routed_queue, [{"data": {"n": n}} for n in range(3)])
    jobs = boss.fetch(routed_queue, batch_size=3)
    with recorded(routed_queue) as statements:
        completed = JobStore(boss.context).complete_each(routed_queue, [(job, {"n": 1}) for job in jobs])
    assert sorted(completed) == sorted(job.id for job in jobs)
    assert_single_task(statements)
