"""manage.py shop_setup: the shop's queues, their policies, and the nightly schedule."""

from __future__ import annotations

from io import StringIO

from django.core.management import call_command

from django_pgboss import boss
from example_project.shop import queues


def test_shop_setup_creates_the_queues_and_the_nightly_schedule_and_can_run_again(db):
    out = StringIO()
    call_command("shop_setup", stdout=out)
    call_command("shop_setup", stdout=out)

    found = {q.name: q for q in boss.get_queues()}
    assert {name: q.policy for name, q in found.items() if not name.startswith("__")} == {
        queues.EMAILS: "standard",
        queues.EMAILS_DEAD: "standard",
        queues.REPORTS: "stately",
        queues.LOYALTY: "key_strict_fifo",
        queues.WAREHOUSE: "standard",
    }
    assert (found[queues.EMAILS].dead_letter, found[queues.EMAILS].retry_limit) == (queues.EMAILS_DEAD, 2)
    (nightly,) = boss.get_schedules(queues.REPORTS)
    assert (nightly.cron, nightly.timezone, nightly.key, nightly.data) == (
        "0 2 * * *",
        "Europe/Paris",
        "nightly",
        {"kind": "nightly"},
    )
    assert "'sales-report' runs at '0 2 * * *' (Europe/Paris)" in out.getvalue()
