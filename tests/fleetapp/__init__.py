"""The mixed fleet's Python handlers (tests/fleet.py runs them beside pg-boss's, tests/node/fleet.mjs).

An app of its own, added to a worker process through PGBOSS_TEST_EXTRA_APPS (or the bench's
settings), so no other worker picks its queues up. The names both sides share live here, in the
package, so the harness reads them without importing jobs.py (which would register the handlers in
the harness's own process).
"""

from __future__ import annotations

#: The queue whose killed jobs come back through their expiry (expire_in_seconds).
EXPIRY_QUEUE = "fleet-expiry"
#: The queue whose killed jobs come back when their heartbeat stops (heartbeat_seconds).
HEARTBEAT_QUEUE = "fleet-heartbeat"
QUEUES = (EXPIRY_QUEUE, HEARTBEAT_QUEUE)
#: The table outside pg-boss where each completed attempt leaves its effect, written in the same
#: transaction as the job's completion, so a row exists exactly when that attempt completed.
EFFECT_TABLE = "pgboss_fleet_effect"
#: The environment variable naming the file each handler appends its runs to (outside any
#: transaction, so a killed attempt's run is still there).
LEDGER_ENV = "PGBOSS_FLEET_LEDGER"
#: Handler threads per queue in each worker process, on both sides.
CONCURRENCY = 3
