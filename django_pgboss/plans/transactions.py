"""The statement that bounds a transactional handler's transaction from the database side."""

from __future__ import annotations

import functools


@functools.lru_cache(maxsize=1)
def bound_transaction() -> str:
    """Set the transaction's own time limits (``set_config(..., true)``, as ``SET LOCAL``).

    Parameters: ``milliseconds``. Returns one row per setting it changed: (name, value).

    PostgreSQL 17's ``transaction_timeout`` bounds the whole transaction, so where the server has
    it, it is the only setting changed. Older servers have no such bound; there the statement sets
    ``statement_timeout`` (one statement of the handler's cannot run longer) and
    ``idle_in_transaction_session_timeout`` (nor can the handler sit idle in its transaction that
    long, which is the case of a handler stuck in Python code, or a worker process frozen under
    it). Each is the tighter of the bound asked for and the one the connection already carries: a
    role, a provider or a pooler that set a shorter one meant it. The current values are compared
    in milliseconds, and 0 (no bound) is read as none.
    The values are set for this transaction only: they end with its COMMIT or ROLLBACK.

    The settings are read with ``current_setting()`` rather than from ``pg_settings``: that view
    is a function that builds every one of the server's settings on each read, twice here (1.5 to
    2.8 ms of server CPU per transaction, EXPLAIN ANALYZE on PostgreSQL 15: most of what a
    transactional job cost the server beyond its commit). ``current_setting()`` shows a value in
    its unit ('90s', '1500ms', '2d', '0'), which PostgreSQL's interval input reads back; the
    missing ``transaction_timeout`` of servers before 17 reads as NULL (missing_ok).
    """
    # The current value, in milliseconds.
    current = "(extract(epoch FROM current_setting(v.name)::interval) * 1000)::bigint"
    return (
        "SELECT v.name, set_config(v.name, "
        f"LEAST(%(milliseconds)s::bigint, NULLIF({current}, 0))::text, true) "
        "FROM (VALUES ('idle_in_transaction_session_timeout'), ('statement_timeout'), "
        "('transaction_timeout')) AS v (name) "
        "WHERE CASE WHEN current_setting('transaction_timeout', true) IS NULL "
        "THEN v.name <> 'transaction_timeout' ELSE v.name = 'transaction_timeout' END "
        "ORDER BY v.name"
    )
