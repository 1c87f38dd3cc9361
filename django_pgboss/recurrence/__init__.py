"""Schedules' expressions, pure: cron expressions and RFC 5545 recurrence rules, read and walked.

- ``expressions.py``: an expression's kind (cron or rrule, pg-boss's test), cron through croniter,
  and :class:`Recurrence`, which walks either kind in its time zone within a CPU budget
  (``preview()``, ``read_stored()``).
- ``rfc5545.py``: a rule's DTSTART, RRULE, RDATE and EXDATE lines read and checked, every part and
  value dateutil would ignore or misread refused.
- ``search.py``: dateutil's search bounded from inside (a deadline, and a horizon its per-period
  step looks at), so that no rule can search to the year 9999.

Nothing here reads settings or touches the database. The names below are what the rest of the
package (the schedule API, the timekeeper, the admin's schedule form) uses.
"""

from __future__ import annotations

from django_pgboss.recurrence.expressions import (
    CRON,
    EVALUATION_BUDGET_SECONDS,
    KINDS,
    PREVIEW_DEFAULT_COUNT,
    PREVIEW_MAX_COUNT,
    PREVIEW_TIME_BUDGET_SECONDS,
    RRULE,
    OutOfTime,
    Recurrence,
    detect_kind,
    is_rrule,
    parse_cron,
    parse_zone,
    preview,
    read_stored,
)

__all__ = [
    "CRON",
    "EVALUATION_BUDGET_SECONDS",
    "KINDS",
    "PREVIEW_DEFAULT_COUNT",
    "PREVIEW_MAX_COUNT",
    "PREVIEW_TIME_BUDGET_SECONDS",
    "RRULE",
    "OutOfTime",
    "Recurrence",
    "detect_kind",
    "is_rrule",
    "parse_cron",
    "parse_zone",
    "preview",
    "read_stored",
]
