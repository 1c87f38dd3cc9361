"""The job pages as an operator reads them: a traceback as text, every time with its seconds and
zone, a failed job's end labelled as what it is, and where a dead-lettered job went."""

from __future__ import annotations

import re

import pytest
from django.contrib.admin.utils import quote
from django.test import override_settings
from django.urls import reverse

from django_pgboss import boss
from tests.helpers import job_row, rows
from tests.test_admin import JOBS, page_text

pytestmark = pytest.mark.django_db

MOMENT = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"


def page_of(name: str, job_id: str) -> str:
    return reverse("admin:pgboss_job_change", args=[quote(f"{name}/{job_id}")])


def charge_card() -> None:
    raise ValueError("card declined: insufficient funds")


@pytest.fixture
def failed_with_a_traceback():
    boss.create_queue("payments-dlq")
    boss.create_queue("payments", retry_limit=0, dead_letter="payments-dlq")
    job_id = boss.send("payments", {"order": 9})
    (job,) = boss.fetch("payments")
    try:
        charge_card()
    except ValueError as exc:
        boss.fail("payments", job, exc)
    return job_id


def test_a_stored_traceback_reads_as_a_monospace_block_of_lines(admin_client, failed_with_a_traceback):
    page = admin_client.get(page_of("payments", failed_with_a_traceback)).content.decode()
    (block,) = re.findall(r'<pre class="pgboss-traceback"[^>]*>(.*?)</pre>', page, re.S)
    lines = block.splitlines()
    assert lines[0] == "Traceback (most recent call last):"
    assert any("in charge_card" in line for line in lines)
    assert lines[-1] == "ValueError: card declined: insufficient funds"
    assert "\\n" not in block
    # The rest of the output stays JSON, without the traceback in it.
    (output,) = re.findall(r'<div class="form-row field-pretty_output">.*?</div>\s*</div>', page, re.S)
    assert "&quot;message&quot;: &quot;card declined: insufficient funds&quot;" in output
    assert "&quot;traceback&quot;" not in output


def test_times_show_seconds_and_the_zone_in_one_format(admin_client, failed_with_a_traceback):
    created_on, completed_on = job_row(failed_with_a_traceback, "created_on", "completed_on")
    text = page_text(admin_client.get(page_of("payments", failed_with_a_traceback)))
    assert re.search(rf"Created on:? {created_on:%Y-%m-%d %H:%M:%S} UTC", text)
    # pg-boss stores a failed job's end in completed_on: the page says it is when it failed.
    assert re.search(
        rf"Ended on \(pg-boss's completed_on\):? {completed_on:%Y-%m-%d %H:%M:%S} UTC \(failed\)", text
    )
    listing = page_text(admin_client.get(JOBS, {"name": "payments"}))
    assert "Came from Created Finished" in listing
    assert f"{created_on:%Y-%m-%d %H:%M:%S} UTC" in listing
    assert f"{completed_on:%Y-%m-%d %H:%M:%S} UTC (failed)" in listing
    # In the site's zone, named.
    with override_settings(TIME_ZONE="Europe/Paris"):
        paris = page_text(admin_client.get(page_of("payments", failed_with_a_traceback)))
    assert re.search(rf"Created on:? {MOMENT} CET|Created on:? {MOMENT} CEST", paris)


def test_a_dead_lettered_job_says_where_it_went_then_where_its_redrive_went(
    admin_client, failed_with_a_traceback
):
    ((copy,),) = rows("SELECT id::text FROM {s}.job WHERE name = 'payments-dlq'")
    page = admin_client.get(page_of("payments", failed_with_a_traceback)).content.decode()
    assert "copied to dead-letter queue payments-dlq" in page_text_of(page)
    assert f'href="{page_of("payments-dlq", copy)}"' in page
    result = boss.redrive("payments-dlq")
    ((_, new_id),) = result.moved_ids
    page = admin_client.get(page_of("payments", failed_with_a_traceback)).content.decode()
    text = page_text_of(page)
    assert "copied to dead-letter queue payments-dlq first (the copy left it when redriven)" in text
    assert f"redriven to payments: {new_id} (created)" in text
    assert f'href="{page_of("payments", new_id)}"' in page
    assert admin_client.get(page_of("payments", new_id)).status_code == 200


def page_text_of(page: str) -> str:
    import html

    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))
