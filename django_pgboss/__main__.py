"""``python -m django_pgboss``: the version, and where to go next.

The real commands are Django management commands (they need a project's settings); this entry
point needs none, so it answers "which django_pgboss is installed here?" anywhere.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from django_pgboss.version import version_text

DESCRIPTION = """\
django_pgboss: pg-boss's PostgreSQL job queue as a Django app.

In a Django project (with "django_pgboss" in INSTALLED_APPS):
  python manage.py migrate pgboss     create pg-boss's schema
  python manage.py pgboss_work        run the @work handlers of every app's jobs.py
  python manage.py pgboss_monitor     count queues, expire and retry, delete old jobs, send cron jobs
"""


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m django_pgboss``."""
    parser = argparse.ArgumentParser(
        prog="python -m django_pgboss",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--version", action="version", version=version_text(), help="print the version and exit"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (argparse exits 2 on a bad argument)."""
    parser = build_parser()
    parser.parse_args(argv)
    # No argument: say what this is and how to ask for the version.
    parser.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
