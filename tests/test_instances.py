"""The instance registry: workers and monitors register, beat and stop; get_instances() lists them
with pg-boss's live, order and paging; the registry is pruned; crash restarts are counted; and
Node and Python read each other's rows."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import uuid

import pytest
from django.db import connection
from django.test import override_settings

from django_pgboss import __version__, boss, signals
from django_pgboss.api.instances import InstanceRegistrar, InstanceRole
from django_pgboss.conf import pgboss_settings
from django_pgboss.db.identifiers import quote_identifier
from django_pgboss.exceptions import InvalidOption
from django_pgboss.records import Instance, InstanceWorker
from django_pgboss.worker.registry import Registration
from tests.conftest import NODE_SCRIPT, database_url, pgboss_schema_option
from tests.helpers import rows, stats_partitions
from tests.processes import in_process, start_monitor, start_worker, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

SCHEMA = quote_identifier(pgboss_settings.SCHEMA)


@pytest.fixture(autouse=True)
def _empty_registry():
    # Other tests' pg-boss (Node) instances register too; each test here starts from none.
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {SCHEMA}.instance")
    yield
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {SCHEMA}.instance")


def named(name: str) -> list[Instance]:
    return [i for i in boss.get_instances() if i.name == name]


def one_named(name: str, **expected: object):
    """A predicate for wait_for(): the one instance of that name, once it has the expected values."""

    def found() -> Instance | None:
        rows = named(name)
        if len(rows) == 1 and all(getattr(rows[0], key) == value for key, value in expected.items()):
            return rows[0]
        return None

    return found


def registrar(**role: bool) -> InstanceRegistrar:
    return InstanceRegistrar(boss.context, role=InstanceRole(**role))


def test_a_worker_process_registers_beats_and_marks_itself_stopped():
    boss.create_queue("echo")
    worker = start_worker(
        "--queue", "echo", PGBOSS_TEST_INSTANCE_NAME="py-worker", PGBOSS_TEST_INSTANCE_HEARTBEAT="1"
    )
    try:
        first = wait_for(one_named("py-worker", live=True), timeout=60)
        assert (first.host, first.pid, first.version) == (socket.gethostname(), worker.pid, __version__)
        assert first.node_version.startswith("python 3.")
        assert first.heartbeat_seconds == 1
        assert (first.supervise, first.schedule, first.migrate) == (False, False, False)
        assert (first.pool_max, first.pool_total) == (None, None)
        assert first.stopped_on is None and first.crash_restarts == 0
        assert first.config["instanceHeartbeatSeconds"] == 1 and first.config["adapter"] == "django"
        # tests/workapp/jobs.py: @work("echo", concurrency=4, batch_size=10, polling_interval_seconds=0.2)
        [entry] = first.workers
        assert (entry.queue, entry.local_concurrency, entry.batch_size, entry.active) == ("echo", 4, 10, 0)
        assert entry.polling_interval_seconds == 0.2
        uuid.UUID(entry.id)
        # The beats move heartbeat_on, and from the second on the metrics carry a CPU rate.
        beaten = wait_for(
            lambda: (
                (row := named("py-worker")[0]).heartbeat_on > first.heartbeat_on
                and row.metrics is not None
                and row.metrics.cpu is not None
                and row
            ),
            timeout=30,
        )
        assert beaten.started_on == first.started_on and beaten.id == first.id
        assert beaten.metrics.rss > 0 and beaten.metrics.cpu_limit >= 1
        assert beaten.metrics.heap_used is None and beaten.metrics.loop_delay is None
        # The last fetch shows in the entry once the worker has polled.
        assert wait_for(lambda: named("py-worker")[0].workers[0].last_fetched_on, timeout=30)
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.communicate(timeout=60)
    assert worker.returncode == 0
    [stopped] = named("py-worker")
    assert stopped.stopped_on is not None and stopped.live is False


def test_a_monitor_process_registers_as_the_supervisor_it_is():
    monitor = start_monitor(PGBOSS_TEST_INSTANCE_NAME="py-monitor", PGBOSS_TEST_INSTANCE_HEARTBEAT="1")
    try:
        row = wait_for(one_named("py-monitor", live=True), timeout=60)
        assert (row.supervise, row.schedule, row.migrate) == (True, True, False)
        assert (row.persist_queue_stats, row.persist_warnings) == (True, False)
        assert row.workers == [] and row.pid == monitor.pid
    finally:
        monitor.send_signal(signal.SIGTERM)
        monitor.communicate(timeout=60)
    [stopped] = named("py-monitor")
    assert stopped.stopped_on is not None and not stopped.live


def test_an_in_process_worker_registers_its_queues_and_stops_its_row(queue):
    worker, thread = in_process(
        Registration(
            queue, lambda job: None, concurrency=2, batch_size=3, include_metadata=True, min_priority=1
        )
    )
    try:
        row = wait_for(lambda: next(iter(boss.get_instances()), None), timeout=30)
        assert row.live
        assert row.workers == [
            InstanceWorker(
                id=row.workers[0].id,
                queue=queue,
                local_concurrency=2,
                batch_size=3,
                polling_interval_seconds=2.0,
                active=0,
                last_fetched_on=row.workers[0].last_fetched_on,
                options={"includeMetadata": True, "minPriority": 1},
            )
        ]
    finally:
        worker.stop()
        thread.join(timeout=60)
    [stopped] = boss.get_instances()
    assert stopped.id == row.id and stopped.stopped_on is not None and not stopped.live


def test_a_failed_registration_never_stops_the_worker_and_a_later_beat_registers(queue):
    errors = []

    def receiver(sender, error, doing, instance, **kwargs):
        errors.append((sender, doing, instance))

    signals.error_raised.connect(receiver)
    with connection.cursor() as cursor:
        cursor.execute(f"ALTER TABLE {SCHEMA}.instance RENAME TO instance_away")
    renamed_back = False
    try:
        with override_settings(PGBOSS={**_configured(), "INSTANCE_HEARTBEAT_SECONDS": 1}):
            worker, thread = in_process(
                Registration(queue, lambda job: {"done": True}, polling_interval_seconds=0.2)
            )
            try:
                job_id = boss.send(queue, {})
                assert wait_for(lambda: boss.get_job_by_id(queue, job_id).state == "completed")
                assert wait_for(lambda: errors)
                assert errors[0] == (type(worker), "registering in the instance registry", worker)
                with connection.cursor() as cursor:
                    cursor.execute(f"ALTER TABLE {SCHEMA}.instance_away RENAME TO instance")
                renamed_back = True
                row = wait_for(lambda: next(iter(boss.get_instances()), None), timeout=30)
                assert row.live and row.workers[0].queue == queue
            finally:
                worker.stop()
                thread.join(timeout=60)
    finally:
        signals.error_raised.disconnect(receiver)
        if not renamed_back:
            with connection.cursor() as cursor:
                cursor.execute(f"ALTER TABLE {SCHEMA}.instance_away RENAME TO instance")


def _configured() -> dict:
    from django.conf import settings

    return dict(settings.PGBOSS)


def test_a_row_goes_quiet_after_three_missed_beats_and_is_pruned_after_seven_days(clock):
    # The passes a week ahead make that week's queue_stats partitions, which would outlive this
    # committing test (and differ from the catalog pg-boss installs in a later one).
    partitions = stats_partitions()
    quiet = registrar()
    quiet.start()
    try:
        row = wait_for(lambda: next(iter(boss.get_instances()), None))
        assert row.live and row.heartbeat_seconds == 30
        # Three beats of 30 seconds: still live at 90 s, quiet just past it, though never stopped.
        clock.advance(seconds=90)
        assert boss.get_instances()[0].live
        clock.advance(seconds=1)
        [gone_quiet] = boss.get_instances()
        assert not gone_quiet.live and gone_quiet.stopped_on is None
        # The monitor's pass deletes a row whose heartbeat has not moved for seven days.
        clock.advance(days=6, hours=23)
        boss.supervise()
        assert len(boss.get_instances()) == 1
        clock.advance(hours=1)
        boss.supervise()
        assert boss.get_instances() == []
    finally:
        quiet.stop()
        for name in stats_partitions() - partitions:
            rows(f'DROP TABLE {{s}}."{name}"')


def test_without_register_instance_nothing_is_written(queue):
    with override_settings(PGBOSS={**_configured(), "REGISTER_INSTANCE": False}):
        worker, thread = in_process(Registration(queue, lambda job: None, polling_interval_seconds=0.2))
        job_id = boss.send(queue, {})
        assert wait_for(lambda: boss.get_job_by_id(queue, job_id).state == "completed")
        worker.stop()
        thread.join(timeout=60)
    assert boss.get_instances() == []


def test_pages_follow_start_order_from_an_instance_or_its_id():
    registrars = [registrar() for _ in range(5)]
    for each in registrars:
        each.start()
    try:
        everyone = wait_for(lambda: len(rows := boss.get_instances()) == 5 and rows)
        assert [(i.started_on, uuid.UUID(i.id)) for i in everyone] == sorted(
            (i.started_on, uuid.UUID(i.id)) for i in everyone
        )
        first = boss.get_instances(limit=2)
        second = boss.get_instances(limit=2, after=first[-1])
        third = boss.get_instances(limit=2, after=second[-1].id)
        assert [i.id for i in first + second + third] == [i.id for i in everyone]
        assert len(third) == 1
        assert boss.get_instances(after=uuid.UUID(third[-1].id)) == []
    finally:
        for each in registrars:
            each.stop()


@pytest.mark.parametrize("limit", [0, -1, 100_001, True, 1.5, "10"])
def test_a_bad_limit_is_refused_before_any_sql(limit, django_assert_num_queries):
    with django_assert_num_queries(0), pytest.raises(InvalidOption, match="get_instances: limit"):
        boss.get_instances(limit=limit)


@pytest.mark.parametrize("after", ["", "not-a-uuid", "\x00", 5, object(), {"id": "x"}])
def test_a_bad_cursor_is_refused_before_any_sql(after, django_assert_num_queries):
    with django_assert_num_queries(0), pytest.raises(InvalidOption, match="get_instances: after"):
        boss.get_instances(after=after)


def test_a_cursor_naming_a_pruned_instance_is_refused():
    with pytest.raises(InvalidOption, match="no longer exists"):
        boss.get_instances(after=str(uuid.uuid4()))


def test_a_crash_restart_is_counted_by_the_next_life_on_its_name_and_host(queue):
    env = {"PGBOSS_TEST_INSTANCE_NAME": "crashy", "PGBOSS_TEST_INSTANCE_HEARTBEAT": "1"}
    boss.create_queue("echo")
    crashed = start_worker("--queue", "echo", **env)
    try:
        wait_for(one_named("crashy", live=True), timeout=60)
    finally:
        crashed.kill()
        crashed.communicate(timeout=30)
    successor = start_worker("--queue", "echo", **env)
    try:
        # The crashed row still reads live at the successor's start; once it goes quiet (three
        # missed beats) the successor counts again and finds one crash before it.
        row = wait_for(
            lambda: next(
                (i for i in named("crashy") if i.pid == successor.pid and i.crash_restarts == 1), None
            ),
            timeout=60,
        )
        assert row.crash_restarts_since is not None
    finally:
        successor.send_signal(signal.SIGTERM)
        successor.communicate(timeout=60)


def test_the_admin_lists_instances_with_their_queues_and_liveness(admin_client, queue):
    from django.urls import reverse

    worker, thread = in_process(Registration(queue, lambda job: None, concurrency=3))
    try:
        row = wait_for(lambda: next(iter(boss.get_instances()), None), timeout=30)
        page = admin_client.get(reverse("admin:pgboss_instance_changelist")).content.decode()
        assert socket.gethostname() in page and str(os.getpid()) in page and __version__ in page
        assert f"{queue} (3)" in page
        assert 'alt="True"' in page
        assert row.heartbeat_on.strftime("%Y-%m-%d %H:%M:%S") in page
        assert admin_client.get(reverse("admin:pgboss_instance_add")).status_code == 403
    finally:
        worker.stop()
        thread.join(timeout=60)
    page = admin_client.get(reverse("admin:pgboss_instance_changelist")).content.decode()
    assert 'alt="False"' in page


# -- Node ------------------------------------------------------------------------------------------


def node_env() -> dict[str, str]:
    return {**os.environ, "PGBOSS_NODE_DIR": os.environ.get("PGBOSS_NODE_DIR", "")}


@pytest.mark.node
def test_a_node_instance_appears_live_and_then_stopped(run_pgboss):
    command = [
        "node",
        str(NODE_SCRIPT),
        "register",
        database_url(),
        pgboss_schema_option(pgboss_settings.SCHEMA),
        "node-api",
        "2",
    ]
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    with subprocess.Popen(command, env=node_env(), text=True, **pipes) as node:
        try:
            assert json.loads(node.stdout.readline()) == {"registered": True}
            row = wait_for(one_named("node-api", live=True), timeout=30)
            assert row.version == "12.38.0" and row.node_version.startswith("v")
            assert row.pid == node.pid and row.host == socket.gethostname() and row.heartbeat_seconds == 2
            assert row.workers == [] and row.metrics is not None and row.metrics.cpu_limit >= 1
            assert row.config["instanceHeartbeatSeconds"] == 2
        finally:
            node.stdin.close()
            node.wait(timeout=60)
            errors = node.stderr.read()
    assert node.returncode == 0, errors
    [stopped] = named("node-api")
    assert stopped.stopped_on is not None and not stopped.live


@pytest.mark.node
def test_a_python_worker_appears_in_node_get_instances(run_pgboss, queue):
    worker, thread = in_process(Registration(queue, lambda job: None, concurrency=2, batch_size=5))
    try:
        ours = wait_for(lambda: next(iter(boss.get_instances()), None), timeout=30)
        [seen] = [
            i for i in run_pgboss("instances", pgboss_settings.SCHEMA)["instances"] if i["id"] == ours.id
        ]
        assert seen["live"] is True and seen["stoppedOn"] is None
        assert (seen["host"], seen["pid"], seen["version"]) == (
            socket.gethostname(),
            os.getpid(),
            __version__,
        )
        assert seen["nodeVersion"].startswith("python 3.")
        assert seen["workers"][0]["queue"] == queue
        assert (seen["workers"][0]["localConcurrency"], seen["workers"][0]["batchSize"]) == (2, 5)
        assert seen["crashRestarts"] == 0 and seen["supervise"] is False
        # Node pages the same list in the same order.
        assert [
            i["id"]
            for i in run_pgboss("instances", pgboss_settings.SCHEMA, json.dumps({"limit": 1}))["instances"]
        ] == [boss.get_instances(limit=1)[0].id]
    finally:
        worker.stop()
        thread.join(timeout=60)
