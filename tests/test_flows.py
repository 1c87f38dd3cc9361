"""Flows (pg-boss 12.35's flow()): inserting a graph, reading its edges, resolving it, and what a
parent's failure, cancellation or deletion does to its children, against a real PostgreSQL."""

from __future__ import annotations

import pytest
from django.db import connection, transaction

from django_pgboss import (
    DependencyRef,
    DuplicateFlowRef,
    EmptyFlow,
    FlowCycle,
    FlowJob,
    FlowJobRefused,
    InvalidFlow,
    InvalidOption,
    QueueNotFound,
    UnknownFlowRef,
    boss,
    signals,
)
from django_pgboss.api.boss import Boss
from django_pgboss.conf import pgboss_settings
from django_pgboss.monitor import Monitor
from django_pgboss.plans import flows as flow_plans
from tests.helpers import job_row, pgboss_settings_with, rows

pytestmark = pytest.mark.django_db


@pytest.fixture
def queues():
    for name in ("charge", "email", "invoice", "archive"):
        boss.create_queue(name)


ORDER = [
    {"ref": "charge", "name": "charge", "data": {"order": 7}},
    {"ref": "email", "name": "email", "depends_on": ["charge"]},
    {"ref": "invoice", "name": "invoice", "depends_on": ["charge"]},
    {"ref": "archive", "name": "archive", "depends_on": ["email", "invoice"]},
]


def flow_columns(job_id: str) -> tuple:
    return job_row(job_id, "state", "blocked", "blocking", "pending_dependencies")


def run_one(name: str, output=None) -> str:
    """Fetch the queue's one ready job and complete it; returns its id."""
    (job,) = boss.fetch(name)
    assert boss.complete(name, job, output) == 1
    return job.id


class FlowsHeard:
    """A receiver of flow_resolved keeping what each signal said, in order."""

    def __init__(self) -> None:
        self.events: list[tuple] = []

    def receive(self, sender, **kwargs):
        self.events.append(
            (
                sender,
                kwargs["instance"],
                kwargs["table"],
                kwargs["resolved"],
                kwargs["using"],
                kwargs["schema"],
            )
        )

    def __enter__(self) -> FlowsHeard:
        signals.flow_resolved.connect(self.receive)
        return self

    def __exit__(self, *exc_info) -> None:
        signals.flow_resolved.disconnect(self.receive)


def edge_count() -> int:
    return rows("SELECT count(*) FROM {s}.job_dependency")[0][0]


def job_count() -> int:
    return rows("SELECT count(*) FROM {s}.job")[0][0]


# -- inserting -------------------------------------------------------------------------------


def test_flow_inserts_children_blocked_with_their_pending_counts(queues):
    ids = boss.flow(ORDER)
    assert set(ids) == {"charge", "email", "invoice", "archive"}
    assert flow_columns(ids["charge"]) == ("created", False, True, 0)
    assert flow_columns(ids["email"]) == ("created", True, True, 1)
    assert flow_columns(ids["invoice"]) == ("created", True, True, 1)
    assert flow_columns(ids["archive"]) == ("created", True, False, 2)
    assert job_row(ids["charge"], "data") == ({"order": 7},)
    assert boss.get_dependencies("archive", ids["archive"]) == sorted(
        [DependencyRef("email", ids["email"]), DependencyRef("invoice", ids["invoice"])],
        key=lambda d: (d.name, d.id),
    )
    assert boss.get_dependents("charge", ids["charge"]) == sorted(
        [DependencyRef("email", ids["email"]), DependencyRef("invoice", ids["invoice"])],
        key=lambda d: (d.name, d.id),
    )
    assert boss.get_dependencies("charge", ids["charge"]) == []
    # Blocked children are not fetched; only the root is.
    assert boss.fetch("email") == [] and boss.fetch("archive") == []
    assert [j.id for j in boss.fetch("charge")] == [ids["charge"]]


def test_flow_takes_flowjobs_and_each_jobs_send_options(queues):
    ids = boss.flow(
        [
            FlowJob("a", "charge", {"n": 1}, options={"priority": 5, "retry_limit": 7, "singleton_key": "k"}),
            FlowJob("b", "email", depends_on=["a", "a"]),
        ]
    )
    assert job_row(ids["a"], "priority", "retry_limit", "singleton_key") == (5, 7, "k")
    # A repeated depends_on counts once, as pg-boss dedupes it.
    assert flow_columns(ids["b"]) == ("created", True, False, 1)
    assert edge_count() == 1


def test_flow_uses_a_given_id(queues):
    given = "6d8f3c2a-1b4e-4c5d-9e6f-7a8b9c0d1e2f"
    ids = boss.flow([FlowJob("a", "charge", options={"id": given}), FlowJob("b", "email", depends_on=["a"])])
    assert ids["a"] == given
    assert boss.get_dependencies("email", ids["b"]) == [DependencyRef("charge", given)]


def test_flow_commits_and_rolls_back_with_the_callers_transaction(queues):
    with pytest.raises(RuntimeError), transaction.atomic():
        boss.flow(ORDER)
        assert job_count() == 4 and edge_count() == 4
        raise RuntimeError("the caller's own work failed")
    assert job_count() == 0 and edge_count() == 0
    with transaction.atomic():
        boss.flow(ORDER)
    assert job_count() == 4 and edge_count() == 4


@pytest.mark.parametrize(
    ("jobs", "error", "words"),
    [
        ([], EmptyFlow, "no jobs"),
        ([{"ref": "a", "name": "charge"}], EmptyFlow, "at least 2 jobs"),
        ([{"ref": "a", "name": "charge"}, {"ref": "b", "name": "email"}], EmptyFlow, "no job depends"),
        (
            [{"ref": "a", "name": "charge"}, {"ref": "a", "name": "email", "depends_on": ["a"]}],
            DuplicateFlowRef,
            "ref 'a' is used by jobs 0 and 1",
        ),
        (
            [{"ref": "a", "name": "charge"}, {"ref": "b", "name": "email", "depends_on": ["nope"]}],
            UnknownFlowRef,
            "flow job 'b' depends on 'nope'",
        ),
        (
            [{"ref": "a", "name": "charge"}, {"ref": "b", "name": "email", "depends_on": ["b"]}],
            FlowCycle,
            "'b' depends on itself",
        ),
        (
            [
                {"ref": "root", "name": "charge"},
                {"ref": "x", "name": "email", "depends_on": ["root", "z"]},
                {"ref": "y", "name": "invoice", "depends_on": ["x"]},
                {"ref": "z", "name": "archive", "depends_on": ["y"]},
                {"ref": "after", "name": "archive", "depends_on": ["z"]},
            ],
            FlowCycle,
            "'z' -> 'y' -> 'x' -> 'z' (each depends on the next)",
        ),
        (
            [{"ref": "a", "name": "charge"}, {"ref": "b", "name": "missing", "depends_on": ["a"]}],
            QueueNotFound,
            "flow job 'b': queue 'missing' does not exist",
        ),
        (
            [{"ref": "a", "name": "charge"}, {"ref": "", "name": "email", "depends_on": ["a"]}],
            InvalidFlow,
            "ref must be a non-empty string",
        ),
        (
            [{"ref": "a", "name": "charge", "dependsOn": []}, {"ref": "b", "name": "email"}],
            InvalidFlow,
            "unknown key(s) 'dependsOn'",
        ),
        (
            [{"ref": "a", "name": "charge"}, {"ref": "b", "name": "email", "depends_on": "a"}],
            InvalidFlow,
            "flow job 'b': depends_on must be a list",
        ),
        (
            [
                {"ref": "a", "name": "charge", "options": {"priority": "high"}},
                {"ref": "b", "name": "email", "depends_on": ["a"]},
            ],
            InvalidOption,
            "priority",
        ),
        (
            [
                {"ref": "a", "name": "charge", "options": {"colour": 1}},
                {"ref": "b", "name": "email", "depends_on": ["a"]},
            ],
            InvalidOption,
            "flow job 'a': unknown option(s) colour",
        ),
        ({"ref": "a"}, InvalidFlow, "takes a list of jobs"),
    ],
)
def test_bad_flows_are_refused_before_anything_is_written(queues, jobs, error, words):
    with transaction.atomic():
        with pytest.raises(error) as raised:
            boss.flow(jobs)
        assert words in str(raised.value)
        # The caller's transaction is still usable, and nothing was written.
        assert job_count() == 0 and edge_count() == 0


def test_bad_flow_runs_no_sql_at_all(queues, django_assert_num_queries):
    with django_assert_num_queries(0):
        for jobs in (
            [],
            [{"ref": "a", "name": "charge"}, {"ref": "b", "name": "email", "depends_on": ["c"]}],
        ):
            with pytest.raises(InvalidFlow):
                boss.flow(jobs)


def test_a_job_its_queue_refuses_rolls_the_whole_flow_back(queues):
    boss.create_queue("once", policy="short")
    boss.send("once", {}, singleton_key="k")
    before = job_count()
    with transaction.atomic():
        with pytest.raises(FlowJobRefused) as raised:
            boss.flow(
                [
                    FlowJob("a", "charge"),
                    FlowJob("dup", "once", options={"singleton_key": "k"}, depends_on=["a"]),
                ]
            )
        assert raised.value.refs == ["dup"]
        assert job_count() == before and edge_count() == 0


# -- resolving -------------------------------------------------------------------------------


def test_completing_a_parent_leaves_its_children_to_the_resolver(queues):
    ids = boss.flow(ORDER)
    run_one("charge", {"paid": True})
    # Completion does no dependency work (pg-boss 12.35): the children wait for the resolver.
    assert flow_columns(ids["email"]) == ("created", True, True, 1)
    assert boss.resolve_flow() == 1
    assert flow_columns(ids["charge"]) == ("completed", False, False, 0)
    assert flow_columns(ids["email"]) == ("created", False, True, 0)
    assert flow_columns(ids["invoice"]) == ("created", False, True, 0)
    assert flow_columns(ids["archive"]) == ("created", True, False, 2)
    assert boss.resolve_flow() == 0  # a resolved parent is never taken twice


def test_a_diamond_runs_in_order_and_children_read_their_parents_outputs(queues):
    ids = boss.flow(ORDER)
    run_one("charge", {"paid": 10})
    boss.resolve_flow()
    email = boss.fetch("email")[0]
    assert boss.get_parent_outputs("email", email.id) == {
        DependencyRef("charge", ids["charge"]): {"paid": 10}
    }
    boss.complete("email", email, {"sent": True})
    boss.resolve_flow()
    # One of archive's two parents is done: it still waits for the other.
    assert flow_columns(ids["archive"]) == ("created", True, False, 1)
    assert boss.fetch("archive") == []
    run_one("invoice", {"number": 3})
    boss.resolve_flow()
    assert flow_columns(ids["archive"]) == ("created", False, False, 0)
    archive = boss.fetch("archive")[0]
    assert boss.get_parent_outputs("archive", archive.id) == {
        DependencyRef("email", ids["email"]): {"sent": True},
        DependencyRef("invoice", ids["invoice"]): {"number": 3},
    }


def test_two_parents_completing_in_one_pass_unblock_their_child_once(queues):
    ids = boss.flow(ORDER)
    run_one("charge")
    boss.resolve_flow()
    run_one("email")
    run_one("invoice")
    assert boss.resolve_flow() == 2
    assert flow_columns(ids["archive"]) == ("created", False, False, 0)


def test_the_resolver_drains_more_than_one_batch(queues, django_capture_on_commit_callbacks):
    n = flow_plans.FLOW_BATCH_SIZE + 5
    jobs = [FlowJob(f"p{i}", "charge") for i in range(n)] + [
        FlowJob("last", "archive", depends_on=[f"p{i}" for i in range(n)])
    ]
    ids = boss.flow(jobs)
    assert flow_columns(ids["last"]) == ("created", True, False, n)
    rows("UPDATE {s}.job SET state = 'completed' WHERE name = 'charge'")
    with FlowsHeard() as heard, django_capture_on_commit_callbacks(execute=True):
        assert boss.resolve_flow() == n
    assert flow_columns(ids["last"]) == ("created", False, False, 0)
    # pg-boss's flow event, once per batch that resolved parents.
    where = ("default", pgboss_settings.SCHEMA)
    assert heard.events == [
        (Boss, boss, "job_common", flow_plans.FLOW_BATCH_SIZE, *where),
        (Boss, boss, "job_common", 5, *where),
    ]


def test_complete_with_include_queued_releases_a_blocked_job_itself(queues):
    ids = boss.flow(ORDER)
    assert boss.complete("archive", ids["archive"], include_queued=True) == 1
    assert flow_columns(ids["archive"]) == ("completed", False, False, 0)


def test_a_parent_failing_for_good_leaves_its_children_blocked_until_it_is_retried(queues):
    boss.update_queue("charge", retry_limit=0)
    ids = boss.flow(ORDER)
    (job,) = boss.fetch("charge")
    boss.fail("charge", job, {"card": "declined"})
    assert boss.resolve_flow() == 0
    assert flow_columns(ids["charge"]) == ("failed", False, True, 0)
    assert flow_columns(ids["email"]) == ("created", True, True, 1)
    assert boss.fetch("email") == []
    # Retried and completed, it releases its children after all.
    assert boss.retry("charge", ids["charge"]) == 1
    run_one("charge")
    assert boss.resolve_flow() == 1
    assert flow_columns(ids["email"]) == ("created", False, True, 0)


def test_a_parent_failing_with_retries_left_keeps_its_flow_columns(queues):
    boss.update_queue("charge", retry_limit=1)
    ids = boss.flow(ORDER)
    (job,) = boss.fetch("charge")
    boss.fail("charge", job)
    assert flow_columns(ids["charge"]) == ("retry", False, True, 0)
    assert boss.get_dependents("charge", ids["charge"]) != []


def test_a_cancelled_parent_leaves_its_children_blocked_until_resumed(queues):
    ids = boss.flow(ORDER)
    assert boss.cancel("charge", ids["charge"]) == 1
    assert boss.resolve_flow() == 0
    assert flow_columns(ids["email"]) == ("created", True, True, 1)
    assert boss.resume("charge", ids["charge"]) == 1
    run_one("charge")
    assert boss.resolve_flow() == 1
    assert flow_columns(ids["email"]) == ("created", False, True, 0)


def test_a_deleted_parent_leaves_its_children_blocked_and_maintenance_drops_its_edges(queues):
    ids = boss.flow(ORDER)
    assert boss.delete_job("charge", ids["charge"]) == 1
    assert boss.resolve_flow() == 0
    assert flow_columns(ids["email"]) == ("created", True, True, 1)
    assert edge_count() == 4
    with pgboss_settings_with(MAINTENANCE_INTERVAL_SECONDS=1):
        report = boss.supervise()
    # The edges from the deleted parent are gone; the children stay blocked, as in pg-boss.
    assert report.dependencies_deleted == 2
    assert boss.get_dependencies("email", ids["email"]) == []
    assert edge_count() == 2
    assert flow_columns(ids["email"]) == ("created", True, True, 1)


def test_retention_deletes_a_stuck_child_and_maintenance_its_edges(queues):
    ids = boss.flow(ORDER)
    rows("UPDATE {s}.job SET keep_until = now() - interval '1 minute' WHERE id = %s", [ids["archive"]])
    with pgboss_settings_with(MAINTENANCE_INTERVAL_SECONDS=1):
        report = boss.supervise()
    assert report.deleted == 1
    assert report.dependencies_deleted == 2
    assert boss.get_dependents("email", ids["email"]) == []


def test_the_monitors_flow_pass_is_gated_across_monitors(queues, django_capture_on_commit_callbacks):
    boss.flow(ORDER)
    run_one("charge")
    first, second = Monitor(cron=False), Monitor(cron=False)
    with FlowsHeard() as heard, django_capture_on_commit_callbacks(execute=True):
        assert first.resolve_flows().claimed
    assert heard.events == [(Monitor, first, "job_common", 1, "default", pgboss_settings.SCHEMA)]
    # Within FLOW_INTERVAL_SECONDS of the first pass no other monitor runs one.
    assert not second.resolve_flows().claimed
    assert second.resolve_flows(gated=False).claimed


def test_the_flow_pass_stamps_the_column_pg_boss_reads(queues):
    Monitor(cron=False).resolve_flows()
    assert rows("SELECT flow_on IS NOT NULL FROM {s}.version") == [(True,)]


def test_flow_graph_has_every_job_and_edge(queues):
    ids = boss.flow(ORDER)
    run_one("charge")
    graph = boss.get_flow("email", ids["email"])
    assert graph.nodes == {
        DependencyRef("charge", ids["charge"]): "completed",
        DependencyRef("email", ids["email"]): "created",
        DependencyRef("invoice", ids["invoice"]): "created",
        DependencyRef("archive", ids["archive"]): "created",
    }
    assert len(graph.edges) == 4 and not graph.truncated
    assert (DependencyRef("charge", ids["charge"]), DependencyRef("email", ids["email"])) in graph.edges
    parents = boss.get_flow_jobs("archive", ids["archive"], parents=True)
    assert [(p.name, p.state) for p in parents] == [("email", "created"), ("invoice", "created")]


def test_reads_refuse_a_malformed_id(queues):
    with pytest.raises(InvalidOption, match="id must be a uuid"):
        boss.get_dependencies("charge", "not-a-uuid")
    assert connection.is_usable()


def test_flow_graph_stops_at_its_edge_limit_and_says_so(queues):
    ids = boss.flow(
        [FlowJob("r", "charge")] + [FlowJob(f"c{i}", "email", depends_on=["r"]) for i in range(12)]
    )
    whole = boss.get_flow("email", ids["c3"])
    assert len(whole.edges) == 12 and not whole.truncated and len(whole.nodes) == 13
    part = boss._flows.graph("email", ids["c3"], limit=5)
    assert part.truncated and len(part.edges) == 5
    assert all(parent == DependencyRef("charge", ids["r"]) for parent, _child in part.edges)
    # A chain is walked to its ends from its middle.
    chain = boss.flow(
        [FlowJob("a", "charge")]
        + [FlowJob(f"s{i}", "email", depends_on=[f"s{i - 1}" if i else "a"]) for i in range(6)]
    )
    graph = boss.get_flow("email", chain["s2"])
    assert len(graph.nodes) == 7 and len(graph.edges) == 6 and not graph.truncated


def test_a_flow_into_notify_and_partitioned_queues(queues, django_capture_on_commit_callbacks):
    boss.create_queue("loud", notify=True)
    boss.create_queue("own", partition=True)
    ids = boss.flow(
        [FlowJob("a", "loud"), FlowJob("b", "own", depends_on=["a"]), FlowJob("c", "loud", depends_on=["b"])]
    )
    assert flow_columns(ids["b"]) == ("created", True, True, 1)
    run_one("loud")
    assert boss.resolve_flow(["loud"]) == 1
    run_one("own")
    # Resolved from the partitioned queue's own table; its child is in job_common.
    with FlowsHeard() as heard, django_capture_on_commit_callbacks(execute=True):
        assert boss.resolve_flow(["own"]) == 1
    assert flow_columns(ids["c"]) == ("created", False, False, 0)
    (table,) = rows("SELECT table_name FROM {s}.queue WHERE name = 'own'")[0]
    assert table != "job_common" and [e[2:4] for e in heard.events] == [(table, 1)]


@pytest.mark.django_db(transaction=True)
def test_flow_resolved_is_sent_when_the_callers_transaction_commits_and_never_when_it_rolls_back(queues):
    boss.flow(ORDER)
    run_one("charge")
    with FlowsHeard() as heard:
        with pytest.raises(RuntimeError), transaction.atomic():
            assert boss.resolve_flow() == 1
            raise RuntimeError("the caller changes its mind")
        assert heard.events == []
        with transaction.atomic():
            assert boss.resolve_flow() == 1
            assert heard.events == []
        assert [e[2:4] for e in heard.events] == [("job_common", 1)]
        # In autocommit, once the batch's own transaction has committed.
        run_one("email")
        assert boss.resolve_flow() == 1
        assert [e[2:4] for e in heard.events] == [("job_common", 1), ("job_common", 1)]
