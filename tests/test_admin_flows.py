"""The admin's flow pages: a job's parents and children on its page, and the flow page's graph
(server-side SVG, admin/flow_graph.py), which marks what the flow waits on."""

from __future__ import annotations

import re

import pytest
from django.contrib.admin.utils import quote
from django.urls import reverse

from django_pgboss import FlowJob, boss
from django_pgboss.admin.flow_graph import MAX_PER_LAYER, Node, flow_svg, holding_up, layers
from django_pgboss.admin.views.flows import LISTED
from tests.test_admin import page_text

pytestmark = pytest.mark.django_db


def job_url(name: str, job_id: str) -> str:
    return reverse("admin:pgboss_job_change", args=[quote(f"{name}/{job_id}")])


def flow_url(name: str, job_id: str) -> str:
    return reverse("admin:pgboss_job_flow", args=[quote(f"{name}/{job_id}")])


@pytest.fixture
def order():
    for name in ("charge", "email", "invoice", "archive"):
        boss.create_queue(name, retry_limit=0)
    ids = boss.flow(
        [
            FlowJob("charge", "charge"),
            FlowJob("email", "email", depends_on=["charge"]),
            FlowJob("invoice", "invoice", depends_on=["charge"]),
            FlowJob("archive", "archive", depends_on=["email", "invoice"]),
        ]
    )
    (job,) = boss.fetch("charge")
    boss.complete("charge", job)
    boss.resolve_flow()
    (job,) = boss.fetch("email")
    boss.fail("email", job, {"message": "smtp down"})
    return ids


def test_a_jobs_page_lists_its_parents_and_children_with_states_and_links(admin_client, order):
    response = admin_client.get(job_url("archive", order["archive"]))
    body = response.content.decode()
    text = page_text(response)
    assert "Blocked: waiting for 2 parents to complete" in text
    assert f"email / {order['email']} : failed" in text
    assert f"invoice / {order['invoice']} : created" in text
    assert f'href="{job_url("email", order["email"])}"' in body
    assert f'href="{flow_url("archive", order["archive"])}"' in body
    charge = page_text(admin_client.get(job_url("charge", order["charge"])))
    assert "Parents (this job waits for them) None." in charge
    assert (
        f"email / {order['email']} : failed" in charge and f"invoice / {order['invoice']} : created" in charge
    )


def test_a_job_in_no_flow_shows_no_flow_section(admin_client):
    boss.create_queue("plain")
    job_id = boss.send("plain", {})
    assert "pgboss-job-flow" not in admin_client.get(job_url("plain", job_id)).content.decode()


def test_the_flow_page_draws_every_job_and_says_what_holds_the_flow_up(admin_client, order):
    response = admin_client.get(flow_url("invoice", order["invoice"]))
    assert response.status_code == 200
    body = response.content.decode()
    svg = re.search(r"<svg class=\"pgboss-flow-graph\".*?</svg>", body, flags=re.DOTALL).group(0)
    states = dict(re.findall(r'data-job="([^"]+)" data-state="([^"]+)"', svg))
    assert states == {
        f"charge/{order['charge']}": "completed",
        f"email/{order['email']}": "failed",
        f"invoice/{order['invoice']}": "created",
        f"archive/{order['archive']}": "blocked",
    }
    assert svg.count("marker-end=") == 4  # one arrow per dependency
    assert f'href="{job_url("email", order["email"])}"' in svg
    text = page_text(response)
    # The failed email keeps the archive blocked; the invoice is next.
    assert f"email / {order['email']} : failed, holds the flow up" in text
    assert f"invoice / {order['invoice']} : created, next" in text
    assert "1 blocked" in text and "1 completed" in text and "1 failed" in text


def test_a_wide_fan_out_is_drawn_with_a_summary_box(admin_client):
    boss.create_queue("root")
    boss.create_queue("leaf")
    ids = boss.flow([FlowJob("r", "root")] + [FlowJob(f"c{i}", "leaf", depends_on=["r"]) for i in range(60)])
    body = admin_client.get(flow_url("root", ids["r"])).content.decode()
    assert body.count('class="pgboss-flow-job"') == 1 + MAX_PER_LAYER
    assert f'data-count="{60 - MAX_PER_LAYER}"' in body
    assert f"+ {60 - MAX_PER_LAYER} more" in body
    assert "60 blocked" in page_text(admin_client.get(flow_url("root", ids["r"])))
    # The root's page lists its first 50 children and says the flow page counts them all.
    page = admin_client.get(job_url("root", ids["r"])).content.decode()
    children = re.search(r'<ul class="pgboss-flow-children">(.*?)</ul>', page, flags=re.S).group(1)
    assert children.count("<li") == LISTED
    assert "The first 50 are listed" in page


def test_a_bad_key_goes_back_to_the_job_list_with_a_message(admin_client):
    response = admin_client.get(reverse("admin:pgboss_job_flow", args=["not-a-job"]), follow=True)
    assert "is not a job id" in page_text(response)


def test_the_flow_page_needs_the_view_permission(staff_client, order):
    client = staff_client()
    assert client.get(flow_url("charge", order["charge"])).status_code == 403


def test_layers_put_each_job_below_all_its_parents():
    a, b, c, d = ("q", "a"), ("q", "b"), ("q", "c"), ("q", "d")
    assert layers([a, b, c, d], [(a, b), (b, c), (a, c), (c, d)]) == [[a], [b], [c], [d]]
    assert layers([a, b, c], [(a, c), (b, c)]) == [[a, b], [c]]


def test_the_graph_marks_a_cancelled_parent_and_escapes_names():
    parent, child = ("<q>", "1"), ("q", "2")
    nodes = {parent: Node("<q>", "1", "cancelled"), child: Node("q", "2", "blocked")}
    assert holding_up(nodes, [(parent, child)]) == {parent: "stuck"}
    svg = flow_svg(nodes, [(parent, child)], label="a flow")
    assert "&lt;q&gt;" in svg and "<q>" not in svg
    assert 'data-holding="stuck"' in svg and 'stroke-dasharray="8 4"' in svg
