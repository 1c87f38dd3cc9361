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

from django.db import connections
from django.db.backends.signals import connection_created

from django_pgboss.conf import pgboss_settings
from django_pgboss.db.identifiers import quote_schema

__all__ = ["CLOCK_SETTING", "TestClock"]

CLOCK_SETTING = "pgboss.test_clock"
"""The session setting through which a connection opts into the test clock (pg-boss's name)."""
_CLOCK_TABLE = "__pgboss_test_clock"


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
        self._start = start
        self._using = using or pgboss_settings.DATABASE
        self._schema = quote_schema(schema or pgboss_settings.SCHEMA)
        self._table = f"{self._schema}.{_CLOCK_TABLE}"
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
        with connections[self._using].cursor() as cursor:
            cursor.execute(f"SELECT pg_get_functiondef('{self._schema}.job_now()'::regprocedure)")
            (self._original_definition,) = cursor.fetchone()
            if CLOCK_SETTING in self._original_definition:
                raise RuntimeError(
                    "job_now() already carries a test clock override (another TestClock is attached, "
                    "or a killed test run left it behind: restore it with TestClock.restore())"
                )
            if self._start is None:
                cursor.execute("SELECT pg_catalog.now()")
                (self._start,) = cursor.fetchone()
            # Dropped and created rather than reused: a table under this name can only be a
            # leftover of a killed run, and its row would be a stale time.
            cursor.execute(f"DROP TABLE IF EXISTS {self._table}")
            cursor.execute(f"CREATE TABLE {self._table} (now timestamp with time zone NOT NULL)")
            cursor.execute(f"INSERT INTO {self._table} (now) VALUES (%s)", [self._start])
            cursor.execute(_clock_function(self._schema, self._override_body()))
            cursor.execute(f"SET {CLOCK_SETTING} = 'on'")
        self._now = self._start
        connection_created.connect(self._opt_in, dispatch_uid=self._uid())

    def detach(self) -> None:
        """Put job_now() back as it was, drop the clock table and opt this connection out."""
        if self._original_definition is None:
            return
        connection_created.disconnect(dispatch_uid=self._uid())
        connection = connections[self._using]
        # A test whose transaction broke cannot run anything more; its rollback undoes the clock.
        if not connection.needs_rollback:
            with connection.cursor() as cursor:
                cursor.execute(self._original_definition)
                cursor.execute(f"DROP TABLE IF EXISTS {self._table}")
                cursor.execute(f"RESET {CLOCK_SETTING}")
        self._original_definition = None
        self._now = None

    @classmethod
    def restore(cls, *, using: str | None = None, schema: str | None = None) -> None:
        """Undo an override a killed test run left behind: job_now() reads the real clock again."""
        quoted = quote_schema(schema or pgboss_settings.SCHEMA)
        with connections[using or pgboss_settings.DATABASE].cursor() as cursor:
            cursor.execute(_clock_function(quoted, "SELECT pg_catalog.now();"))
            cursor.execute(f"DROP TABLE IF EXISTS {quoted}.{_CLOCK_TABLE}")

    def _override_body(self) -> str:
        # pg-boss's override, so its drift check recognises a test clock for what it is. The
        # subquery keeps the function from being inlined, which only tests ever pay for.
        return (
            f"SELECT COALESCE(CASE WHEN current_setting('{CLOCK_SETTING}', true) = 'on' "
            f"THEN (SELECT c.now FROM {self._table} c LIMIT 1) END, pg_catalog.now());"
        )

    def _uid(self) -> str:
        return f"django_pgboss.testing.TestClock:{id(self)}"

    def _opt_in(self, sender: Any, connection: Any, **kwargs: Any) -> None:
        if connection.alias == self._using:
            with connection.cursor() as cursor:
                cursor.execute(f"SET {CLOCK_SETTING} = 'on'")

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
        with connections[self._using].cursor() as cursor:
            cursor.execute(f"UPDATE {self._table} SET now = %s", [moment])
        self._now = moment
        return moment

    def advance(self, delta: dt.timedelta | None = None, **units: float) -> dt.datetime:
        """Move the clock forward by ``delta`` and/or timedelta units (``seconds=61``,
        ``hours=2``, ``days=1``); returns the new time."""
        step = (delta or dt.timedelta()) + dt.timedelta(**units)
        if step < dt.timedelta():
            raise ValueError(f"advance() moves forward only, not by {step}; use set_time() to go back")
        return self.set_time(self.now() + step)


def _clock_function(schema: str, body: str) -> str:
    # The shape the migration creates, so the catalog reads the same once the clock is restored.
    return f"""CREATE OR REPLACE FUNCTION {schema}.job_now()
RETURNS timestamp with time zone AS
$$
      {body}
$$
LANGUAGE sql STABLE"""
