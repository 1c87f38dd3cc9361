"""The admin in a real browser: Playwright driving Debian's chromium against the live server.

Every page is checked at desktop (1400 px) and phone (390 px) widths: no serious accessibility
violation (axe-core, which scripts/test.sh installs from npm under .venvs/node-axe and names in
PGBOSS_AXE_JS; the test reads it at run time and injects it into each page), no sideways
scrolling of the main content, and a screenshot of each.

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
from django.contrib.admin.utils import quote
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
DESKTOP = {"width": 1400, "height": 900}
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
    screenshots(page, "queues-1400")

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
    screenshots(page, "queue-charts-1400")
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
    screenshots(page, "dead-letters-1400")
    page.locator("#action-toggle").check()
    page.select_option("select[name=action]", "redrive_jobs")
    page.click("button[name=index]")
    expect(page.locator("#pgboss-redrive")).to_contain_text("2 selected; 2 can be redriven now.")
    expect(page.locator(".pgboss-preview table.pgboss-redrive-destinations")).to_contain_text("orders")
    expect(page.locator(".pgboss-preview table.pgboss-redrive-jobs tbody tr")).to_have_count(2)
    screenshots(page, "redrive-preview-1400")
    page.click("#pgboss-confirm-redrive")
    expect(page.locator("ul.messagelist")).to_contain_text(
        "Redrive of 2 selected job(s): 2 moved, 0 conflicted. New jobs: orders/"
    )
    assert rows("SELECT count(*) FROM {s}.job WHERE name = 'orders-dlq'") == [(0,)]

    # From a redriven job's page to its lineage.
    (redriven,) = rows("SELECT id FROM {s}.job WHERE name = 'orders' AND state = 'created' LIMIT 1")[0]
    page.goto(f"{admin}/job/{redriven}/change/")
    expect(page.locator(".pgboss-job-actions")).to_contain_text("Act on this job: Cancel Delete")
    screenshots(page, "job-1400")
    page.click("#pgboss-lineage-link")
    hops = page.locator("li.pgboss-hop")
    expect(hops).to_have_count(2)
    expect(hops.nth(0)).to_contain_text("Original in orders")
    expect(hops.nth(0)).to_contain_text("payment gateway timed out")
    expect(hops.nth(1)).to_contain_text("Redriven in orders")
    expect(hops.nth(1)).to_contain_text("this job")
    screenshots(page, "lineage-1400")
    page.set_viewport_size(PHONE)
    assert fits(page, "li.pgboss-hop")
    screenshots(page, "lineage-390")
    screenshots(page, "lineage-390-section", "#pgboss-lineage")
    hops.nth(0).get_by_role("link", name=re.compile("^[0-9a-f-]{36}$")).click()
    expect(page.locator("#content h2").first).to_be_visible()
    assert "/change/" in page.url


#: axe's impact levels that fail the test; "minor" and "moderate" findings are reported only.
FAILING_IMPACTS = {"serious", "critical"}


def axe_script() -> str:
    path = os.environ.get("PGBOSS_AXE_JS", "")
    # Not a skip: without axe-core the pages would go unchecked while the run looks green.
    assert path and Path(path).is_file(), (
        "axe-core is missing: scripts/test.sh installs it with npm and sets PGBOSS_AXE_JS "
        f"(PGBOSS_AXE_JS={path!r})"
    )
    return Path(path).read_text()


def serious_violations(tab: Page, script: str) -> list[str]:
    """axe-core's serious and critical findings on the page, one line each with where."""
    tab.add_script_tag(content=script)
    found = tab.evaluate(
        """async () => (await axe.run(document, {resultTypes: ['violations']})).violations.map(
            v => ({id: v.id, impact: v.impact, help: v.help,
                   nodes: v.nodes.slice(0, 3).map(n => n.target.join(' '))}))"""
    )
    return [
        f"{v['impact']} {v['id']}: {v['help']} at {', '.join(v['nodes'])}"
        for v in found
        if v["impact"] in FAILING_IMPACTS
    ]


def overflow(tab: Page) -> dict:
    """The main content's widths (Django's <main>: the page's content and its sidebar, without the
    navigation): it must not need scrolling sideways (scrollWidth <= clientWidth)."""
    return tab.evaluate(
        """() => { const main = document.querySelector('main#content-start') || document.querySelector('#content');
                   return {scroll: main.scrollWidth, client: main.clientWidth}; }"""
    )


def test_every_page_passes_axe_and_fits_at_1400_and_390_px(page, live_server, operations, screenshots):
    script = axe_script()
    boss.schedule("orders", "0 3 * * *", {"kind": "nightly"}, tz="Europe/Paris", key="nightly")
    (failed,) = rows("SELECT id::text FROM {s}.job WHERE name = 'orders' AND state = 'failed' LIMIT 1")[0]
    copy = operations[0]
    admin = f"{live_server.url}/admin"
    pages = {
        "index": f"{admin}/",
        "queues": f"{admin}/pgboss/queue/",
        "queue": f"{admin}/pgboss/queue/orders/change/",
        "jobs": f"{admin}/pgboss/job/",
        "failed-job": f"{admin}/pgboss/job/{quote('orders/' + failed)}/change/",
        "dead-letter": f"{admin}/pgboss/job/{quote('orders-dlq/' + copy)}/change/",
        "lineage": f"{admin}/pgboss/job/{quote('orders-dlq/' + copy)}/lineage/",
        "schedules": f"{admin}/pgboss/schedules/",
        "schedule-add": f"{admin}/pgboss/schedules/add/",
        "schedule-change": f"{admin}/pgboss/schedules/change/?name=orders&key=nightly",
        "purge": f"{admin}/pgboss/queue/orders/purge/queued/",
        "warnings": f"{admin}/pgboss/warning/",
        "queue-stats": f"{admin}/pgboss/queuestats/",
    }
    problems: list[str] = []
    for width, viewport in (("1400", DESKTOP), ("390", PHONE)):
        page.set_viewport_size(viewport)
        for name, url in pages.items():
            response = page.goto(url)
            assert response is not None and response.status == 200, (name, url)
            problems += [f"{name} at {width} px: {v}" for v in serious_violations(page, script)]
            widths = overflow(page)
            if widths["scroll"] > widths["client"]:
                problems.append(
                    f"{name} at {width} px: main content {widths['scroll']} px wide in {widths['client']} px"
                )
            screenshots(page, f"page-{name}-{width}")
        # The redrive confirmation is a POST: reached as an operator reaches it.
        page.goto(f"{admin}/pgboss/job/?name=orders-dlq")
        page.locator("#action-toggle").check()
        page.select_option("select[name=action]", "redrive_jobs")
        page.click("button[name=index]")
        expect(page.locator("#pgboss-redrive")).to_be_visible()
        problems += [f"redrive at {width} px: {v}" for v in serious_violations(page, script)]
        widths = overflow(page)
        if widths["scroll"] > widths["client"]:
            problems.append(
                f"redrive at {width} px: main content {widths['scroll']} px wide in {widths['client']} px"
            )
        screenshots(page, f"page-redrive-{width}")
    assert problems == [], "\n".join(problems)


def test_the_schedule_form_previews_the_next_ten_runs_and_shows_errors_under_the_field(
    page, live_server, operations, screenshots
):
    page.goto(f"{live_server.url}/admin/")
    # The index lists Schedules, linked to their pages.
    page.get_by_role("link", name="Schedules", exact=True).click()
    expect(page.locator("#content h1")).to_have_text("Schedules")
    page.get_by_role("link", name="Add schedule").click()
    page.select_option("#id_name", "orders")
    page.fill("#id_key", "month-end")
    page.fill("#id_cron", "FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=17;BYMINUTE=0;BYSECOND=0")
    page.fill("#id_tz", "Europe/Paris")
    page.get_by_role("button", name="Preview the next 10 runs").click()
    preview = page.locator("#pgboss-schedule-preview")
    expect(preview.locator("h2")).to_have_text("The next 10 runs")
    expect(preview.locator("tbody tr")).to_have_count(10)
    # Each a last Friday of its month, at 17:00 in Paris.
    for text in preview.locator("tbody tr td:first-child").all_inner_texts():
        assert re.fullmatch(r"Fri \d{4}-\d\d-(2[2-9]|3[01]) 17:00:00 CES?T", text), text
    assert boss.get_schedule("orders", "month-end") is None  # a preview saves nothing
    screenshots(page, "schedule-preview-1400")

    # A malformed rule: the error is under the field, and nothing is previewed or saved.
    page.fill("#id_cron", "FREQ=SOMETIMES")
    page.get_by_role("button", name="Preview the next 10 runs").click()
    row = page.locator(".form-row.field-cron")
    expect(row).to_have_class(re.compile(r"\berrors\b"))
    error = row.locator("ul.errorlist")
    expect(error).to_be_visible()
    assert "FREQ" in error.inner_text()
    error_box, field_box = error.bounding_box(), page.locator("#id_cron").bounding_box()
    assert error_box and field_box and error_box["y"] + error_box["height"] <= field_box["y"] + 1
    expect(page.locator("#pgboss-schedule-preview")).to_have_count(0)
    screenshots(page, "schedule-error-1400")

    # An unknown time zone: under the time zone field.
    page.fill("#id_cron", "0 3 * * *")
    page.fill("#id_tz", "Mars/Olympus_Mons")
    page.get_by_role("button", name="Save schedule").click()
    expect(page.locator(".form-row.field-tz ul.errorlist")).to_be_visible()
    assert boss.get_schedule("orders", "month-end") is None

    page.fill("#id_tz", "Europe/Paris")
    page.get_by_role("button", name="Save schedule").click()
    expect(page.locator("ul.messagelist")).to_contain_text(
        "Scheduled 'orders month-end': 0 3 * * * (Europe/Paris)."
    )
    assert boss.get_schedule("orders", "month-end").cron == "0 3 * * *"


def test_pg_boss_internal_queues_are_shown_on_request_and_the_warnings_page_says_how_to_keep_them(
    page, live_server, operations
):
    from django_pgboss.schedules import SEND_IT_QUEUE

    boss.create_queue(SEND_IT_QUEUE)
    admin = f"{live_server.url}/admin"
    page.goto(f"{admin}/pgboss/queue/")
    expect(page.locator("#result_list")).not_to_contain_text(SEND_IT_QUEUE)
    page.get_by_role("link", name="Shown").click()
    expect(page.locator("#result_list")).to_contain_text(SEND_IT_QUEUE)
    # The redrive page: the checkbox, then "Update preview", lists it as a destination.
    page.goto(f"{admin}/pgboss/job/?name=orders-dlq")
    page.locator("#action-toggle").check()
    page.select_option("select[name=action]", "redrive_jobs")
    page.click("button[name=index]")
    send_it = page.locator(f'#pgboss-destination option[value="{SEND_IT_QUEUE}"]')
    expect(send_it).to_have_count(0)
    expect(page.locator('#pgboss-destination option[value="orders"]')).to_have_count(1)
    page.locator("#pgboss-show-internal").check()
    page.click("button[name=preview]")
    expect(send_it).to_have_count(1)
    page.goto(f"{admin}/pgboss/warning/")
    expect(page.locator("#pgboss-warnings-off")).to_contain_text('PGBOSS["PERSIST_WARNINGS"] is off')
