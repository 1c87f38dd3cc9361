"""settings.PGBOSS is read through one object, with defaults, and follows setting changes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from django_pgboss.conf import DEFAULTS, pgboss_settings
from tests.test_docs import marked_blocks

PACKAGE = Path(__file__).resolve().parents[2] / "django_pgboss"


def test_defaults_apply_for_missing_keys():
    with override_settings(PGBOSS={}):
        assert pgboss_settings.SCHEMA == "pgboss"
        assert pgboss_settings.DATABASE == "default"
    assert DEFAULTS == {
        "SCHEMA": "pgboss",
        "DATABASE": "default",
        "BACKEND": "postgres",
        "PREPARED_STATEMENTS": True,
        "MONITOR_INTERVAL_SECONDS": 60,
        "MAINTENANCE_INTERVAL_SECONDS": 86400,
        "CRON_INTERVAL_SECONDS": 30,
        "FLOW_INTERVAL_SECONDS": 5,
        "BAM_INTERVAL_SECONDS": 60,
        "PERSIST_QUEUE_STATS": True,
        "QUEUE_STATS_RETENTION_DAYS": 7,
        "WARNING_QUEUE_SIZE": 10_000,
        "WARNING_SLOW_QUERY_SECONDS": 30,
        "PERSIST_WARNINGS": False,
        "WARNING_RETENTION_DAYS": 365,
        "MONITOR_VACUUM": True,
        "REINDEX": True,
        "REINDEX_INTERVAL_SECONDS": 86400,
        "MAX_ABANDONED_THREADS": 5,
        "NOTIFY_HEARTBEAT_INTERVAL_SECONDS": 10,
        "NOTIFY_HEARTBEAT_TIMEOUT_SECONDS": 5,
        "NOTIFY_KEEPALIVE_INITIAL_DELAY_SECONDS": 10,
        "METRICS_TOKEN": None,
        "METRICS_ADDR": "127.0.0.1",
        "REGISTER_INSTANCE": True,
        "INSTANCE_NAME": None,
        "INSTANCE_HEARTBEAT_SECONDS": 30,
        "PROPAGATE_TRACE_CONTEXT": True,
    }


def test_override_settings_is_seen_at_once_and_undone_after():
    original = pgboss_settings.SCHEMA
    with override_settings(PGBOSS={"SCHEMA": "other_jobs"}):
        assert pgboss_settings.SCHEMA == "other_jobs"
    assert original == pgboss_settings.SCHEMA


def test_a_key_an_override_leaves_out_is_back_to_its_default():
    # Each value read is kept on the settings object; a setting change must drop every one of them,
    # including those the new settings no longer name.
    with override_settings(PGBOSS={"SCHEMA": "pgboss", "WARNING_QUEUE_SIZE": 5, "PERSIST_WARNINGS": True}):
        assert (pgboss_settings.WARNING_QUEUE_SIZE, pgboss_settings.PERSIST_WARNINGS) == (5, True)
        with override_settings(PGBOSS={"SCHEMA": "pgboss"}):
            assert pgboss_settings.WARNING_QUEUE_SIZE == 10_000
            assert pgboss_settings.PERSIST_WARNINGS is False
        assert pgboss_settings.WARNING_QUEUE_SIZE == 5


def test_unknown_key_is_named():
    with (
        override_settings(PGBOSS={"SCHEMA": "x", "RETRY": 3}),
        pytest.raises(ImproperlyConfigured, match="RETRY"),
    ):
        _ = pgboss_settings.SCHEMA


def test_pgboss_must_be_a_dict():
    with override_settings(PGBOSS=["pgboss"]), pytest.raises(ImproperlyConfigured, match="must be a dict"):
        _ = pgboss_settings.SCHEMA


def test_unknown_attribute_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no key 'NOPE'"):
        _ = pgboss_settings.NOPE


def test_settings_md_lists_every_key_the_package_reads_with_its_default():
    (block,) = marked_blocks("settings.md", 1)
    namespace: dict = {}
    exec(compile(block, "docs/settings.md", "exec"), namespace)
    documented = namespace["PGBOSS"]
    # The keys the package's code reads (pgboss_settings.KEY), each of which DEFAULTS must hold.
    read = {
        key
        for path in PACKAGE.rglob("*.py")
        for key in re.findall(r"pgboss_settings\.([A-Z][A-Z_]*)\b", path.read_text())
    }
    assert sorted(documented) == sorted(DEFAULTS) == sorted(read)
    assert documented == DEFAULTS
