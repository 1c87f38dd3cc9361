"""TestClock: a clock the test moves by hand, for the database and for the package's timers.

Every statement of pg-boss's schema reads the time through ``<schema>.job_now()``: creation and
completion stamps, start_after, expiry, retention, the monitor's claim intervals and its throughput
window, the cron timekeeper. ``TestClock`` swaps that function's body, as pg-boss's own TestClock
does, so that a test moves time forward (or back) with ``advance()`` and ``set_time()`` instead of
sleeping, and every connection that opted in sees the same "now".

The override is pg-boss's: a one-row table ``<schema>.__pgboss_test_clock`` holds the time, and
``job_now()`` reads it only in sessions where the setting ``pgboss.test_clock`` is ``on``; every other
session (a pg-boss instance on the same database, a connection of another test run) stays on the
real clock. A pg-boss (Node) ``detectSchemaDrift()`` recognises the override as a test clock. The
statements are in ``django_pgboss.plans.testing``.

While attached, the clock also drives the timers of the monitor's loop (its passes, the
timekeeper's cron cadence, the health checks' intervals: ``django_pgboss.clocks``) and of any worker
built meanwhile without a clock of its own (its polling, heartbeats, deadlines and grace period): a
``Monitor`` or a ``boss.worker()`` running on a thread waits for the test to move time, and
``advance()`` returns once the passes it made due have run.

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

from django_pgboss import arguments, clocks
from django_pgboss.conf import pgboss_settings
from django_pgboss.db.context import DatabaseContext
from django_pgboss.db.cursors import bind_test_clock
from django_pgboss.db.identifiers import quote_schema
from django_pgboss.exceptions import InvalidOption
from django_pgboss.plans import testing as plans
from django_pgboss.plans.testing import CLOCK_SETTING
from django_pgboss.testing.timers import TimerClock

__all__ = ["CLOCK_SETTING", "TestClock"]


class TestClock:
    """A clock for ``job_now()`` and the monitor's timers that only the test moves; a context manager.

    ``start`` is the time the clock shows when attached (a timezone-aware datetime; default: the
    database's current time). ``using`` and ``schema`` default to settings.PGBOSS, as for ``Boss``.
    With ``timers`` (the default) the clock drives the timers of ``django_pgboss.clocks`` too (the
    monitor's and the timekeeper's loops); ``timers=False`` leaves them on real time.
    ``settle_seconds`` is how long ``advance()`` waits, in real time, for the passes it made due
    to run before it raises WaitTimedOut.
    """

    # Not a test class, whatever pytest's name-based collection thinks.
    __test__ = False

    def __init__(
        self,
        start: dt.datetime | None = None,
        *,
        using: str | None = None,
        schema: str | None = None,
        timers: bool = True,
        settle_seconds: float = 30.0,
    ) -> None:
        if start is not None and (not isinstance(start, dt.datetime) or start.tzinfo is None):
            raise InvalidOption(f"TestClock start must be a timezone-aware datetime, not {start!r}")
        arguments.boolean("timers", timers)
        arguments.number("settle_seconds", settle_seconds, minimum=0.001)
        self._start = start
        self._using = using or pgboss_settings.DATABASE
        self._schema = quote_schema(schema or pgboss_settings.SCHEMA)
        self._context = DatabaseContext(self._using, schema or pgboss_settings.SCHEMA)
        self._original_definition: str | None = None
        self._now: dt.datetime | None = None
        self._drives_timers = timers
        self._settle_seconds = float(settle_seconds)
        self._timers: TimerClock | None = None

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
        schema, context = self._schema, self._context
        (definition,) = context.one(plans.job_now_definition(), {"function": plans.job_now_signature(schema)})
        if CLOCK_SETTING in definition:
            raise RuntimeError(
                "job_now() already carries a test clock override (another TestClock is attached, "
                "or a killed test run left it behind: restore it with TestClock.restore())"
            )
        if self._start is None:
            (self._start,) = context.one(plans.database_now())
        # Dropped and created rather than reused: a table under this name can only be a
        # leftover of a killed run, and its row would be a stale time.
        context.execute(plans.drop_clock_table(schema))
        context.execute(plans.create_clock_table(schema))
        context.execute(plans.start_clock(schema), {"now": self._start})
        context.execute(plans.job_now_function(schema, test_clock=True))
        context.execute(plans.opt_in())
        bind_test_clock(self._using, schema, attached=True)
        self._original_definition = definition
        self._now = self._start
        connection_created.connect(self._opt_in, dispatch_uid=self._uid())
        if self._drives_timers:
            self._timers = TimerClock(wall=self._start.timestamp(), settle_seconds=self._settle_seconds)
            clocks.install(self._timers)

    def detach(self) -> None:
        """Put job_now() back as it was, drop the clock table and opt this connection out."""
        if self._original_definition is None:
            return
        connection_created.disconnect(dispatch_uid=self._uid())
        bind_test_clock(self._using, self._schema, attached=False)
        if self._timers is not None:
            clocks.uninstall(self._timers)
            self._timers.stop()
            self._timers = None
        context = self._context
        # A test whose transaction broke cannot run anything more; its rollback undoes the clock.
        if not context.connection().needs_rollback:
            context.script(self._original_definition)
            context.execute(plans.drop_clock_table(self._schema))
            context.execute(plans.opt_out())
        self._original_definition = None
        self._now = None

    @classmethod
    def restore(cls, *, using: str | None = None, schema: str | None = None) -> None:
        """Undo an override a killed test run left behind: job_now() reads the real clock again."""
        context = DatabaseContext(using or pgboss_settings.DATABASE, schema or pgboss_settings.SCHEMA)
        context.execute(plans.job_now_function(context.quoted_schema, test_clock=False))
        context.execute(plans.drop_clock_table(context.quoted_schema))

    def _uid(self) -> str:
        return f"django_pgboss.testing.TestClock:{id(self)}"

    def _opt_in(self, sender: Any, connection: Any, **kwargs: Any) -> None:
        if connection.alias == self._using:
            self._context.execute(plans.opt_in(), connection=connection)

    # -- moving time ---------------------------------------------------------------------------

    def now(self) -> dt.datetime:
        """The time job_now() returns to connections that opted in."""
        if self._now is None:
            raise RuntimeError("the TestClock is not attached")
        return self._now

    def set_time(self, moment: dt.datetime) -> dt.datetime:
        """Jump to ``moment`` (forwards or backwards); returns it.

        The timers see a forward jump as time passed, as the database does: each pass it made due
        runs once, and set_time() returns once they have. A backward jump leaves the timers where
        they are (as pg-boss's does), so an interval already counted is not counted again.
        """
        if not isinstance(moment, dt.datetime) or moment.tzinfo is None:
            raise InvalidOption(f"set_time() needs a timezone-aware datetime, not {moment!r}")
        step = moment - self.now()
        self._context.execute(plans.set_clock(self._schema), {"now": moment})
        self._now = moment
        if self._timers is not None:
            if step > dt.timedelta():
                self._timers.move(step.total_seconds(), wall=moment.timestamp())
            else:
                self._timers.set_wall(moment.timestamp())
        return moment

    def advance(self, delta: dt.timedelta | None = None, **units: float) -> dt.datetime:
        """Move the clock forward by ``delta`` and/or timedelta units (``seconds=61``,
        ``hours=2``, ``days=1``); returns the new time, once the timers' passes it made due ran."""
        if delta is not None and not isinstance(delta, dt.timedelta):
            raise InvalidOption(f"advance() takes a timedelta or units such as seconds=61, not {delta!r}")
        try:
            step = (delta or dt.timedelta()) + dt.timedelta(**units)
        except TypeError as exc:
            raise InvalidOption(
                f"advance() takes timedelta units (seconds, minutes, hours, days): {exc}"
            ) from exc
        if step < dt.timedelta():
            raise InvalidOption(f"advance() moves forward only, not by {step}; use set_time() to go back")
        return self.set_time(self.now() + step)

    @property
    def timers(self) -> TimerClock:
        """The clock of the timers this TestClock drives: what a worker built while it is attached
        takes as its ``clock`` (worker/ports.py's Clock) unless given another, as the monitor's
        loop finds it in ``django_pgboss.clocks``.
        RuntimeError when the clock is detached or was made with ``timers=False``."""
        if self._timers is None:
            raise RuntimeError("this TestClock drives no timers (it is detached, or made with timers=False)")
        return self._timers

    def wait_for_timers(self, count: int = 1, *, timeout: float = 10.0) -> int:
        """Wait (real time) until ``count`` threads wait on this clock's timers, such as a Monitor
        started on a thread once its first passes ran; returns how many do. Raises WaitTimedOut
        after ``timeout`` seconds, and RuntimeError when the clock drives no timers."""
        arguments.integer("count", count, minimum=1)
        arguments.number("timeout", timeout, minimum=0.0)
        return self.timers.wait_for_sleepers(count, float(timeout))
