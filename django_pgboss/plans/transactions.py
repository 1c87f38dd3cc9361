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
    role, a provider or a pooler that set a shorter one meant it. pg_settings reports the three in
    milliseconds, unitless, so the comparison needs no parsing, and 0 (no bound) is read as none.
    The values are set for this transaction only: they end with its COMMIT or ROLLBACK.
    """
    return (
        "SELECT s.name, set_config(s.name, "
        "LEAST(%(milliseconds)s::bigint, NULLIF(s.setting::bigint, 0))::text, true) "
        "FROM pg_settings s "
        "WHERE s.name = 'transaction_timeout' "
        "OR (s.name IN ('statement_timeout', 'idle_in_transaction_session_timeout') "
        "AND NOT EXISTS (SELECT 1 FROM pg_settings t WHERE t.name = 'transaction_timeout')) "
        "ORDER BY s.name"
    )
