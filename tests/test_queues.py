"""Queue management: create, update, delete and read queues, with pg-boss's rules."""

from __future__ import annotations

import pytest

from django_pgboss import (
    DeadLetterQueueNotFound,
    InvalidOption,
    InvalidPolicy,
    InvalidQueueName,
    QueueInUse,
    QueueNotFound,
    QueuePolicy,
    boss,
)
from tests.helpers import count_jobs, rows

pytestmark = pytest.mark.django_db


def test_create_queue_with_defaults():
    boss.create_queue("emails")
    queue = boss.get_queue("emails")
    assert (queue.name, queue.policy, queue.partition, queue.table_name, queue.dead_letter) == (
        "emails",
        "standard",
        False,
        "job_common",
        None,
    )
    assert (queue.retry_limit, queue.retry_delay, queue.retry_backoff, queue.retry_delay_max) == (
        2,
        0,
        False,
        None,
    )
    assert (queue.expire_in_seconds, queue.retention_seconds, queue.delete_after_seconds) == (
        900,
        1209600,
        604800,
    )
    assert (queue.heartbeat_seconds, queue.warning_queue_size, queue.notify) == (None, 0, False)
    assert (queue.queued_count, queue.created_delta, queue.delta_on) == (0, 0, None)


def test_create_queue_with_every_option():
    boss.create_queue("dlq")
    boss.create_queue(
        "orders",
        policy="stately",
        partition=True,
        dead_letter="dlq",
        retry_limit=5,
        retry_delay=10,
        retry_backoff=True,
        retry_delay_max=300,
        expire_in_seconds=60,
        retention_seconds=3600,
        delete_after_seconds=0,
        heartbeat_seconds=30,
        warning_queue_size=100,
        notify=True,
    )
    queue = boss.get_queue("orders")
    assert queue.policy == "stately"
    assert queue.partition is True
    assert queue.table_name.startswith("j") and len(queue.table_name) == 57
    assert (queue.dead_letter, queue.retry_limit, queue.retry_delay, queue.retry_backoff) == (
        "dlq",
        5,
        10,
        True,
    )
    assert (queue.retry_delay_max, queue.expire_in_seconds, queue.retention_seconds) == (300, 60, 3600)
    assert (queue.delete_after_seconds, queue.heartbeat_seconds, queue.warning_queue_size, queue.notify) == (
        0,
        30,
        100,
        True,
    )


@pytest.mark.parametrize("policy", [p.value for p in QueuePolicy])
def test_each_policy_can_be_created(policy):
    boss.create_queue(f"q-{policy}", policy=policy)
    assert boss.get_queue(f"q-{policy}").policy == policy


def test_creating_an_existing_queue_changes_nothing():
    boss.create_queue("reports", retry_limit=1)
    boss.create_queue("reports", retry_limit=9, policy="singleton")
    queue = boss.get_queue("reports")
    assert (queue.retry_limit, queue.policy) == (1, "standard")


@pytest.mark.parametrize(
    "name",
    [
        "",
        "emails'; DROP TABLE pgboss.job; --",
        'a"b',
        "with space",
        "tab\t",
        "ünïcode",
        "x" * 256,
        None,
        42,
    ],
)
def test_invalid_queue_names_are_refused_before_anything_is_written(name):
    with pytest.raises(InvalidQueueName):
        boss.create_queue(name)
    assert rows("SELECT count(*) FROM {s}.queue") == [(0,)]


@pytest.mark.parametrize("name", ["a", "emails", "Orders.v2", "team/emails-2", "_private", "0"])
def test_valid_queue_names(name):
    boss.create_queue(name)
    assert boss.get_queue(name).name == name


def test_invalid_policy():
    with pytest.raises(InvalidPolicy, match="'fifo' is not a queue policy"):
        boss.create_queue("q", policy="fifo")
    assert boss.get_queue("q") is None


def test_dead_letter_must_exist():
    with pytest.raises(DeadLetterQueueNotFound, match="'missing'"):
        boss.create_queue("q", dead_letter="missing")
    assert boss.get_queue("q") is None


def test_dead_letter_cannot_be_itself():
    with pytest.raises(InvalidOption, match="own dead_letter"):
        boss.create_queue("q", dead_letter="q")


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("retry_limit", -1),
        ("retry_limit", 1.5),
        ("retry_limit", "3"),
        ("retry_limit", True),
        ("retry_delay", -5),
        ("retry_backoff", "yes"),
        ("expire_in_seconds", 0),
        ("expire_in_seconds", 24 * 3600 + 1),
        ("retention_seconds", 0),
        ("delete_after_seconds", -1),
        ("heartbeat_seconds", 5),
        ("warning_queue_size", -1),
        ("notify", 1),
        ("partition", "true"),
        ("colour", "blue"),
    ],
)
def test_invalid_options_name_the_option(option, value):
    with pytest.raises(InvalidOption, match=option):
        boss.create_queue("q", **{option: value})
    assert boss.get_queue("q") is None


def test_retry_delay_max_needs_backoff():
    with pytest.raises(InvalidOption, match="retry_delay_max can only be set together with retry_backoff"):
        boss.create_queue("q", retry_delay_max=10)


def test_update_queue_changes_settings_and_clears_nullable_ones():
    boss.create_queue("dlq")
    boss.create_queue("q", dead_letter="dlq", heartbeat_seconds=20, retry_backoff=True, retry_delay_max=60)
    boss.update_queue("q", retry_limit=7, notify=True, expire_in_seconds=120)
    queue = boss.get_queue("q")
    assert (queue.retry_limit, queue.notify, queue.expire_in_seconds, queue.dead_letter) == (
        7,
        True,
        120,
        "dlq",
    )
    boss.update_queue("q", dead_letter=None, heartbeat_seconds=None, retry_backoff=True, retry_delay_max=None)
    queue = boss.get_queue("q")
    assert (queue.dead_letter, queue.heartbeat_seconds, queue.retry_delay_max) == (None, None, None)
    assert queue.updated_on >= queue.created_on


def test_update_queue_refuses_policy_partition_unknown_queue_and_nothing():
    boss.create_queue("q")
    with pytest.raises(InvalidOption, match="policy cannot be changed"):
        boss.update_queue("q", policy="short")
    with pytest.raises(InvalidOption, match="partition cannot be changed"):
        boss.update_queue("q", partition=True)
    with pytest.raises(InvalidOption, match="at least one option"):
        boss.update_queue("q")
    with pytest.raises(QueueNotFound, match="'nope'"):
        boss.update_queue("nope", retry_limit=1)
    with pytest.raises(DeadLetterQueueNotFound):
        boss.update_queue("q", dead_letter="missing")


def test_delete_queue_removes_it_and_its_jobs_only():
    boss.create_queue("keep")
    boss.create_queue("drop")
    boss.send("keep", {"n": 1})
    boss.send("drop", {"n": 2})
    boss.delete_queue("drop")
    assert boss.get_queue("drop") is None
    assert (count_jobs("keep"), count_jobs("drop")) == (1, 0)


def test_delete_queue_of_a_queue_that_does_not_exist_does_nothing():
    boss.create_queue("keep")
    boss.delete_queue("never-created")  # pg-boss's deleteQueue() is a no-op here too
    assert [q.name for q in boss.get_queues()] == ["keep"]


def test_delete_queue_refuses_the_dead_letter_of_another_queue_and_deletes_nothing():
    boss.create_queue("dlq")
    boss.create_queue("orders", dead_letter="dlq")
    boss.send("dlq", {"n": 1})
    with pytest.raises(QueueInUse, match="'dlq' is the dead_letter of 'orders'"):
        boss.delete_queue("dlq")
    assert boss.get_queue("dlq") is not None and count_jobs("dlq") == 1


def test_delete_queue_refuses_a_queue_jobs_of_other_queues_name_as_their_dead_letter():
    boss.create_queue("dlq")
    boss.create_queue("orders")
    boss.send("orders", {"n": 1}, dead_letter="dlq")  # a send option: the queue's own stays unset
    boss.send("dlq", {"n": 2})
    with pytest.raises(QueueInUse, match="'dlq' is still the dead_letter of jobs of other queues"):
        boss.delete_queue("dlq")
    assert boss.get_queue("dlq") is not None and (count_jobs("dlq"), count_jobs("orders")) == (1, 1)


@pytest.mark.django_db(transaction=True)
def test_delete_partitioned_queue_drops_its_table():
    # Committing: the job's deferred foreign-key checks must have run before its table can go, as
    # they have in any real deployment (a send and a delete_queue are separate transactions).
    boss.create_queue("own", partition=True)
    table = boss.get_queue("own").table_name
    boss.send("own")
    boss.delete_queue("own")
    assert rows("SELECT to_regclass(%s)", [f"{table}"]) == [(None,)]


def test_get_queues_all_and_by_name():
    for name in ("b", "a", "c"):
        boss.create_queue(name)
    assert [q.name for q in boss.get_queues()] == ["a", "b", "c"]
    assert [q.name for q in boss.get_queues(["c", "a", "zz"])] == ["a", "c"]
    assert boss.get_queue("zz") is None


def test_queue_recreated_with_another_table_is_followed():
    boss.create_queue("moving")
    boss.send("moving")
    boss.delete_queue("moving")
    boss.create_queue("moving", partition=True)
    job_id = boss.send("moving")
    table = boss.get_queue("moving").table_name
    # Read from the queue's own table rather than by the row's tableoid: on Citus a row's tableoid
    # is its shard's, whose name is not the table's.
    assert rows(f"SELECT count(*) FROM {{s}}.{table} WHERE name = 'moving' AND id = %s", [job_id]) == [(1,)]


# -- another process changes a queue this Boss has cached ---------------------------------------


@pytest.fixture
def other_boss():
    """A second Boss, standing for another process: its cache is its own."""
    from django_pgboss import Boss

    return Boss()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("partition", [False, True], ids=["shared", "own-table"])
def test_sending_to_a_queue_another_process_deleted_raises(other_boss, partition):
    boss.create_queue("gone", partition=partition)
    boss.send("gone")  # cached here
    other_boss.delete_queue("gone")
    for _ in range(2):
        with pytest.raises(QueueNotFound, match="'gone'"):
            boss.send("gone", {"lost?": "no"})
    boss.create_queue("gone2", partition=partition)
    boss.send("gone2")
    other_boss.delete_queue("gone2")
    with pytest.raises(QueueNotFound):
        boss.send_throttled("gone2", None, 300)
    with pytest.raises(QueueNotFound):
        boss.insert("gone2", [{"data": 1}])
    with pytest.raises(QueueNotFound):
        boss.insert("gone2", [{"data": 1}], return_ids=True)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("partition", [False, True], ids=["was-shared", "was-own-table"])
def test_a_queue_recreated_with_another_table_is_followed_outside_a_transaction(other_boss, partition):
    boss.create_queue("moved", partition=partition)
    boss.send("moved")
    other_boss.delete_queue("moved")
    other_boss.create_queue("moved", partition=not partition)
    job_id = boss.send("moved", {"n": 1})
    assert [j.id for j in boss.find_jobs("moved")] == [job_id]


@pytest.mark.django_db(transaction=True)
def test_inside_a_transaction_a_stale_table_fails_once_then_is_followed(other_boss):
    from django.db import DatabaseError, transaction

    boss.create_queue("moved", partition=True)
    boss.send("moved")
    other_boss.delete_queue("moved")
    other_boss.create_queue("moved")
    with pytest.raises(DatabaseError), transaction.atomic():
        boss.send("moved", {"n": 1})
    with transaction.atomic():
        job_id = boss.send("moved", {"n": 2})
    assert [j.data for j in boss.find_jobs("moved")] == [{"n": 2}]
    assert job_id is not None
