"""SQL for schedules (cron and RFC 5545 rules) and the timekeeper's claim."""

from __future__ import annotations

_COLUMNS = (
    "name, key, kind, cron, COALESCE(timezone, 'UTC'), data, options, created_on, updated_on, last_job_id"
)


def upsert_schedule(schema: str) -> str:
    """Create or replace a schedule. Parameters: name, key, kind, cron, timezone, data json, options json.

    A replaced schedule's updated_on is the one the insert would have written (EXCLUDED), the
    statement's job_now(): Citus refuses a function call in DO UPDATE SET on a reference table,
    and this spelling runs on both."""
    return f"""
    INSERT INTO {schema}.schedule (name, key, kind, cron, timezone, data, options, created_on, updated_on)
    VALUES (
      %(name)s, %(key)s, %(kind)s, %(cron)s, %(timezone)s, %(data)s::jsonb, %(options)s::jsonb,
      {schema}.job_now(), {schema}.job_now()
    )
    ON CONFLICT (name, key) DO UPDATE SET
      kind = EXCLUDED.kind, cron = EXCLUDED.cron, timezone = EXCLUDED.timezone, data = EXCLUDED.data,
      options = EXCLUDED.options, updated_on = EXCLUDED.updated_on
    """


def delete_schedule(schema: str) -> str:
    """Delete a schedule. Parameters: name, key."""
    return f"DELETE FROM {schema}.schedule WHERE name = %(name)s AND COALESCE(key, '') = %(key)s"


def get_schedules(
    schema: str, *, by_name: bool = False, by_key: bool = False, paged: bool = False, after: bool = False
) -> str:
    """Schedules in name and key order: every one, one queue's (parameter: name), or one
    (parameters: name, key; a NULL key, written by hand, reads as the empty key).

    ``paged``: at most the parameter limit (the public get_schedules(); the cron pass reads them
    all); ``after``: only those after (after_name, after_key), the previous page's last schedule.
    """
    conditions = []
    if by_name:
        conditions.append("name = %(name)s")
        if by_key:
            conditions.append("COALESCE(key, '') = %(key)s")
    if after:
        conditions.append("(name, key) > (%(after_name)s, %(after_key)s)")
    where = f"WHERE {' AND '.join(conditions)}" if conditions else ""
    page = "LIMIT %(limit)s" if paged else ""
    return f"SELECT {_COLUMNS} FROM {schema}.schedule {where} ORDER BY name, key {page}"


def database_now(schema: str) -> str:
    """The schema's clock (job_now()), which the cron pass evaluates schedules against."""
    return f"SELECT {schema}.job_now()"


def set_schedule_kinds(schema: str) -> str:
    """Relabel schedules whose stored kind disagrees with their expression. Parameter: records,
    a JSON array of {name, key, kind, cron}.

    Matched on the expression too, so a schedule() landing between the pass's read and this
    write keeps the kind it was written with. updated_on stays: the definition did not change.
    """
    return f"""
    UPDATE {schema}.schedule s SET kind = k.kind
    FROM json_to_recordset(%(records)s::json) AS k (name text, key text, kind text, cron text)
    WHERE s.name = k.name AND COALESCE(s.key, '') = k.key AND s.cron = k.cron
    """


def claim_cron(schema: str) -> str:
    """Claim the cron pass: one timekeeper per interval, by the server's clock. Parameter: seconds.

    Returns the previous pass's time (to catch up on occurrences missed while no pass ran) and
    whether this call won the claim.
    """
    return f"""
    WITH prior AS (SELECT cron_on FROM {schema}.version),
    claim AS (
      UPDATE {schema}.version SET cron_on = {schema}.job_now()
      WHERE extract(epoch FROM ({schema}.job_now() - COALESCE(cron_on, {schema}.job_now() - interval '1 week'))) >= %(seconds)s
      RETURNING true
    )
    SELECT prior.cron_on, EXISTS (SELECT 1 FROM claim), {schema}.job_now() FROM prior
    """


def set_last_job_ids(schema: str) -> str:
    """Record the last job each schedule sent. Parameter: records, a JSON array of {name, key, jobId}."""
    return f"""
    UPDATE {schema}.schedule s SET last_job_id = x."jobId"
    FROM json_to_recordset(%(records)s::json) AS x (name text, key text, "jobId" uuid)
    WHERE s.name = x.name AND COALESCE(s.key, '') = x.key
    """
