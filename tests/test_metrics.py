"""Prometheus metrics: the view and the commands' ports, scraped and parsed with prometheus-client's
own parser, against the database's counts after a monitor pass; and what a scrape costs (EXPLAIN)."""

from __future__ import annotations

import json
import signal
import socket
import sys
import urllib.error
import urllib.request

import pytest
from django.db import connection
from prometheus_client.parser import text_string_to_metric_families

from django_pgboss import boss
from django_pgboss.db.context import DatabaseContext
from django_pgboss.db.identifiers import quote_job_table
from django_pgboss.observability import exposition
from django_pgboss.observability.metrics import PGBOSS_REGISTRY, MonitorMetrics
from django_pgboss.observability.queues import read_queues
from django_pgboss.plans import metrics as metric_plans
from tests.helpers import pgboss_settings_with, rows, schema_sql
from tests.processes import start_monitor, wait_for

pytestmark = pytest.mark.django_db


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of an exposition: (name, sorted labels) -> value, through prometheus-client's parser."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(parsed: dict, name: str, **labels: str) -> float:
    return parsed[(name, tuple(sorted(labels.items())))]


def database_counts(name: str) -> dict[str, int]:
    ((queued, deferred, active, failed, total),) = rows(
        "SELECT count(*) FILTER (WHERE state < 'active'), "
        "count(*) FILTER (WHERE state < 'active' AND start_after > now()), "
        "count(*) FILTER (WHERE state = 'active'), count(*) FILTER (WHERE state = 'failed'), count(*) "
        "FROM {s}.job WHERE name = %s",
        [name],
    )
    return {"queued": queued, "deferred": deferred, "active": active, "failed": failed, "total": total}


def fill_queues() -> None:
    """Two queues and a dead-letter queue in every state the gauges report."""
    boss.create_queue("mail_dlq")
    boss.create_queue("mail", retry_limit=0, dead_letter="mail_dlq")
    boss.create_queue("reports", partition=True)
    for n in range(5):
        boss.send("mail", {"n": n})
    boss.send("mail", {"later": True}, start_after=3600)
    first, second = boss.fetch("mail", batch_size=2)
    boss.fail("mail", first, {"message": "boom"})
    boss.complete("mail", second)
    boss.fetch("mail")
    boss.insert("reports", [{"data": {"n": n}} for n in range(3)])


def assert_gauges_match_the_database(parsed: dict) -> None:
    for name in ("mail", "mail_dlq", "reports"):
        counts = database_counts(name)
        assert value(parsed, "pgboss_queue_queued_jobs", queue=name) == counts["queued"], name
        assert value(parsed, "pgboss_queue_deferred_jobs", queue=name) == counts["deferred"], name
        assert value(parsed, "pgboss_queue_ready_jobs", queue=name) == counts["queued"] - counts["deferred"]
        assert value(parsed, "pgboss_queue_active_jobs", queue=name) == counts["active"], name
        assert value(parsed, "pgboss_queue_failed_jobs", queue=name) == counts["failed"], name
        assert value(parsed, "pgboss_queue_total_jobs", queue=name) == counts["total"], name
    # The failed job's copy waits in the dead-letter queue.
    assert value(parsed, "pgboss_dead_letter_queued_jobs", queue="mail_dlq") == 1
    assert ("pgboss_dead_letter_queued_jobs", (("queue", "mail"),)) not in parsed
    assert value(parsed, "pgboss_queue_metrics_up") == 1


def test_the_view_reports_the_database_s_counts_after_a_monitor_pass(staff_client):
    fill_queues()
    boss.supervise()
    response = staff_client().get("/pgboss/metrics")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    parsed = samples(response.content.decode())
    assert_gauges_match_the_database(parsed)
    assert value(parsed, "pgboss_queue_counted_age_seconds", queue="mail") < 60
    # Every ready job was sent moments ago; the deferred one is not ready, so it is no oldest.
    assert 0 <= value(parsed, "pgboss_queue_oldest_ready_job_age_seconds", queue="mail") < 60
    assert value(parsed, "pgboss_queue_oldest_ready_job_age_seconds", queue="reports") < 60


def test_the_gauges_are_the_monitor_s_counts_not_a_fresh_count(staff_client):
    boss.create_queue("mail")
    boss.supervise()
    boss.send("mail", {})
    client = staff_client()
    before = samples(client.get("/pgboss/metrics").content.decode())
    assert value(before, "pgboss_queue_queued_jobs", queue="mail") == 0
    rows("UPDATE {s}.queue SET monitor_claim_on = NULL, monitor_on = NULL")
    boss.supervise()
    after = samples(client.get("/pgboss/metrics").content.decode())
    assert value(after, "pgboss_queue_queued_jobs", queue="mail") == 1


def test_the_view_answers_staff_and_the_token_and_refuses_everyone_else(client, django_user_model):
    boss.create_queue("mail")
    anonymous = client.get("/pgboss/metrics")
    assert anonymous.status_code == 401
    assert anonymous["WWW-Authenticate"].startswith("Bearer")
    # No token is configured: a bearer header alone is nobody.
    assert client.get("/pgboss/metrics", HTTP_AUTHORIZATION="Bearer anything").status_code == 401
    with pgboss_settings_with(METRICS_TOKEN="s3cret-token"):
        token = client.get("/pgboss/metrics", HTTP_AUTHORIZATION="Bearer s3cret-token")
        assert token.status_code == 200
        assert ("pgboss_queue_queued_jobs", (("queue", "mail"),)) in samples(token.content.decode())
        assert client.get("/pgboss/metrics", HTTP_AUTHORIZATION="Bearer s3cret-tokeN").status_code == 401
        assert client.get("/pgboss/metrics", HTTP_AUTHORIZATION="Basic s3cret-token").status_code == 401
    user = django_user_model.objects.create_user("someone")
    client.force_login(user)
    assert client.get("/pgboss/metrics").status_code == 403
    user.is_staff = True
    user.save()
    assert client.get("/pgboss/metrics").status_code == 200
    user.is_active = False
    user.save()
    assert client.get("/pgboss/metrics").status_code in (401, 403)
    assert client.post("/pgboss/metrics").status_code in (401, 403, 405)


def test_the_view_speaks_openmetrics_when_asked(staff_client):
    boss.create_queue("mail")
    response = staff_client().get(
        "/pgboss/metrics", HTTP_ACCEPT="application/openmetrics-text; version=1.0.0"
    )
    assert response["Content-Type"].startswith("application/openmetrics-text")
    assert response.content.decode().rstrip().endswith("# EOF")


def plan_of(sql: str, params: dict) -> dict:
    sql = sql.replace("%(names)s", "%s")
    with connection.cursor() as cursor:
        cursor.execute(
            f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql}", [params["names"]] if params else None
        )
        (document,) = cursor.fetchone()
    return (json.loads(document) if isinstance(document, str) else document)[0]["Plan"]


def nodes(plan: dict) -> list[dict]:
    return [plan, *(node for child in plan.get("Plans", []) for node in nodes(child))]


def test_reading_the_gauges_reads_the_queue_table_alone():
    boss.create_queue("mail")
    boss.insert("mail", [{"data": {}} for _ in range(2000)])
    boss.supervise()
    plan = plan_of(metric_plans.queue_gauges(schema_sql()), {})
    relations = {node["Relation Name"] for node in nodes(plan) if "Relation Name" in node}
    assert relations == {"queue"}


def test_the_oldest_ready_job_is_found_in_a_few_index_entries_whatever_the_backlog():
    boss.create_queue("mail")
    # 20,000 waiting jobs over three priorities, and 500 deferred ones created first.
    boss.insert("mail", [{"data": {}, "start_after": 3600} for _ in range(500)])
    for priority in (0, 5, 10):
        boss.insert("mail", [{"data": {}, "priority": priority} for _ in range(6_667)])
    rows("ANALYZE {s}.job_common")
    sql = metric_plans.oldest_ready(schema_sql(), quote_job_table("job_common"))
    plan = plan_of(sql, {"names": ["mail"]})
    scans = [node for node in nodes(plan) if "Relation Name" in node]
    assert scans, plan
    assert {node["Node Type"] for node in scans} == {"Index Only Scan"}, plan
    assert {node["Index Name"] for node in scans} == {"job_common_i11"}, plan
    # The walk reads one entry per priority plus the deferred jobs it steps over in priority 0,
    # not the 20,000 waiting jobs.
    visited = sum(
        node["Actual Rows"] * node["Actual Loops"] + node.get("Rows Removed by Filter", 0) for node in scans
    )
    assert visited < 600


def test_the_oldest_ready_age_counts_from_the_send_across_priorities(clock):
    boss.create_queue("mail")
    boss.send("mail", {"old": True}, priority=0)
    clock.advance(seconds=120)
    boss.send("mail", {"new": True}, priority=10)
    boss.send("mail", {"deferred": True}, start_after=10)
    clock.advance(seconds=30)
    (reading,) = read_queues(DatabaseContext())
    # The priority-0 job waits longest, though the priority-10 one is fetched first.
    assert reading.oldest_ready_age_seconds == pytest.approx(150, abs=1)
    boss.fetch("mail", batch_size=2)
    (reading,) = read_queues(DatabaseContext())
    # Left: the deferred job, ready since 20 s, sent 30 s ago.
    assert reading.oldest_ready_age_seconds == pytest.approx(30, abs=1)
    boss.fetch("mail")
    (reading,) = read_queues(DatabaseContext())
    assert reading.oldest_ready_age_seconds is None


def test_an_empty_queue_the_monitor_counted_costs_no_probe(django_assert_num_queries):
    for name in ("a", "b", "c"):
        boss.create_queue(name)
    boss.supervise()
    with django_assert_num_queries(1):
        read_queues(DatabaseContext())


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        return response.read().decode()


@pytest.mark.django_db(transaction=True)
def test_the_port_server_reads_the_queue_gauges_on_a_connection_of_its_own():
    fill_queues()
    boss.supervise()
    server = exposition.serve(0, "127.0.0.1", queues=True)

    def other_connections() -> int:
        return rows(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )[0][0]

    try:
        before = other_connections()
        parsed = samples(scrape(server.server_port))
        assert_gauges_match_the_database(parsed)
        # Each scrape's thread closes its connection: none is left open behind it.
        for _ in range(3):
            scrape(server.server_port)
        wait_for(lambda: other_connections() == before, timeout=5)
        assert other_connections() == before
    finally:
        server.shutdown()
        server.server_close()


def test_the_monitor_s_counters_add_each_window_it_counted(clock):
    boss.create_queue("mail", retry_limit=0)
    metrics = MonitorMetrics(boss.context)
    created = metrics.throughput["created"].labels("mail")
    completed = metrics.throughput["completed"].labels("mail")
    before = (created._value.get(), completed._value.get())
    metrics.observe(boss.supervise())
    total = 0
    for _ in range(3):
        clock.advance(seconds=15)
        boss.insert("mail", [{"data": {}} for _ in range(4)])
        job = boss.fetch("mail")[0]
        boss.complete("mail", job)
        clock.advance(seconds=60)
        metrics.observe(boss.supervise())
        total += 4
    (database_created,) = rows("SELECT count(*) FROM {s}.job WHERE name = 'mail'")[0]
    assert (created._value.get() - before[0], completed._value.get() - before[1]) == (total, 3)
    assert database_created == total
    exposed = samples(exposition_text())
    assert value(exposed, "pgboss_queue_created_jobs_total", queue="mail") == created._value.get()


def exposition_text() -> str:
    from prometheus_client import generate_latest

    return generate_latest(exposition.Exposition()).decode()  # type: ignore[arg-type]


@pytest.mark.django_db(transaction=True)
def test_pgboss_monitor_serves_the_gauges_and_its_counters_on_its_metrics_port():
    fill_queues()
    port = free_port()
    monitor = start_monitor("--interval", "1", "--metrics-port", str(port), "--metrics-addr", "127.0.0.1")
    try:

        def passed() -> dict | None:
            try:
                parsed = samples(scrape(port))
            except (urllib.error.URLError, ConnectionError):
                return None
            if parsed.get(("pgboss_monitor_passes_total", ())):
                return parsed
            return None

        parsed = wait_for(passed, timeout=30)
        assert_gauges_match_the_database(parsed)
        # The process's own metrics come with it (prometheus-client's default registry).
        assert any(name == "process_cpu_seconds_total" for name, _labels in parsed) or sys.platform != "linux"
    finally:
        monitor.send_signal(signal.SIGTERM)
        _out, err = monitor.communicate(timeout=30)
    assert monitor.returncode == 0, err
    assert f"metrics on http://127.0.0.1:{port}/metrics" in err


def test_a_metrics_port_out_of_range_is_refused_before_anything_starts():
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match="--metrics-port must be between 0 and 65535"):
        call_command("pgboss_monitor", "--once", "--metrics-port", "70000")


def test_process_metrics_live_in_their_own_registry():
    from prometheus_client import REGISTRY

    MonitorMetrics(boss.context)
    ours = {metric.name for metric in PGBOSS_REGISTRY.collect()}
    assert "pgboss_monitor_passes" in ours
    assert "pgboss_monitor_passes" not in {metric.name for metric in REGISTRY.collect()}


@pytest.mark.queue(retry_limit=0)
def test_the_wait_and_run_histograms_are_the_last_window_s_bins(queue, clock):
    from prometheus_client import CollectorRegistry, generate_latest

    from django_pgboss.observability.metrics import QueueCollector

    boss.supervise()  # starts the counting window
    boss.send(queue)
    clock.advance(seconds=2)
    job = boss.fetch(queue)
    clock.advance(seconds=5)
    boss.complete(queue, job)
    boss.flow([{"ref": "p", "name": queue}, {"ref": "c", "name": queue, "depends_on": ["p"]}])
    clock.advance(seconds=70)
    boss.supervise()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(QueueCollector(oldest=False))
    parsed = samples(generate_latest(registry).decode())
    # The job waited 2 s (slot 16: up to 10 ms·√2^16 = 2.56 s) and ran 5 s (slot 18: up to 5.12 s);
    # the buckets are cumulative, the +Inf one the count.
    assert value(parsed, "pgboss_queue_wait_seconds_bucket", queue=queue, le="1.81019") == 0
    assert value(parsed, "pgboss_queue_wait_seconds_bucket", queue=queue, le="2.56") == 1
    assert value(parsed, "pgboss_queue_wait_seconds_bucket", queue=queue, le="+Inf") == 1
    assert value(parsed, "pgboss_queue_run_seconds_bucket", queue=queue, le="3.62039") == 0
    assert value(parsed, "pgboss_queue_run_seconds_bucket", queue=queue, le="5.12") == 1
    buckets = [key for key in parsed if key[0] == "pgboss_queue_wait_seconds_bucket"]
    assert len(buckets) == 48
    assert value(parsed, "pgboss_queue_blocked_jobs", queue=queue) == 1
    assert value(parsed, "pgboss_queue_ready_jobs", queue=queue) == 1
    assert value(parsed, "pgboss_queue_retained_jobs", queue=queue) == 1
