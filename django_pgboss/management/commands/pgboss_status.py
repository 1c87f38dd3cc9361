"""manage.py pgboss_status: the queues, the running instances, the monitor's last pass and the
open warnings, with checks whose failure makes the exit status non-zero (a container health check).

The command parses its arguments and prints; what it reports and how each check is judged is
django_pgboss.monitor.status, the text layout django_pgboss.management.status_text.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError
from django.utils.connection import ConnectionDoesNotExist

from django_pgboss.db.context import DatabaseContext
from django_pgboss.exceptions import PgBossError, SchemaError
from django_pgboss.management.schema_commands import configured_schema
from django_pgboss.management.status_text import render
from django_pgboss.monitor.status import CHECKS, read_status
from django_pgboss.version import version_text


class Command(BaseCommand):
    help = (
        "Show the queues (waiting, active, failed, dead letter depth, oldest ready job, throughput), the "
        "running workers and monitors, the monitor's last pass and recent warnings. Exits non-zero when a "
        f"check ({', '.join(CHECKS)}) chosen with --checks fails."
    )
    # A health probe runs it every few seconds: the project's system checks are not its question,
    # and on a database never migrated it must still answer in one line.
    requires_system_checks: list[str] = []

    def get_version(self) -> str:
        """What --version prints: django_pgboss's version and the pg-boss release it ports."""
        return version_text()

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--json", action="store_true", help="print one JSON document (docs/monitoring.md)"
        )
        parser.add_argument(
            "--queue", action="append", dest="queues", metavar="Q", help="only this queue (repeatable)"
        )
        parser.add_argument(
            "--internal",
            action="store_true",
            help="also list pg-boss's internal queues (__pgboss__send-it); they are judged either way",
        )
        parser.add_argument(
            "--host", help="only the instances on this host; its instances check then needs one of them live"
        )
        parser.add_argument(
            "--checks",
            default=",".join(CHECKS),
            metavar="LIST",
            help=(
                "the checks whose failure fails the command, comma-separated, or none "
                f"(default {','.join(CHECKS)})"
            ),
        )
        parser.add_argument(
            "--warnings-window",
            type=int,
            default=3600,
            metavar="SECONDS",
            help="list the warnings persisted this many seconds back (default 3600)",
        )
        parser.add_argument(
            "--database", default=None, help='the database alias (default PGBOSS["DATABASE"])'
        )

    def handle(self, *args: Any, **options: Any) -> None:
        enforce = _checks(options["checks"])
        window = options["warnings_window"]
        if window < 1:
            raise CommandError(f"--warnings-window must be at least 1 second, not {window}")
        alias, schema = configured_schema(options["database"])
        try:
            status = read_status(
                DatabaseContext(alias, schema),
                queues=options["queues"],
                host=options["host"],
                enforce=enforce,
                warnings_window_seconds=window,
                internal=options["internal"],
            )
        except SchemaError:
            raise  # SchemaNotInstalled: a CommandError already, saying to run migrate.
        except PgBossError as exc:
            raise CommandError(str(exc)) from None
        except ConnectionDoesNotExist:
            raise CommandError(f"--database: no database alias {alias!r} in settings.DATABASES") from None
        except DatabaseError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise CommandError(f"database {alias!r}: {first}") from None
        if options["json"]:
            self.stdout.write(json.dumps(status.as_json(), indent=2))
        else:
            for line in render(status):
                self.stdout.write(line)
        failed = status.failed
        if failed:
            raise CommandError(
                f"{len(failed)} check(s) failed: " + "; ".join(f"{c.name}: {c.detail}" for c in failed)
            )


def _checks(value: str) -> list[str]:
    """The --checks list, each name known; ``none`` for none."""
    names = [name.strip() for name in value.split(",") if name.strip()]
    if names == ["none"]:
        return []
    if not names:
        raise CommandError(f"--checks is empty: name the checks ({', '.join(CHECKS)}), or none")
    unknown = [name for name in names if name not in CHECKS]
    if unknown:
        raise CommandError(
            f"--checks: {', '.join(unknown)} is not a check; the checks are {', '.join(CHECKS)}, or none"
        )
    return names
