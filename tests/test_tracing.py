"""OpenTelemetry spans, read back from the SDK's in-memory exporter, with the messaging semantic
conventions' attributes: a job sent inside a span stores the send span's trace context
(pg-boss 12.38's propagateContext) and its handler span continues that trace; with
PROPAGATE_TRACE_CONTEXT off, or for a job stored without one, the send span and the handler span
are joined through the job's own trace (trace id = job id), as docs/observability.md says."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from django_pgboss import boss
from django_pgboss.monitor import Monitor
from django_pgboss.observability import tracing
from tests.helpers import HANDLER_KINDS, handler_of
from tests.processes import REPO, worker_env

pytestmark = pytest.mark.django_db


class _WhileRecording(InMemorySpanExporter):
    """Keeps spans only while a test of this module asks for them: the provider stays set for the
    rest of the session, whose other tests' spans would otherwise pile up here."""

    recording = False

    def export(self, spans):
        return super().export(spans) if self.recording else SpanExportResult.SUCCESS


_exporter = _WhileRecording()


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
    _exporter.recording = True
    yield _exporter.get_finished_spans
    _exporter.recording = False
    _exporter.clear()


@pytest.fixture
def own_traces(settings):
    """PROPAGATE_TRACE_CONTEXT off: each job gets a trace of its own (trace id = job id)."""
    settings.PGBOSS = {**(getattr(settings, "PGBOSS", None) or {}), "PROPAGATE_TRACE_CONTEXT": False}


def by_name(finished, name: str):
    matching = [span for span in finished() if span.name == name]
    assert matching, [span.name for span in finished()]
    return matching


def test_a_send_span_is_a_producer_span_linked_to_the_job_s_own_trace(spans, own_traces):
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


def test_an_insert_span_counts_its_jobs_and_links_to_each_even_without_return_ids(spans, own_traces):
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


def run_burst(queue: str, handler, **options) -> None:
    from django_pgboss.worker import Worker
    from django_pgboss.worker.registry import Registration

    Worker([Registration(queue, handler, polling_interval_seconds=0.1, **options)], burst=True).run()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("kind", HANDLER_KINDS)
def test_the_send_span_and_the_handler_span_of_one_job_are_joined_by_the_job_s_trace(spans, own_traces, kind):
    boss.create_queue("mail")
    tracer = trace.get_tracer("tests")
    with tracer.start_as_current_span("POST /signup"):
        job_id = boss.send("mail", {"to": "a@example.com"})
    run_burst("mail", handler_of(kind, lambda job: {"sent": True}))
    (send,) = by_name(spans, "send mail")
    (process,) = by_name(spans, "process mail")
    (fetch,) = by_name(spans, "fetch mail")
    (complete,) = by_name(spans, "complete mail")
    job_trace = uuid.UUID(job_id).int
    # The send span links to the job's trace; the handler span is a child in it.
    assert [link.context.trace_id for link in send.links] == [job_trace]
    assert process.context.trace_id == job_trace
    assert process.parent.trace_id == job_trace and process.parent.is_remote
    assert process.kind == SpanKind.CONSUMER
    assert process.attributes["messaging.message.id"] == job_id
    assert process.attributes["messaging.destination.name"] == "mail"
    assert process.attributes["messaging.operation.type"] == "process"
    assert process.attributes["pgboss.job.retry_count"] == 0
    assert process.status.status_code != StatusCode.ERROR
    # The settle of that one job is in its trace too; the fetch that claimed it counts it.
    assert complete.context.trace_id == job_trace
    assert complete.attributes["messaging.operation.type"] == "settle"
    assert fetch.kind == SpanKind.CLIENT and fetch.attributes["messaging.batch.message_count"] == 1
    assert fetch.attributes["messaging.operation.type"] == "receive"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("kind", HANDLER_KINDS)
def test_a_job_s_trace_is_complete_its_root_exported_and_every_parent_in_it(spans, own_traces, kind):
    """send -> worker -> complete: the job's trace has one root, the "create" span the send
    recorded, and every other span of the trace has a parent the exporter holds."""
    boss.create_queue("mail")
    with trace.get_tracer("tests").start_as_current_span("POST /signup"):
        job_id = boss.send("mail", {"to": "a@example.com"})
    run_burst("mail", handler_of(kind, lambda job: {"sent": True}))
    job_trace = uuid.UUID(job_id).int
    in_trace = [span for span in spans() if span.context.trace_id == job_trace]
    (root,) = [span for span in in_trace if span.parent is None]
    assert root.name == "create mail" and root.kind == SpanKind.PRODUCER
    assert root.context.span_id == tracing.job_span_context(job_id).span_id
    assert root.attributes["messaging.message.id"] == job_id
    assert root.attributes["messaging.operation.type"] == "create"
    assert root.instrumentation_scope.name == tracing.ROOT_TRACER_NAME
    # The root links back to the send span, in the request's trace.
    (send,) = by_name(spans, "send mail")
    assert [link.context.span_id for link in root.links] == [send.context.span_id]
    exported = {span.context.span_id for span in in_trace}
    assert {span.name for span in in_trace} == {"create mail", "process mail", "complete mail"}
    for span in in_trace:
        assert span.parent is None or span.parent.span_id in exported, span.name
        assert span.parent is None or span.parent.trace_id == job_trace
    # The send span's link names the root itself.
    assert [(link.context.trace_id, link.context.span_id) for link in send.links] == [
        (job_trace, root.context.span_id)
    ]


def test_an_insert_records_the_root_of_each_job_s_trace(spans, own_traces):
    boss.create_queue("batch")
    ids = boss.insert("batch", [{"data": {"n": n}} for n in range(3)], return_ids=True)
    roots = by_name(spans, "create batch")
    assert sorted((span.context.trace_id, span.parent) for span in roots) == sorted(
        (uuid.UUID(job_id).int, None) for job_id in ids
    )
    # Other spans of the provider draw their ids as before: random, not a job's.
    (insert,) = by_name(spans, "insert batch")
    assert insert.context.trace_id not in {uuid.UUID(job_id).int for job_id in ids}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("kind", HANDLER_KINDS)
def test_every_attempt_of_a_job_is_in_its_trace_and_a_failure_is_recorded(spans, own_traces, kind):
    boss.create_queue("flaky", retry_limit=1)
    job_id = boss.send("flaky", {})

    def handler(job):
        if job.retry_count == 0:
            raise ValueError("first attempt fails")

    run_burst("flaky", handler_of(kind, handler))
    first, second = sorted(by_name(spans, "process flaky"), key=lambda span: span.start_time)
    assert {first.context.trace_id, second.context.trace_id} == {uuid.UUID(job_id).int}
    assert (first.attributes["pgboss.job.retry_count"], second.attributes["pgboss.job.retry_count"]) == (0, 1)
    assert first.status.status_code == StatusCode.ERROR
    (event,) = [event for event in first.events if event.name == "exception"]
    assert event.attributes["exception.type"] == "ValueError"
    assert second.status.status_code != StatusCode.ERROR
    (fail,) = by_name(spans, "fail flaky")
    assert fail.context.trace_id == uuid.UUID(job_id).int


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("kind", HANDLER_KINDS)
def test_a_batch_handler_s_span_links_to_each_job_s_trace(spans, own_traces, kind):
    boss.create_queue("batched")
    ids = boss.insert("batched", [{"data": {"n": n}} for n in range(3)], return_ids=True)
    run_burst("batched", handler_of(kind, lambda jobs: None), batch=True, batch_size=3)
    (process,) = by_name(spans, "process batched")
    assert process.attributes["messaging.batch.message_count"] == 3
    assert {link.context.trace_id for link in process.links} == {uuid.UUID(job_id).int for job_id in ids}
    # Without one job to be the child of, the call is a trace of its own.
    assert process.context.trace_id not in {uuid.UUID(job_id).int for job_id in ids}


@pytest.mark.django_db(transaction=True)
def test_inside_an_async_handler_the_job_s_span_is_current_and_covers_the_coroutine(spans, own_traces):
    import asyncio

    from asgiref.sync import sync_to_async

    boss.create_queue("amail")
    job_id = boss.send("amail", {})
    seen = {}

    def current() -> tuple[int, int]:
        context = trace.get_current_span().get_span_context()
        return context.trace_id, context.span_id

    async def handler(job):
        seen["before"] = current()
        await asyncio.sleep(0.2)
        seen["after"] = current()
        # What the coroutine runs on a thread (the async ORM's way) sees it too.
        seen["thread"] = await sync_to_async(current)()

    run_burst("amail", handler, concurrency=2)
    (process,) = by_name(spans, "process amail")
    mine = (uuid.UUID(job_id).int, process.context.span_id)
    assert seen == {"before": mine, "after": mine, "thread": mine}
    # The span covers the coroutine's run, its await included.
    assert process.end_time - process.start_time >= 0.2e9


@pytest.mark.django_db(transaction=True)
def test_an_idle_queue_s_empty_polls_make_no_spans(spans):
    boss.create_queue("idle")
    run_burst("idle", lambda job: None)
    assert not [span for span in spans() if span.name == "fetch idle"]


@pytest.mark.django_db(transaction=True)
def test_the_documented_console_example_prints_the_joined_spans(tmp_path):
    from tests.test_docs import marked_blocks

    (block,) = marked_blocks("observability.md", 1)
    script = tmp_path / "console_example.py"
    script.write_text("import django; django.setup()\n" + block + "print('JOB', job_id)\n")
    result = subprocess.run(
        [sys.executable, str(script)], cwd=REPO, env=worker_env(), capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    documents = [json.loads(text) for text in re.findall(r"^\{.*?^\}", result.stdout, flags=re.S | re.M)]
    named = {document["name"]: document for document in documents}
    assert {"POST /signup", "send emails", "fetch emails", "process emails", "complete emails"} <= set(named)
    request_trace = named["POST /signup"]["context"]["trace_id"]
    assert named["send emails"]["parent_id"] == named["POST /signup"]["context"]["span_id"]
    # The job stored the send span's context: its handler span is that span's child, in the
    # request's trace, and so is the settle of that one job.
    assert named["process emails"]["context"]["trace_id"] == request_trace
    assert named["process emails"]["parent_id"] == named["send emails"]["context"]["span_id"]
    assert named["complete emails"]["context"]["trace_id"] == request_trace


@pytest.mark.node
@pytest.mark.django_db(transaction=True)
def test_a_job_pg_boss_sent_gets_its_handler_span_in_the_job_s_trace(spans, run_pgboss):
    from django_pgboss.conf import pgboss_settings

    boss.create_queue("mail")
    (job_id,) = run_pgboss("send", pgboss_settings.SCHEMA, "mail", json.dumps([{"data": {"to": "a"}}]))["ids"]
    run_burst("mail", lambda job: None)
    (process,) = by_name(spans, "process mail")
    assert process.context.trace_id == uuid.UUID(job_id).int
    assert process.attributes["messaging.message.id"] == job_id


@pytest.mark.node
@pytest.mark.django_db(transaction=True)
def test_a_traced_send_leaves_pg_boss_the_job_exactly_as_sent(spans, run_pgboss):
    from django_pgboss.conf import pgboss_settings

    boss.create_queue("mail")
    with trace.get_tracer("tests").start_as_current_span("POST /signup"):
        job_id = boss.send("mail", {"to": "a"})
    assert by_name(spans, "send mail")
    # The trace context rides in its own column, not in the data: pg-boss reads back the data as
    # it was sent.
    (job,) = run_pgboss("work", pgboss_settings.SCHEMA, "mail", "null")["jobs"]
    assert (job["id"], job["data"]) == (job_id, {"to": "a"})


def test_with_the_api_installed_but_no_provider_set_the_helpers_do_nothing():
    script = (
        "import django; django.setup()\n"
        "from django_pgboss.observability import tracing\n"
        "assert tracing.ENABLED\n"
        "assert tracing.send_span('q') is tracing.process_span('q', []) is tracing.monitor_span()\n"
        "assert tracing.now() == 0\n"
        "from opentelemetry import trace\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "trace.set_tracer_provider(TracerProvider())\n"
        "assert tracing.send_span('q') is not tracing.monitor_span() and tracing.now() > 0\n"
        "print('ok')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, env=worker_env(), capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def traceparent(span) -> str:
    """The W3C traceparent of a finished span, as a send stores it: sampled ("01"), and with the
    SDK's random trace ids W3C's level-2 random flag too ("03")."""
    context = span.context
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


def stored_trace_context(queue: str, job_id: str):
    """A job's trace_context column, read with SQL (no read of the API returns it)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT trace_context FROM {boss.context.quoted_schema}.job WHERE name = %s AND id = %s",
            [queue, job_id],
        )
        (value,) = cursor.fetchone()
    return json.loads(value) if isinstance(value, str) else value


def test_a_send_inside_a_span_stores_the_send_span_s_traceparent(spans):
    boss.create_queue("mail")
    with trace.get_tracer("tests").start_as_current_span("POST /signup"):
        job_id = boss.send("mail", {"to": "a@example.com"})
        throttled = boss.send_throttled("mail", {}, 60, "k")
    first, second = by_name(spans, "send mail")
    assert stored_trace_context("mail", job_id) == {"traceparent": traceparent(first)}
    assert stored_trace_context("mail", throttled) == {"traceparent": traceparent(second)}
    # The job's trace is the sender's now: no trace of its own, no link to one.
    assert not first.links
    assert not [span for span in spans() if span.name == "create mail"]
    assert first.attributes["messaging.message.id"] == job_id


def test_every_job_of_an_insert_stores_the_insert_span_s_context(spans):
    boss.create_queue("batch")
    # Jobs of nothing but data (the one-array statement) and jobs with options (the recordset).
    plain = boss.insert("batch", [{"data": {"n": n}} for n in range(3)], return_ids=True)
    optioned = boss.insert(
        "batch", [{"data": {}, "priority": 2}, {"data": {}, "retry_limit": 1}], return_ids=True
    )
    first, second = by_name(spans, "insert batch")
    assert [stored_trace_context("batch", job_id) for job_id in plain] == [
        {"traceparent": traceparent(first)}
    ] * 3
    assert [stored_trace_context("batch", job_id) for job_id in optioned] == [
        {"traceparent": traceparent(second)}
    ] * 2
    assert not first.links and not [span for span in spans() if span.name == "create batch"]


def test_an_upsert_stores_the_context_only_when_it_inserts(spans):
    boss.create_queue("profile")
    with trace.get_tracer("tests").start_as_current_span("first request"):
        inserted = boss.upsert("profile", {"v": 1}, singleton_key="user-1")
    with trace.get_tracer("tests").start_as_current_span("second request"):
        updated = boss.upsert("profile", {"v": 2}, singleton_key="user-1")
    assert (inserted.inserted, updated.updated, updated.jobs) == (1, 1, inserted.jobs)
    (upsert,) = by_name(spans, "upsert profile")
    # The update left the job in the trace of the send that created it.
    assert stored_trace_context("profile", inserted.jobs[0]) == {"traceparent": traceparent(upsert)}


def test_with_propagation_off_a_send_stores_no_trace_context(spans, own_traces):
    boss.create_queue("mail")
    with trace.get_tracer("tests").start_as_current_span("POST /signup"):
        job_id = boss.send("mail", {})
        (batch_id,) = boss.insert("mail", [{"data": {}}], return_ids=True)
    assert stored_trace_context("mail", job_id) is None
    assert stored_trace_context("mail", batch_id) is None


def test_without_a_tracer_provider_a_send_stores_no_trace_context():
    # A fresh process in which the API is installed but no tracer provider is set.
    script = (
        "import django; django.setup()\n"
        "from django.db import connection\n"
        "from django_pgboss import boss\n"
        "from django_pgboss.observability import tracing\n"
        "assert tracing.ENABLED and not tracing.active()\n"
        "boss.create_queue('untraced')\n"
        "ids = [boss.send('untraced', {}), *boss.insert('untraced', [{'data': {}}] * 2, return_ids=True)]\n"
        "with connection.cursor() as cursor:\n"
        "    cursor.execute(f'SELECT count(*) FROM {boss.context.quoted_schema}.job WHERE name = %s "
        "AND trace_context IS NULL', ['untraced'])\n"
        "    print(len(ids), cursor.fetchone()[0])\n"
        "boss.delete_queue('untraced')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, env=worker_env(), capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["3", "3"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("kind", HANDLER_KINDS)
def test_the_handler_span_continues_the_trace_the_send_stored(spans, kind):
    boss.create_queue("mail")
    seen = {}

    def handler(job):
        context = trace.get_current_span().get_span_context()
        seen["current"] = (context.trace_id, context.span_id)

    with trace.get_tracer("tests").start_as_current_span("POST /signup") as request_span:
        job_id = boss.send("mail", {"to": "a@example.com"})
    run_burst("mail", handler_of(kind, handler))
    (send,) = by_name(spans, "send mail")
    (process,) = by_name(spans, "process mail")
    (complete,) = by_name(spans, "complete mail")
    request_trace = request_span.get_span_context().trace_id
    assert process.context.trace_id == request_trace
    assert process.parent.span_id == send.context.span_id and process.parent.is_remote
    assert process.attributes["messaging.message.id"] == job_id
    assert not process.links
    # The handler runs inside its process span; the settle of its one job is in the trace too.
    assert seen["current"] == (request_trace, process.context.span_id)
    assert complete.context.trace_id == request_trace


@pytest.mark.django_db(transaction=True)
def test_every_attempt_and_the_dead_letter_copy_keep_the_stored_trace(spans):
    boss.create_queue("graveyard")
    boss.create_queue("flaky", retry_limit=1, dead_letter="graveyard")
    with trace.get_tracer("tests").start_as_current_span("POST /signup"):
        job_id = boss.send("flaky", {})

    def handler(job):
        raise ValueError(f"attempt {job.retry_count} fails")

    run_burst("flaky", handler)
    (send,) = by_name(spans, "send flaky")
    attempts = sorted(by_name(spans, "process flaky"), key=lambda span: span.start_time)
    assert [span.attributes["pgboss.job.retry_count"] for span in attempts] == [0, 1]
    assert {(span.context.trace_id, span.parent.span_id) for span in attempts} == {
        (send.context.trace_id, send.context.span_id)
    }
    # The job failed for good keeps the context, and so does its copy in the dead-letter queue.
    assert stored_trace_context("flaky", job_id) == {"traceparent": traceparent(send)}
    (copy,) = boss.find_jobs("graveyard")
    assert stored_trace_context("graveyard", copy.id) == {"traceparent": traceparent(send)}


@pytest.mark.django_db(transaction=True)
def test_a_batch_span_links_to_each_job_s_stored_context(spans):
    boss.create_queue("batched")
    for n in range(2):
        with trace.get_tracer("tests").start_as_current_span(f"request {n}"):
            boss.send("batched", {"n": n})
    senders = by_name(spans, "send batched")
    run_burst("batched", lambda jobs: None, batch=True, batch_size=3)
    (process,) = by_name(spans, "process batched")
    assert {(link.context.trace_id, link.context.span_id) for link in process.links} == {
        (span.context.trace_id, span.context.span_id) for span in senders
    }
    assert process.context.trace_id not in {span.context.trace_id for span in senders}


@pytest.mark.django_db(transaction=True)
def test_a_stored_context_wins_over_the_worker_thread_s_current_span(spans):
    boss.create_queue("mail")
    with trace.get_tracer("tests").start_as_current_span("POST /signup"):
        boss.send("mail", {})
    # A worker run inside a span of its own: the job's span is still its sender's child.
    with trace.get_tracer("tests").start_as_current_span("deploy script") as outer:
        run_burst("mail", lambda job: None)
    (send,) = by_name(spans, "send mail")
    (process,) = by_name(spans, "process mail")
    assert process.parent.span_id == send.context.span_id
    assert process.context.trace_id != outer.get_span_context().trace_id


@pytest.mark.django_db(transaction=True)
def test_a_stored_context_that_is_no_trace_context_leaves_the_job_its_own_trace(spans):
    boss.create_queue("mail")
    job_id = boss.send("mail", {})
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {boss.context.quoted_schema}.job SET trace_context = %s WHERE id = %s",
            [json.dumps({"traceparent": "not a traceparent"}), job_id],
        )
    run_burst("mail", lambda job: None)
    (process,) = by_name(spans, "process mail")
    assert process.context.trace_id == uuid.UUID(job_id).int


@pytest.mark.node
@pytest.mark.django_db(transaction=True)
def test_a_job_pg_boss_sent_with_a_stored_context_is_worked_inside_that_trace(spans, run_pgboss):
    from django_pgboss.conf import pgboss_settings

    boss.create_queue("mail")
    parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    (job_id,) = run_pgboss(
        "send-traced", pgboss_settings.SCHEMA, "mail", json.dumps([{"data": {"to": "a"}}]), parent
    )["ids"]
    assert stored_trace_context("mail", job_id) == {"traceparent": parent}
    run_burst("mail", lambda job: None)
    (process,) = by_name(spans, "process mail")
    assert process.context.trace_id == 0x4BF92F3577B34DA6A3CE929D0E0E4736
    assert process.parent.span_id == 0x00F067AA0BA902B7
    assert process.attributes["messaging.message.id"] == job_id


@pytest.mark.node
@pytest.mark.django_db(transaction=True)
def test_pg_boss_reads_back_the_trace_context_a_python_send_stored(spans, run_pgboss):
    from django_pgboss.conf import pgboss_settings

    boss.create_queue("mail")
    with trace.get_tracer("tests").start_as_current_span("POST /signup"):
        job_id = boss.send("mail", {"to": "a"})
    (send,) = by_name(spans, "send mail")
    fetched = run_pgboss("fetch-traced", pgboss_settings.SCHEMA, "mail")
    assert fetched["ids"] == [job_id]
    assert fetched["carriers"] == [{"traceparent": traceparent(send)}]
