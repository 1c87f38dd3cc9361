"""SQL for sending jobs: the one insert statement behind send(), send_*() and insert()."""

from __future__ import annotations

# The recordset a send or insert carries, one JSON object per job, with pg-boss's option names:
# the same shape pg-boss itself inserts from, so a job reads the same whichever side sent it.
_RECORDSET = """
        id uuid,
        priority integer,
        data jsonb,
        "startAfter" text,
        "retryLimit" integer,
        "retryDelay" integer,
        "retryDelayMax" integer,
        "retryBackoff" boolean,
        "singletonKey" text,
        "singletonSeconds" integer,
        "singletonOffset" integer,
        "groupId" text,
        "groupTier" text,
        "expireInSeconds" integer,
        "deleteAfterSeconds" integer,
        "retentionSeconds" integer,
        "deadLetter" text,
        "heartbeatSeconds" integer"""


def notify_channel() -> str:
    """The LISTEN/NOTIFY channel of a schema, as pg-boss derives it. Parameter: the schema key.

    'pgboss_' and 24 hex digits of sha224(schema): channels are database-wide and limited to 63
    bytes, so pg-boss hashes the schema into a short, stable name that LISTEN and NOTIFY agree on.
    """
    return "('pgboss_' || left(encode(sha224(%s::bytea), 'hex'), 24))"


def insert_jobs(schema: str, table: str, *, returning: bool = True, notify: bool = False) -> str:
    """Insert a batch of jobs from a JSON array, in one statement.

    Parameters: the JSON array, the queue name, and (with notify) the schema key and queue name for
    the NOTIFY. Each job takes its option if given, else its queue's setting (the pg-boss cascade:
    job option, queue config, default). start_after is a timestamp string or an interval string,
    relative to job_now(). singleton_on is the throttle slot: job_now() floored to a multiple of
    singletonSeconds, shifted by singletonOffset for a debounced job's next slot. ON CONFLICT DO
    NOTHING is how a policy or throttle slot drops a job: it simply returns no id.

    With notify, one pg_notify is issued, and only when some inserted job is runnable now; the
    notification is delivered on commit, with the jobs.
    """
    insert = f"""
    INSERT INTO {schema}.{table} (
      id, name, data, priority, start_after, created_on, singleton_key, singleton_on, group_id,
      group_tier, expire_seconds, deletion_seconds, keep_until, retry_limit, retry_delay,
      retry_backoff, retry_delay_max, policy, dead_letter, heartbeat_seconds
    )
    SELECT
      COALESCE(j.id, gen_random_uuid()),
      q.name,
      j.data,
      COALESCE(j.priority, 0),
      j.start_after,
      {schema}.job_now(),
      j."singletonKey",
      CASE WHEN j."singletonSeconds" IS NOT NULL THEN
        'epoch'::timestamp + '1s'::interval * (j."singletonSeconds"::float8 * floor(
          (date_part('epoch', {schema}.job_now()) + COALESCE(j."singletonOffset", 0)::float8)
          / j."singletonSeconds"::float8))
      END,
      j."groupId",
      j."groupTier",
      COALESCE(j."expireInSeconds", q.expire_seconds),
      COALESCE(j."deleteAfterSeconds", q.deletion_seconds),
      j.start_after + COALESCE(j."retentionSeconds", q.retention_seconds) * interval '1s',
      COALESCE(j."retryLimit", q.retry_limit),
      COALESCE(j."retryDelay", q.retry_delay),
      COALESCE(j."retryBackoff", q.retry_backoff, false),
      COALESCE(j."retryDelayMax", q.retry_delay_max),
      q.policy,
      COALESCE(j."deadLetter", q.dead_letter),
      COALESCE(j."heartbeatSeconds", q.heartbeat_seconds)
    FROM (
      SELECT x.*,
        CASE
          WHEN right(x."startAfter", 1) = 'Z' OR x."startAfter" ~ '^[0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}}'
            THEN x."startAfter"::timestamptz
          ELSE {schema}.job_now() + COALESCE(x."startAfter", '0')::interval
        END AS start_after
      FROM json_to_recordset(%s::json) AS x ({_RECORDSET}
      )
    ) j
    JOIN {schema}.queue q ON q.name = %s
    ON CONFLICT DO NOTHING
    """
    if not notify:
        return insert + ("RETURNING id" if returning else "")
    return f"""
    WITH inserted AS (
      {insert}
      RETURNING id, start_after
    ),
    notified AS (
      SELECT pg_notify({notify_channel()}, %s)
      FROM inserted WHERE start_after <= {schema}.job_now() LIMIT 1
    )
    SELECT id FROM inserted WHERE (SELECT count(*) FROM notified) >= 0
    """


def debounce_delay(schema: str) -> str:
    """Seconds until the throttle slot after the current one opens, on the database's clock.

    Parameter: the slot length in seconds. A debounced send whose slot is taken is put in the next
    slot and must not start before it; pg-boss waits one extra second for slots longer than a
    second so the job lands inside its slot.
    """
    return f"""
    SELECT greatest(s - mod(floor(extract(epoch FROM {schema}.job_now()))::bigint, s)::int, 1) + (s > 1)::int
    FROM (SELECT %s::int AS s) slot
    """
