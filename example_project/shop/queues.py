"""The shop's queues and their policies, and the nightly report's cron schedule.

``setup()`` is what ``manage.py shop_setup`` runs (and the demo, first): it creates every queue and
the schedule, and is safe to run again (an existing queue is left as it is, a schedule replaced).
"""

from __future__ import annotations

from django_pgboss import boss

#: Order confirmation emails: retried twice, a second apart, then copied to EMAILS_DEAD.
EMAILS = "order-emails"
#: Where confirmation emails that failed for good wait, to be redriven once their cause is fixed.
EMAILS_DEAD = "order-emails-dead"
#: Sales reports: ``stately`` keeps at most one waiting and one running, so a burst of requests
#: while a report runs adds one more run, not one per request.
REPORTS = "sales-report"
#: Loyalty points: ``key_strict_fifo`` runs one customer's jobs one at a time, oldest first
#: (the key is the customer), while different customers run side by side.
LOYALTY = "loyalty-points"
#: The warehouse task's queue, the queue of the Django tasks backend in settings.TASKS.
WAREHOUSE = "warehouse"

#: The nightly report: 02:00 in the shop's time zone.
NIGHTLY_REPORT_CRON = "0 2 * * *"
NIGHTLY_REPORT_TZ = "Europe/Paris"
NIGHTLY_REPORT_KEY = "nightly"


def setup() -> None:
    """Create the shop's queues and the nightly report's schedule (idempotent)."""
    boss.create_queue(EMAILS_DEAD)
    boss.create_queue(EMAILS, retry_limit=2, retry_delay=1, dead_letter=EMAILS_DEAD, notify=True)
    boss.create_queue(REPORTS, policy="stately", retry_limit=1)
    boss.create_queue(LOYALTY, policy="key_strict_fifo", retry_limit=3, retry_delay=1, notify=True)
    boss.create_queue(WAREHOUSE, retry_limit=3, notify=True)
    boss.schedule(
        REPORTS, NIGHTLY_REPORT_CRON, {"kind": "nightly"}, tz=NIGHTLY_REPORT_TZ, key=NIGHTLY_REPORT_KEY
    )


def teardown() -> None:
    """Delete the shop's queues with their jobs and schedules (the demo starts from scratch)."""
    for name in (EMAILS, EMAILS_DEAD, REPORTS, LOYALTY, WAREHOUSE):
        boss.delete_queue(name)
