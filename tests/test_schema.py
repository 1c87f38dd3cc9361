"""The schema migrate creates is pg-boss 12.38's (version 46), object for object."""

from __future__ import annotations

import datetime as dt
import hashlib
import json

import pytest
from django.db import connection

from django_pgboss.conf import pgboss_settings
from django_pgboss.constants import SCHEMA_VERSION, JobState, QueuePolicy
from django_pgboss.db.identifiers import quote_identifier
from tests.catalog import read_catalog

pytestmark = pytest.mark.django_db

# The DEFAULT partition's indexes exactly as PostgreSQL renders them (pg_get_indexdef). job_i5 is
# absent on purpose: pg-boss retired that number.
JOB_COMMON_INDEXES = {
    "job_common_pkey": "CREATE UNIQUE INDEX job_common_pkey ON <schema>.job_common USING btree (name, id)",
    "job_common_i1": "CREATE UNIQUE INDEX job_common_i1 ON <schema>.job_common USING btree "
    "(name, COALESCE(singleton_key, ''::text)) WHERE ((state = 'created'::<schema>.job_state) "
    "AND (policy = 'short'::text))",
    "job_common_i2": "CREATE UNIQUE INDEX job_common_i2 ON <schema>.job_common USING btree "
    "(name, COALESCE(singleton_key, ''::text)) WHERE ((state = 'active'::<schema>.job_state) "
    "AND (policy = 'singleton'::text))",
    "job_common_i3": "CREATE UNIQUE INDEX job_common_i3 ON <schema>.job_common USING btree "
    "(name, state, COALESCE(singleton_key, ''::text)) WHERE ((state <= 'active'::<schema>.job_state) "
    "AND (policy = 'stately'::text))",
    "job_common_i4": "CREATE UNIQUE INDEX job_common_i4 ON <schema>.job_common USING btree "
    "(name, singleton_on, COALESCE(singleton_key, ''::text)) WHERE ((state <> 'cancelled'::<schema>.job_state) "
    "AND (singleton_on IS NOT NULL))",
    "job_common_i6": "CREATE UNIQUE INDEX job_common_i6 ON <schema>.job_common USING btree "
    "(name, COALESCE(singleton_key, ''::text)) WHERE ((state <= 'active'::<schema>.job_state) "
    "AND (policy = 'exclusive'::text))",
    "job_common_i7": "CREATE INDEX job_common_i7 ON <schema>.job_common USING btree (name, group_id) "
    "WHERE ((state = 'active'::<schema>.job_state) AND (group_id IS NOT NULL))",
    "job_common_i8": "CREATE UNIQUE INDEX job_common_i8 ON <schema>.job_common USING btree (name, singleton_key) "
    "WHERE ((state = ANY (ARRAY['active'::<schema>.job_state, 'retry'::<schema>.job_state, "
    "'failed'::<schema>.job_state])) AND (policy = 'key_strict_fifo'::text))",
    "job_common_i9": "CREATE INDEX job_common_i9 ON <schema>.job_common USING btree (name, id) "
    "WHERE (blocking AND (state = 'completed'::<schema>.job_state))",
    "job_common_i10": "CREATE INDEX job_common_i10 ON <schema>.job_common USING btree "
    "(name, singleton_key, state DESC, created_on, id) INCLUDE (start_after) "
    "WHERE ((state < 'active'::<schema>.job_state) AND (NOT blocked) AND (policy = 'key_strict_fifo'::text))",
    "job_common_i11": "CREATE INDEX job_common_i11 ON <schema>.job_common USING btree "
    "(name, priority DESC, created_on, start_after) WHERE ((state < 'active'::<schema>.job_state) AND (NOT blocked))",
    "job_common_i12": "CREATE INDEX job_common_i12 ON <schema>.job_common USING btree (source_root_id) "
    "WHERE (source_root_id IS NOT NULL)",
    # Schema 45: the waiting jobs upsert() keyed, one per key.
    "job_common_i13": "CREATE UNIQUE INDEX job_common_i13 ON <schema>.job_common USING btree (name, singleton_key) "
    "WHERE ((state = 'created'::<schema>.job_state) AND upsert_by_key)",
    # Schema 46: the live jobs the monitor counts, every job by creation, the finished ones by
    # completion, and the waiting jobs with a key.
    "job_common_i14": "CREATE INDEX job_common_i14 ON <schema>.job_common USING btree (name, state, blocked, start_after) "
    "WHERE (state = ANY (ARRAY['created'::<schema>.job_state, 'retry'::<schema>.job_state, "
    "'active'::<schema>.job_state, 'failed'::<schema>.job_state]))",
    "job_common_i15": "CREATE INDEX job_common_i15 ON <schema>.job_common USING btree (name, created_on)",
    "job_common_i16": "CREATE INDEX job_common_i16 ON <schema>.job_common USING btree (name, completed_on) "
    "WHERE (completed_on IS NOT NULL)",
    "job_common_i17": "CREATE INDEX job_common_i17 ON <schema>.job_common USING btree (name, singleton_key, created_on) "
    "WHERE ((state < 'active'::<schema>.job_state) AND (singleton_key IS NOT NULL))",
}

OTHER_INDEXES = {
    "job_pkey": "CREATE UNIQUE INDEX job_pkey ON ONLY <schema>.job USING btree (name, id)",
    "queue_pkey": "CREATE UNIQUE INDEX queue_pkey ON <schema>.queue USING btree (name)",
    "schedule_pkey": "CREATE UNIQUE INDEX schedule_pkey ON <schema>.schedule USING btree (name, key)",
    "subscription_pkey": "CREATE UNIQUE INDEX subscription_pkey ON <schema>.subscription USING btree (event, name)",
    "version_pkey": "CREATE UNIQUE INDEX version_pkey ON <schema>.version USING btree (version)",
    "bam_pkey": "CREATE UNIQUE INDEX bam_pkey ON <schema>.bam USING btree (id)",
    "warning_pkey": "CREATE UNIQUE INDEX warning_pkey ON <schema>.warning USING btree (id)",
    "warning_i1": "CREATE INDEX warning_i1 ON <schema>.warning USING btree (created_on DESC)",
    "queue_stats_pkey": "CREATE UNIQUE INDEX queue_stats_pkey ON ONLY <schema>.queue_stats USING btree (id, captured_on)",
    "queue_stats_i1": "CREATE INDEX queue_stats_i1 ON ONLY <schema>.queue_stats USING btree (name, captured_on DESC) "
    "INCLUDE (deferred_count, queued_count, ready_count, active_count, failed_count, total_count)",
    "job_dependency_pkey": "CREATE UNIQUE INDEX job_dependency_pkey ON <schema>.job_dependency USING btree "
    "(child_name, child_id, parent_name, parent_id)",
    "job_dep_parent_idx": "CREATE INDEX job_dep_parent_idx ON <schema>.job_dependency USING btree "
    "(parent_name, parent_id)",
    "instance_pkey": "CREATE UNIQUE INDEX instance_pkey ON <schema>.instance USING btree (id)",
}

# Indexes every partitioned queue's table gets, and the one its policy adds (standard adds none).
BASE_PARTITION_INDEXES = {"pkey", "i4", "i7", "i9", "i11", "i12", "i13", "i14", "i15", "i16", "i17"}
POLICY_PARTITION_INDEXES = {
    "standard": set(),
    "short": {"i1"},
    "singleton": {"i2"},
    "stately": {"i3"},
    "exclusive": {"i6"},
    "key_strict_fifo": {"i8", "i10"},
}


def schema() -> str:
    return pgboss_settings.SCHEMA


def q() -> str:
    return quote_identifier(schema())


def fetchall(sql: str, params=None) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def create_queue(name: str, **options) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {q()}.create_queue(%s, %s::jsonb)", [name, json.dumps(options)])


def delete_queue(name: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {q()}.delete_queue(%s)", [name])


def partition_table(queue: str) -> str:
    return "j" + hashlib.sha224(queue.encode()).hexdigest()


def test_version_row_is_43():
    assert fetchall(f"SELECT version FROM {q()}.version") == [(SCHEMA_VERSION,)] == [(46,)]


def test_schema_holds_exactly_pg_boss_tables():
    catalog = read_catalog(schema())
    # tests/catalog.py reads queue_stats's day partitions as one, queue_stats_<day>.
    assert catalog.tables == {
        "version": "r",
        "queue": "r",
        "schedule": "r",
        "subscription": "r",
        "bam": "r",
        "job": "p",
        "job_common": "r",
        "warning": "r",
        "queue_stats": "p",
        "queue_stats_<day>": "r",
        "job_dependency": "r",
        "instance": "r",
    }


def stats_day_partitions() -> dict[str, str]:
    """queue_stats's partitions: name -> bound."""
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL TimeZone = 'UTC'")
        return dict(
            fetchall(
                "SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits i "
                "JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = to_regclass(%s)",
                [f"{q()}.queue_stats"],
            )
        )


def test_job_is_list_partitioned_by_name_with_job_common_as_default():
    assert fetchall(
        "SELECT pt.partstrat, a.attname FROM pg_partitioned_table pt "
        "JOIN pg_attribute a ON a.attrelid = pt.partrelid AND a.attnum = pt.partattrs[0] "
        "WHERE pt.partrelid = to_regclass(%s)",
        [f"{q()}.job"],
    ) == [("l", "name")]
    assert read_catalog(schema()).partitions["job_common"] == ("job", "DEFAULT")


def test_queue_stats_is_range_partitioned_by_captured_on_in_utc_days():
    assert fetchall(
        "SELECT pt.partstrat, a.attname FROM pg_partitioned_table pt "
        "JOIN pg_attribute a ON a.attrelid = pt.partrelid AND a.attnum = pt.partattrs[0] "
        "WHERE pt.partrelid = to_regclass(%s)",
        [f"{q()}.queue_stats"],
    ) == [("r", "captured_on")]
    today = fetchall("SELECT (now() AT TIME ZONE 'UTC')::date")[0][0]
    bounds = stats_day_partitions()
    # The migration made the day it ran and the next; a monitor pass since may have added days
    # (the suite's database can be older than today's midnight). Whichever days, each partition
    # holds exactly one UTC day, named after it, and the days run on without a gap up to today
    # at least.
    days = sorted(dt.date.fromisoformat(f"{n[-8:-4]}-{n[-4:-2]}-{n[-2:]}") for n in bounds)
    assert len(days) >= 2 and days[-1] >= today
    assert [day.toordinal() for day in days] == list(
        range(days[0].toordinal(), days[0].toordinal() + len(days))
    )
    assert bounds == {
        f"queue_stats_{day:%Y%m%d}": (
            f"FOR VALUES FROM ('{day} 00:00:00+00') TO ('{day + dt.timedelta(days=1)} 00:00:00+00')"
        )
        for day in days
    }


def test_job_state_enum_keeps_pg_boss_order():
    assert read_catalog(schema()).enum == [state.value for state in JobState]
    assert [state.value for state in JobState] == [
        "created",
        "retry",
        "active",
        "completed",
        "cancelled",
        "failed",
    ]


def test_job_columns_types_and_defaults():
    columns = {c[0]: c[1:] for c in read_catalog(schema()).columns["job"]}
    assert list(columns)[:5] == ["id", "name", "priority", "data", "state"]
    assert columns["id"] == ("uuid", True, "gen_random_uuid()")
    assert columns["state"] == ("<schema>.job_state", True, "'created'::<schema>.job_state")
    assert columns["singleton_on"] == ("timestamp without time zone", False, None)
    assert columns["keep_until"] == (
        "timestamp with time zone",
        True,
        "(now() + '336:00:00'::interval)",
    )  # 1209600 s, as pg-boss writes it
    assert columns["retry_limit"] == ("integer", True, "2")
    assert columns["expire_seconds"] == ("integer", True, "900")
    assert columns["deletion_seconds"] == ("integer", True, "604800")
    for provenance in (
        "source_name",
        "source_id",
        "source_created_on",
        "source_retry_count",
        "source_output",
    ):
        assert provenance in columns
    assert columns["source_root_id"] == ("uuid", False, None)
    assert columns["trace_context"] == ("jsonb", False, None)  # schema 44
    assert columns["upsert_by_key"] == ("boolean", False, None)  # schema 45
    assert len(columns) == 37


def test_queue_columns_carry_the_throughput_window_latency_and_retained_count():
    columns = {c[0]: c[1:] for c in read_catalog(schema()).columns["queue"]}
    for delta in ("created_delta", "completed_delta", "failed_delta"):
        assert columns[delta] == ("integer", True, "0")
    assert columns["delta_on"] == ("timestamp with time zone", False, None)
    assert columns["delta_seconds"] == ("integer", False, None)
    assert columns["ready_history"] == ("integer[]", True, "'{}'::integer[]")
    for stamp in ("monitor_claim_on", "monitor_on", "maintain_on"):
        assert columns[stamp] == ("timestamp with time zone", False, None)
    # Schema 44: flow-blocked jobs, the latency histograms, the oldest ready job's wait.
    assert columns["blocked_count"] == ("integer", True, "0")
    for bins in ("wait_bins", "run_bins"):
        assert columns[bins] == ("integer[]", False, None)
    assert columns["ready_oldest_seconds"] == ("integer", False, None)
    # Schema 46: the finished jobs held, counted up to retained_on.
    assert columns["retained_count"] == ("integer", False, None)
    assert columns["retained_on"] == ("timestamp with time zone", False, None)
    assert len(columns) == 39


def test_indexes_have_pg_boss_definitions():
    indexes = read_catalog(schema()).indexes
    # Each day's queue_stats partition carries the parent's two indexes under generated names
    # (tests/catalog.py reads the days as one, queue_stats_<day>).
    day_indexes = {name for name in indexes if name.startswith("queue_stats_<day>")}
    assert sorted(day_indexes) == [
        "queue_stats_<day>_name_captured_on_deferred_count_queued_idx",
        "queue_stats_<day>_pkey",
    ]
    assert {name: d for name, d in indexes.items() if name not in day_indexes} == {
        **JOB_COMMON_INDEXES,
        **OTHER_INDEXES,
    }


def test_constraints_have_pg_boss_definitions():
    constraints = read_catalog(schema()).constraints
    assert constraints[("queue", "queue_check")] == "CHECK ((dead_letter IS DISTINCT FROM name))"
    assert (
        constraints[("queue", "queue_dead_letter_fkey")]
        == "FOREIGN KEY (dead_letter) REFERENCES <schema>.queue(name)"
    )
    assert constraints[("job_common", "q_fkey")] == (
        "FOREIGN KEY (name) REFERENCES <schema>.queue(name) ON DELETE RESTRICT DEFERRABLE INITIALLY DEFERRED"
    )
    assert constraints[("job_common", "dlq_fkey")] == (
        "FOREIGN KEY (dead_letter) REFERENCES <schema>.queue(name) ON DELETE RESTRICT DEFERRABLE INITIALLY DEFERRED"
    )
    assert constraints[("job_common", "job_key_strict_fifo_singleton_key_check")] == (
        "CHECK ((NOT ((policy = 'key_strict_fifo'::text) AND (singleton_key IS NULL))))"
    )
    assert (
        constraints[("schedule", "schedule_kind_check")]
        == "CHECK ((kind = ANY (ARRAY['cron'::text, 'rrule'::text])))"
    )
    assert constraints[("schedule", "schedule_name_fkey")] == (
        "FOREIGN KEY (name) REFERENCES <schema>.queue(name) ON DELETE CASCADE"
    )
    assert constraints[("subscription", "subscription_name_fkey")] == (
        "FOREIGN KEY (name) REFERENCES <schema>.queue(name) ON DELETE CASCADE"
    )


def test_functions_have_pg_boss_signatures():
    functions = {name: f[:4] for name, f in read_catalog(schema()).functions.items()}
    assert functions == {
        "job_now": ("", "timestamp with time zone", "sql", "s"),
        "job_table_format": ("command text, table_name text", "text", "sql", "i"),
        "job_table_run": ("command text, tbl_name text, queue_name text", "void", "plpgsql", "v"),
        "job_table_run_async": (
            "command_name text, version integer, command text, tbl_name text, queue_name text",
            "void",
            "plpgsql",
            "v",
        ),
        "create_queue": ("queue_name text, options jsonb", "void", "plpgsql", "v"),
        "delete_queue": ("queue_name text", "void", "plpgsql", "v"),
    }


def test_job_now_reads_the_transaction_clock():
    assert fetchall(f"SELECT {q()}.job_now() = now()") == [(True,)]


def test_create_queue_without_partition_uses_job_common_and_pg_boss_defaults():
    before = set(read_catalog(schema()).tables)
    create_queue("emails", policy="standard")
    assert set(read_catalog(schema()).tables) == before
    row = fetchall(
        f"SELECT policy, partition, table_name, retry_limit, retry_delay, retry_backoff, retry_delay_max, "
        f"expire_seconds, retention_seconds, deletion_seconds, warning_queued, dead_letter, heartbeat_seconds, "
        f"notify FROM {q()}.queue WHERE name = 'emails'"
    )
    assert row == [
        ("standard", False, "job_common", 2, 0, False, None, 900, 1209600, 604800, 0, None, None, False)
    ]


def test_create_queue_takes_every_option():
    create_queue("dlq", policy="standard")
    create_queue(
        "orders",
        policy="short",
        retryLimit=5,
        retryDelay=3,
        retryBackoff=True,
        retryDelayMax=60,
        expireInSeconds=30,
        retentionSeconds=100,
        deleteAfterSeconds=200,
        warningQueueSize=10,
        deadLetter="dlq",
        heartbeatSeconds=15,
        notify=True,
    )
    assert fetchall(
        f"SELECT policy, retry_limit, retry_delay, retry_backoff, retry_delay_max, expire_seconds, "
        f"retention_seconds, deletion_seconds, warning_queued, dead_letter, heartbeat_seconds, notify "
        f"FROM {q()}.queue WHERE name = 'orders'"
    ) == [("short", 5, 3, True, 60, 30, 100, 200, 10, "dlq", 15, True)]


def test_create_queue_leaves_an_existing_queue_unchanged():
    create_queue("reports", policy="standard", retryLimit=1)
    create_queue("reports", policy="singleton", retryLimit=9)
    assert fetchall(f"SELECT policy, retry_limit FROM {q()}.queue WHERE name = 'reports'") == [
        ("standard", 1)
    ]


def test_queue_cannot_dead_letter_into_itself():
    from django.db import IntegrityError

    with pytest.raises(IntegrityError, match="queue_check"):
        create_queue("loop", policy="standard", deadLetter="loop")


@pytest.mark.parametrize("policy", [p.value for p in QueuePolicy])
def test_create_queue_with_partition_builds_its_own_table(policy):
    name = f"part.{policy}/queue-1"
    table = partition_table(name)
    create_queue(name, policy=policy, partition=True)

    catalog = read_catalog(schema())
    assert fetchall(f"SELECT partition, table_name FROM {q()}.queue WHERE name = %s", [name]) == [
        (True, table)
    ]
    assert catalog.partitions[table] == ("job", f"FOR VALUES IN ('{name}')")
    assert [c[0] for c in catalog.columns[table]] == [c[0] for c in catalog.columns["job"]]
    own = {index.removeprefix(f"{table}_") for index in catalog.indexes if index.startswith(table)}
    assert own == BASE_PARTITION_INDEXES | POLICY_PARTITION_INDEXES[policy]
    for suffix in own - {"pkey"}:
        expected = JOB_COMMON_INDEXES[f"job_common_{suffix}"].replace("job_common", table)
        assert catalog.indexes[f"{table}_{suffix}"] == expected
    constraints = {name: d for (t, name), d in catalog.constraints.items() if t == table}
    assert constraints["cjc"] == f"CHECK ((name = '{name}'::text))"
    assert constraints["q_fkey"] == catalog.constraints[("job_common", "q_fkey")]
    assert constraints["dlq_fkey"] == catalog.constraints[("job_common", "dlq_fkey")]
    assert ("job_key_strict_fifo_singleton_key_check" in constraints) == (policy == "key_strict_fifo")

    delete_queue(name)
    catalog = read_catalog(schema())
    assert table not in catalog.tables
    assert not any(index.startswith(table) for index in catalog.indexes)
    assert fetchall(f"SELECT count(*) FROM {q()}.queue WHERE name = %s", [name]) == [(0,)]


def test_rows_route_to_their_queue_partition():
    create_queue("shared", policy="standard")
    create_queue("own", policy="standard", partition=True)
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {q()}.job (name, data) VALUES ('shared', '{{}}'), ('own', '{{}}')")
    assert fetchall(f"SELECT tableoid::regclass::text, name FROM {q()}.job ORDER BY name") == [
        (f"{q()}.{partition_table('own')}", "own"),
        (f"{q()}.job_common", "shared"),
    ]


def test_delete_queue_removes_a_shared_queue_and_only_its_jobs():
    create_queue("keep", policy="standard")
    create_queue("drop", policy="standard")
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {q()}.job (name) VALUES ('keep'), ('drop'), ('drop')")
    delete_queue("drop")
    assert fetchall(f"SELECT name FROM {q()}.job") == [("keep",)]
    assert fetchall(f"SELECT name FROM {q()}.queue") == [("keep",)]


def test_policy_index_enforced_on_job_common():
    from django.db import IntegrityError

    create_queue("one-at-a-time", policy="short")
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {q()}.job (name, policy, singleton_key) VALUES ('one-at-a-time', 'short', 'k')"
        )
        with pytest.raises(IntegrityError, match="job_common_i1"):
            cursor.execute(
                f"INSERT INTO {q()}.job (name, policy, singleton_key) VALUES ('one-at-a-time', 'short', 'k')"
            )
