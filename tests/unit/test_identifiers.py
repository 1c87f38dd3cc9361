"""The identifier choke point (db/identifiers.py), tested on its own: no database is touched here.

pytest-django refuses database access to a test without a django_db marker, so a test in this
module that reached PostgreSQL would fail rather than quietly depend on it.
"""

from __future__ import annotations

import hashlib

import pytest

from django_pgboss.db.identifiers import (
    quote_identifier,
    quote_job_table,
    quote_schema,
    schema_key,
    schema_name_problem,
    validate_schema_name,
)
from django_pgboss.exceptions import ImproperlyConfiguredSchema


@pytest.mark.parametrize(
    ("name", "spelled"),
    [
        ("pgboss", "pgboss"),
        ("jobs_2", "jobs_2"),
        ("_private", "_private"),
        ("Jobs", '"Jobs"'),
        ("job queue", '"job queue"'),
        ("Boss Jobs-2", '"Boss Jobs-2"'),
        ("9lives", '"9lives"'),
        ("café", '"café"'),
        # Reserved and other non-unreserved keywords cannot stand bare.
        ("order", '"order"'),
        ("user", '"user"'),
        ("select", '"select"'),
        # Unreserved keywords can.
        ("queue", "queue"),
        ("schema", "schema"),
    ],
)
def test_a_name_is_quoted_only_when_postgresql_would_not_read_it_back_bare(name, spelled):
    assert quote_identifier(name) == spelled
    assert quote_schema(name) == spelled


def test_quote_identifier_refuses_a_double_quote_even_without_validation():
    with pytest.raises(ImproperlyConfiguredSchema, match="must not contain a double quote"):
        quote_identifier('x" OR 1=1 --')


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ('x"; DROP TABLE users; --', "must not contain a double quote"),
        ("it's", "must not contain a single quote"),
        ("100%", "must not contain a percent sign"),
        ("$$", "must not contain a dollar sign"),
        ("a.b", "must not contain a period"),
        ("a\\b", "must not contain a backslash"),
        ("tab\there", "must not contain control characters"),
        ("nul\x00", "must not contain control characters"),
        ("", "must not be empty"),
        ("x" * 51, "must be at most 50 bytes long"),
        # 26 two-byte characters: 26 characters, 52 bytes.
        ("é" * 26, "must be at most 50 bytes long"),
        ("pg_jobs", "must not start with pg_"),
        (None, "must be a string, not NoneType"),
        (42, "must be a string, not int"),
    ],
)
def test_an_unusable_schema_name_is_refused_naming_the_setting_and_the_problem(name, problem):
    assert problem in schema_name_problem(name)
    with pytest.raises(ImproperlyConfiguredSchema) as raised:
        validate_schema_name(name)
    assert str(raised.value).startswith(f'settings.PGBOSS["SCHEMA"] = {name!r} is invalid: the schema name ')
    assert problem in str(raised.value)
    with pytest.raises(ImproperlyConfiguredSchema):
        quote_schema(name)


@pytest.mark.parametrize("name", ["pgboss", "x" * 50, "é" * 25, "Boss Jobs-2", "order"])
def test_a_usable_schema_name_is_returned_unchanged(name):
    assert schema_name_problem(name) is None
    assert validate_schema_name(name) == name


def test_a_refused_schema_name_is_refused_again_on_every_call():
    # quote_schema caches its answers; a failure must never be cached as a success.
    for _ in range(3):
        with pytest.raises(ImproperlyConfiguredSchema):
            quote_schema("pg_again")


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("pgboss", "pgboss"),
        # pg-boss removes only meaningless quotes: a bare-looking keyword keeps none in its keys,
        # although SQL text must quote it.
        ("order", "order"),
        ("Boss Jobs-2", '"Boss Jobs-2"'),
        ("Jobs", '"Jobs"'),
    ],
)
def test_the_schema_key_is_the_spelling_pg_boss_hashes_into_its_locks_and_channels(name, key):
    assert schema_key(name) == key


@pytest.mark.parametrize(
    "table", ["job", "job_common", "j" + hashlib.sha224(b"emails").hexdigest(), "j" + "0" * 56]
)
def test_a_job_table_create_queue_can_make_is_accepted_as_written(table):
    assert quote_job_table(table) == table


@pytest.mark.parametrize(
    "table",
    [
        "queue",
        "job_common; DROP TABLE job",
        "j" + "0" * 55,
        "j" + "0" * 57,
        "j" + "G" * 56,
        "J" + "0" * 56,
        "job\n",
        "",
        None,
    ],
)
def test_any_other_job_table_name_is_refused(table):
    with pytest.raises(ValueError, match="is not a pg-boss job table"):
        quote_job_table(table)


def test_a_trailing_newline_does_not_pass_for_a_bare_name():
    # A regex "$" also matches before a final newline; the pattern must look at the whole name.
    assert quote_identifier("pgboss\n") == '"pgboss\n"'
    assert schema_key("pgboss\n") == '"pgboss\n"'
