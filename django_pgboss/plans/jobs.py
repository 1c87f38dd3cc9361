"""SQL for sending jobs: the one insert statement behind send(), send_*() and insert()."""

from __future__ import annotations

import functools
import re

from django_pgboss.plans import fragments
from django_pgboss.plans.fragments import JOB_COLUMNS, JOB_MIN_COLUMNS

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
# The flow columns a flow() insert adds to the recordset (pg-boss's names).
_FLOW_RECORDSET = """,
        blocked boolean,
        blocking boolean,
        "pendingDependencies" integer"""


def _column_names(recordset: str) -> str:
    """The column names of a recordset definition ("id uuid, ..."), for the WITH ORDINALITY alias."""
    return ", ".join(column.strip().rsplit(" ", 1)[0] for column in recordset.split(","))


def notify_channel() -> str:
    """The LISTEN/NOTIFY channel of a schema, as pg-boss derives it. Parameter: schema_key.

    'pgboss_' and 24 hex digits of sha224(schema): channels are database-wide and limited to 63
    bytes, so pg-boss hashes the schema into a short, stable name that LISTEN and NOTIFY agree on.
    """
    return "('pgboss_' || left(encode(sha224(%(schema_key)s::bytea), 'hex'), 24))"


def listen(channel: str) -> str:
    """LISTEN on a schema's channel (see notify_channel); the channel name is validated here."""
    if not re.fullmatch(r"pgboss_[0-9a-f]{24}", channel):
        raise ValueError(f"{channel!r} is not a pg-boss notify channel")
    return f"LISTEN {channel}"


def listening_channels() -> str:
    """The channels this session LISTENs on: the listener's heartbeat (pg-boss's), which proves
    in one round trip that the connection answers and that its LISTEN is still registered."""
    return "SELECT channel FROM pg_listening_channels() AS listening(channel)"


@functools.lru_cache(maxsize=256)
def insert_jobs(
    schema: str,
    table: str,
    *,
    returning: bool = True,
    notify: bool = False,
    slots: bool = False,
    flow: bool = False,
    upsert_by_key: bool = False,
    trace_context: bool = False,
) -> str:
    """Insert a batch of jobs from a JSON array, in one statement.

    Parameters: jobs (the JSON array), name, and with notify schema_key (for the channel). Each
    job takes its option if given, else its queue's setting (the pg-boss cascade: job option,
    queue config, default). start_after is a timestamp string or an interval string,
    relative to job_now(). singleton_on is the throttle slot: job_now() floored to a multiple of
    singletonSeconds, shifted by singletonOffset for a debounced job's next slot. ON CONFLICT DO
    NOTHING is how a policy or throttle slot drops a job: it simply returns no id.

    With ``slots`` each job may name its throttle slot outright ("__singletonSlot", a UTC timestamp):
    the cron pass files an occurrence in the minute the occurrence falls in, which an offset from
    job_now() (insert time) cannot pin. Only that internal statement declares the field.

    With notify, one pg_notify is issued, and only when some inserted job is runnable now; the
    notification is delivered on commit, with the jobs.

    The jobs keep the list's order: each one's created_on is job_now() plus its position in the
    array, in microseconds. Every job of a statement would otherwise share job_now() (the
    transaction's start), and the fetch orders ties by id, which is random: a key_strict_fifo
    key's jobs ran in any order, and equal-priority jobs of any queue were fetched in any order.
    pg-boss 12.35's insert has the same tie (created_on = job_now() for every row, heads ordered
    by created_on, id). A batch of n jobs spans n microseconds, a millisecond for 1,000.

    With ``flow`` each job also carries its flow columns (blocked, blocking, pendingDependencies,
    absent meaning false/0), as pg-boss's flow() insert writes them; only api/flows.py asks for it.
    ``upsert_by_key`` and ``trace_context`` add the columns of fragments.written_extras().
    """
    slot = fragments.singleton_slot(schema, 'j."singletonSeconds"::float8', 'j."singletonOffset"::float8')
    if slots:
        slot = f"""CASE WHEN j."__singletonSlot" IS NOT NULL THEN j."__singletonSlot"::timestamp
        ELSE {slot} END"""
    recordset = _RECORDSET + ("," + chr(10) + '        "__singletonSlot" text' if slots else "")
    columns: tuple[str, ...] = fragments.INSERT_COLUMNS
    flow_values = ""
    if flow:
        recordset += _FLOW_RECORDSET
        columns += ("blocked", "blocking", "pending_dependencies")
        flow_values = """,
      COALESCE(j.blocked, false),
      COALESCE(j.blocking, false),
      COALESCE(j."pendingDependencies", 0)"""
    extra_columns, extra_values = fragments.written_extras(
        upsert_by_key=upsert_by_key, trace_context=trace_context
    )
    columns += extra_columns
    insert = f"""
    INSERT INTO {schema}.{table} ({", ".join(columns)})
    SELECT
      COALESCE(j.id, gen_random_uuid()),
      q.name,
      j.data,
      COALESCE(j.priority, 0),
      j.start_after,
      {schema}.job_now() + (j.position - 1) * interval '1 microsecond',
      j."singletonKey",
      {slot},
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
      COALESCE(j."heartbeatSeconds", q.heartbeat_seconds){flow_values}{extra_values}
    FROM (
      SELECT x.*, {fragments.start_after(schema, 'x."startAfter"')} AS start_after
      FROM ROWS FROM (json_to_recordset(%(jobs)s::json) AS ({recordset}
      )) WITH ORDINALITY AS x ({_column_names(recordset)}, position)
    ) j
    JOIN {schema}.queue q ON q.name = %(name)s
    ON CONFLICT DO NOTHING
    """
    return _returning(schema, insert, returning=returning, notify=notify)


def _returning(schema: str, insert: str, *, returning: bool, notify: bool) -> str:
    """An insert of jobs with its RETURNING id, or, with notify, wrapped so that one pg_notify
    is issued (and only when some inserted job is runnable now), returning every id.

    The notifying CTE returns a boolean rather than pg_notify()'s void: Citus keeps a CTE's rows as
    an intermediate result, which cannot hold a column of a pseudo-type."""
    if not notify:
        return insert + ("RETURNING id" if returning else "")
    return f"""
    WITH inserted AS (
      {insert}
      RETURNING id, start_after
    ),
    notified AS (
      SELECT pg_notify({notify_channel()}, %(name)s) IS NULL AS sent
      FROM inserted WHERE start_after <= {schema}.job_now() LIMIT 1
    )
    SELECT id FROM inserted WHERE (SELECT count(*) FROM notified) >= 0
    """


@functools.lru_cache(maxsize=256)
def insert_data_jobs(
    schema: str, table: str, *, on_conflict: bool, returning: bool, notify: bool, trace_context: bool = False
) -> str:
    """Insert a batch of jobs that carry nothing but their data: the common insert().

    Parameters: data (a JSON array of the jobs' data, a JSON null for a job without), name, and
    with notify schema_key. The rows are the rows insert_jobs() writes for the same jobs with
    every option absent (tests/test_send.py compares them column by column): every column takes
    its queue's setting or its default directly, start_after is job_now(), created_on job_now()
    plus the job's position in microseconds (see insert_jobs()). What it leaves out is what costs
    insert_jobs() a third of its server time per job: a recordset of eighteen columns to read
    out of each job's JSON, the start_after expression with its pattern match, and the option
    cascade per column; jsonb_array_elements() parses the array once and hands out its values.

    ``on_conflict`` adds ON CONFLICT DO NOTHING, how a policy drops a job. It can be left out
    only where no unique index can refuse a row (a standard queue: no id is given, no throttle
    slot is set): speculative insertion costs a second WAL record and the unique indexes'
    pre-checks per row, about a fifth of the statement's server time.

    ``trace_context`` adds the column of fragments.written_extras().
    """
    conflict = "ON CONFLICT DO NOTHING" if on_conflict else ""
    extra_columns, extra_values = fragments.written_extras(upsert_by_key=False, trace_context=trace_context)
    insert = f"""
    INSERT INTO {schema}.{table} ({", ".join(fragments.INSERT_COLUMNS + extra_columns)})
    SELECT
      gen_random_uuid(),
      q.name,
      NULLIF(j.data, 'null'::jsonb),
      0,
      {schema}.job_now(),
      {schema}.job_now() + (j.position - 1) * interval '1 microsecond',
      NULL,
      NULL,
      NULL,
      NULL,
      q.expire_seconds,
      q.deletion_seconds,
      {schema}.job_now() + q.retention_seconds * interval '1s',
      q.retry_limit,
      q.retry_delay,
      COALESCE(q.retry_backoff, false),
      q.retry_delay_max,
      q.policy,
      q.dead_letter,
      q.heartbeat_seconds{extra_values}
    FROM {schema}.queue q
    CROSS JOIN jsonb_array_elements(%(data)s::jsonb) WITH ORDINALITY AS j (data, position)
    WHERE q.name = %(name)s
    {conflict}
    """
    return _returning(schema, insert, returning=returning, notify=notify)


def debounce_delay(schema: str) -> str:
    """Seconds until the throttle slot after the current one opens, on the database's clock.

    Parameter: seconds, the slot length. A debounced send whose slot is taken is put in the next
    slot and must not start before it; pg-boss waits one extra second for slots longer than a
    second so the job lands inside its slot. In bigint: a slot of 2^31 - 1 seconds plus that extra
    second is past int4.
    """
    return f"""
    SELECT greatest(s - mod(floor(extract(epoch FROM {schema}.job_now()))::bigint, s), 1) + (s > 1)::int
    FROM (SELECT %(seconds)s::bigint AS s) slot
    """


@functools.lru_cache(maxsize=256)
def fetch_jobs(
    schema: str,
    table: str,
    *,
    policy: str,
    include_metadata: bool = False,
    ignore_start_after: bool = False,
    min_priority: bool = False,
    max_priority: bool = False,
    group_concurrency: bool = False,
    group_tiers: bool = False,
    single_group: bool = False,
    ignore_groups: bool = False,
    include_trace_context: bool = False,
) -> str:
    """Claim up to N waiting jobs of one queue: mark them active and return them.

    Named parameters: name, batch_size, and with their options min_priority, max_priority,
    group_limit (the default per-group limit), group_tiers (a JSON object of tier -> limit) and
    ignore_groups (a text[] of group ids whose jobs are passed over: a worker's groups at their
    local_group_concurrency, pg-boss's ignoreGroups).

    Candidates are taken in priority order, then creation order, which is the order of the fetch
    index (job_i11), so the scan stops after N rows and needs no sort; FOR UPDATE SKIP LOCKED lets
    concurrent fetchers pass over rows another one is claiming instead of queueing behind it. A
    claim of a job that was started before (a retry, or an expired attempt) counts as a new
    attempt: retry_count goes up, and the attempt fence relies on that.

    Policies:
    - singleton and stately allow one active job per key (job_i2, job_i3). A key that already has
      an active job is skipped by a probe of that same index, and a batch takes one job per key;
      pg-boss reads the active keys from a cache the monitor refreshes, so its fetch can come back
      empty while another key waits.
    - key_strict_fifo claims only each key's head (the oldest waiting job, a retry before anything
      created), and only while no other job of the key is active, waiting to retry, or failed: a
      failed job blocks its key until it is retried or deleted.

    Group concurrency caps the active jobs per group_id, at the default limit or the limit of the
    job's group_tier; within a group, candidates are ranked in claim order. ``single_group`` is a
    group_concurrency of 1 without tiers (group_limit 1), the common "one job of a group at a
    time": a candidate's group is then probed for an active job through job_i7, as pg-boss does,
    instead of counting every active job of the queue by group first.

    ``include_trace_context`` returns each job's trace_context too (pg-boss 12.38's
    includeTraceContext): the worker asks for it while spans are recorded, so that a job's
    process span continues the trace its sender stored.
    """
    keyed = policy in ("singleton", "stately")
    strict_fifo = policy == "key_strict_fifo"
    due = "" if ignore_start_after else f"AND j.start_after <= {schema}.job_now()"
    conditions: list[str] = []
    ctes: list[str] = []
    if strict_fifo:
        head_due = "" if ignore_start_after else f"AND h.start_after <= {schema}.job_now()"
        ctes.append(f"""
      strict_fifo_heads AS MATERIALIZED (
        SELECT DISTINCT ON (h.singleton_key) h.id
        FROM {schema}.{table} h
        WHERE h.name = %(name)s AND h.state < 'active' AND NOT h.blocked
          AND h.policy = 'key_strict_fifo' {head_due}
        ORDER BY h.singleton_key, h.state DESC, h.created_on, h.id
      )""")
        conditions.append("j.id IN (SELECT id FROM strict_fifo_heads)")
        conditions.append(f"""NOT EXISTS (
            SELECT 1 FROM {schema}.{table} b
            WHERE b.name = {fragments.UNSEEN_QUEUE_NAME} AND b.singleton_key = j.singleton_key
              AND b.state IN ('active', 'retry', 'failed') AND b.policy = 'key_strict_fifo'
              AND b.id <> j.id)""")
    if keyed:
        # The policy is spelled out rather than matched to j.policy: the planner uses a partial
        # index only when the query implies its predicate by constants, and with a.policy =
        # j.policy it read every row of the table for each candidate (a sequential scan of
        # job_common under a nested-loop anti join: 32 ms for a claim of 50 at 40,000 jobs,
        # bench/README.md). With the constant, the probe is job_i2's (singleton) or job_i3's
        # (stately: state = 'active' implies its state <= 'active'). A queue's jobs all carry its
        # policy, so the two spellings select the same jobs.
        conditions.append(f"""NOT EXISTS (
            SELECT 1 FROM {schema}.{table} a
            WHERE a.name = {fragments.UNSEEN_QUEUE_NAME} AND a.state = 'active' AND a.policy = '{policy}'
              AND COALESCE(a.singleton_key, '') = COALESCE(j.singleton_key, ''))""")
    if min_priority:
        conditions.append("j.priority >= %(min_priority)s")
    if max_priority:
        conditions.append("j.priority <= %(max_priority)s")
    if ignore_groups:
        conditions.append("(j.group_id IS NULL OR j.group_id <> ALL(%(ignore_groups)s::text[]))")
    group_limit = "COALESCE((%(group_tiers)s::jsonb ->> j.group_tier)::int, %(group_limit)s)"
    if not group_tiers:
        group_limit = "%(group_limit)s"
    if group_concurrency and single_group:
        # One active job closes its group, so whether a group has one is all the claim needs to
        # know: a probe per candidate (the partial index job_i7 holds exactly the active jobs
        # with a group), where the count below reads every active job of the queue on every
        # fetch. Within the batch a group still gets one job (group_rank <= group_limit, 1).
        active = "0"
        conditions.append(f"""(j.group_id IS NULL OR NOT EXISTS (
            SELECT 1 FROM {schema}.{table} g
            WHERE g.name = {fragments.UNSEEN_QUEUE_NAME} AND g.state = 'active' AND g.group_id IS NOT NULL
              AND g.group_id = j.group_id))""")
    elif group_concurrency:
        ctes.append(f"""
      active_groups AS MATERIALIZED (
        SELECT COALESCE(jsonb_object_agg(group_id, active), '{{}}'::jsonb) AS counts
        FROM (
          SELECT group_id, count(*)::int AS active
          FROM {schema}.{table}
          WHERE name = %(name)s AND state = 'active' AND group_id IS NOT NULL
          GROUP BY group_id
        ) g
      )""")
        active = "COALESCE(((SELECT counts FROM active_groups) ->> j.group_id)::int, 0)"
        conditions.append(f"(j.group_id IS NULL OR {active} < {group_limit})")
    extra_columns = ""
    if keyed:
        extra_columns += ", j.singleton_key"
    if group_concurrency:
        extra_columns += f", j.group_id, j.group_tier, {active} AS active, {group_limit} AS group_limit"
    where = "".join(f"\n          AND {condition}" for condition in conditions)
    # The candidates' scan compares the name as fragments.queue_jobs() does, and for the same
    # reason: for a queue the statistics do not know, a plain parameter is expected to match a row
    # or so, and the planner may then read the queue through the primary key and sort all of it
    # rather than walk job_i11 in the claim's order and stop at the batch.
    ctes.append(f"""
      next AS (
        SELECT j.ctid, j.priority, j.created_on{extra_columns}
        FROM {schema}.{table} j
        WHERE j.name = {fragments.UNSEEN_QUEUE_NAME} AND j.state < 'active' AND NOT j.blocked {due}{where}
        ORDER BY j.priority DESC, j.created_on
        LIMIT %(batch_size)s
        FOR UPDATE OF j SKIP LOCKED
      )""")
    chosen = "next"
    if keyed:
        # One job per key in a batch: the first in claim order wins.
        ctes.append("""
      one_per_key AS (
        SELECT * FROM (
          SELECT n.*, row_number() OVER (
            PARTITION BY COALESCE(n.singleton_key, '') ORDER BY n.priority DESC, n.created_on) AS key_rank
          FROM next n
        ) ranked WHERE key_rank = 1
      )""")
        chosen = "one_per_key"
    if group_concurrency:
        # Within the batch, a group gets only as many jobs as it has room for.
        ctes.append(f"""
      within_group_limit AS (
        SELECT * FROM (
          SELECT c.*, row_number() OVER (
            PARTITION BY c.group_id ORDER BY c.priority DESC, c.created_on) AS group_rank
          FROM {chosen} c
        ) ranked WHERE group_id IS NULL OR active + group_rank <= group_limit
      )""")
        chosen = "within_group_limit"
    columns = JOB_COLUMNS if include_metadata else JOB_MIN_COLUMNS
    if include_trace_context:
        columns = (*columns, "trace_context")
    # The id comes back as text: a Job's id is a str, and psycopg would otherwise build a UUID
    # object for each row only for records.py to turn it into text again (about 2 us a row).
    returning = ", ".join("j.id::text AS id" if column == "id" else f"j.{column}" for column in columns)
    # The UPDATE finds the chosen rows by their tuple ids, which the candidates' scan read as it
    # locked them: a TID scan goes straight to each row's heap page, where finding them by id took
    # one descent of the primary key per row (a claim of 50 executed in 1.66 ms that way, in 1.25 ms
    # this way: bench/claim_by_tuple_id.py). The tuple ids cannot go stale within the statement:
    # each row is locked by it, so nobody else can update or delete it. A row that another
    # transaction changed after this statement's snapshot (the lock then takes its new version) is
    # not updated either way, so it is left unclaimed, as a row another fetch locked first is: its
    # tuple id is one this snapshot cannot see, or names a version whose successor the update then
    # rechecks by tuple id and rejects. The tuple ids are handed over as an array rather than
    # joined: joined, the planner sizes the CTE from the LIMIT and from a few hundred rows up hashes
    # it against a sequential scan of the whole job table. A claim leaves priority and created_on as
    # they were, so the row's own values order the batch. The update compares the queue's name too,
    # which costs a filter on rows already found: it is what lets Citus route the whole claim to
    # the one shard that holds the queue (fragments.ROUTABLE_QUEUE_NAME).
    claimed_rows = f"j.ctid = ANY(ARRAY(SELECT ctid FROM {chosen}))"
    # An UPDATE returns rows in no particular order; the outer SELECT hands the batch back in the
    # order it was claimed in.
    return f"""
    WITH {",".join(ctes)},
      claimed AS (
        UPDATE {schema}.{table} j SET
          state = 'active',
          started_on = {schema}.job_now(),
          heartbeat_on = {schema}.job_now(),
          retry_count = CASE WHEN j.started_on IS NOT NULL THEN j.retry_count + 1 ELSE j.retry_count END
        WHERE j.name = {fragments.UNSEEN_QUEUE_NAME} AND {claimed_rows}
        RETURNING {returning}, j.priority AS claim_priority, j.created_on AS claim_created_on
      )
    SELECT {", ".join(columns)} FROM claimed ORDER BY claim_priority DESC, claim_created_on
    """


def use_generic_plans() -> str:
    """Run this session's prepared statements with their generic plans (the worker's fetch loop).

    The claim's LIMIT is a parameter, and the generic plan, which cannot see it, is costed for a
    tenth of the queue; so PostgreSQL never picks it and plans the claim anew on every fetch
    (pg_prepared_statements: 0 generic, 39 custom plans in 39 fetches), about a third of a
    millisecond of server CPU each time. The generic plan has the same scans and joins as the
    custom one in each of the claim's 384 variants (bench/claim_plans.py).
    """
    return "SET plan_cache_mode = force_generic_plan"


def get_job(schema: str, table: str) -> str:
    """One job with every column. Parameters: name, id."""
    return f"SELECT {', '.join(JOB_COLUMNS)} FROM {schema}.{table} WHERE name = %(name)s AND id = %(id)s"


def find_jobs(
    schema: str, table: str, *, by_id: bool, by_key: bool, by_data: bool, queued: bool, after: bool = False
) -> str:
    """Jobs of a queue matching the given filters, oldest first.

    Parameters: name, limit, and for the filters present id, key (the singleton key) and data
    (JSON, matched by containment). With ``after``, the page after a job: after_created_on and
    after_id, read first with find_jobs_anchor(), as pg-boss 12.38 pages it; the created_on bound
    beside the row comparison is what lets the index scan start there.
    """
    conditions = ["name = %(name)s"]
    if by_id:
        conditions.append("id = %(id)s")
    if by_key:
        conditions.append("singleton_key = %(key)s")
    if by_data:
        conditions.append("data @> %(data)s::jsonb")
    if queued:
        conditions.append("state < 'active'")
    if after:
        conditions.append("created_on >= %(after_created_on)s")
        conditions.append("(created_on, id) > (%(after_created_on)s, %(after_id)s::uuid)")
    return f"""
    SELECT {", ".join(JOB_COLUMNS)} FROM {schema}.{table}
    WHERE {" AND ".join(conditions)}
    ORDER BY created_on, id
    LIMIT %(limit)s
    """


def find_jobs_anchor(schema: str, table: str) -> str:
    """The created_on of the job a find_jobs() page continues after (no row once it was
    deleted). Parameters: name, id."""
    return f"SELECT created_on FROM {schema}.{table} WHERE name = %(name)s AND id = %(id)s::uuid"


@functools.lru_cache(maxsize=256)
def insert_job(
    schema: str,
    table: str,
    *,
    on_conflict: bool,
    options: bool = True,
    upsert_by_key: bool = False,
    trace_context: bool = False,
) -> str:
    """Insert one job: the statement behind send().

    The row insert_jobs() writes for one job, with typed parameters instead of a JSON recordset:
    name, id (the job's id: the caller's, or a random uuid the client drew, as gen_random_uuid()
    would), data (json) and, with ``options``, a JSON object of pg-boss's other option names (an
    option absent or null takes the queue's setting). Without ``options`` (a send that names
    none, the common case) every column takes the queue's setting or its default directly: the
    same row, without reading a JSON document per column (about 15 µs of a send's server time).
    Fewer parameters and no recordset matter here: a single send is dominated by per-statement
    costs. For the same reason there is no RETURNING without ON CONFLICT: the id is known before
    the statement runs, and the row count says whether the row was written (the queue is gone),
    which spares every send a row description and a data row to send, read and convert.

    ``on_conflict`` adds ON CONFLICT DO NOTHING, how a policy or throttle slot drops a job, and
    RETURNING id, which says whether it was written: Citus counts a row that ON CONFLICT dropped as
    written, so the row count cannot say it there. ON CONFLICT is
    left out only when no unique index can refuse the row (a standard queue, no id given, no
    throttle slot): speculative insertion writes an extra WAL record per row, a real share of a
    single send's cost. ``upsert_by_key`` and ``trace_context`` add the columns of
    fragments.written_extras().
    """

    def option(key: str, cast: str, default: str) -> str:
        # The pg-boss cascade for one column: the job's option, else the queue's setting/default.
        return f"COALESCE((o->>'{key}')::{cast}, {default})" if options else default

    def text_option(key: str) -> str:
        return f"o->>'{key}'" if options else "NULL"

    conflict = "ON CONFLICT DO NOTHING" if on_conflict else ""
    if options:
        start_after = "s.start_after"
        sources = f"""
    CROSS JOIN (SELECT %(options)s::jsonb AS o) options
    CROSS JOIN LATERAL (SELECT {fragments.start_after(schema, "o->>'startAfter'")} AS start_after) s"""
        singleton_on = fragments.singleton_slot(
            schema, "(o->>'singletonSeconds')::float8", "(o->>'singletonOffset')::float8"
        )
    else:
        start_after, sources, singleton_on = f"{schema}.job_now()", "", "NULL"
    extra_columns, extra_values = fragments.written_extras(
        upsert_by_key=upsert_by_key, trace_context=trace_context
    )
    return f"""
    INSERT INTO {schema}.{table} ({", ".join(fragments.INSERT_COLUMNS + extra_columns)})
    SELECT
      %(id)s::uuid,
      q.name,
      %(data)s::jsonb,
      {option("priority", "int", "0")},
      {start_after},
      {schema}.job_now(),
      {text_option("singletonKey")},
      {singleton_on},
      {text_option("groupId")},
      {text_option("groupTier")},
      {option("expireInSeconds", "int", "q.expire_seconds")},
      {option("deleteAfterSeconds", "int", "q.deletion_seconds")},
      {start_after} + {option("retentionSeconds", "int", "q.retention_seconds")} * interval '1s',
      {option("retryLimit", "int", "q.retry_limit")},
      {option("retryDelay", "int", "q.retry_delay")},
      {option("retryBackoff", "bool", "q.retry_backoff")} IS TRUE,
      {option("retryDelayMax", "int", "q.retry_delay_max")},
      q.policy,
      {option("deadLetter", "text", "q.dead_letter")},
      {option("heartbeatSeconds", "int", "q.heartbeat_seconds")}{extra_values}
    FROM {schema}.queue q{sources}
    WHERE q.name = %(name)s
    {conflict}
    """ + ("RETURNING id" if on_conflict else "")


@functools.lru_cache(maxsize=256)
def retries_waiting(schema: str, table: str) -> str:
    """How many jobs of a queue wait in the retry state, and when the first is due. Parameters:
    name. What a burst worker that stops reports as still due (their start_after is ahead)."""
    return f"""
    SELECT count(*), min(start_after)
    FROM {schema}.{table}
    WHERE name = %(name)s AND state = 'retry'
    """
