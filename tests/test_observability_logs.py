"""The log records' extra fields (queue, job id, attempt) and the JSON logging configuration that
docs/deployment.md shows, run as written."""

from __future__ import annotations

import io
import json
import logging
import logging.config
import sys

import pytest

from django_pgboss import boss
from django_pgboss.worker import Worker
from django_pgboss.worker.registry import Registration
from tests.test_docs import marked_blocks

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def json_lines():
    """docs/deployment.md's LOGGING, applied with its handler writing to a buffer; restored after."""
    (block,) = marked_blocks("deployment.md", 1)
    namespace: dict = {}
    exec(compile(block, "docs/deployment.md", "exec"), namespace)
    config = namespace["LOGGING"]
    logger = logging.getLogger("django_pgboss")
    saved = (logger.handlers[:], logger.level, logger.propagate)
    logging.config.dictConfig(config)
    (handler,) = logger.handlers
    buffer = io.StringIO()
    handler.setStream(buffer)
    yield lambda: [json.loads(line) for line in buffer.getvalue().splitlines()]
    logger.handlers[:], logger.level, logger.propagate = saved


def test_a_failed_job_logs_its_queue_id_and_attempt_as_json_fields(json_lines):
    boss.create_queue("flaky", retry_limit=1)
    job_id = boss.send("flaky", {})

    def handler(job):
        raise ValueError("no such address")

    # Two bursts: the second runs the retry, whichever way the first ended around it.
    for _ in range(2):
        Worker([Registration("flaky", handler, polling_interval_seconds=0.1)], burst=True).run()
    failures = [line for line in json_lines() if ": ValueError: no such address" in line["message"]]
    assert [(line["queue"], line["job_id"], line["attempt"], line["will_retry"]) for line in failures] == [
        ("flaky", job_id, 1, True),
        ("flaky", job_id, 2, False),
    ]
    assert all(line["logger"] == "django_pgboss.worker" and line["level"] == "ERROR" for line in failures)
    assert all("ValueError: no such address" in line["exc_info"] for line in failures)


def test_a_monitor_warning_names_its_queue_and_type(json_lines):
    boss.create_queue("busy", warning_queue_size=1)
    boss.insert("busy", [{"data": {}} for _ in range(3)])
    boss.supervise()
    (warning,) = [line for line in json_lines() if "backlog" in line["message"]]
    assert warning["queue"] == "busy" and warning["pgboss_warning"] == "queue_backlog"
    assert warning["level"] == "WARNING"


def test_the_json_formatter_keeps_the_traceback():
    from django_pgboss.observability.logs import JsonFormatter

    try:
        raise RuntimeError("boom")
    except RuntimeError:
        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed %s", ("here",), sys.exc_info())
    document = json.loads(JsonFormatter().format(record))
    assert document["message"] == "failed here"
    assert "RuntimeError: boom" in document["exc_info"]
