"""A jobs module whose @work registration is refused (a zero transaction timeout)."""

from __future__ import annotations

from django_pgboss import work


@work("txn", transactional=True, transaction_timeout_seconds=0)
def zero_timeout(job):
    return None
