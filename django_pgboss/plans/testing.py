"""The statements of the testing aids (django_pgboss.testing): the test clock's override of
``job_now()``, and the transaction settings a transactional handler run inside a test's own
transaction sets and gives back.

``job_now()``'s override is pg-boss's own shape, so that its drift check recognises a test clock
for what it is: a one-row table holds the time, read only by sessions whose setting
``pgboss.test_clock`` is ``on``. The subquery keeps the function from being inlined, which only
tests ever pay for.
"""

from __future__ import annotations

CLOCK_SETTING = "pgboss.test_clock"
"""The session setting through which a connection opts into the test clock (pg-boss's name)."""
#: The table that holds the test clock's time, in the pg-boss schema.
CLOCK_TABLE = "__pgboss_test_clock"

# The timeouts plans.transactions.bound_transaction() may set for a transactional handler.
_BOUNDED_SETTINGS = "('idle_in_transaction_session_timeout'), ('statement_timeout'), ('transaction_timeout')"


def job_now_definition() -> str:
    """The current definition of ``<schema>.job_now()``, as CREATE OR REPLACE FUNCTION text.

    Parameters: ``function``, the function's signature with its schema
    (``job_now_signature()``). Returns one row: (definition).
    """
    return "SELECT pg_get_functiondef(%(function)s::regprocedure)"


def job_now_signature(schema: str) -> str:
    """What job_now_definition() binds as ``function``: the quoted schema's job_now()."""
    return f"{schema}.job_now()"


def database_now() -> str:
    """The database's own time, whatever job_now() says. Parameters: none. Returns (now)."""
    return "SELECT pg_catalog.now()"


def drop_clock_table(schema: str) -> str:
    """Drop the clock table, if there is one. Parameters: none."""
    return f"DROP TABLE IF EXISTS {schema}.{CLOCK_TABLE}"


def create_clock_table(schema: str) -> str:
    """Create the clock table, empty. Parameters: none."""
    return f"CREATE TABLE {schema}.{CLOCK_TABLE} (now timestamp with time zone NOT NULL)"


def start_clock(schema: str) -> str:
    """Give the new clock table its one row, at ``now``. Parameters: ``now``."""
    return f"INSERT INTO {schema}.{CLOCK_TABLE} (now) VALUES (%(now)s)"


def set_clock(schema: str) -> str:
    """Move the clock to ``now``. Parameters: ``now``."""
    return f"UPDATE {schema}.{CLOCK_TABLE} SET now = %(now)s"


def job_now_function(schema: str, *, test_clock: bool) -> str:
    """Define ``<schema>.job_now()``: on the test clock, or (``test_clock=False``) on the
    database's clock, as the migration creates it, so the catalog reads the same once the clock
    is gone. Parameters: none."""
    if test_clock:
        body = (
            f"SELECT COALESCE(CASE WHEN current_setting('{CLOCK_SETTING}', true) = 'on' "
            f"THEN (SELECT c.now FROM {schema}.{CLOCK_TABLE} c LIMIT 1) END, pg_catalog.now());"
        )
    else:
        body = "SELECT pg_catalog.now();"
    return f"""CREATE OR REPLACE FUNCTION {schema}.job_now()
RETURNS timestamp with time zone AS
$$
      {body}
$$
LANGUAGE sql STABLE"""


#: The parameter a statement reads the test clock's time from on the citus-distributed backend
#: (bound_clock()).
CLOCK_PARAMETER = "pgboss_test_clock_now"


def clock_reading(schema: str) -> str:
    """The time ``<schema>.job_now()`` gives this session (the test clock's, once opted in).
    Parameters: none. Returns one row: (now)."""
    return f"SELECT {schema}.job_now()"


def bound_clock(sql: str, schema: str) -> str:
    """``sql`` with each call of ``<schema>.job_now()`` replaced by the bound time
    ``%(pgboss_test_clock_now)s``, for the citus-distributed backend while a TestClock is attached.

    There a statement about a queue runs on the worker node that holds its shard, where the test
    clock's table is not and where this session's opt-in setting is not set either: job_now()
    would fail there, or read the worker's real clock. So the time is read first on the
    coordinator (clock_reading(), through the override itself) and the statement takes it as a
    value, the one time every part of it sees, on whichever node it runs: exactly the time
    job_now() gives this session, as on one PostgreSQL.
    """
    return sql.replace(f"{schema}.job_now()", f"%({CLOCK_PARAMETER})s::timestamptz")


def opt_in() -> str:
    """Have this session read the test clock. Parameters: none."""
    return f"SET {CLOCK_SETTING} = 'on'"


def opt_out() -> str:
    """Have this session read the database's clock again. Parameters: none."""
    return f"RESET {CLOCK_SETTING}"


def transaction_settings() -> str:
    """The transaction bounds this transaction has now (NULL for one the server lacks).

    Parameters: none. Returns one row per setting: (name, value).
    """
    return (
        "SELECT v.name, current_setting(v.name, true) "
        f"FROM (VALUES {_BOUNDED_SETTINGS}) AS v (name) ORDER BY v.name"
    )


def restore_transaction_settings() -> str:
    """Set transaction bounds back to the values read before, for this transaction only.

    Parameters: ``names`` and ``values``, two text arrays of one length.
    """
    return (
        "SELECT set_config(s.name, s.value, true) "
        "FROM unnest(%(names)s::text[], %(values)s::text[]) AS s (name, value)"
    )
