"""Properties over job data, send options and queue options (issue 13): every value is either
stored and read back equal, or refused with a package error before any SQL, and the connection
stays usable, inside and outside transaction.atomic().

Hypothesis draws JSON-like data with the awkward corners mixed in (NUL, lone surrogates, floats
jsonb cannot keep, huge integers, deep nesting), and send() and create_queue() options around
their bounds. The runs are derandomized for CI; PGBOSS_HYPOTHESIS_RANDOM=1 and
PGBOSS_HYPOTHESIS_EXAMPLES=N explore further. A raw
django.db error, a RecursionError, or a value read back different fails the property.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import math
import os
import uuid

import pytest
from django.db import transaction
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from django_pgboss import PgBossError, boss
from tests.helpers import rows

pytestmark = pytest.mark.django_db(transaction=True)

AWKWARD_CHARACTERS = st.sampled_from(["\x00", "\ud800", "\udfff", "\\", '"', "é", "😀", "\u2028"])
TEXT = st.text(alphabet=st.one_of(st.characters(), AWKWARD_CHARACTERS), max_size=12)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(),  # NaN, infinities, 1e308 and the like included
    TEXT,
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(TEXT, children, max_size=4)),
    max_leaves=20,
)


def nested(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


DATA = st.one_of(JSON_VALUES, st.sampled_from([nested(499), nested(500), nested(5000)]))

AROUND_INT4 = st.one_of(
    st.integers(min_value=-3, max_value=100),
    st.sampled_from([2**31 - 2, 2**31 - 1, 2**31, 2**63, True]),
)
KEYS = st.one_of(TEXT, st.sampled_from(["k" * 1024, "k" * 1025, "é" * 512, "é" * 513]))
START_AFTER = st.one_of(
    st.integers(min_value=-1, max_value=10**12),
    st.floats(),
    st.timedeltas(),
    st.datetimes(timezones=st.one_of(st.none(), st.just(dt.UTC))),
    st.sampled_from(["2030-01-01T00:00:00Z", "9999-12-31", "soon", dt.datetime.max, dt.date(9899, 1, 1)]),
)
OPTIONS = st.fixed_dictionaries(
    {},
    optional={
        "retry_limit": AROUND_INT4,
        "retry_delay": AROUND_INT4,
        "retention_seconds": AROUND_INT4,
        "delete_after_seconds": AROUND_INT4,
        "heartbeat_seconds": st.one_of(st.none(), AROUND_INT4),
        "expire_in_seconds": st.one_of(AROUND_INT4, st.just(86_400), st.just(86_401)),
        "priority": st.one_of(AROUND_INT4, st.just(-(2**31)), st.just(-(2**31) - 1)),
        "singleton_key": KEYS,
        "group_id": KEYS,
        "start_after": START_AFTER,
    },
)


def stored(data, options, report=lambda outcome: None):
    """send() the job, read it back and compare; or check the refusal left the connection usable."""
    try:
        job_id = boss.send("props", data, **options)
    except (PgBossError, ValueError, TypeError) as exc:
        # A package error (or ValueError/TypeError). django.db's errors derive from none of these,
        # so one reaching here fails the property with its own traceback.
        report(f"refused: {type(exc).__name__}")
        assert rows("SELECT 1") == [(1,)]
        return None
    report("stored")
    job = boss.get_job_by_id("props", job_id)
    assert job is not None
    assert job.data == data
    for option in (
        "retry_limit",
        "retry_delay",
        "priority",
        "singleton_key",
        "group_id",
        "heartbeat_seconds",
    ):
        if option in options:
            assert getattr(job, option) == options[option], option
    if "retention_seconds" in options:
        assert job.keep_until - job.start_after == dt.timedelta(seconds=options["retention_seconds"])
    if "delete_after_seconds" in options:
        assert job.delete_after_seconds == options["delete_after_seconds"]
    if "expire_in_seconds" in options:
        assert job.expire_in_seconds == options["expire_in_seconds"]
    when = options.get("start_after")
    if isinstance(when, dt.datetime):
        assert job.start_after == (when if when.tzinfo else when.replace(tzinfo=dt.UTC))
    return job_id


@pytest.fixture
def props_queue():
    boss.create_queue("props")
    return "props"


@settings(
    max_examples=int(os.environ.get("PGBOSS_HYPOTHESIS_EXAMPLES", "300")),
    deadline=None,
    derandomize=os.environ.get("PGBOSS_HYPOTHESIS_RANDOM") != "1",
    database=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
@given(data=DATA, options=OPTIONS)
def test_every_job_is_stored_and_read_back_equal_or_refused_before_sql(props_queue, data, options):
    # Outside atomic (autocommit): each statement its own transaction.
    stored(data, options, report=event)
    # Inside atomic: a refusal must leave the transaction able to go on and commit.
    with transaction.atomic():
        rows("SELECT 1")
        job_id = stored(data, options)
        assert rows("SELECT 1") == [(1,)]
    if job_id is not None:
        assert boss.get_job_by_id("props", job_id) is not None


def test_the_strategies_reach_both_outcomes(props_queue):
    """The property is not vacuous: the corners are refused and ordinary values are stored."""
    assert stored({"a": [1, 2.5, "x", None, True]}, {"retry_limit": 3, "singleton_key": "é" * 512})
    assert stored({"a": "\x00"}, {}) is None
    assert stored({"a": math.inf}, {}) is None
    assert stored({}, {"retry_delay": 2**31}) is None
    assert stored({}, {"start_after": dt.datetime.max}) is None


QUEUE_OPTIONS = st.fixed_dictionaries(
    {},
    optional={
        "policy": st.sampled_from(
            ["standard", "short", "singleton", "stately", "exclusive", "key_strict_fifo", "x"]
        ),
        "retry_limit": AROUND_INT4,
        "retry_delay": AROUND_INT4,
        "retry_backoff": st.one_of(st.booleans(), st.just(1)),
        "retry_delay_max": st.one_of(st.none(), AROUND_INT4),
        "expire_in_seconds": st.one_of(AROUND_INT4, st.just(86_400), st.just(86_401)),
        "retention_seconds": AROUND_INT4,
        "delete_after_seconds": AROUND_INT4,
        "heartbeat_seconds": st.one_of(st.none(), AROUND_INT4),
        "warning_queue_size": AROUND_INT4,
        "notify": st.booleans(),
    },
)


@settings(
    max_examples=int(os.environ.get("PGBOSS_HYPOTHESIS_EXAMPLES", "150")),
    deadline=None,
    derandomize=os.environ.get("PGBOSS_HYPOTHESIS_RANDOM") != "1",
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(options=QUEUE_OPTIONS, inside_atomic=st.booleans())
def test_every_queue_option_is_stored_and_read_back_or_refused_before_sql(options, inside_atomic):
    name = f"qprops_{uuid.uuid4().hex}"
    context = transaction.atomic() if inside_atomic else contextlib.nullcontext()
    with context:
        try:
            boss.create_queue(name, **options)
        except (PgBossError, ValueError, TypeError) as exc:
            event(f"refused: {type(exc).__name__}")
            assert rows("SELECT 1") == [(1,)]
            assert boss.get_queue(name) is None
            return
        event("stored")
    info = boss.get_queue(name)
    assert info is not None
    for option, value in options.items():
        if value is not None:
            assert getattr(info, option) == value, option
    boss.delete_queue(name)
