"""The monitor's bam pass: the index builds pg-boss's migrations queue in bam, built by our monitor.

The commands are queued as pg-boss's migrations queue them, through the schema's own
job_table_run_async(), and built for real (CREATE INDEX CONCURRENTLY needs autocommit, so these
tests commit). Each test drops the indexes it built.
"""

from __future__ import annotations

import threading

import pytest
from django.db import connection, connections

from django_pgboss import boss, signals
from django_pgboss.conf import pgboss_settings
from django_pgboss.monitor import Monitor
from tests.helpers import rows, schema_sql

pytestmark = pytest.mark.django_db(transaction=True)

#: Index numbers no release of pg-boss uses, so the tests' indexes never meet the schema's own.
TEST_INDEXES = ("job_common_i90", "job_common_i91", "job_common_i92", "job_common_i93", "job_common_i94")


@pytest.fixture(autouse=True)
def _drop_test_indexes():
    yield
    with connection.cursor() as cursor:
        for name in TEST_INDEXES:
            cursor.execute(f"DROP INDEX IF EXISTS {schema_sql()}.{name}")


def enqueue(name: str, command: str, version: int = 43) -> None:
    """Queue a command as a pg-boss migration does: job_table_run_async() on job_common (and on
    every partitioned queue's table, none here)."""
    rows("SELECT {s}.job_table_run_async(%s, %s, %s)", [name, version, command.replace("{s}", schema_sql())])


def entries() -> dict[str, tuple]:
    return {e.name: (e.status, e.error, e.table) for e in boss.get_bam_entries()}


def index(name: str) -> tuple | None:
    """(valid, unique, oid) of the schema's index ``name``, None when there is none."""
    found = rows(
        "SELECT i.indisvalid, i.indisunique, c.oid::int FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid "
        "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = %s",
        [pgboss_settings.SCHEMA, name],
    )
    return found[0] if found else None


class Heard:
    """A receiver of bam_status_changed and error_raised, keeping what each said in order, with the
    command's status in the table when a bam_status_changed came."""

    def __init__(self) -> None:
        self.events: list[tuple] = []

    def bam(self, sender, **kwargs):
        (stored,) = rows("SELECT status::text FROM {s}.bam WHERE id = %s", [kwargs["id"]])[0]
        fields = ("instance", "name", "status")
        after = ("queue", "table", "error", "using", "schema")
        self.events.append((sender, *(kwargs[f] for f in fields), stored, *(kwargs[f] for f in after)))

    def error(self, sender, **kwargs):
        self.events.append(("error_raised", str(kwargs["error"])))

    def __enter__(self) -> Heard:
        signals.bam_status_changed.connect(self.bam)
        signals.error_raised.connect(self.error)
        return self

    def __exit__(self, *exc_info) -> None:
        signals.bam_status_changed.disconnect(self.bam)
        signals.error_raised.disconnect(self.error)


def test_pending_commands_are_built_by_one_pass_and_marked_completed():
    enqueue("job_i90", "CREATE INDEX CONCURRENTLY IF NOT EXISTS job_i90 ON {s}.job (name, created_on)")
    enqueue("job_i91", "CREATE INDEX CONCURRENTLY IF NOT EXISTS job_i91 ON {s}.job (name, start_after)", 44)
    assert [(s.status, s.count) for s in boss.get_bam_status()] == [("pending", 2)]

    monitor = Monitor(cron=False)
    with Heard() as heard:
        report = monitor.build_indexes()

    assert (
        report.claimed
        and report.completed == [("job_i90", "job_common"), ("job_i91", "job_common")]
        and report.failed == {}
    )
    assert entries() == {
        "job_i90": ("completed", None, "job_common"),
        "job_i91": ("completed", None, "job_common"),
    }
    assert index("job_common_i90")[:2] == (True, False)
    assert index("job_common_i91")[:2] == (True, False)
    (status,) = boss.get_bam_status()
    assert (status.status, status.count) == ("completed", 2)
    (first, second) = boss.get_bam_entries()
    assert (first.version, second.version) == (43, 44)
    assert first.completed_on is not None and first.started_on is not None and first.queue is None
    # pg-boss's bam event, as a signal, each sent after the status it reports was stored.
    where = ("job_common", None, "default", pgboss_settings.SCHEMA)
    assert heard.events == [
        (Monitor, monitor, "job_i90", "in_progress", "in_progress", None, *where),
        (Monitor, monitor, "job_i90", "completed", "completed", None, *where),
        (Monitor, monitor, "job_i91", "in_progress", "in_progress", None, *where),
        (Monitor, monitor, "job_i91", "completed", "completed", None, *where),
    ]
    # The gate (version.bam_on) is taken: a second monitor's pass within the interval does nothing.
    with Heard() as heard:
        assert not Monitor(cron=False).build_indexes().claimed
    assert heard.events == []


def test_an_invalid_stub_left_by_an_interrupted_build_is_dropped_and_rebuilt(queue):
    boss.send(queue, {"n": 1})
    boss.send(queue, {"n": 2})
    # A unique build over two jobs of one queue fails and leaves its index behind, INVALID: what an
    # interrupted CREATE INDEX CONCURRENTLY leaves.
    with pytest.raises(Exception, match="could not create unique index"):
        rows("CREATE UNIQUE INDEX CONCURRENTLY job_common_i92 ON {s}.job_common (name)")
    assert index("job_common_i92")[:2] == (False, True)
    enqueue("job_i92", "CREATE INDEX CONCURRENTLY IF NOT EXISTS job_i92 ON {s}.job (name)")
    # Its claim is long past the grace window, and no build holds the table: the process died.
    rows("UPDATE {s}.bam SET status = 'in_progress', started_on = now() - interval '10 minutes'")

    report = Monitor(cron=False).build_indexes(gated=False)

    assert report.completed == [("job_i92", "job_common")]
    assert entries()["job_i92"] == ("completed", None, "job_common")
    # Rebuilt from the command, not kept: valid, and not the unique stub.
    assert index("job_common_i92")[:2] == (True, False)


def test_a_valid_index_behind_a_stale_claim_is_marked_done_without_a_rebuild():
    rows("CREATE INDEX job_common_i93 ON {s}.job_common (name, id)")
    valid, _, oid = index("job_common_i93")
    # Without IF NOT EXISTS, as pg-boss's oldest commands (job_i7, job_i8): running it again would
    # fail with "already exists".
    enqueue("job_i93", "CREATE INDEX CONCURRENTLY job_i93 ON {s}.job (name, id)")
    rows("UPDATE {s}.bam SET status = 'in_progress', started_on = now() - interval '10 minutes'")

    report = Monitor(cron=False).build_indexes(gated=False)

    assert (report.completed, report.failed) == ([("job_i93", "job_common")], {})
    assert entries()["job_i93"] == ("completed", None, "job_common")
    assert index("job_common_i93") == (valid, False, oid)


def test_a_live_claim_is_not_taken_over():
    enqueue("job_i90", "CREATE INDEX CONCURRENTLY IF NOT EXISTS job_i90 ON {s}.job (name, created_on)")
    # Claimed a minute ago, within the grace window: its builder may not have started yet.
    rows("UPDATE {s}.bam SET status = 'in_progress', started_on = now() - interval '1 minute'")
    enqueue("job_i91", "CREATE INDEX CONCURRENTLY IF NOT EXISTS job_i91 ON {s}.job (name)")

    report = Monitor(cron=False).build_indexes(gated=False)

    assert report.completed == [] and index("job_common_i90") is None and index("job_common_i91") is None
    assert entries()["job_i91"][0] == "pending"


def test_a_failing_command_is_marked_failed_with_its_error_and_the_pass_goes_on():
    enqueue("job_i94", "CREATE INDEX CONCURRENTLY IF NOT EXISTS job_i94 ON {s}.job (no_such_column)")
    # Another migration's command: one of the same migration on the same table would wait for the
    # failed one (the next test).
    enqueue("job_i90", "CREATE INDEX CONCURRENTLY IF NOT EXISTS job_i90 ON {s}.job (name, created_on)", 44)
    received = []

    def receiver(sender, **kwargs):
        received.append((sender, kwargs["doing"], str(kwargs["error"]), kwargs["instance"]))

    monitor = Monitor(cron=False)
    signals.error_raised.connect(receiver)
    try:
        with Heard() as heard:
            report = monitor.build_indexes()
    finally:
        signals.error_raised.disconnect(receiver)

    assert report.completed == [("job_i90", "job_common")]
    assert list(report.failed) == [("job_i94", "job_common")]
    assert "no_such_column" in report.failed[("job_i94", "job_common")]
    status, error, _ = entries()["job_i94"]
    assert status == "failed" and 'column "no_such_column" does not exist' in error
    assert entries()["job_i90"] == ("completed", None, "job_common")
    ((sender, doing, message, instance),) = received
    assert (sender, doing, instance) == (Monitor, "a background index build", monitor)
    assert "no_such_column" in message
    # The command's bam events, its failure's error_raised coming before the one that says failed,
    # with the error's text as stored.
    (claimed, (kind, failure), failed, *others) = heard.events
    assert kind == "error_raised" and "no_such_column" in failure
    assert [e[2:5] for e in (claimed, failed, *others)] == [
        ("job_i94", "in_progress", "in_progress"),
        ("job_i94", "failed", "failed"),
        ("job_i90", "in_progress", "in_progress"),
        ("job_i90", "completed", "completed"),
    ]
    assert failed[7] == error
    assert [e[7] for e in (claimed, *others)] == [None, None, None]
    # The failed command waits for the next pass; then it is tried again, and fails again.
    (started,) = rows("SELECT started_on FROM {s}.bam WHERE name = 'job_i94'")
    again = monitor.build_indexes(gated=False)
    assert (again.completed, list(again.failed)) == ([], [("job_i94", "job_common")])
    assert rows("SELECT started_on > %s FROM {s}.bam WHERE name = 'job_i94'", [started[0]]) == [(True,)]


def test_a_command_waits_for_the_earlier_commands_of_its_migration_on_its_table(queue):
    """pg-boss 12.38's ordering rule: version 40's build of job_i11 and retire of job_i5 are such a
    pair, here a build that fails and a drop of the index it replaces."""
    rows("CREATE INDEX job_common_i93 ON {s}.job_common (name)")
    boss.create_queue("bam-own", partition=True)
    try:
        own = boss.get_queue("bam-own").table_name
        enqueue("job_i94", "CREATE INDEX CONCURRENTLY IF NOT EXISTS job_i94 ON {s}.job (no_such_column)", 40)
        rows(
            "UPDATE {s}.bam SET command = replace(command, 'no_such_column', 'name') WHERE table_name = %s",
            [own],
        )
        enqueue("job_i93", "DROP INDEX CONCURRENTLY IF EXISTS {s}.job_i93", 40)
        # A later migration's command on the same table is not held back (pg-boss's rule is per
        # migration), nor is anything on another table.
        enqueue(
            "job_i90", "CREATE INDEX CONCURRENTLY IF NOT EXISTS job_i90 ON {s}.job (name, created_on)", 41
        )

        monitor = Monitor(cron=False)
        report = monitor.build_indexes(gated=False)

        assert list(report.failed) == [("job_i94", "job_common")]
        assert sorted(report.completed) == sorted(
            [("job_i94", own), ("job_i93", own), ("job_i90", "job_common"), ("job_i90", own)]
        )
        by_table = {(e.name, e.table): e.status for e in boss.get_bam_entries()}
        assert by_table[("job_i93", "job_common")] == "pending"
        # The index the failed build was to replace is still there, valid.
        assert index("job_common_i93")[0] is True
        assert index("job_common_i90")[0] is True

        # The failed command is claimable itself: once it builds, the drop behind it goes too.
        rows("UPDATE {s}.bam SET command = replace(command, 'no_such_column', 'name') WHERE name = 'job_i94'")
        again = monitor.build_indexes(gated=False)

        assert again.completed == [("job_i94", "job_common"), ("job_i93", "job_common")]
        assert index("job_common_i93") is None and index("job_common_i94")[0] is True
    finally:
        boss.delete_queue("bam-own")


def test_two_monitors_at_once_build_each_command_once():
    names = ["job_i90", "job_i91", "job_i92", "job_i93"]
    for name in names:
        enqueue(name, f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON {{s}}.job (name, id)")
    barrier = threading.Barrier(2)
    reports = []
    errors = []

    def run() -> None:
        try:
            monitor = Monitor(cron=False)
            barrier.wait(timeout=30)
            reports.append(monitor.build_indexes(gated=False))
        except Exception as exc:  # reported below: a thread's exception is otherwise lost
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)

    assert errors == []
    built = [name for report in reports for name, _ in report.completed]
    assert sorted(built) == names
    assert all(status == "completed" for status, _, _ in entries().values())
    assert all(index(f"job_common_i{n}")[0] for n in (90, 91, 92, 93))


def test_a_pass_inside_a_transaction_builds_nothing():
    from django.db import transaction

    enqueue("job_i90", "CREATE INDEX CONCURRENTLY IF NOT EXISTS job_i90 ON {s}.job (name, created_on)")
    with transaction.atomic():
        report = Monitor(cron=False).build_indexes()
    assert not report.claimed and entries()["job_i90"][0] == "pending"
