"""Sending: send, send_after, send_throttled, send_debounced and insert, with pg-boss's cascade."""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import select
import uuid

import psycopg
import pytest
from django.contrib.auth.models import User
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from django_pgboss import (
    DeadLetterQueueNotFound,
    InvalidOption,
    InvalidQueueName,
    InvalidStartAfter,
    JobDataNotSerializable,
    QueueNotFound,
    boss,
)
from django_pgboss.db.identifiers import schema_key
from django_pgboss.observability import tracing
from tests.conftest import database_url
from tests.helpers import count_jobs, job_row, rows

pytestmark = [pytest.mark.django_db, pytest.mark.queue("emails")]


def seconds_until(moment: dt.datetime) -> float:
    (now,) = rows("SELECT now()")[0]
    return (moment - now).total_seconds()


def test_send_returns_the_id_of_a_created_job(queue):
    job_id = boss.send(queue, {"to": "ada@example.com"})
    assert uuid.UUID(job_id)
    assert job_row(job_id, "name", "state", "data", "priority", "retry_count") == (
        "emails",
        "created",
        {"to": "ada@example.com"},
        0,
        0,
    )


def test_send_without_data_stores_null(queue):
    assert job_row(boss.send(queue), "data") == (None,)


def test_data_round_trips_django_types(queue):
    when = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    key = uuid.uuid4()
    job_id = boss.send(queue, {"at": when, "price": decimal.Decimal("9.99"), "key": key, "list": [1, None]})
    assert job_row(job_id, "data") == (
        {"at": "2026-01-02T03:04:05Z", "price": "9.99", "key": str(key), "list": [1, None]},
    )


@pytest.mark.parametrize("data", [{"x": object()}, {1, 2}, float("nan"), {"n": float("inf")}])
def test_unserialisable_data_is_refused_and_nothing_written(queue, data):
    with pytest.raises(JobDataNotSerializable, match="job data cannot be stored as JSON"):
        boss.send(queue, data)
    assert count_jobs() == 0


def test_unknown_queue():
    with pytest.raises(QueueNotFound, match="'nowhere' does not exist"):
        boss.send("nowhere", {})


def test_queue_name_that_looks_like_sql_never_reaches_sql():
    with pytest.raises(InvalidQueueName):
        boss.send("x'); DELETE FROM pgboss.job; --", {})


def test_options_cascade_job_then_queue_then_default():
    boss.create_queue("dlq")
    boss.create_queue(
        "q",
        retry_limit=5,
        retry_delay=7,
        retry_backoff=True,
        retry_delay_max=99,
        expire_in_seconds=60,
        delete_after_seconds=10,
        heartbeat_seconds=20,
        dead_letter="dlq",
    )
    from_queue = boss.send("q")
    assert job_row(
        from_queue,
        "retry_limit",
        "retry_delay",
        "retry_backoff",
        "retry_delay_max",
        "expire_seconds",
        "deletion_seconds",
        "heartbeat_seconds",
        "dead_letter",
        "policy",
    ) == (5, 7, True, 99, 60, 10, 20, "dlq", "standard")
    boss.create_queue("dlq2")
    from_job = boss.send(
        "q",
        retry_limit=1,
        retry_delay=2,
        retry_backoff=False,
        expire_in_seconds=30,
        delete_after_seconds=0,
        heartbeat_seconds=10,
        dead_letter="dlq2",
    )
    assert job_row(
        from_job,
        "retry_limit",
        "retry_delay",
        "retry_backoff",
        "expire_seconds",
        "deletion_seconds",
        "heartbeat_seconds",
        "dead_letter",
    ) == (1, 2, False, 30, 0, 10, "dlq2")
    boss.create_queue("plain")
    assert job_row(boss.send("plain"), "retry_limit", "expire_seconds", "deletion_seconds") == (
        2,
        900,
        604800,
    )


def test_a_send_without_options_writes_the_row_a_send_with_them_writes():
    """send() has a leaner statement for a job that names no option; it must write the same row."""
    boss.create_queue("dlq")
    boss.create_queue("q", retry_limit=4, retry_backoff=True, retention_seconds=600, dead_letter="dlq")
    plain = boss.send("q", {"n": 1})
    optioned = boss.send("q", {"n": 1}, priority=0)  # an option that changes nothing
    columns = [
        "name", "data", "priority", "state", "retry_limit", "retry_count", "retry_delay", "retry_backoff",
        "retry_delay_max", "expire_seconds", "deletion_seconds", "singleton_key", "singleton_on",
        "group_id", "group_tier", "policy", "dead_letter", "heartbeat_seconds", "keep_until - start_after",
        "start_after = created_on",
    ]  # fmt: skip
    assert job_row(plain, *columns) == job_row(optioned, *columns)
    assert job_row(plain, "keep_until - start_after", "start_after = created_on") == (
        dt.timedelta(seconds=600),
        True,
    )


def test_retention_sets_keep_until_from_start_after(queue):
    job_id = boss.send(queue, retention_seconds=3600, start_after=60)
    start_after, keep_until = job_row(job_id, "start_after", "keep_until")
    assert keep_until - start_after == dt.timedelta(hours=1)


def test_send_with_an_id_and_a_repeat_of_it(queue):
    job_id = str(uuid.uuid4())
    assert boss.send(queue, {"n": 1}, id=job_id) == job_id
    assert boss.send(queue, {"n": 2}, id=job_id) is None
    assert job_row(job_id, "data") == ({"n": 1},)
    with pytest.raises(InvalidOption, match="id must be a uuid"):
        boss.send(queue, id="not-a-uuid")


def test_priority(queue):
    assert job_row(boss.send(queue, priority=10), "priority") == (10,)
    assert job_row(boss.send(queue, priority=-3), "priority") == (-3,)
    with pytest.raises(InvalidOption, match="priority"):
        boss.send(queue, priority="high")


@pytest.mark.parametrize(
    ("start_after", "expected_seconds"),
    [
        (30, 30),
        (0.5, 0.5),
        (dt.timedelta(minutes=1), 60),
    ],
)
def test_start_after_in_seconds(queue, start_after, expected_seconds):
    (start,) = job_row(boss.send(queue, start_after=start_after), "start_after")
    assert seconds_until(start) == pytest.approx(expected_seconds, abs=0.05)


def test_start_after_datetime_iso_string_and_naive_values_are_utc(queue):
    aware = dt.datetime(2030, 5, 6, 7, 8, 9, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert job_row(boss.send(queue, start_after=aware), "start_after") == (aware,)
    naive = dt.datetime(2030, 5, 6, 7, 8, 9)
    assert job_row(boss.send(queue, start_after=naive), "start_after") == (naive.replace(tzinfo=dt.UTC),)
    assert job_row(boss.send(queue, start_after="2030-05-06T07:08:09Z"), "start_after") == (
        naive.replace(tzinfo=dt.UTC),
    )
    assert job_row(boss.send(queue, start_after="2030-05-06"), "start_after") == (
        dt.datetime(2030, 5, 6, tzinfo=dt.UTC),
    )
    assert job_row(boss.send_after(queue, {"n": 1}, "2030-05-06T07:08:09+02:00"), "start_after") == (aware,)


def test_start_after_iso_variants_resolve_to_the_same_instant(queue):
    instant = dt.datetime(2027, 1, 1, 8, tzinfo=dt.UTC)
    for text in (
        "2027-01-01T08:00:00Z",
        "2027-01-01T08:00:00+00:00",
        "2027-01-01T13:30:00+05:30",
        "2027-01-01T00:00:00-08:00",
        "2027-01-01T08:00:00",
        "2027-01-01T08:00",
        "2027-01-01 08:00:00",
        "20270101T080000Z",
        "  2027-01-01T08:00:00Z",
    ):
        assert job_row(boss.send(queue, start_after=text), "start_after") == (instant,), text


# "1 hour" is an interval pg-boss reads on the database clock, and so does django_pgboss now
# (tests/test_start_after.py); "1 hour ago" would start in the past.
@pytest.mark.parametrize("bad", ["tomorrow", "1 hour ago", "2030-13-01", -1, float("inf"), True, [1]])
def test_unparseable_start_after(queue, bad):
    with pytest.raises(InvalidStartAfter):
        boss.send(queue, start_after=bad)
    assert count_jobs() == 0


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("retry_limit", -1),
        ("retry_delay", 1.5),
        ("expire_in_seconds", 0),
        ("heartbeat_seconds", 9),
        ("singleton_seconds", 0),
        ("singleton_key", 5),
        ("group_id", 1),
        ("group_id", ""),
        ("priority", 2**31),
        ("surprise", 1),
    ],
)
def test_bad_send_options_name_the_option(queue, option, value):
    with pytest.raises(InvalidOption, match=option):
        boss.send(queue, **{option: value})
    assert count_jobs() == 0


def test_job_dead_letter_must_exist(queue):
    with pytest.raises(DeadLetterQueueNotFound, match="'ghost'"):
        boss.send(queue, dead_letter="ghost")
    assert count_jobs() == 0


def test_group_and_tier(queue):
    job_id = boss.send(queue, group_id="tenant-1", group_tier="gold")
    assert job_row(job_id, "group_id", "group_tier") == ("tenant-1", "gold")
    with pytest.raises(InvalidOption, match="group_tier needs group_id"):
        boss.send(queue, group_tier="gold")


def test_throttled_send_keeps_one_job_per_slot_and_key(queue):
    first = boss.send_throttled(queue, {"n": 1}, 60, "user-1")
    assert first is not None
    assert boss.send_throttled(queue, {"n": 2}, 60, "user-1") is None
    assert boss.send_throttled(queue, {"n": 3}, 60, "user-2") is not None
    assert boss.send_throttled(queue, {"n": 4}, 60) is not None
    assert boss.send_throttled(queue, {"n": 5}, 60) is None
    (slot,) = job_row(first, "singleton_on")
    assert slot.second == 0 and slot.tzinfo is None


def test_debounced_send_queues_one_job_for_the_next_slot(queue):
    first = boss.send_debounced(queue, {"n": 1}, 60, "k")
    second = boss.send_debounced(queue, {"n": 2}, 60, "k")
    third = boss.send_debounced(queue, {"n": 3}, 60, "k")
    assert first and second and third is None
    (slot1, _), (slot2, start2) = (
        job_row(first, "singleton_on", "start_after"),
        job_row(second, "singleton_on", "start_after"),
    )
    assert slot2 - slot1 == dt.timedelta(seconds=60)
    # The second job starts once its slot opens (pg-boss adds a second to land inside it).
    assert start2.replace(tzinfo=None) >= slot2
    assert seconds_until(start2) <= 62


def test_singleton_next_slot_needs_seconds(queue):
    with pytest.raises(InvalidOption, match="singleton_next_slot needs singleton_seconds"):
        boss.send(queue, singleton_next_slot=True)


def test_key_strict_fifo_needs_a_key():
    boss.create_queue("fifo", policy="key_strict_fifo")
    with pytest.raises(InvalidOption, match="needs a singleton_key"):
        boss.send("fifo", {})
    assert boss.send("fifo", {}, singleton_key="account-1") is not None


def test_insert_is_one_statement_for_thousands_of_jobs(queue):
    jobs = [{"data": {"i": i}, "priority": i % 3} for i in range(5000)]
    boss.send(queue)  # warm the queue cache so only the insert remains
    with CaptureQueriesContext(connection) as queries:
        assert boss.insert(queue, jobs) is None
    assert len(queries) == 1
    assert count_jobs(queue) == 5001
    assert rows("SELECT count(*) FROM {s}.job WHERE priority = 2") == [(1666,)]


def test_insert_returns_ids_and_honours_given_ids(queue):
    given = str(uuid.uuid4())
    ids = boss.insert(queue, [{"data": {"n": 1}, "id": given}, {"data": {"n": 2}}], return_ids=True)
    assert len(ids) == 2 and given in ids
    assert boss.insert(queue, [{"id": given}], return_ids=True) == []
    assert boss.insert(queue, [], return_ids=True) == []


def test_insert_validates_every_job_before_writing(queue):
    with pytest.raises(InvalidOption, match="job 1: unknown option"):
        boss.insert(queue, [{"data": 1}, {"data": 2, "bogus": True}])
    same = str(uuid.uuid4())
    with pytest.raises(InvalidOption, match="repeats id"):
        boss.insert(queue, [{"id": same}, {"id": same}])
    with pytest.raises(InvalidOption, match="list of job dicts"):
        boss.insert(queue, {"data": 1})
    with pytest.raises(JobDataNotSerializable):
        boss.insert(queue, [{"data": 1}, {"data": object()}])
    assert count_jobs() == 0


def test_insert_of_data_only_jobs_writes_what_job_by_job_encoding_writes(queue):
    # A list of nothing but {"data": ...} is encoded in one call; a priority forces the per-job
    # path. Both must store the same data, in the list's order.
    values = [{"i": 1}, None, "é ✓", [1, 2.5, {"deep": [[[True]]]}], decimal.Decimal("1.10"), 0, ""]
    fast = boss.insert(queue, [{"data": v} for v in values] + [{}], return_ids=True)
    slow = boss.insert(
        queue, [{"data": v, "priority": 0} for v in values] + [{"priority": 0}], return_ids=True
    )
    stored = dict(rows("SELECT id::text, data FROM {s}.job"))
    assert [stored[i] for i in fast] == [stored[i] for i in slow]
    expected = [{"i": 1}, None, "é ✓", [1, 2.5, {"deep": [[[True]]]}], "1.10", 0, "", None]
    assert [boss.get_job_by_id(queue, i).data for i in fast + slow] == expected + expected


def test_insert_of_data_only_jobs_refuses_what_job_by_job_refuses(queue):
    # The batch's check failing sends the list down the per-job path, which names the reason.
    nested: object = 1
    for _ in range(499):
        nested = [nested]
    boss.insert(queue, [{"data": 1}, {"data": nested}])  # 499 levels: within the limit
    assert count_jobs(queue) == 2
    for bad, reason in (("a\x00b", "NUL"), ("\ud800", "surrogate"), (1e308, "float"), (float("nan"), "JSON")):
        with pytest.raises(JobDataNotSerializable, match=reason):
            boss.insert(queue, [{"data": 1}, {"data": {"x": bad}}])
    nested = [nested]
    with pytest.raises(JobDataNotSerializable, match="nested deeper"):
        boss.insert(queue, [{"data": 1}, {"data": [nested]}])
    assert count_jobs(queue) == 2


#: Every column a send or insert writes (or leaves to its default), as compared between two
#: statements that must write the same rows; the timestamps relative to the job's start_after.
ROW_COLUMNS = [
    "data", "priority", "state", "retry_limit", "retry_count", "retry_delay", "retry_backoff",
    "retry_delay_max", "expire_seconds", "deletion_seconds", "singleton_key", "singleton_on",
    "group_id", "group_tier", "policy", "dead_letter", "heartbeat_seconds", "blocked", "blocking",
    "pending_dependencies", "started_on", "completed_on", "output", "keep_until - start_after",
    "created_on - start_after", "start_after - now() < interval '1 minute'",
]  # fmt: skip


def stored_rows(name: str) -> list[tuple]:
    """The jobs of a queue in the order of their list, their columns as ROW_COLUMNS says."""
    return rows(f"SELECT {', '.join(ROW_COLUMNS)} FROM {{s}}.job WHERE name = %s ORDER BY created_on", [name])


DATA_ONLY = [
    {"data": {"i": 1}},
    {"data": None},
    {},
    {"data": "text"},
    {"data": [1, {"x": None}]},
    {"data": 0},
]


def twin_queues(*names: str, policy: str, partition: bool) -> None:
    """Create queues ``names`` alike: ``policy``, ``partition`` and every other setting a job takes
    from its queue set to something other than its default, with a dead-letter queue."""
    boss.create_queue("dlq")
    settings = dict(
        policy=policy, partition=partition, retry_limit=4, retry_delay=3, retry_backoff=True,
        retry_delay_max=50, expire_in_seconds=90, retention_seconds=600, delete_after_seconds=7,
        heartbeat_seconds=30, dead_letter="dlq",
    )  # fmt: skip
    for name in names:
        boss.create_queue(name, **settings)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("partition", [False, True], ids=["shared", "own-table"])
@pytest.mark.parametrize("policy", ["standard", "short", "singleton", "stately", "exclusive"])
@pytest.mark.parametrize("atomic", [False, True], ids=["autocommit", "in-transaction"])
def test_insert_of_data_only_jobs_writes_the_rows_the_general_statement_writes(policy, partition, atomic):
    """insert() has a leaner statement for jobs of nothing but data (insert_data_jobs(), without
    ON CONFLICT on a standard queue outside a transaction); it must write, and drop under a
    policy, the rows insert_jobs() writes for the same jobs."""
    twin_queues("lean", "general", policy=policy, partition=partition)
    general_jobs = [{**job, "priority": 0} for job in DATA_ONLY]  # an option: the general statement
    with transaction.atomic() if atomic else contextlib.nullcontext():
        lean = boss.insert("lean", DATA_ONLY, return_ids=True)
        general = boss.insert("general", general_jobs, return_ids=True)
        assert boss.insert("lean", DATA_ONLY) is None
        boss.insert("general", general_jobs)
    assert len(lean) == len(general)
    assert stored_rows("lean") == stored_rows("general")
    if policy in ("standard", "singleton"):  # singleton limits active jobs, not queued ones
        assert count_jobs("lean") == 2 * len(DATA_ONLY)
        # Each job's created_on is its statement's job_now() plus its position in microseconds.
        offsets = sorted(row[ROW_COLUMNS.index("created_on - start_after")] for row in stored_rows("lean"))
        assert offsets == sorted(2 * [dt.timedelta(microseconds=i) for i in range(len(DATA_ONLY))])
        assert {row[ROW_COLUMNS.index("keep_until - start_after")] for row in stored_rows("lean")} == {
            dt.timedelta(seconds=600)
        }
    else:
        assert count_jobs("lean") < 2 * len(DATA_ONLY)  # the policy dropped some keyless jobs


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("partition", [False, True], ids=["shared", "own-table"])
@pytest.mark.parametrize("policy", ["standard", "short", "singleton", "stately", "exclusive"])
@pytest.mark.parametrize("atomic", [False, True], ids=["autocommit", "in-transaction"])
def test_a_send_of_data_alone_writes_and_drops_what_the_general_send_does(
    policy, partition, atomic, monkeypatch
):
    """send() of nothing but data takes a hot path once its queue's route is cached (JobSender.send());
    it must write, and drop under a policy, what the general path writes for the same jobs."""
    twin_queues("hot", "general", policy=policy, partition=partition)
    # The first send of each reads and caches its queue's route.
    assert boss.send("hot", "first") is not None
    assert boss.send("general", "first", priority=0) is not None  # an option: the general path
    # A span to record sends every job the general way: as without a tracer provider, which an
    # earlier test of the session may have set for good.
    monkeypatch.setattr(tracing, "active", lambda: False)
    general_path = []
    sender = type(boss._sender)
    general_send = sender._send
    monkeypatch.setattr(
        sender,
        "_send",
        lambda self, name, *args, **kwargs: (
            general_path.append(name) or general_send(self, name, *args, **kwargs)
        ),
    )
    values = [job.get("data") for job in DATA_ONLY] * 2
    with transaction.atomic() if atomic else contextlib.nullcontext():
        hot = [boss.send("hot", data) for data in values]
        general = [boss.send("general", data, priority=0) for data in values]
    # On the citus-distributed backend each statement is rewritten for Citus's routing on
    # entering the statement cursor, so there every send goes the general way.
    assert ("hot" in general_path) == boss.context.distributed
    assert [job_id is None for job_id in hot] == [job_id is None for job_id in general]
    assert sorted(stored_rows("hot"), key=repr) == sorted(stored_rows("general"), key=repr)
    sent = [job_id for job_id in hot if job_id is not None]
    assert len(sent) == count_jobs("hot") - 1
    if policy in ("standard", "singleton"):  # singleton limits active jobs, not queued ones
        assert None not in hot
    else:
        assert None in hot  # the policy dropped some keyless jobs


@pytest.mark.django_db(transaction=True)
def test_data_only_insert_follows_a_standard_queue_recreated_with_a_policy():
    """Without ON CONFLICT, a policy's unique index refusing a row means the cached route is
    stale (the queue was re-created with a policy): the insert is tried again, with it."""
    from django_pgboss import Boss

    boss.create_queue("turned")
    boss.insert("turned", DATA_ONLY)  # cached here as standard
    other = Boss()
    other.delete_queue("turned")
    other.create_queue("turned", policy="short")
    other.send("turned", {"first": True})  # the one queued keyless job a short queue holds
    assert boss.insert("turned", DATA_ONLY, return_ids=True) == []
    assert [j.data for j in boss.find_jobs("turned")] == [{"first": True}]
    assert boss.insert("turned", DATA_ONLY) is None
    assert count_jobs("turned") == 1


def test_insert_takes_each_job_option(queue):
    (job_id,) = boss.insert(
        queue,
        [{"data": {"n": 1}, "priority": 4, "retry_limit": 9, "singleton_key": "k", "start_after": 120}],
        return_ids=True,
    )
    priority, retry_limit, key, start = job_row(
        job_id, "priority", "retry_limit", "singleton_key", "start_after"
    )
    assert (priority, retry_limit, key) == (4, 9, "k")
    assert seconds_until(start) == pytest.approx(120, abs=1)


@pytest.mark.django_db(transaction=True)
def test_send_commits_and_rolls_back_with_the_callers_transaction():
    boss.create_queue("welcome")

    class Boom(Exception):
        pass

    with pytest.raises(Boom), transaction.atomic():
        User.objects.create(username="ada")
        boss.send("welcome", {"user": "ada"})
        raise Boom
    assert (User.objects.count(), count_jobs("welcome")) == (0, 0)

    with transaction.atomic():
        User.objects.create(username="grace")
        job_id = boss.send("welcome", {"user": "grace"})
    assert User.objects.filter(username="grace").exists()
    assert job_row(job_id, "data") == ({"user": "grace"},)


@pytest.mark.django_db(transaction=True)
def test_notify_queue_issues_one_notify_for_runnable_jobs_only():
    boss.create_queue("live", notify=True)
    boss.create_queue("quiet")
    (channel,) = rows(
        "SELECT ('pgboss_' || left(encode(sha224(%s::bytea), 'hex'), 24))", [schema_key(boss.schema)]
    )[0]
    with psycopg.connect(database_url(), autocommit=True) as listener:
        listener.execute(f'LISTEN "{channel}"')

        def received() -> list[str]:
            select.select([listener.pgconn.socket], [], [], 0.5)
            return [n.payload for n in listener.notifies(timeout=0.2, stop_after=10)]

        with transaction.atomic():
            boss.send("live", {"n": 1})
            assert received() == []  # nothing before commit
        assert received() == ["live"]
        boss.insert("live", [{"data": i} for i in range(50)])
        assert received() == ["live"]
        boss.send("live", {"later": True}, start_after=3600)
        boss.send("quiet", {"n": 1})
        assert received() == []
