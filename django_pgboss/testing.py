"""Test helpers for projects that use django_pgboss: a clock the tests drive by hand.

Every statement of pg-boss's schema reads the time through ``<schema>.job_now()``: creation and
completion stamps, start_after, expiry, retention, the monitor's claim intervals and its throughput
window, the cron timekeeper. ``TestClock`` swaps that function's body, as pg-boss's own TestClock
does, so that a test moves time forward (or back) with ``advance()`` and ``set_time()`` instead of
sleeping, and every connection that opted in sees the same "now".

The override is pg-boss's: a one-row table ``<schema>.__pgboss_test_clock`` holds the time, and
``job_now()`` reads it only in sessions where the setting ``pgboss.test_clock`` is ``on``; every other
session (a pg-boss instance on the same database, a connection of another test run) stays on the
real clock. A pg-boss (Node) ``detectSchemaDrift()`` recognises the override as a test clock.

Usage, in a test:

    from django_pgboss.testing import TestClock

    def test_a_job_expires(db):
        with TestClock() as clock:
            boss.create_queue("q", expire_in_seconds=60)
            ...
            clock.advance(seconds=61)
            assert boss.supervise().expired == 1

Inside a test wrapped in a transaction (pytest-django's ``db``, Django's ``TestCase``), everything
the clock does is rolled back with the test. With real transactions (``transactional_db``,
``TransactionTestCase``) leaving the ``with`` block restores ``job_now()`` and drops the table.
Connections opened while the clock is attached (worker threads, a second Boss) opt in on opening.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db.backends.signals import connection_created

from django_pgboss.conf import pgboss_settings
from django_pgboss.db.context import DatabaseContext
from django_pgboss.db.identifiers import quote_schema
from django_pgboss.plans import clock as plans
from django_pgboss.plans.clock import CLOCK_SETTING

__all__ = ["CLOCK_SETTING", "TestClock"]


class TestClock:
    """A clock for ``job_now()`` that only the test moves; a context manager.

    ``start`` is the time the clock shows when attached (a timezone-aware datetime; default: the
    database's current time). ``using`` and ``schema`` default to settings.PGBOSS, as for ``Boss``.
    """

    # Not a test class, whatever pytest's name-based collection thinks.
    __test__ = False

    def __init__(
        self, start: dt.datetime | None = None, *, using: str | None = None, schema: str | None = None
    ) -> None:
        if start is not None and (not isinstance(start, dt.datetime) or start.tzinfo is None):
            raise ValueError(f"TestClock start must be a timezone-aware datetime, not {start!r}")
        schema = schema or pgboss_settings.SCHEMA
        quote_schema(schema)  # an invalid name is refused before any SQL
        self._start = start
        self._context = DatabaseContext(using or pgboss_settings.DATABASE, schema)
        self._original_definition: str | None = None
        self._now: dt.datetime | None = None

    # -- attaching -----------------------------------------------------------------------------

    def __enter__(self) -> TestClock:
        self.attach()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.detach()

    def attach(self) -> None:
        """Install the override and opt this thread's connection (and any opened later) in."""
        if self._original_definition is not None:
            raise RuntimeError("this TestClock is already attached")
        context = self._context
        schema = context.quoted_schema
        (definition,) = context.one(plans.function_definition(), {"function": f"{schema}.job_now()"})
        if CLOCK_SETTING in definition:
            raise RuntimeError(
                "job_now() already carries a test clock override (another TestClock is attached, "
                "or a killed test run left it behind: restore it with TestClock.restore())"
            )
        self._original_definition = definition
        if self._start is None:
            (self._start,) = context.one(plans.database_now())
        # Dropped and created rather than reused: a table under this name can only be a leftover
        # of a killed run, and its row would be a stale time.
        context.execute(plans.drop_clock_table(schema))
        context.execute(plans.create_clock_table(schema))
        context.execute(plans.insert_clock_time(schema), {"now": self._start})
        context.execute(plans.overridden_job_now(schema))
        context.execute(plans.opt_in())
        self._now = self._start
        connection_created.connect(self._opt_in, dispatch_uid=self._uid())

    def detach(self) -> None:
        """Put job_now() back as it was, drop the clock table and opt this connection out."""
        if self._original_definition is None:
            return
        connection_created.disconnect(dispatch_uid=self._uid())
        context = self._context
        # A test whose transaction broke cannot run anything more; its rollback undoes the clock.
        if not context.connection().needs_rollback:
            # The definition job_now() had, read back from the catalog: a statement of its own.
            context.script(self._original_definition)
            context.execute(plans.drop_clock_table(context.quoted_schema))
            context.execute(plans.opt_out())
        self._original_definition = None
        self._now = None

    @classmethod
    def restore(cls, *, using: str | None = None, schema: str | None = None) -> None:
        """Undo an override a killed test run left behind: job_now() reads the real clock again."""
        if schema is not None:
            quote_schema(schema)  # an invalid name is refused before any SQL
        context = DatabaseContext(using, schema)
        context.execute(plans.real_job_now(context.quoted_schema))
        context.execute(plans.drop_clock_table(context.quoted_schema))

    def _uid(self) -> str:
        return f"django_pgboss.testing.TestClock:{id(self)}"

    def _opt_in(self, sender: Any, connection: Any, **kwargs: Any) -> None:
        if connection.alias == self._context.using:
            self._context.execute(plans.opt_in(), connection=connection)

    # -- moving time ---------------------------------------------------------------------------

    def now(self) -> dt.datetime:
        """The time job_now() returns to connections that opted in."""
        if self._now is None:
            raise RuntimeError("the TestClock is not attached")
        return self._now

    def set_time(self, moment: dt.datetime) -> dt.datetime:
        """Jump to ``moment`` (forwards or backwards); returns it."""
        if not isinstance(moment, dt.datetime) or moment.tzinfo is None:
            raise ValueError(f"set_time() needs a timezone-aware datetime, not {moment!r}")
        self.now()  # attached?
        self._context.execute(plans.set_clock_time(self._context.quoted_schema), {"now": moment})
        self._now = moment
        return moment

    def advance(self, delta: dt.timedelta | None = None, **units: float) -> dt.datetime:
        """Move the clock forward by ``delta`` and/or timedelta units (``seconds=61``,
        ``hours=2``, ``days=1``); returns the new time."""
        step = (delta or dt.timedelta()) + dt.timedelta(**units)
        if step < dt.timedelta():
            raise ValueError(f"advance() moves forward only, not by {step}; use set_time() to go back")
        return self.set_time(self.now() + step)
