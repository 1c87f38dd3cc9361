"""publish / subscribe / unsubscribe."""

from __future__ import annotations

import pytest

from django_pgboss import InvalidOption, QueueNotFound, boss
from tests.helpers import count_jobs, job_row, rows

pytestmark = pytest.mark.django_db


@pytest.fixture
def queues():
    for name in ("emails", "audit", "unrelated"):
        boss.create_queue(name)


def test_publish_sends_to_every_subscribed_queue(queues):
    boss.subscribe("order.paid", "emails")
    boss.subscribe("order.paid", "audit")
    sent = boss.publish("order.paid", {"order": 7}, priority=2)
    assert set(sent) == {"audit", "emails"}
    for name, job_id in sent.items():
        assert job_row(job_id, "name", "data", "priority") == (name, {"order": 7}, 2)
    assert count_jobs("unrelated") == 0


def test_publish_without_subscribers_sends_nothing(queues):
    assert boss.publish("nobody.listens", {"x": 1}) == {}
    assert count_jobs() == 0


def test_subscribing_twice_keeps_one_subscription(queues):
    boss.subscribe("e", "emails")
    boss.subscribe("e", "emails")
    assert rows("SELECT count(*) FROM {s}.subscription") == [(1,)]
    assert len(boss.publish("e")) == 1


def test_unsubscribe(queues):
    boss.subscribe("e", "emails")
    boss.subscribe("e", "audit")
    boss.unsubscribe("e", "emails")
    boss.unsubscribe("e", "never-subscribed")
    assert list(boss.publish("e")) == ["audit"]


def test_subscribe_to_a_missing_queue():
    with pytest.raises(QueueNotFound):
        boss.subscribe("e", "ghost")


@pytest.mark.parametrize("event", ["", None, 3])
def test_event_name_is_required(queues, event):
    with pytest.raises(InvalidOption, match="event"):
        boss.publish(event)


def test_publish_reports_jobs_a_policy_dropped(queues):
    boss.create_queue("once", policy="short")
    boss.subscribe("e", "once")
    boss.subscribe("e", "emails")
    boss.publish("e", singleton_key="k")
    second = boss.publish("e", singleton_key="k")
    assert second["once"] is None
    assert second["emails"] is not None


def test_publish_is_all_or_nothing(queues):
    boss.create_queue("fifo", policy="key_strict_fifo")
    boss.subscribe("e", "emails")
    boss.subscribe("e", "fifo")
    with pytest.raises(InvalidOption, match="singleton_key"):
        boss.publish("e", {"n": 1})
    assert count_jobs() == 0


def test_deleting_a_queue_drops_its_subscriptions(queues):
    boss.subscribe("e", "emails")
    boss.delete_queue("emails")
    assert boss.publish("e") == {}
