"""The database context: where django_pgboss's statements run, and what they share.

A :class:`DatabaseContext` is one Django database alias and one pg-boss schema, with what every
part of django_pgboss needs to run statements there: the schema as SQL spells it, cursors on
Django's connection (db/cursors.py), pg-boss's advisory-lock keys and LISTEN/NOTIFY channel, and
the cache of where each queue's jobs live. ``Boss``, the monitor, the timekeeper, the dead-letter
API, the worker's listener and the tasks backend each take one, the way pg-boss hands its
supervisor and timekeeper ``(db, config)``; none of them reaches into another for its plumbing.

The alias and the schema default to settings.PGBOSS, read at each use (so ``override_settings``
and a settings change reach the default context too), unless given when the context is made.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Mapping
from typing import Any, NamedTuple

from django.db import connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from django_pgboss import clocks
from django_pgboss.conf import pgboss_settings
from django_pgboss.constants import Backend
from django_pgboss.db.cursors import raise_if_not_installed, ready_cursor, statement_cursor, thread_connection
from django_pgboss.db.identifiers import advisory_lock_key, quote_job_table, quote_schema, schema_key
from django_pgboss.exceptions import QueueNotFound, StatementReturnedNoRow
from django_pgboss.plans import jobs as job_plans
from django_pgboss.plans import queues as queue_plans

#: A row as a statement returns it: its columns' values in the statement's order.
Row = tuple[Any, ...]

#: A statement's named parameters (plans/ statements bind every value by name).
Params = Mapping[str, Any] | None


class Table(NamedTuple):
    """A statement's rows with its column names, for readers that match columns by name
    (``records.jobs_from_table()``): the rows of one statement all have the same columns."""

    columns: tuple[str, ...]
    rows: list[Row]


#: How often, at most, a statement that found nothing re-reads its queue's route when the caller
#: asks for the bound (the fetch, whose polls of an idle queue all come back empty): another
#: process's new partitioning of the queue is then seen within this long. pg-boss refreshes its
#: own queue cache every 60 seconds (queueCacheIntervalSeconds).
ROUTE_RECHECK_SECONDS = 5.0

#: SQLSTATEs that mean a cached route names a table that no longer holds the queue: the table is
#: gone (undefined_table), or job_common refused a row whose queue now has a partition of its own
#: (check_violation).
STALE_ROUTE_SQLSTATES = frozenset({"42P01", "23514"})
#: The same on the citus-distributed backend, where a shard's partition constraint that refuses a
#: row reaches the coordinator as an internal error (XX000, "new row for relation job_common_NNN
#: violates partition constraint"), not as check_violation.
DISTRIBUTED_STALE_ROUTE_SQLSTATES = STALE_ROUTE_SQLSTATES | {"XX000"}


class QueueRoute:
    """What the job statements need to know of a queue: its job table (quoted), policy and notify,
    and when the route was last read or checked (``checked``, on clocks.current()'s monotonic
    clock)."""

    __slots__ = ("checked", "notify", "policy", "table")

    def __init__(self, table: str, policy: str, notify: bool, checked: float = 0.0) -> None:
        self.table = quote_job_table(table)
        self.policy = policy
        self.notify = notify
        self.checked = checked

    def same_as(self, other: QueueRoute) -> bool:
        """Whether ``other`` leads to the same table, with the same policy and notify."""
        return (self.table, self.policy, self.notify) == (other.table, other.policy, other.notify)


class DatabaseContext:
    """One database alias and one pg-boss schema, and the plumbing of statements run there.

    Cheap to make and thread-safe: each cursor is taken on the calling thread's Django connection.
    Contexts over the same alias and schema are interchangeable, except that each keeps its own
    queue-route cache; objects meant to share that cache share one context.
    """

    def __init__(self, using: str | None = None, schema: str | None = None) -> None:
        self._using = using
        self._schema = schema
        self._routes: dict[str, QueueRoute] = {}
        self._routes_lock = threading.Lock()

    @classmethod
    def of(cls, source: Any) -> DatabaseContext:
        """The context of ``source``: a DatabaseContext itself, or anything with a ``context``
        attribute holding one (a Boss). Lets the documented functions that take a Boss
        (``supervise(boss)``, ``run_timekeeper(boss)``) take a context as well."""
        if isinstance(source, DatabaseContext):
            return source
        context = getattr(source, "context", None)
        if isinstance(context, DatabaseContext):
            return context
        raise TypeError(f"expected a Boss or a DatabaseContext, not {type(source).__name__}")

    def __repr__(self) -> str:
        return f"<DatabaseContext using={self.using!r} schema={self.schema!r}>"

    # -- where -----------------------------------------------------------------------------------

    @property
    def using(self) -> str:
        """The Django database alias every statement runs on."""
        return self._using or pgboss_settings.DATABASE

    @property
    def schema(self) -> str:
        """The schema name, as PostgreSQL stores it."""
        return self._schema or pgboss_settings.SCHEMA

    @property
    def quoted_schema(self) -> str:
        """The schema name as it is written in SQL (quoted only when it must be)."""
        return quote_schema(self.schema)

    @property
    def distributed(self) -> bool:
        """Whether the schema is the citus-distributed variant (``PGBOSS["BACKEND"]``), whose
        statements that span queues run split, one queue's job table each (docs/citus.md)."""
        return bool(pgboss_settings.BACKEND == Backend.CITUS_DISTRIBUTED)

    @property
    def stale_route_sqlstates(self) -> frozenset[str]:
        """The SQLSTATEs of an error that may mean a cached queue route is stale, on this backend
        (the caller reads the route again, and runs its statement once more only when it moved)."""
        return DISTRIBUTED_STALE_ROUTE_SQLSTATES if self.distributed else STALE_ROUTE_SQLSTATES

    def same_database(self, other: DatabaseContext) -> bool:
        """Whether ``other`` runs on the same alias and schema."""
        return (self.using, self.schema) == (other.using, other.schema)

    # -- statements ------------------------------------------------------------------------------

    def cursor(self, connection: BaseDatabaseWrapper | None = None) -> Any:
        """A context manager giving a cursor on Django's connection for this alias (db/cursors.py).

        ``connection``: the calling thread's connection for this alias, when the caller already
        holds it (see connection()). A statement that fails because this schema's objects do not
        exist raises SchemaNotInstalled ("the pgboss schema is not installed in database ...: run
        manage.py migrate pgboss")."""
        return statement_cursor(self.using, self, connection)

    # One way to run a statement: each of these takes a plans/ statement and its named parameters,
    # runs it on the cursor cursor() gives (prepared, on Django's connection, errors translated,
    # a missing schema said as such) and hands back what the caller needs of it. ``connection``
    # is the calling thread's connection, when the caller already holds it (see connection()).

    def execute(
        self, sql: str, params: Params = None, *, connection: BaseDatabaseWrapper | None = None
    ) -> None:
        """Run ``sql`` for its effect; its rows, if any, are dropped."""
        with statement_cursor(self.using, self, connection) as cursor:
            cursor.execute(sql, params)

    def one(self, sql: str, params: Params = None, *, connection: BaseDatabaseWrapper | None = None) -> Row:
        """The first row of a statement that always returns one (an aggregate, a RETURNING of a
        row it always writes). Raises StatementReturnedNoRow when it returned none."""
        with statement_cursor(self.using, self, connection) as cursor:
            cursor.execute(sql, params)
            row: Row | None = cursor.fetchone()
        if row is None:
            raise StatementReturnedNoRow(f"a statement that returns a row returned none: {sql.strip()[:200]}")
        return row

    def one_or_none(
        self, sql: str, params: Params = None, *, connection: BaseDatabaseWrapper | None = None
    ) -> Row | None:
        """The first row of the statement, or None when it returned none."""
        with statement_cursor(self.using, self, connection) as cursor:
            cursor.execute(sql, params)
            row: Row | None = cursor.fetchone()
        return row

    def all(
        self, sql: str, params: Params = None, *, connection: BaseDatabaseWrapper | None = None
    ) -> list[Row]:
        """Every row of the statement."""
        with statement_cursor(self.using, self, connection) as cursor:
            cursor.execute(sql, params)
            rows: list[Row] = cursor.fetchall()
        return rows

    def rowcount(
        self, sql: str, params: Params = None, *, connection: BaseDatabaseWrapper | None = None
    ) -> int:
        """How many rows the statement wrote (or returned), as PostgreSQL counts them."""
        with statement_cursor(self.using, self, connection) as cursor:
            cursor.execute(sql, params)
            return int(cursor.rowcount)

    def written_on_ready_cursor(
        self, sql: str, params: Params, connection: BaseDatabaseWrapper, *, returning: bool
    ) -> int:
        """How many rows ``sql`` wrote, run on the reused cursor of db/cursors.ready_cursor() without
        entering statement_cursor(): a send's hot path (api/sending.py), where entering it is a
        measurable part of the whole. Counted from the rows the statement returns when
        ``returning`` (Citus counts a row that ON CONFLICT dropped as written), else from the row
        count. ``connection`` is the calling thread's (connection()).

        The caller asks ready_cursor_available() first; should the settings have changed since,
        the statement runs through statement_cursor() as rowcount() and all() run theirs. Errors
        are theirs, a schema that is not installed included.
        """
        # The connection's own alias is this context's (connection() looked it up by it).
        cursor = ready_cursor(connection.alias, connection)
        if cursor is None:
            if returning:
                return len(self.all(sql, params, connection=connection))
            return self.rowcount(sql, params, connection=connection)
        try:
            cursor.execute(sql, params)
            written: int = len(cursor.fetchall()) if returning else cursor.rowcount
        except Exception as exc:
            raise_if_not_installed(exc, connection.alias, self.schema)
            raise
        return written

    def table(
        self, sql: str, params: Params = None, *, connection: BaseDatabaseWrapper | None = None
    ) -> Table:
        """Every row of the statement with the statement's column names."""
        with statement_cursor(self.using, self, connection) as cursor:
            cursor.execute(sql, params)
            columns = tuple(column[0] for column in cursor.description)
            return Table(columns, cursor.fetchall())

    def records(
        self, sql: str, params: Params = None, *, connection: BaseDatabaseWrapper | None = None
    ) -> list[dict[str, Any]]:
        """Every row of the statement as a dict from column name to value."""
        columns, rows = self.table(sql, params, connection=connection)
        return [dict(zip(columns, row, strict=True)) for row in rows]

    def script(self, sql: str) -> None:
        """Run a text of several statements with no parameters (a frozen migration or rollback
        file, a plpgsql function's definition) on Django's own cursor: never prepared (a prepared
        statement is one statement), and with no parameters, so the driver leaves the ``%``
        of format() specifiers (%I, %L) in plpgsql bodies alone."""
        with connections[self.using].cursor() as cursor:
            cursor.execute(sql, None)

    def atomic(self) -> Any:
        """``transaction.atomic`` on this alias: a transaction, or a savepoint inside the caller's."""
        return transaction.atomic(using=self.using)

    def connection(self) -> BaseDatabaseWrapper:
        """The calling thread's Django connection for this alias (``connections[using]``), for a
        caller that asks it more than one thing in one call (send(): in_atomic_block, a cursor)."""
        return thread_connection(self.using)

    @property
    def in_atomic_block(self) -> bool:
        """Whether the calling thread's connection is inside a caller's transaction."""
        return bool(connections[self.using].in_atomic_block)

    def connection_params(self) -> dict[str, Any]:
        """The psycopg connection parameters Django uses for this alias (for a LISTEN connection)."""
        return dict(connections[self.using].get_connection_params())

    # -- pg-boss's names -------------------------------------------------------------------------

    def lock_key(self, name: str) -> str:
        """pg-boss's advisory-lock key for ``name``: '.pgboss.' + the schema as pg-boss spells it +
        the name, so a pg-boss (Node) instance on the same schema and this one exclude each other."""
        return advisory_lock_key(self.schema, name)

    def notify_channel(self) -> str:
        """The LISTEN/NOTIFY channel of this schema, the one pg-boss uses: 'pgboss_' and 24 hex
        digits of sha224 of the schema, so Node and Python workers wake each other."""
        digest = hashlib.sha224(schema_key(self.schema).encode("utf-8")).hexdigest()
        return f"pgboss_{digest[:24]}"

    def listen_sql(self) -> str:
        """The LISTEN statement on this schema's channel, for the worker's listener connection."""
        return job_plans.listen(self.notify_channel())

    def listening_channels_sql(self) -> str:
        """The statement that lists the channels a session LISTENs on, the listener's heartbeat."""
        return job_plans.listening_channels()

    # -- the queue-route cache -------------------------------------------------------------------

    def route(self, name: str) -> QueueRoute:
        """Where queue ``name``'s jobs live, cached, and dropped by forget_route() whenever code on
        this context changes the queue. Raises QueueNotFound. ``name`` is validated by the caller."""
        route = self._routes.get(name)
        if route is not None:
            return route
        row = self.one_or_none(queue_plans.get_queue_routing(self.quoted_schema), {"name": name})
        if row is None:
            raise QueueNotFound(f"queue {name!r} does not exist; create it with create_queue() first")
        table, policy, notify = row
        route = QueueRoute(table, policy, notify, checked=clocks.current().monotonic())
        with self._routes_lock:
            self._routes[name] = route
        return route

    def cached_route(self, name: str) -> QueueRoute | None:
        """Queue ``name``'s route if it is cached, else None; reads nothing (a send's hot path)."""
        return self._routes.get(name)

    def recheck_route(
        self, name: str, used: QueueRoute, *, at_most_every: float | None = None
    ) -> QueueRoute | None:
        """Read queue ``name``'s route again after a statement on ``used`` found less than it was
        asked for, or found its table gone: another process may have deleted the queue and created
        it again with the other partitioning, so that its jobs now live in another table.

        Returns the new route, now cached, when it differs from ``used`` (the caller then runs its
        statement again on it); None when it is the same, when the queue no longer exists (the
        caller's own result stands, and the cached route stays: a worker polling a deleted queue
        keeps finding nothing rather than failing), or, with ``at_most_every``, when ``used`` was
        read or checked fewer seconds ago than that (nothing is read then).
        """
        now = clocks.current().monotonic()
        if at_most_every is not None and now - used.checked < at_most_every:
            return None
        row = self.one_or_none(queue_plans.get_queue_routing(self.quoted_schema), {"name": name})
        fresh = None if row is None else QueueRoute(row[0], row[1], row[2], checked=now)
        if fresh is None or fresh.same_as(used):
            used.checked = now
            return None
        with self._routes_lock:
            self._routes[name] = fresh
        return fresh

    def forget_route(self, name: str) -> None:
        """Drop the cached route of queue ``name`` (it was changed, deleted, or found stale)."""
        with self._routes_lock:
            self._routes.pop(name, None)

    def queue_exists(self, name: str) -> bool:
        """Whether queue ``name`` exists now, read fresh (not from the cache)."""
        return self.one_or_none(queue_plans.get_queue_routing(self.quoted_schema), {"name": name}) is not None


def sqlstate(exc: BaseException) -> str | None:
    """The SQLSTATE of a database error, through Django's wrapper."""
    return getattr(exc.__cause__, "sqlstate", None) or getattr(exc, "sqlstate", None)
