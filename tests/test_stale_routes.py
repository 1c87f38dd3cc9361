"""A queue's route (the table that holds its jobs) is cached per process; another process that
deletes the queue and creates it again with the other partitioning moves its jobs to another table.
The fetch, the worker's fetch loop, and every settle and read keyed by the route notice it and
follow the queue to its new table.

"Another process" is a Boss with its own route cache on its own connection (a thread of this
process), or pg-boss 12.38.0 itself (Node). Both commit for real, hence transaction=True.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection, connections

from django_pgboss import Boss, clocks
from django_pgboss.db.context import ROUTE_RECHECK_SECONDS
from django_pgboss.worker import Worker
from django_pgboss.worker.registry import Registration

pytestmark = pytest.mark.django_db(transaction=True)

QUEUE = "moving"

#: Both ways: a queue in job_common made again with its own table, and the other way round.
DIRECTIONS = pytest.mark.parametrize(
    ("before", "after"), [(False, True), (True, False)], ids=["to-own-table", "to-job-common"]
)


class SteppedClock(clocks.SystemClock):
    """The system's clock, whose monotonic reading the test moves ahead (the route's recheck
    interval is read on clocks.current(); the worker's own timers keep the system's clock)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def monotonic(self) -> float:
        return time.monotonic() + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += seconds


@pytest.fixture
def route_clock():
    clock = SteppedClock()
    clocks.install(clock)
    yield clock
    clocks.uninstall(clock)


def elsewhere(action: Callable[[Boss], Any]) -> Any:
    """Run ``action`` with a Boss of its own (its own route cache) on another thread, so on its own
    connection, committed; return what it returned."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = action(Boss())
        except BaseException as exc:  # handed to the test below
            outcome["error"] = exc
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(60)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def recreate(partition: bool, sends: int = 1) -> Callable[[Boss], list[str]]:
    """What the other process does: delete the queue, create it with ``partition``, send jobs."""

    def action(other: Boss) -> list[str]:
        other.delete_queue(QUEUE)
        other.create_queue(QUEUE, partition=partition)
        return [other.send(QUEUE, {"n": n}) for n in range(sends)]

    return action


def cached_here(partition: bool) -> Boss:
    """A Boss that made the queue with ``partition`` and has its route cached (a fetch and a
    completion ran on it)."""
    here = Boss()
    here.create_queue(QUEUE, partition=partition)
    here.send(QUEUE)
    (job,) = here.fetch(QUEUE)
    assert here.complete(QUEUE, job) == 1
    return here


def route_reads(action: Callable[[], Any]) -> tuple[Any, int]:
    """What ``action`` returned, and how many times it read a queue's route."""
    seen = []

    def watch(execute, sql, params, many, context):
        if sql.startswith("SELECT table_name, policy, notify FROM"):
            seen.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(watch):
        result = action()
    return result, len(seen)


@DIRECTIONS
def test_a_fetch_follows_a_queue_another_process_created_again_with_the_other_partitioning(
    before, after, route_clock
):
    here = cached_here(before)
    (sent,) = elsewhere(recreate(after))
    # An empty fetch re-reads the route at most once per interval; the interval is over.
    route_clock.advance(ROUTE_RECHECK_SECONDS)
    (job,) = here.fetch(QUEUE)
    assert (job.id, job.data) == (sent, {"n": 0})
    assert here.complete(QUEUE, job, {"done": True}) == 1
    assert elsewhere(lambda other: other.get_job_by_id(QUEUE, sent).state) == "completed"


def test_an_idle_queue_reads_its_route_at_most_once_per_interval_and_nothing_while_jobs_come(route_clock):
    here = cached_here(False)
    # Empty fetches within the interval read nothing more than the claim.
    assert route_reads(lambda: [here.fetch(QUEUE) for _ in range(5)]) == ([[]] * 5, 0)
    route_clock.advance(ROUTE_RECHECK_SECONDS)
    assert route_reads(lambda: [here.fetch(QUEUE) for _ in range(5)]) == ([[]] * 5, 1)
    # A fresh route with jobs to claim: no read at all, whenever it was checked.
    route_clock.advance(ROUTE_RECHECK_SECONDS)
    here.insert(QUEUE, [{}, {}])
    jobs, reads = route_reads(lambda: here.fetch(QUEUE, batch_size=2))
    assert (len(jobs), reads) == (2, 0)


def test_a_fetch_inside_a_transaction_follows_a_dropped_table():
    # The fetch has its own savepoint there, so the dropped table's error is retried on the new
    # route, and the caller's transaction goes on.
    from django.db import transaction

    here = cached_here(True)
    (sent,) = elsewhere(recreate(False))
    with transaction.atomic():
        (job,) = here.fetch(QUEUE)
        assert here.complete(QUEUE, job) == 1
    assert job.id == sent


@DIRECTIONS
@pytest.mark.parametrize("in_transaction", [False, True], ids=["autocommit", "in-transaction"])
@pytest.mark.parametrize("path", ["data-only", "general"])
def test_a_send_from_the_stale_process_follows_and_its_fetch_finds_the_job(
    before, after, in_transaction, path, monkeypatch
):
    # The insert path's own handling of a stale route (a dropped table, or job_common's partition
    # constraint refusing the row): outside a transaction it follows at once; inside one the
    # statement fails and aborts it, and the next try follows. A send of data alone takes
    # send()'s hot path, when no span is to be recorded (an earlier test may have set a tracer
    # provider for good); one with an option, the general path.
    from django.db import DatabaseError, transaction

    from django_pgboss.observability import tracing

    monkeypatch.setattr(tracing, "active", lambda: False)
    options = {} if path == "data-only" else {"priority": 0}
    here = cached_here(before)
    elsewhere(recreate(after, sends=0))
    if in_transaction:
        with pytest.raises(DatabaseError), transaction.atomic():
            here.send(QUEUE, {"n": 8}, **options)
        with transaction.atomic():
            sent = here.send(QUEUE, {"n": 9}, **options)
    else:
        sent = here.send(QUEUE, {"n": 9}, **options)
    (job,) = here.fetch(QUEUE)
    assert (job.id, job.data) == (sent, {"n": 9})
    assert here.complete(QUEUE, job) == 1


def claimed_elsewhere(partition: bool) -> Callable[[Boss], dict[str, Any]]:
    """The other process recreates the queue, sends four jobs and claims two of them."""

    def action(other: Boss) -> dict[str, Any]:
        ids = recreate(partition, sends=4)(other)
        claimed = other.fetch(QUEUE, batch_size=2)
        return {"ids": ids, "claimed": claimed}

    return action


def state_of(job_id: str) -> str:
    return elsewhere(lambda other: other.get_job_by_id(QUEUE, job_id).state)


SETTLES = {
    "complete": lambda here, job: (here.complete(QUEUE, job, {"ok": 1}), "completed"),
    "fail": lambda here, job: (here.fail(QUEUE, job, {"no": 1}), "retry"),
    "cancel": lambda here, job: (here.cancel(QUEUE, job.id), "cancelled"),
    "delete_job": lambda here, job: (here.delete_job(QUEUE, job), None),
    "touch": lambda here, job: (here.touch(QUEUE, job), "active"),
}


@DIRECTIONS
@pytest.mark.parametrize("verb", sorted(SETTLES))
def test_a_settle_follows_a_queue_another_process_created_again(before, after, verb):
    here = cached_here(before)
    made = elsewhere(claimed_elsewhere(after))
    job = made["claimed"][0]
    count, state = SETTLES[verb](here, job)
    assert count == 1
    if state is None:
        assert elsewhere(lambda other: other.get_job_by_id(QUEUE, job.id)) is None
    else:
        assert state_of(job.id) == state


@DIRECTIONS
def test_resume_follows_a_queue_another_process_created_again(before, after):
    here = cached_here(before)

    def cancelled_elsewhere(other: Boss) -> str:
        (job_id,) = recreate(after)(other)
        assert other.cancel(QUEUE, job_id) == 1
        return job_id

    job_id = elsewhere(cancelled_elsewhere)
    assert here.resume(QUEUE, job_id) == 1
    assert state_of(job_id) == "created"


READS = {
    "get_job_by_id": lambda here, ids: [here.get_job_by_id(QUEUE, ids[3]).data],
    "find_jobs": lambda here, ids: sorted((job.data for job in here.find_jobs(QUEUE)), key=str),
}


@DIRECTIONS
@pytest.mark.parametrize("read", sorted(READS))
def test_the_reads_follow_a_queue_another_process_created_again(before, after, read):
    here = cached_here(before)
    ids = elsewhere(recreate(after, sends=4))
    expected = [{"n": 3}] if read == "get_job_by_id" else [{"n": n} for n in range(4)]
    assert READS[read](here, ids) == expected


@DIRECTIONS
def test_a_burst_worker_follows_a_queue_another_process_created_again(before, after, route_clock):
    handled: list[Any] = []
    here = cached_here(before)
    (sent,) = elsewhere(recreate(after))
    route_clock.advance(ROUTE_RECHECK_SECONDS)
    worker = Worker([Registration(QUEUE, lambda job: handled.append(job.data))], boss=here, burst=True)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    # A burst worker ends once its queue is drained; one stuck on the stale route would poll on.
    thread.join(30)
    if thread.is_alive():
        worker.stop(grace_seconds=0)
        thread.join(30)
    assert handled == [{"n": 0}]
    assert state_of(sent) == "completed"


@pytest.mark.node
@DIRECTIONS
def test_a_fetch_follows_a_queue_pg_boss_created_again(before, after, run_pgboss, route_clock):
    from django_pgboss.conf import pgboss_settings

    here = cached_here(before)
    (sent,) = run_pgboss(
        "recreate",
        pgboss_settings.SCHEMA,
        QUEUE,
        json.dumps({"partition": after}),
        json.dumps([{"data": {"from": "node"}}]),
    )["ids"]
    route_clock.advance(ROUTE_RECHECK_SECONDS)
    (job,) = here.fetch(QUEUE)
    assert (job.id, job.data) == (sent, {"from": "node"})
    assert here.complete(QUEUE, job) == 1
    (node_view,) = run_pgboss("get", pgboss_settings.SCHEMA, QUEUE, sent)["jobs"]
    assert node_view["state"] == "completed"
