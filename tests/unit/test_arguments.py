"""The argument and wire layers on their own: no database, no fixture.

These are pure functions; the tests that prove what PostgreSQL then stores or refuses are in
tests/test_input_bounds.py.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import uuid

import pytest
from django.core.serializers.json import DjangoJSONEncoder

from django_pgboss import arguments, wire
from django_pgboss.exceptions import (
    InvalidJobReference,
    InvalidOption,
    InvalidQueueName,
    InvalidStartAfter,
    InvalidTimestamp,
    JobDataNotSerializable,
)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (True, "must be an integer >= 0, not True"),
        (-1, "must be an integer >= 0, not -1"),
        ("3", "must be an integer >= 0, not '3'"),
        (2**31, f"must be at most {2**31 - 1}, not {2**31}"),
    ],
)
def test_integer_refuses_non_integers_and_values_past_int4(value, message):
    with pytest.raises(InvalidOption, match=f"retry_limit {message}"):
        arguments.integer("retry_limit", value, minimum=0)


def test_integer_accepts_the_int4_bounds_and_none_when_nullable():
    assert arguments.integer("retry_delay", 2**31 - 1, minimum=0) == 2**31 - 1
    assert arguments.integer("heartbeat_seconds", None, minimum=10, nullable=True) is None


def test_limit_takes_a_bigint_and_no_more():
    assert arguments.limit("limit", 2**63 - 1) == 2**63 - 1
    with pytest.raises(InvalidOption, match="limit must be at most"):
        arguments.limit("limit", 2**63)


@pytest.mark.parametrize(
    "option",
    [
        "retry_limit",
        "retry_delay",
        "retention_seconds",
        "delete_after_seconds",
        "heartbeat_seconds",
    ],
)
def test_every_int4_option_is_bounded(option):
    with pytest.raises(InvalidOption, match=option):
        arguments.shared_options({option: 2**31})
    arguments.shared_options({option: 2**31 - 1})


def test_retry_delay_max_and_warning_queue_size_are_bounded_too():
    with pytest.raises(InvalidOption, match="retry_delay_max must be at most"):
        arguments.shared_options({"retry_backoff": True, "retry_delay_max": 2**31})
    with pytest.raises(InvalidOption, match="warning_queue_size must be at most"):
        arguments.queue_options("q", {"warning_queue_size": 2**31}, creating=True)
    with pytest.raises(InvalidOption, match="expire_in_seconds must be at most 86400"):
        arguments.shared_options({"expire_in_seconds": 86401})


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("a\x00b", "NUL"),
        ("a\ud800b", "lone surrogate"),
        ("k" * 1025, "longer than 1024 bytes"),
        ("é" * 513, "longer than 1024 bytes"),
        (7, "must be a (non-empty )?string"),
    ],
)
def test_text_an_index_holds_is_refused_when_postgresql_could_not_store_or_index_it(value, message):
    with pytest.raises(InvalidOption, match=message):
        arguments.job_payload(None, {"singleton_key": value})
    with pytest.raises(InvalidOption, match=message):
        arguments.job_payload(None, {"group_id": value})


def test_key_of_exactly_the_bound_is_accepted():
    assert arguments.job_payload(None, {"singleton_key": "k" * 1024})["singleton_key"] == "k" * 1024


def test_event_names_and_schedule_keys_are_bounded():
    with pytest.raises(InvalidOption, match="event"):
        arguments.event_name("e" * 1025)
    with pytest.raises(InvalidOption, match="event cannot contain a NUL"):
        arguments.event_name("e\x00")
    with pytest.raises(InvalidOption, match="key"):
        arguments.schedule_key("k" * 1025)
    assert arguments.schedule_key("") == ""


def test_queue_names_keep_their_rule():
    with pytest.raises(InvalidQueueName, match="can only contain"):
        arguments.queue_name("a\x00")
    with pytest.raises(InvalidQueueName, match="longer than 255"):
        arguments.queue_name("a" * 256)
    assert arguments.queue_name("a/b.c-d_e") == "a/b.c-d_e"


@pytest.mark.parametrize(
    "value",
    [
        dt.datetime.max,
        dt.datetime(9900, 1, 1, tzinfo=dt.UTC),
        "9999-12-31",
        dt.date(9950, 1, 1),
        dt.datetime.min,
        dt.datetime(1, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=14))),
        dt.timedelta.max,
        1e300,
        float("inf"),
        -1,
    ],
)
def test_start_after_refuses_moments_whose_keep_until_could_not_be_read(value):
    with pytest.raises(InvalidStartAfter, match="start_after"):
        arguments.start_after(value)


def test_start_after_renders_what_postgresql_reads():
    assert arguments.start_after(30) == "30 seconds"
    # No exponent: PostgreSQL's interval input refuses "1e-07 seconds".
    assert arguments.start_after(1e-7) == "0.000000 seconds"
    assert arguments.start_after(1.5) == "1.500000 seconds"
    assert arguments.start_after("2030-01-02T03:04:05Z") == "2030-01-02T03:04:05+00:00"
    assert arguments.start_after(dt.datetime(2030, 1, 2)) == "2030-01-02T00:00:00+00:00"


def test_moment_parses_iso_dates_and_refuses_the_rest():
    assert arguments.moment("2030-01-02", "created_before") == dt.datetime(2030, 1, 2, tzinfo=dt.UTC)
    with pytest.raises(InvalidTimestamp, match="created_before 'soon'"):
        arguments.moment("soon", "created_before")


def test_priority_is_an_int4():
    with pytest.raises(InvalidOption, match="priority must be an integer"):
        arguments.job_payload(None, {"priority": 2**31})
    assert arguments.job_payload(None, {"priority": -(2**31)})["priority"] == -(2**31)


def test_attempt_fence_retry_count_is_an_int4():
    job_id = str(uuid.uuid4())
    with pytest.raises(InvalidJobReference, match="retry_count"):
        arguments.attempt_references({"id": job_id, "retry_count": 2**31}, "complete")


def test_group_concurrency_tiers_are_bounded():
    with pytest.raises(InvalidOption, match="group_concurrency must be at most"):
        arguments.group_limits(2**31)
    with pytest.raises(InvalidOption, match="NUL"):
        arguments.group_limits({"default": 1, "tiers": {"a\x00": 2}})


# -- wire ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"t": "a\x00b"}, "NUL"),
        ({"a\x00": 1}, "NUL"),
        ({"t": "a\udc80"}, "lone surrogate"),
        ({"t": "\ud83d\ude00"}, "lone surrogate"),  # two surrogates are not an emoji in a str
        ({"f": 1e308}, "would read back as a different number"),
        ({"f": 2.0**70 + 2.0**18}, "would read back as a different number"),
        ({"f": float("nan")}, "not JSON compliant"),
        ({"o": object()}, "not JSON serializable"),
    ],
)
def test_to_json_refuses_what_jsonb_cannot_give_back(value, message):
    with pytest.raises(JobDataNotSerializable, match=f"job data cannot be stored as JSON.*{message}"):
        wire.to_json(value, "job data")


def test_to_json_refuses_nesting_deeper_than_its_bound_and_takes_the_bound():
    deep: list = []
    for _ in range(wire.MAX_JSON_DEPTH):
        deep = [deep]
    with pytest.raises(JobDataNotSerializable, match="nested deeper"):
        wire.to_json(deep, "job data")
    assert json.loads(wire.to_json(deep[0], "job data")) == deep[0]
    very_deep: list = []
    for _ in range(100_000):
        very_deep = [very_deep]
    with pytest.raises(JobDataNotSerializable, match="nested deeper"):
        wire.to_json(very_deep, "job data")


def test_to_json_refuses_text_over_its_size_bound():
    with pytest.raises(JobDataNotSerializable, match="bytes is more than"):
        wire.to_json("x" * (wire.MAX_JSON_BYTES + 1), "job data")


def test_to_json_keeps_what_reads_back_equal():
    value = {
        "text": 'quote " backslash \\u0000 and é, 😀',
        "floats": [0.1, 1e16, 1.5e20, 5e-324, -2.5],
        "many": [[{}]] * 600,  # many brackets, shallow
    }
    assert json.loads(wire.to_json(value, "job data")) == value


def test_wire_names_are_the_one_table_both_ways():
    assert wire.to_wire({"singleton_key": "k", "dead_letter": None}) == {
        "singletonKey": "k",
        "deadLetter": None,
    }
    assert wire.from_wire({"singletonKey": "k", "unknown": 1}) == {"singleton_key": "k"}
    assert set(wire.PYTHON_NAMES) == set(wire.WIRE_NAMES.values())


def test_a_payload_is_snake_case_until_it_is_encoded():
    job = arguments.job_payload({"a": 1}, {"singleton_key": "k", "retry_limit": 3, "start_after": 5})
    assert job["singleton_key"] == "k" and "singletonKey" not in job
    encoded = json.loads(wire.encode_jobs([job]))
    assert encoded == [{"data": {"a": 1}, "singletonKey": "k", "retryLimit": 3, "startAfter": "5 seconds"}]


def test_schedule_options_nest_group_as_pg_boss_stores_it():
    stored = wire.schedule_options_to_wire({"group_id": "g", "group_tier": "t", "priority": 2, "id": None})
    assert stored == {"group": {"id": "g", "tier": "t"}, "priority": 2}
    assert wire.schedule_options_from_wire(stored) == {"group_id": "g", "group_tier": "t", "priority": 2}


def test_an_exception_whose_message_holds_a_nul_keeps_its_message():
    output = wire.output_value(ValueError("bad \x00 byte \udc80"))
    assert output["name"] == "ValueError"
    assert output["message"] == "bad \\u0000 byte \\udc80"
    assert "bad \\u0000 byte" in output["traceback"]
    assert json.loads(wire.to_json(output, "output"))["message"] == output["message"]


def test_random_uuid_text_is_a_canonical_version_4_uuid_of_122_random_bits():
    drawn = [wire.random_uuid_text() for _ in range(20_000)]
    assert len(set(drawn)) == len(drawn)
    for text in drawn[:2_000]:
        value = uuid.UUID(text)
        assert str(value) == text  # canonical: lowercase, hyphenated 8-4-4-4-12
        assert (value.version, value.variant) == (4, uuid.RFC_4122)
    # Every bit outside the version's 4 and the variant's 2 takes both values across the draws;
    # those 6 always read 0100 and 10.
    all_bits = (1 << 128) - 1
    fixed = (0xF << 76) | (0x3 << 62)
    set_in_some = 0
    set_in_all = all_bits
    for text in drawn:
        bits = uuid.UUID(text).int
        set_in_some |= bits
        set_in_all &= bits
    assert set_in_some | fixed == all_bits
    assert set_in_all & ~fixed == 0
    assert set_in_all == (0x4 << 76) | (0x2 << 62)
    assert set_in_some & fixed == set_in_all & fixed


def test_to_json_says_circular_data_is_circular():
    loop: list = []
    loop.append(loop)
    with pytest.raises(JobDataNotSerializable, match="job data cannot be stored as JSON: Circular reference"):
        wire.to_json({"a": loop}, "job data")


@pytest.mark.parametrize("encoder", ["c-encoder", "encode"])
def test_to_json_writes_what_djangos_encoder_writes(encoder, monkeypatch):
    if encoder == "encode":
        monkeypatch.setattr(wire, "_DIRECT_ENCODER", None)
    else:
        # CPython's C accelerator, which to_json() calls directly on both CI Pythons.
        assert wire._DIRECT_ENCODER is not None
    values = [
        {"i": 1},
        "a string",
        5,
        [1, 2.5, None, True, False, "é", "😀", {"nested": {"deeper": []}}],
        {1: "an int key", "é": "non-ASCII"},
        [dt.datetime(2026, 12, 7, 6, 30, 1, 123456, tzinfo=dt.UTC), dt.date(2026, 12, 7), uuid.UUID(int=7)],
        [decimal.Decimal("1.10"), dt.timedelta(seconds=90)],
    ]
    for value in values:
        expected = json.dumps(value, cls=DjangoJSONEncoder, separators=(",", ":"), ensure_ascii=False)
        assert wire.to_json(value, "job data") == expected
