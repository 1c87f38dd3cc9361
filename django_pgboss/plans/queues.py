"""SQL for queues: create, update, delete, read, and the advisory lock around schema changes."""

from __future__ import annotations

from django_pgboss.plans.fragments import lock_id


def advisory_lock() -> str:
    """Take pg-boss's transaction-scoped advisory lock for a key.

    Parameter: lock_key, the text ``'.pgboss.' || <schema key> || <lock name>``. The lock id is derived
    exactly as pg-boss derives it, so a pg-boss (Node) instance creating or deleting a queue on the
    same schema waits for us and we for it.
    """
    return f"SELECT pg_advisory_xact_lock({lock_id('%(lock_key)s')})"


def create_queue(schema: str) -> str:
    """Create a queue through pg-boss's create_queue(). Parameters: name, options (pg-boss JSON)."""
    return f"SELECT {schema}.create_queue(%(name)s, %(options)s::jsonb)"


def delete_queue(schema: str) -> str:
    """Delete a queue and its jobs through pg-boss's delete_queue(). Parameter: name."""
    return f"SELECT {schema}.delete_queue(%(name)s)"


def update_queue(schema: str) -> str:
    """Change a queue's settings. Parameters: name, options (pg-boss JSON).

    An option absent from the JSON keeps its value. The nullable settings (retryDelayMax,
    heartbeatSeconds, deadLetter) are cleared by a key present with null, hence the presence tests
    instead of COALESCE for those.
    """
    return f"""
    WITH options AS (SELECT %(options)s::jsonb AS data)
    UPDATE {schema}.queue SET
      retry_limit = COALESCE((o.data->>'retryLimit')::int, retry_limit),
      retry_delay = COALESCE((o.data->>'retryDelay')::int, retry_delay),
      retry_backoff = COALESCE((o.data->>'retryBackoff')::bool, retry_backoff),
      retry_delay_max = CASE WHEN (o.data -> 'retryDelayMax') IS NOT NULL
        THEN (o.data->>'retryDelayMax')::int ELSE retry_delay_max END,
      expire_seconds = COALESCE((o.data->>'expireInSeconds')::int, expire_seconds),
      retention_seconds = COALESCE((o.data->>'retentionSeconds')::int, retention_seconds),
      deletion_seconds = COALESCE((o.data->>'deleteAfterSeconds')::int, deletion_seconds),
      warning_queued = COALESCE((o.data->>'warningQueueSize')::int, warning_queued),
      heartbeat_seconds = CASE WHEN (o.data -> 'heartbeatSeconds') IS NOT NULL
        THEN (o.data->>'heartbeatSeconds')::int ELSE heartbeat_seconds END,
      notify = COALESCE((o.data->>'notify')::bool, notify),
      dead_letter = CASE WHEN (o.data -> 'deadLetter') IS NOT NULL
        THEN o.data->>'deadLetter' ELSE dead_letter END,
      updated_on = {schema}.job_now()
    FROM options o
    WHERE name = %(name)s
    """


#: The columns get_queues() returns, in QueueInfo's field order.
QUEUE_COLUMNS = (
    "name",
    "policy",
    "partition",
    "table_name",
    "dead_letter",
    "retry_limit",
    "retry_delay",
    "retry_backoff",
    "retry_delay_max",
    "expire_seconds",
    "retention_seconds",
    "deletion_seconds",
    "heartbeat_seconds",
    "warning_queued",
    "notify",
    "deferred_count",
    "queued_count",
    "ready_count",
    "blocked_count",
    "active_count",
    "failed_count",
    "total_count",
    "retained_count",
    "created_delta",
    "completed_delta",
    "failed_delta",
    "delta_seconds",
    "delta_on",
    "wait_bins",
    "run_bins",
    "ready_oldest_seconds",
    "singletons_active",
    "monitor_on",
    "created_on",
    "updated_on",
)


def get_queues(schema: str, *, by_name: bool, paged: bool = False, after: bool = False) -> str:
    """Read queues, all of them or (by_name) those in the array parameter names, in name order.

    ``paged``: at most the parameter limit (the public get_queues(); the monitor and the admin
    read them all); ``after``: only the names after the parameter after, the previous page's last
    name, as pg-boss 12.38 pages them.
    """
    conditions = []
    if by_name:
        conditions.append("name = ANY(%(names)s::text[])")
    if after:
        conditions.append("name > %(after)s")
    where = f"WHERE {' AND '.join(conditions)}" if conditions else ""
    page = "LIMIT %(limit)s" if paged else ""
    return f"SELECT {', '.join(QUEUE_COLUMNS)} FROM {schema}.queue {where} ORDER BY name {page}"


def get_queue_routing(schema: str) -> str:
    """The few columns the job API needs to reach a queue's jobs. Parameter: name."""
    return f"SELECT table_name, policy, notify FROM {schema}.queue WHERE name = %(name)s"


def dead_letter_users(schema: str) -> str:
    """The queues whose dead_letter is the given queue. Parameter: name."""
    return f"SELECT name FROM {schema}.queue WHERE dead_letter = %(name)s ORDER BY name"
