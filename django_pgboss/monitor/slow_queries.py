"""pg-boss's slow_query warning: the monitor's statements timed, the slow ones reported.

pg-boss's supervisor runs each of its statements through a stopwatch (``Boss.#executeQuery``) and
warns ``slow_query`` for every one that took longer than ``warningSlowQuerySeconds`` (30 by
default, at least 1): a pass statement that slow means the job tables or the server need looking
at. The same here, with PGBOSS["WARNING_SLOW_QUERY_SECONDS"]: the pass installs a Django execute
wrapper on the monitor's connection for its duration, which sees every statement it runs.

Two choices differ in form, not in effect. The warnings are raised once the pass's statements are
done, not in the middle of them: django_pgboss reuses one cursor per connection, so writing the
warning row between a statement and the reading of its rows would lose them. And, as pg-boss
routes its REINDEX and DROP INDEX CONCURRENTLY outside the stopwatch (a rebuild is expected to take
seconds, and warning on every one would be noise), those statements are not timed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connections

from django_pgboss.conf import pgboss_settings
from django_pgboss.db.context import DatabaseContext

#: pg-boss's message, word for word; the statement and its values are in the data.
SLOW_QUERY_MESSAGE = "Warning: slow query. Your queues and/or database server should be reviewed"
#: Statements the stopwatch leaves out (pg-boss's #executeDdl): index rebuilds, which take seconds.
_UNTIMED_PREFIXES = ("REINDEX", "DROP INDEX")


class SlowQueries:
    """The execute wrapper: keeps (elapsed seconds, sql, params) of each statement over the
    threshold that succeeded (pg-boss times only statements that return)."""

    def __init__(self, threshold: float) -> None:
        self.threshold = threshold
        self.found: list[tuple[float, str, Any]] = []

    def __call__(self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        started = time.monotonic()
        result = execute(sql, params, many, context)
        elapsed = time.monotonic() - started
        if elapsed > self.threshold and not sql.lstrip().upper().startswith(_UNTIMED_PREFIXES):
            self.found.append((elapsed, sql, params))
        return result


@contextmanager
def timed_statements(
    context: DatabaseContext, report: Any, sender: Any, warn: Callable[..., None]
) -> Iterator[None]:
    """Time every statement run on ``context``'s connection (this thread's) inside the block, then
    warn slow_query for each slow one through ``warn`` (monitor.supervisor's: logged, stored with
    PERSIST_WARNINGS, sent as signals.warning_raised from ``sender``).

    The warnings are raised when the block ends, also when it ends with an error, unless the
    connection is gone (a warning could not be stored then either).
    """
    timer = SlowQueries(float(pgboss_settings.WARNING_SLOW_QUERY_SECONDS))
    connection = connections[context.using]
    failed = False
    try:
        with connection.execute_wrapper(timer):
            yield
    except BaseException:
        failed = True
        raise
    finally:
        usable = timer.found and (
            not failed
            or (
                connection.connection is not None and not connection.needs_rollback and connection.is_usable()
            )
        )
        if usable:
            for elapsed, sql, params in timer.found:
                warn(
                    context,
                    report,
                    "slow_query",
                    SLOW_QUERY_MESSAGE,
                    {"elapsed": round(elapsed, 3), "sql": sql, "values": params},
                    sender=sender,
                )
