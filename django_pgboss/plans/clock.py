"""The test clock's statements (``django_pgboss.testing.TestClock``), SQL text only.

pg-boss's own TestClock overrides ``<schema>.job_now()`` the same way: a one-row table holds the
time the test set, and the function reads it only in sessions whose setting ``pgboss.test_clock``
is ``on``. The table and function names are pg-boss's, so its drift check recognises the override.
``schema`` is the quoted schema throughout.
"""

from __future__ import annotations

CLOCK_SETTING = "pgboss.test_clock"
"""The session setting through which a connection opts into the test clock (pg-boss's name)."""

#: The clock table's name in the schema (pg-boss's).
CLOCK_TABLE = "__pgboss_test_clock"


def clock_table(schema: str) -> str:
    """The clock table, qualified by the (quoted) schema."""
    return f"{schema}.{CLOCK_TABLE}"


def function_definition() -> str:
    """job_now()'s definition as it is now, to put back when the clock is detached.
    Parameter: function, the function's signature text (``<schema>.job_now()``)."""
    return "SELECT pg_get_functiondef(%(function)s::regprocedure)"


def database_now() -> str:
    """The server's own clock, not job_now(): where a clock without a start begins."""
    return "SELECT pg_catalog.now()"


def drop_clock_table(schema: str) -> str:
    """Drop the clock table, if there is one (a killed run's leftover, or the detached clock's)."""
    return f"DROP TABLE IF EXISTS {clock_table(schema)}"


def create_clock_table(schema: str) -> str:
    """The one-row table the override reads the time from."""
    return f"CREATE TABLE {clock_table(schema)} (now timestamp with time zone NOT NULL)"


def insert_clock_time(schema: str) -> str:
    """The clock's first time. Parameter: now."""
    return f"INSERT INTO {clock_table(schema)} (now) VALUES (%(now)s)"


def set_clock_time(schema: str) -> str:
    """Move the clock. Parameter: now."""
    return f"UPDATE {clock_table(schema)} SET now = %(now)s"


def opt_in() -> str:
    """Have this session's job_now() read the clock table."""
    return f"SET {CLOCK_SETTING} = 'on'"


def opt_out() -> str:
    """Have this session's job_now() read the real clock again."""
    return f"RESET {CLOCK_SETTING}"


def overridden_job_now(schema: str) -> str:
    """job_now() reading the clock table in the sessions that opted in, the real clock in others.
    The subquery keeps the function from being inlined, which only tests ever pay for."""
    return _job_now(
        schema,
        f"SELECT COALESCE(CASE WHEN current_setting('{CLOCK_SETTING}', true) = 'on' "
        f"THEN (SELECT c.now FROM {clock_table(schema)} c LIMIT 1) END, pg_catalog.now());",
    )


def real_job_now(schema: str) -> str:
    """job_now() as the migrations create it: the real clock."""
    return _job_now(schema, "SELECT pg_catalog.now();")


def _job_now(schema: str, body: str) -> str:
    # The shape the migration creates, so the catalog reads the same once the clock is restored.
    return f"""CREATE OR REPLACE FUNCTION {schema}.job_now()
RETURNS timestamp with time zone AS
$$
      {body}
$$
LANGUAGE sql STABLE"""
