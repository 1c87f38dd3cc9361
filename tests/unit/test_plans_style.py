"""The plans layer's conventions, checked without a database: one parameter style, and Jobs built
from named columns."""

from __future__ import annotations

import pathlib
import re
import uuid

import django_pgboss.plans
from django_pgboss.plans import fragments, queues, settle
from django_pgboss.records import job_from_row

PLANS = pathlib.Path(django_pgboss.plans.__file__).parent


def test_every_statement_binds_named_parameters_only():
    for path in sorted(PLANS.glob("*.py")):
        text = path.read_text()
        # A positional placeholder, outside the doubled %% of a literal percent sign.
        assert not re.search(r"(?<!%)%s", text), f"{path.name} has a positional %s parameter"


def test_the_advisory_lock_id_is_written_once():
    assert fragments.lock_id("%(lock_key)s") in queues.advisory_lock()
    for path in sorted(PLANS.glob("*.py")):
        if path.name != "fragments.py":
            assert "sha224((current_database()" not in path.read_text(), path.name


def test_fail_reinserts_every_job_column():
    sql = settle.fail_jobs("pgboss", "job_common", fenced=True)
    # Every column a Job reads, and the stored trace context (pg-boss 12.38 keeps it on a retry).
    assert f"({', '.join((*fragments.JOB_COLUMNS, 'trace_context'))})" in sql
    assert "%(attempts)s" in sql and "%(output)s" in sql


def test_a_job_is_built_from_named_columns_in_any_order():
    job_id = uuid.uuid4()
    columns = ["claim_priority", "retry_count", "data", "expire_seconds", "name", "id", "deletion_seconds"]
    job = job_from_row([5, 2, '{"a": 1}', 60, "q", job_id, 30], columns)
    assert (job.id, job.name, job.data, job.retry_count) == (str(job_id), "q", {"a": 1}, 2)
    assert (job.expire_in_seconds, job.delete_after_seconds, job.state) == (60, 30, None)
