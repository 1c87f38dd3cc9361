"""The admin's flow pages in a real browser (the fixtures of tests/test_admin_browser.py): from a
blocked job's page to its flow's graph, which fits and reads at phone width."""

from __future__ import annotations

import pytest
from django.contrib.admin.utils import quote
from playwright.sync_api import expect

from django_pgboss import FlowJob, boss
from tests.test_admin_browser import PHONE, browser, fits, page, screenshots  # noqa: F401  (fixtures)

pytestmark = pytest.mark.django_db(transaction=True)


def test_operator_follows_a_stuck_flow_from_a_job_to_its_graph(page, live_server, screenshots):  # noqa: F811
    for name in ("orders.charge", "orders.email", "orders.invoice", "orders.archive"):
        boss.create_queue(name, retry_limit=0)
    ids = boss.flow(
        [
            FlowJob("charge", "orders.charge"),
            FlowJob("email", "orders.email", depends_on=["charge"]),
            FlowJob("invoice", "orders.invoice", depends_on=["charge"]),
            FlowJob("archive", "orders.archive", depends_on=["email", "invoice"]),
        ]
    )
    boss.complete("orders.charge", boss.fetch("orders.charge")[0])
    boss.resolve_flow()
    boss.fail("orders.email", boss.fetch("orders.email")[0], {"message": "smtp down"})

    admin = f"{live_server.url}/admin/pgboss"
    page.goto(f"{admin}/job/orders.archive/{ids['archive']}/change/")
    section = page.locator("#pgboss-job-flow")
    expect(section).to_contain_text("Blocked: waiting for 2 parents to complete")
    expect(section.locator(".pgboss-flow-parents li[data-state=failed]")).to_contain_text("orders.email")
    screenshots(page, "flow-job-1280")
    page.click("#pgboss-flow-link")
    graph = page.locator("svg.pgboss-flow-graph")
    expect(graph).to_be_visible()
    expect(graph.locator("g.pgboss-flow-job")).to_have_count(4)
    expect(page.locator(".pgboss-flow-waits")).to_contain_text("orders.email")
    expect(page.locator(".pgboss-flow-waits li[data-holding='holds the flow up']")).to_contain_text("failed")
    screenshots(page, "flow-1280")

    page.set_viewport_size(PHONE)
    assert fits(page, "svg.pgboss-flow-graph")
    # The job names in the boxes read at phone width: at least 11 CSS pixels tall.
    name_height = page.locator("g.pgboss-flow-job text").first.bounding_box()["height"]
    assert name_height >= 11, name_height
    screenshots(page, "flow-390")
    # A box links to its job's page.
    page.locator("g.pgboss-flow-job[data-state=failed]").click()
    expect(page.locator("#pgboss-job-flow")).to_contain_text("Children (they wait for this job)")
    assert f"/job/{quote('orders.email/' + ids['email'])}/change/" in page.url
