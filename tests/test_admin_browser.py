"""The admin in a real browser: Playwright driving Debian's chromium against the live server.

scripts/test.sh installs chromium with apt-get; these tests skip, with the reason, only when no
browser could be installed. Set PGBOSS_SCREENSHOTS to a folder to keep the screenshots taken at
desktop and phone widths (they are written to a temporary folder otherwise).
"""

from __future__ import annotations

import datetime as dt
import os
import re
import shutil
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect, sync_playwright

from django_pgboss import boss
from tests.helpers import rows, stats_partitions
from tests.test_admin import add_snapshot

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    if not Path(CHROMIUM).exists():
        pytest.skip(
            os.environ.get("PGBOSS_NO_BROWSER")
            or "chromium is not installed (scripts/test.sh installs Debian's chromium with apt-get)"
        )
    # Playwright's sync API runs an event loop in this thread; Django refuses ORM calls from a
    # thread with a running loop unless told that this one is synchronous code after all.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path_factory.mktemp("xdg"))}
    try:
        with sync_playwright() as playwright:
            launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, env=env)
            yield launched
            launched.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def page(browser, live_server, django_user_model):
    django_user_model.objects.create_superuser("admin", "admin@example.com", "pw")
    context = browser.new_context(viewport=DESKTOP)
    page = context.new_page()
    page.goto(f"{live_server.url}/admin/login/")
    page.fill("#id_username", "admin")
    page.fill("#id_password", "pw")
    page.click("input[type=submit]")
    page.wait_for_url(f"{live_server.url}/admin/")
    yield page
    context.close()


@pytest.fixture
def screenshots(tmp_path):
    folder = Path(os.environ.get("PGBOSS_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)

    def take(page: Page, name: str, selector: str | None = None) -> Path:
        path = folder / f"{name}.png"
        if selector is None:
            page.screenshot(path=path, full_page=True)
        else:
            page.locator(selector).first.screenshot(path=path)
        assert path.read_bytes()[:4] == b"\x89PNG"
        return path

    return take


@pytest.fixture
def operations():
    """Queue 'orders' with an hour of history, and two jobs failed into its dead-letter queue.

    This test commits: a partition made for history before today's (run just after midnight UTC)
    would outlive it, so it is dropped afterwards.
    """
    partitions = stats_partitions()
    boss.create_queue("orders-dlq")
    boss.create_queue("orders", dead_letter="orders-dlq", retry_limit=0)
    for n in (1, 2):
        boss.send("orders", {"order": n})
    jobs = boss.fetch("orders", batch_size=2)
    boss.fail("orders", jobs, {"message": "payment gateway timed out"})
    now = timezone.now().replace(second=30, microsecond=0)
    for minutes, (created, completed, failed) in enumerate(
        [(12, 10, 1), (20, 17, 2), (8, 9, 0), (15, 14, 1), (30, 26, 3), (18, 19, 0)]
    ):
        add_snapshot(
            "orders",
            now - dt.timedelta(minutes=55 - 10 * minutes),
            created_delta=created,
            completed_delta=completed,
            failed_delta=failed,
            queued_count=created - completed + 5,
            active_count=2,
            failed_count=failed + 2,
        )
    yield [str(r[0]) for r in rows("SELECT id FROM {s}.job WHERE name = 'orders-dlq'")]
    for name in stats_partitions() - partitions:
        rows(f'DROP TABLE {{s}}."{name}"')


def fits(page: Page, selector: str) -> bool:
    """Whether the element lies within the viewport's width (no sideways scrolling to read it)."""
    box = page.locator(selector).first.bounding_box()
    return box is not None and box["x"] >= 0 and box["x"] + box["width"] <= page.viewport_size["width"] + 1


def test_operator_reads_charts_redrives_and_follows_the_lineage(page, live_server, operations, screenshots):
    admin = f"{live_server.url}/admin/pgboss"
    page.goto(f"{admin}/queue/")
    row = page.locator("#result_list tr", has_text="orders-dlq").first
    expect(row).to_be_visible()
    orders = page.locator("#result_list tbody tr").filter(
        has=page.locator("th a", has_text=re.compile("^orders$"))
    )
    # 95 completed over 6 minutes counted: 15.83 per minute.
    expect(orders).to_contain_text("15.83")
    expect(orders.locator("svg.pgboss-sparkline")).to_be_visible()
    screenshots(page, "queues-1280")

    # The queue's charts.
    orders.locator("th a").click()
    expect(page.locator("#pgboss-throughput-chart svg")).to_be_visible()
    expect(page.locator(".pgboss-rates div", has_text="Completed per minute").locator("dd")).to_have_text(
        "15.83"
    )
    markers = page.locator("#pgboss-throughput-chart svg g.pgboss-series title")
    expect(markers).to_have_count(18)
    expect(page.locator("#pgboss-throughput-chart svg")).to_contain_text("Completed")
    assert "Completed: 26 jobs at " in page.locator("#pgboss-throughput-chart svg").inner_html()
    screenshots(page, "queue-charts-1280")
    page.set_viewport_size(PHONE)
    assert fits(page, "#pgboss-throughput-chart svg") and fits(page, "#pgboss-gauge-chart svg")
    screenshots(page, "queue-charts-390")
    screenshots(page, "queue-charts-390-section", ".pgboss-charts")
    page.set_viewport_size(DESKTOP)
    page.get_by_role("link", name="6 hours").click()
    expect(page.locator(".pgboss-range a.selected")).to_have_text("6 hours")

    # Redrive both dead-letter jobs through the preview.
    page.goto(f"{admin}/job/?name=orders-dlq")
    expect(page.locator("#result_list tbody tr")).to_have_count(2)
    screenshots(page, "dead-letters-1280")
    page.locator("#action-toggle").check()
    page.select_option("select[name=action]", "redrive_jobs")
    page.click("button[name=index]")
    expect(page.locator("#pgboss-redrive")).to_contain_text("2 selected; 2 can be redriven now.")
    expect(page.locator(".pgboss-preview table")).to_contain_text("orders")
    screenshots(page, "redrive-preview-1280")
    page.click("#pgboss-confirm-redrive")
    expect(page.locator("ul.messagelist")).to_contain_text(
        "Redrive of 2 selected job(s): 2 moved, 0 conflicted. New jobs: orders/"
    )
    assert rows("SELECT count(*) FROM {s}.job WHERE name = 'orders-dlq'") == [(0,)]

    # From a redriven job's page to its lineage.
    (redriven,) = rows("SELECT id FROM {s}.job WHERE name = 'orders' AND state = 'created' LIMIT 1")[0]
    page.goto(f"{admin}/job/{redriven}/change/")
    expect(page.locator(".pgboss-job-actions")).to_contain_text("Act on this job: Cancel Delete")
    screenshots(page, "job-1280")
    page.click("#pgboss-lineage-link")
    hops = page.locator("li.pgboss-hop")
    expect(hops).to_have_count(2)
    expect(hops.nth(0)).to_contain_text("Original in orders")
    expect(hops.nth(0)).to_contain_text("payment gateway timed out")
    expect(hops.nth(1)).to_contain_text("Redriven in orders")
    expect(hops.nth(1)).to_contain_text("this job")
    screenshots(page, "lineage-1280")
    page.set_viewport_size(PHONE)
    assert fits(page, "li.pgboss-hop")
    screenshots(page, "lineage-390")
    screenshots(page, "lineage-390-section", "#pgboss-lineage")
    hops.nth(0).get_by_role("link", name=re.compile("^[0-9a-f-]{36}$")).click()
    expect(page.locator("#content h2").first).to_be_visible()
    assert "/change/" in page.url
