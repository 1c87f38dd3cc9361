"""pg-boss's internal queues (``__pgboss__send-it``) in the admin: left out of the queue list, the
redrive destinations and the schedule targets, and shown when the page is asked for them."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from django_pgboss import boss
from django_pgboss.schedules import SEND_IT_QUEUE
from tests.test_admin import page_text
from tests.test_admin_deadletters import dead_letter, redrive

pytestmark = pytest.mark.django_db


@pytest.fixture
def internal():
    """The project's queues 'orders' (dead letter 'dlq') and pg-boss's own send-it queue, created
    as the timekeeper creates it."""
    boss.create_queue("dlq")
    boss.create_queue("orders", dead_letter="dlq", retry_limit=0)
    boss.create_queue(SEND_IT_QUEUE)


def listed_queues(response) -> list[str]:
    """The queue names in the changelist's rows."""
    return re.findall(r'<th class="field-name"><a href="[^"]*">([^<]+)</a>', response.content.decode())


def options_of(response, select_id: str) -> list[str]:
    body = response.content.decode()
    select = re.search(rf'<select[^>]*id="{select_id}"[^>]*>(.*?)</select>', body, re.S)
    assert select is not None, body
    return re.findall(r'<option value="([^"]*)"', select.group(1))


def test_the_queue_list_hides_internal_queues_until_its_filter_shows_them(admin_client, internal):
    url = reverse("admin:pgboss_queue_changelist")
    default = admin_client.get(url)
    assert listed_queues(default) == ["dlq", "orders"]
    text = page_text(default)
    assert "By pg-boss's internal queues Hidden Shown Only these" in text
    assert listed_queues(admin_client.get(url, {"internal": "1"})) == [SEND_IT_QUEUE, "dlq", "orders"]
    assert listed_queues(admin_client.get(url, {"internal": "only"})) == [SEND_IT_QUEUE]


def test_redrive_destinations_leave_out_internal_queues_unless_asked(admin_client, internal):
    copy = dead_letter("orders", {"n": 1})
    preview = redrive(admin_client, [copy], index=0)
    assert options_of(preview, "pgboss-destination") == ["", "dlq", "orders"]
    assert "List pg-boss's internal queues ( __pgboss__ ...) as destinations too" in page_text(preview)
    assert 'id="pgboss-show-internal" checked' not in preview.content.decode()
    asked = redrive(admin_client, [copy], index=0, internal="1", preview="1")
    assert options_of(asked, "pgboss-destination") == ["", SEND_IT_QUEUE, "dlq", "orders"]
    assert 'id="pgboss-show-internal" checked' in asked.content.decode()


def test_schedule_targets_leave_out_internal_queues_unless_asked(admin_client, internal):
    add = reverse("admin:pgboss_schedule_add")
    default = admin_client.get(add)
    assert options_of(default, "id_name") == ["dlq", "orders"]
    assert "pg-boss's internal queues ( __pgboss__ ...) are not listed: no schedule of yours" in page_text(
        default
    )
    link = re.search(
        r'<p class="help" id="pgboss-internal-toggle">.*?<a href="([^"]+)">List them too</a>',
        default.content.decode(),
        re.S,
    )
    assert link is not None and link.group(1) == f"{add}?internal=1"
    asked = admin_client.get(link.group(1))
    assert options_of(asked, "id_name") == [SEND_IT_QUEUE, "dlq", "orders"]
    assert "Hide them" in page_text(asked)


def test_a_schedule_form_opened_for_an_internal_queue_keeps_it(admin_client, internal):
    # A link that names the queue (?queue=) asked for it: the form must be able to show it.
    page = admin_client.get(reverse("admin:pgboss_schedule_add"), {"queue": SEND_IT_QUEUE})
    assert SEND_IT_QUEUE in options_of(page, "id_name")
    assert re.search(rf'<option value="{SEND_IT_QUEUE}" selected>', page.content.decode())
