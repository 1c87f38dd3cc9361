"""OpenTelemetry spans, read back from the SDK's in-memory exporter: the send span and the handler
span of one job joined through the job's own trace (trace id = job id), as docs/observability.md
says, with the messaging semantic conventions' attributes."""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from django_pgboss import boss
from django_pgboss.monitor.runner import Monitor
from django_pgboss.observability import tracing
from tests.test_worker import REPO, worker_env

pytestmark = pytest.mark.django_db

_exporter = InMemorySpanExporter()


@pytest.fixture(scope="session")
def _provider():
    # The global provider can be set once per process: the first test that needs it sets it.
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(_exporter))
    trace.set_tracer_provider(provider)
    return provider


@pytest.fixture
def spans(_provider):
    _exporter.clear()
    yield _exporter.get_finished_spans
    _exporter.clear()


def by_name(finished, name: str):
    matching = [span for span in finished() if span.name == name]
    assert matching, [span.name for span in finished()]
    return matching


def test_a_send_span_is_a_producer_span_linked_to_the_job_s_own_trace(spans):
    boss.create_queue("mail")
    tracer = trace.get_tracer("tests")
    with tracer.start_as_current_span("POST /signup") as request_span:
        job_id = boss.send("mail", {"to": "a@example.com"})
    (send,) = by_name(spans, "send mail")
    assert send.kind == SpanKind.PRODUCER
    # The send span is in the request's trace, under its span.
    assert send.context.trace_id == request_span.get_span_context().trace_id
    assert send.parent.span_id == request_span.get_span_context().span_id
    assert send.attributes["messaging.system"] == "pgboss"
    assert send.attributes["messaging.destination.name"] == "mail"
    assert send.attributes["messaging.operation.type"] == "send"
    assert send.attributes["messaging.message.id"] == job_id
    (link,) = send.links
    assert link.context.trace_id == uuid.UUID(job_id).int
    assert link.attributes["messaging.message.id"] == job_id


def test_an_insert_span_counts_its_jobs_and_links_to_each_even_without_return_ids(spans):
    boss.create_queue("mail")
    assert boss.insert("mail", [{"data": {"n": n}} for n in range(3)]) is None
    (insert,) = by_name(spans, "insert mail")
    assert insert.attributes["messaging.batch.message_count"] == 3
    ids = {job.id for job in boss.find_jobs("mail")}
    assert {uuid.UUID(int=link.context.trace_id).hex for link in insert.links} == {
        uuid.UUID(job_id).hex for job_id in ids
    }


def test_a_send_the_policy_drops_has_no_message_id(spans):
    boss.create_queue("once", policy="singleton")
    boss.create_queue("short", policy="short")
    assert boss.send("short", {}, singleton_key="k")
    assert boss.send("short", {}, singleton_key="k") is None
    first, second = by_name(spans, "send short")
    assert "messaging.message.id" in first.attributes
    assert "messaging.message.id" not in second.attributes
    assert not second.links


def test_a_send_refused_before_any_sql_opens_no_span(spans):
    boss.create_queue("mail", policy="key_strict_fifo")
    with pytest.raises(Exception, match="singleton_key"):
        boss.send("mail", {})
    # Refused before any SQL: no span was started for a send that never ran.
    assert not [span for span in spans() if span.name == "send mail"]


def test_each_monitor_pass_has_a_span_with_what_it_did(spans):
    boss.create_queue("mail")
    boss.send("mail", {})
    Monitor(cron=False).supervise()
    (span,) = by_name(spans, "pgboss monitor pass")
    assert span.kind == SpanKind.INTERNAL
    assert span.attributes["pgboss.monitor.counted"] == 1
    assert span.status.status_code != StatusCode.ERROR


def test_a_job_s_trace_context_is_its_uuid():
    job_id = "0f8fad5b-d9cb-469f-a165-70867728950e"
    context = tracing.job_span_context(job_id)
    assert context.trace_id == uuid.UUID(job_id).int
    assert context.span_id == uuid.UUID(job_id).int & 0xFFFFFFFFFFFFFFFF
    assert context.is_remote and context.trace_flags.sampled
    assert tracing.job_span_context("00000000-0000-0000-0000-000000000000") is None
    assert tracing.job_span_context("not a uuid") is None


def test_without_opentelemetry_installed_sending_works_and_nothing_is_traced():
    # A process in which opentelemetry cannot be imported, as where the otel extra is not installed.
    script = (
        "import sys; sys.modules['opentelemetry'] = None\n"
        "import django; django.setup()\n"
        "from django_pgboss.observability import tracing\n"
        "assert not tracing.ENABLED\n"
        "assert tracing.send_span('q') is tracing.process_span('q', []) is tracing.monitor_span()\n"
        "with tracing.send_span('q') as span:\n"
        "    assert span is None\n"
        "print('ok')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, env=worker_env(), capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
