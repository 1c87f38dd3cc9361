"""Cursors for django_pgboss's own statements, on Django's connection.

Every statement runs on the Django connection of the configured alias, so it shares the caller's
transaction. By default it runs through a server-side binding psycopg cursor: PostgreSQL then
prepares each statement once per connection instead of parsing and planning it on every call,
which was most of the cost of a send (bench/README.md). Django's own cursors keep client-side
binding and never prepare, so the ORM is unaffected.

The psycopg cursor is kept per thread and connection and reused. Errors are translated to Django's
as for any query; when an execute wrapper is installed or queries are logged, each use goes through
Django's own cursor wrapper so those see our statements too.
"""

from __future__ import annotations

import asyncio
import datetime
import threading
from typing import Any

import psycopg
from django.conf import settings
from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.postgresql.psycopg_any import register_tzloader
from psycopg.pq import Format

from django_pgboss.conf import pgboss_settings
from django_pgboss.constants import Backend
from django_pgboss.db.installed import not_installed
from django_pgboss.plans import testing as testing_plans
from django_pgboss.plans.fragments import routable

#: After how many uses on a connection a statement is prepared: the second, so a statement run
#: once (create_queue, a one-off read) is never prepared, and a hot one almost at once.
PREPARE_THRESHOLD = 1

_local = threading.local()

#: Where Django's settings object keeps each setting it has read: it drops one there whenever
#: the setting changes (an assignment, override_settings), and reading it again puts it back.
#: A setting read there is current, for a dict lookup instead of LazyObject's Python-level
#: __getattribute__.
_SETTINGS_READ: dict[str, Any] = object.__getattribute__(settings, "__dict__")

# asyncio's own lookup of the running loop, which answers None off a loop where the public
# get_running_loop() raises.
_get_running_loop = asyncio._get_running_loop

# Read once: each read of a member from its enum class is a Python-level lookup, on every statement.
_CITUS_DISTRIBUTED = Backend.CITUS_DISTRIBUTED

#: The (alias, quoted schema) pairs whose job_now() a TestClock (django_pgboss.testing) overrides
#: in this process: on the citus-distributed backend their statements take the test clock's time
#: as a bound value (plans.testing.bound_clock()). Empty outside tests.
_TEST_CLOCKS: set[tuple[str, str]] = set()


def bind_test_clock(alias: str, quoted_schema: str, *, attached: bool) -> None:
    """Record that a TestClock was attached to (``attached``) or detached from ``alias`` and
    ``quoted_schema``; see _TEST_CLOCKS."""
    if attached:
        _TEST_CLOCKS.add((alias, quoted_schema))
    else:
        _TEST_CLOCKS.discard((alias, quoted_schema))


#: psycopg's own timestamptz loader (its C one where psycopg's binary package is installed).
_TIMESTAMPTZ_OID = psycopg.adapters.types["timestamptz"].oid
_NATIVE_TIMESTAMPTZ_LOADER = psycopg.adapters.get_loader(_TIMESTAMPTZ_OID, Format.TEXT)


def thread_connection(alias: str) -> BaseDatabaseWrapper:
    """``connections[alias]`` for the calling thread, found the short way when it can be.

    Django keeps each thread's connections in asgiref's ``Local(thread_critical=True)``, which, on
    a thread that runs no event loop, stores them in a plain ``threading.local``; its lookup asks
    asyncio for a running loop by catching the RuntimeError raised where there is none, a
    microsecond or more of every statement. Here that store is read directly where it is one (the
    asgiref releases Django supports), after the cheaper test for a running loop; on a thread
    that runs a loop, before the thread's first use of the alias, or with another asgiref,
    ``connections[alias]`` answers as usual.
    """
    if _get_running_loop() is None:
        # Django's (private) store, which django-stubs does not declare.
        store = getattr(connections._connections, "_storage", None)  # type: ignore[attr-defined]
        if type(store) is threading.local:
            connection = store.__dict__.get(alias)
            if connection is not None:
                return connection
    return connections[alias]


def statement_cursor(
    alias: str, context: Any = None, connection: BaseDatabaseWrapper | None = None
) -> _StatementCursor:
    """A context manager giving a Django cursor wrapper for one of django_pgboss's statements on
    connection ``alias``.

    ``context`` (a DatabaseContext) names the schema the statements address: an error saying an
    object of that schema does not exist becomes SchemaNotInstalled (db/installed.py).
    ``connection`` is ``connections[alias]`` when the caller has just looked it up on this thread
    (the lookup, through asgiref's Local, is a microsecond or more of every send).
    """
    return _StatementCursor(alias, context, connection)


class _StatementCursor:
    """statement_cursor()'s context manager: a class rather than a generator, because every send
    and fetch enters one and a generator-based context manager costs several times as much."""

    __slots__ = ("_alias", "_connection", "_context", "_plain")

    def __init__(
        self, alias: str, context: Any = None, connection: BaseDatabaseWrapper | None = None
    ) -> None:
        self._alias = alias
        self._context = context
        self._connection = connection
        self._plain: Any = None

    def __enter__(self) -> Any:
        cursor = self._enter()
        if pgboss_settings.BACKEND == _CITUS_DISTRIBUTED:
            clock = None
            if _TEST_CLOCKS and self._context is not None:
                schema = self._context.quoted_schema
                clock = schema if (self._alias, schema) in _TEST_CLOCKS else None
            return _RoutableCursor(cursor, clock)
        return cursor

    def _enter(self) -> Any:
        connection = self._connection if self._connection is not None else thread_connection(self._alias)
        cursor = ready_cursor(self._alias, connection, routed=True)
        if cursor is None:
            # PREPARED_STATEMENTS is off: Django's own cursor, closed on leaving.
            self._plain = connection.cursor()
            return self._plain.__enter__()
        return cursor

    def __exit__(self, *exc_info: Any) -> None:
        # The reused psycopg cursor stays open for the next statement; a plain Django cursor
        # (PREPARED_STATEMENTS off) is closed as Django closes it.
        if self._plain is not None:
            self._plain.__exit__(*exc_info)
        if exc_info[0] is not None and self._context is not None:
            # Only on an error: the schema is read then, so a statement that succeeds pays nothing.
            raise_if_not_installed(exc_info[1], self._alias, self._context.schema)


def ready_cursor(alias: str, connection: BaseDatabaseWrapper, *, routed: bool = False) -> Any:
    """The reused server-side binding cursor of this thread and ``connection`` (``connections[alias]``
    on the calling thread), wrapped as Django would wrap it for whoever watches the queries (see
    the module's docstring); made, or made again, when the connection or its time zone changed.

    statement_cursor() enters with it; a caller that runs one statement without entering
    statement_cursor() (a send's hot path, api/sending.py) takes it directly, and translates an
    error as statement_cursor() does (raise_if_not_installed(); psycopg's errors already come as
    Django's). None where statement_cursor() must be entered instead: with PREPARED_STATEMENTS off
    (a plain Django cursor, closed on leaving), and, unless ``routed`` (the caller rewrites each
    statement as Citus routes it, as statement_cursor() does), on the citus-distributed backend.
    """
    if not ready_cursor_available(routed=routed):
        return None
    # Django's own test (on attributes django-stubs does not declare), made here first: the call
    # it saves is a microsecond of every send, and its answer changes only once per request, when
    # Django resets health_check_done.
    if connection.health_check_enabled and not connection.health_check_done:  # type: ignore[attr-defined]
        connection.close_if_health_check_failed()
    raw = connection.connection
    if raw is None:
        # ensure_connection() does only this once connected; called on every statement it
        # also runs Django's async-unsafe check (an environment lookup and a raised
        # exception), which Boss's own check on a running event loop already made.
        connection.ensure_connection()
        raw = connection.connection
    cursors: dict[str, tuple[Any, psycopg.Cursor, _LeanCursor, Any]] | None = _local.__dict__.get("cursors")
    if cursors is None:
        cursors = _local.cursors = {}
    cached = cursors.get(alias)
    # The connection's time zone is read on each use because a settings change (a test's
    # override_settings) resets it, and Django then loads timestamps in the new one.
    timezone = connection.timezone
    if cached is None or cached[0] is not raw or cached[1].closed or cached[3] is not timezone:
        # Django opens connections with prepared statements disabled (for connection
        # poolers); they are enabled here for server-side binding cursors, which only we use.
        if raw.prepare_threshold is None:
            raw.prepare_threshold = PREPARE_THRESHOLD
        cursor = psycopg.Cursor(raw)
        load_timestamps_as_django_does(cursor, timezone)
        cached = (raw, cursor, _LeanCursor(connection, cursor), timezone)
        cursors[alias] = cached
    debug = _SETTINGS_READ.get("DEBUG")
    if debug is None:
        debug = settings.DEBUG
    # connection.queries_logged, read as Django reads it (force_debug_cursor or DEBUG) without the
    # settings object's Python-level attribute lookup on every statement.
    if connection.execute_wrappers or connection.force_debug_cursor or debug:
        # Someone watches the queries (an execute_wrapper, DEBUG's query log, a test's
        # assertNumQueries): Django's own wrapper, so they see ours too.
        # Django's own (private) wrapping step, which django-stubs does not declare.
        return connection._prepare_cursor(cached[1])  # type: ignore[attr-defined]
    return cached[2]


def ready_cursor_available(*, routed: bool = False) -> bool:
    """Whether ready_cursor() gives a cursor under the current settings (its ``routed`` says what
    that means): for a caller that would otherwise do a statement's work before finding out."""
    return bool(pgboss_settings.PREPARED_STATEMENTS) and (
        routed or pgboss_settings.BACKEND != _CITUS_DISTRIBUTED
    )


def raise_if_not_installed(error: BaseException, alias: str, schema: str) -> None:
    """Raise SchemaNotInstalled, from ``error``, when ``error`` says ``schema`` is not installed
    (db/installed.py); what statement_cursor() does with a statement's error on leaving."""
    missing = not_installed(error, alias, schema)
    if missing is not None:
        raise missing from error


def load_timestamps_as_django_does(cursor: psycopg.Cursor, timezone: datetime.tzinfo | None) -> None:
    """Have ``cursor`` load timestamptz values as Django's own cursors would, the fast way if it can.

    Django loads every timestamptz through a Python subclass of psycopg's loader that replaces
    the value's tzinfo with the connection's time zone: about 8 us a value where psycopg's own
    loader takes under 1 (bench/worker_overheads.py), and a fetch returns one or, with its metadata,
    seven of them per job. Under USE_TZ with the database's TIME_ZONE unset, Django's time zone
    is UTC and it sets the session's TimeZone to UTC; psycopg's own loader then returns the same
    value, an aware datetime whose tzinfo is datetime.timezone.utc, so that loader is used. Any
    other set-up (naive datetimes without USE_TZ, a TIME_ZONE of the database's) keeps Django's
    loader, registered here as Django registers it on its own cursors when the connection's was
    made for another time zone.
    """
    if (
        _NATIVE_TIMESTAMPTZ_LOADER is not None
        and timezone is datetime.UTC
        and cursor.connection.info.parameter_status("TimeZone") == "UTC"
    ):
        cursor.adapters.register_loader(_TIMESTAMPTZ_OID, _NATIVE_TIMESTAMPTZ_LOADER)
        return
    registered = cursor.connection.adapters.get_loader(_TIMESTAMPTZ_OID, Format.TEXT)
    if getattr(registered, "timezone", timezone) != timezone:
        register_tzloader(timezone, cursor)


class _LeanCursor:
    """What Django's CursorWrapper does for a statement, minus what nobody is using.

    Django's wrapper builds the chain of execute wrappers and the query log for every statement,
    and every send and fetch runs one; when there are neither (checked on each use of
    statement_cursor()), this does the rest of it, and only that: refuse to run in a transaction
    that an error broke, and turn psycopg's errors into Django's, exactly as CursorWrapper does.
    """

    __slots__ = ("_connection", "_cursor")

    def __init__(self, connection: Any, cursor: psycopg.Cursor) -> None:
        self._connection = connection
        self._cursor = cursor

    def execute(self, sql: str, params: Any = None) -> Any:
        if self._connection.needs_rollback:
            # Django's own refusal, with its message; the test above saves a call on every statement.
            self._connection.validate_no_broken_transaction()
        try:
            return self._cursor.execute(sql, params)
        except Exception:
            # Django's translation, entered only for an error: the wrapper is a new object on
            # every use, which a statement that succeeds need not pay for.
            with self._connection.wrap_database_errors:
                raise

    def fetchone(self) -> Any:
        with self._connection.wrap_database_errors:
            return self._cursor.fetchone()

    def fetchall(self) -> list[Any]:
        with self._connection.wrap_database_errors:
            return self._cursor.fetchall()

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount

    @property
    def description(self) -> Any:
        return self._cursor.description


class _RoutableCursor:
    """The statement cursor on the citus-distributed backend: each statement runs with the queue's
    name compared as Citus routes it (plans.fragments.routable()), so a statement about one queue
    runs whole on the one node that holds the queue's shard. While a TestClock is attached to the
    schema (``clock``, its quoted name), a statement that reads job_now() takes the test clock's
    time as a bound value instead (plans.testing.bound_clock() says why). Everything else is the
    wrapped cursor's."""

    __slots__ = ("_clock", "_cursor")

    def __init__(self, cursor: Any, clock: str | None = None) -> None:
        self._cursor = cursor
        self._clock = clock

    def execute(self, sql: Any, params: Any = None) -> Any:
        if not isinstance(sql, str):
            return self._cursor.execute(sql, params)
        sql = routable(sql)
        # An anonymous code block (DO) takes no parameters, and runs on the coordinator, where
        # job_now() reads the test clock itself: it keeps its calls.
        if (
            self._clock is not None
            and not sql.lstrip().startswith("DO ")
            and f"{self._clock}.job_now()" in sql
            and sql.strip() != (reading := testing_plans.clock_reading(self._clock))
        ):
            self._cursor.execute(reading)
            (now,) = self._cursor.fetchone()
            sql = testing_plans.bound_clock(sql, self._clock)
            params = {**(params or {}), testing_plans.CLOCK_PARAMETER: now}
        return self._cursor.execute(sql, params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)
