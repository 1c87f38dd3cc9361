"""The worker's Prometheus metrics: jobs by outcome (from django_pgboss's signals), handler
durations, send-to-start delays and running handlers; served by pgboss_work --metrics-port, and by
one endpoint for several worker processes in prometheus-client's multi-process mode."""

from __future__ import annotations

import signal
import time
import urllib.error

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector

from django_pgboss import boss
from django_pgboss.observability.metrics import WorkerMetrics
from django_pgboss.worker import Worker
from django_pgboss.worker.registry import Registration
from tests.helpers import HANDLER_KINDS, handler_of
from tests.processes import run_worker, start_worker, wait_for
from tests.test_metrics import free_port, samples, scrape, value

pytestmark = pytest.mark.django_db(transaction=True)


def burst(queue: str, handler, metrics: WorkerMetrics, **options) -> None:
    registration = Registration(queue, handler, polling_interval_seconds=0.1, **options)
    Worker([registration], burst=True, instruments=metrics).run()


@pytest.fixture
def metrics():
    # A registry of the test's own, so counts start at zero whatever ran before.
    worker_metrics = WorkerMetrics(CollectorRegistry(auto_describe=False)).connect()
    yield worker_metrics
    worker_metrics.disconnect()


def exposed(metrics: WorkerMetrics) -> dict:
    registry = CollectorRegistry(auto_describe=False)
    for metric in (metrics.jobs, metrics.duration, metrics.delay, metrics.running, metrics.abandoned):
        registry.register(metric)
    return samples(generate_latest(registry).decode())


@pytest.mark.parametrize("kind", HANDLER_KINDS)
def test_jobs_are_counted_by_outcome_and_each_handler_call_is_timed(metrics, kind):
    boss.create_queue("mail_dlq")
    boss.create_queue("mail", retry_limit=1, dead_letter="mail_dlq")
    boss.insert("mail", [{"data": {"ok": True}} for _ in range(4)])
    boss.insert("mail", [{"data": {"ok": False}} for _ in range(2)])

    def handler(job):
        if not job.data["ok"]:
            raise ValueError("refused")

    burst("mail", handler_of(kind, handler, sleep_before=0.05), metrics, concurrency=2)
    parsed = exposed(metrics)
    assert value(parsed, "pgboss_worker_jobs_total", queue="mail", outcome="completed") == 4
    # Each bad job failed once and went back (retry_limit 1), then failed for good into the dead
    # letter queue.
    assert value(parsed, "pgboss_worker_jobs_total", queue="mail", outcome="retried") == 2
    assert value(parsed, "pgboss_worker_jobs_total", queue="mail", outcome="failed") == 2
    assert value(parsed, "pgboss_worker_jobs_total", queue="mail", outcome="dead_lettered") == 2
    assert len(boss.find_jobs("mail_dlq")) == 2
    # 8 handler calls, each at least 50 ms; none running now.
    assert value(parsed, "pgboss_worker_handler_duration_seconds_count", queue="mail") == 8
    assert value(parsed, "pgboss_worker_handler_duration_seconds_sum", queue="mail") >= 8 * 0.05
    assert value(parsed, "pgboss_worker_handler_duration_seconds_bucket", queue="mail", le="0.025") == 0
    assert value(parsed, "pgboss_worker_running_handlers", queue="mail") == 0
    assert value(parsed, "pgboss_worker_send_to_start_seconds_count", queue="mail") == 8


def test_the_send_to_start_delay_counts_from_when_the_job_became_ready(metrics):
    boss.create_queue("mail")
    boss.send("mail", {})
    time.sleep(1.0)
    burst("mail", lambda job: None, metrics)
    parsed = exposed(metrics)
    assert value(parsed, "pgboss_worker_send_to_start_seconds_count", queue="mail") == 1
    assert 1.0 <= value(parsed, "pgboss_worker_send_to_start_seconds_sum", queue="mail") < 30
    assert value(parsed, "pgboss_worker_send_to_start_seconds_bucket", queue="mail", le="0.5") == 0


@pytest.mark.parametrize("kind", HANDLER_KINDS)
def test_running_handlers_are_counted_while_they_run(metrics, kind):
    boss.create_queue("slow")
    boss.insert("slow", [{"data": {}} for _ in range(3)])
    seen = []

    def handler(job):
        seen.append(metrics.running.labels("slow")._value.get())

    burst("slow", handler_of(kind, handler, sleep_after=0.3), metrics, concurrency=3, batch_size=3)
    # The last of three concurrent calls to start saw all three running.
    assert max(seen) == 3
    assert metrics.running.labels("slow")._value.get() == 0


@pytest.mark.parametrize("queue", ["echo", "aecho"])
def test_pgboss_work_serves_its_metrics_on_its_port(queue):
    # "aecho" is echo's async def twin (tests/workapp/jobs.py).
    boss.create_queue(queue)
    port = free_port()
    worker = start_worker("--queue", queue, "--metrics-port", str(port), "--metrics-addr", "127.0.0.1")
    try:
        boss.insert(queue, [{"data": {"n": n}} for n in range(5)])

        def handled() -> dict | None:
            try:
                parsed = samples(scrape(port))
            except (urllib.error.URLError, ConnectionError):
                return None
            key = ("pgboss_worker_handler_duration_seconds_count", (("queue", queue),))
            return parsed if parsed.get(key) == 5 else None

        parsed = wait_for(handled, timeout=60, interval=0.2)
        assert value(parsed, "pgboss_worker_running_handlers", queue=queue) == 0
        # The counters fed by the job signals, sent by the same handler calls.
        assert value(parsed, "pgboss_worker_send_to_start_seconds_count", queue=queue) == 5
        completed = ("pgboss_worker_jobs_total", (("outcome", "completed"), ("queue", queue)))
        wait_for(lambda: samples(scrape(port)).get(completed) == 5, timeout=30, interval=0.2)
        # A worker serves no queue gauges: they are read from the view or the monitor's port.
        assert not any(name.startswith("pgboss_queue_") for name, _labels in parsed)
    finally:
        worker.send_signal(signal.SIGTERM)
        _out, err = worker.communicate(timeout=60)
    assert worker.returncode == 0, err


def test_several_worker_processes_are_served_from_one_multiprocess_folder(
    tmp_path, staff_client, monkeypatch
):
    boss.create_queue("echo")
    boss.insert("echo", [{"data": {"n": n}} for n in range(30)])
    folder = tmp_path / "prometheus"
    folder.mkdir()
    env = {"PROMETHEUS_MULTIPROC_DIR": str(folder)}
    # --max-jobs 15 each: both processes run 15 of the 30 jobs, however their starts fall.
    workers = [start_worker("--queue", "echo", "--max-jobs", "15", **env) for _ in range(2)]
    for worker in workers:
        _out, err = worker.communicate(timeout=120)
        assert worker.returncode == 0, err
    # Each process wrote its own files; prometheus-client's collector adds them up.
    assert len(list(folder.glob("histogram_*.db"))) == 2
    registry = CollectorRegistry(auto_describe=False)
    MultiProcessCollector(registry, path=str(folder))
    parsed = samples(generate_latest(registry).decode())
    assert value(parsed, "pgboss_worker_handler_duration_seconds_count", queue="echo") == 30
    assert value(parsed, "pgboss_worker_jobs_total", queue="echo", outcome="completed") == 30
    # The view, in a process with the folder set, serves the same sum beside the queue gauges.
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(folder))
    boss.supervise()
    served = samples(staff_client().get("/pgboss/metrics").content.decode())
    assert value(served, "pgboss_queue_queued_jobs", queue="echo") == 0
    assert value(served, "pgboss_worker_handler_duration_seconds_count", queue="echo") == 30
    assert value(served, "pgboss_worker_jobs_total", queue="echo", outcome="completed") == 30
    # Their running-handler gauges were marked dead as they exited: no live process is left to count.
    assert served.get(("pgboss_worker_running_handlers", (("queue", "echo"),)), 0) == 0


def test_a_worker_without_a_port_or_a_folder_counts_nothing(monkeypatch):
    from django_pgboss.management import metrics_port

    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
    assert metrics_port.worker_metrics({"metrics_port": None}) is None
    result = run_worker("--queue", "echo", "--burst", "--metrics-port", "70000")
    assert result.returncode != 0
    assert "--metrics-port must be between 0 and 65535" in result.stderr


@pytest.mark.parametrize("kind", HANDLER_KINDS)
def test_a_handler_that_ignores_its_deadline_is_counted_abandoned_until_it_ends(metrics, kind):
    import asyncio
    import threading

    boss.create_queue("slow", expire_in_seconds=1, retry_limit=0)
    boss.send("slow", {})
    release = threading.Event()

    async def stubborn(job):
        # A coroutine that swallows its cancellation (the async way to ignore the deadline).
        while not release.is_set():
            try:
                await asyncio.sleep(0.05)
            except asyncio.CancelledError:
                continue

    handler = (lambda job: release.wait(30)) if kind == "sync" else stubborn
    worker = Worker(
        [Registration("slow", handler, polling_interval_seconds=0.1)],
        instruments=metrics,
        max_abandoned_threads=5,
    )
    runner = threading.Thread(target=worker.run)
    runner.start()
    try:
        # Past its 1 s deadline the job is failed and its signal set; the handler ignores it, and
        # a second later the worker counts the thread abandoned.
        wait_for(lambda: metrics.abandoned.labels("slow")._value.get() == 1, timeout=20)
        assert metrics.running.labels("slow")._value.get() == 1
        release.set()
        wait_for(lambda: metrics.running.labels("slow")._value.get() == 0, timeout=10)
        wait_for(lambda: metrics.abandoned.labels("slow")._value.get() == 0, timeout=10)
    finally:
        release.set()
        worker.stop()
        runner.join(60)


def test_the_outcome_counters_and_the_delay_hang_off_the_job_signals(metrics):
    import datetime as dt

    from django_pgboss import signals
    from django_pgboss.records import Job

    job = Job(
        id="0f8fad5b-d9cb-469f-a165-70867728950e",
        name="mail",
        data=None,
        retry_count=0,
        expire_in_seconds=60,
        start_after=dt.datetime.now(dt.UTC) - dt.timedelta(seconds=3),
    )
    # Sent with the arguments django_pgboss/signals.py documents.
    signals.send(signals.job_started, Worker, worker=None, queue="mail", job=job)
    signals.send(signals.job_completed, Worker, worker=None, queue="mail", job=job, output=None)
    for will_retry in (True, False):
        signals.send(
            signals.job_failed,
            Worker,
            worker=None,
            queue="mail",
            job=job,
            output={},
            exception=None,
            will_retry=will_retry,
        )
    signals.send(
        signals.job_dead_lettered,
        Worker,
        worker=None,
        queue="mail",
        job=job,
        dead_letter="dlq",
        dead_letter_id="x",
    )
    parsed = exposed(metrics)
    for outcome in ("completed", "retried", "failed", "dead_lettered"):
        assert value(parsed, "pgboss_worker_jobs_total", queue="mail", outcome=outcome) == 1, outcome
    assert value(parsed, "pgboss_worker_send_to_start_seconds_count", queue="mail") == 1
    assert 3 <= value(parsed, "pgboss_worker_send_to_start_seconds_sum", queue="mail") < 30
    metrics.disconnect()
    signals.send(signals.job_completed, Worker, worker=None, queue="mail", job=job, output=None)
    assert value(exposed(metrics), "pgboss_worker_jobs_total", queue="mail", outcome="completed") == 1


def test_the_per_queue_series_are_looked_up_once_and_count_as_the_metric_does():
    # The worker's calls update the same children labels() hands out, each queue its own.
    metrics = WorkerMetrics(CollectorRegistry(auto_describe=False))
    for queue in ("a", "a", "b"):
        metrics.handler_started(queue)
    metrics.handler_finished("a", 0.5)
    assert metrics.running.labels("a")._value.get() == 1
    assert metrics.running.labels("b")._value.get() == 1
    assert metrics._running.labels("a") is metrics.running.labels("a")
    assert exposed(metrics)[("pgboss_worker_handler_duration_seconds_count", (("queue", "a"),))] == 1
