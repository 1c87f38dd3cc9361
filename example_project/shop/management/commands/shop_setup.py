"""manage.py shop_setup: create the shop's queues and the nightly report's cron schedule."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from example_project.shop import queues


class Command(BaseCommand):
    help = "Create the shop's queues and the nightly sales report schedule (safe to run again)."

    def handle(self, *args: Any, **options: Any) -> None:
        queues.setup()
        self.stdout.write(
            f"queues {queues.EMAILS}, {queues.EMAILS_DEAD}, {queues.REPORTS}, {queues.LOYALTY} are ready; "
            f"{queues.REPORTS!r} runs at {queues.NIGHTLY_REPORT_CRON!r} ({queues.NIGHTLY_REPORT_TZ})"
        )
