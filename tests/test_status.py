"""manage.py pgboss_status against a live worker and monitor: the text report, the --json document,
and the exit status of each check (a stopped monitor, a queue over its warning size, a crashed
worker), as a health probe sees them; and the one-line refusals."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
from pathlib import Path

import pytest
from django.db import connection

from django_pgboss import boss
from django_pgboss.conf import pgboss_settings
from django_pgboss.db.identifiers import quote_identifier
from tests.processes import run_manage, run_monitor, start_monitor, start_worker, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

SCHEMA = quote_identifier(pgboss_settings.SCHEMA)
#: The child processes beat every second, so a crashed one reads as gone within three.
FAST_BEATS = {"PGBOSS_TEST_INSTANCE_HEARTBEAT": "1"}
HOST = socket.gethostname()
NOT_INSTALLED = "the pgboss schema is not installed in database 'default': run manage.py migrate pgboss"


def status(*args: str, **env: str) -> subprocess.CompletedProcess:
    return run_manage("pgboss_status", *args, timeout=60, **env)


def status_json(*args: str, **env: str) -> tuple[int, dict]:
    result = status("--json", *args, **env)
    return result.returncode, json.loads(result.stdout)


def section(text: str, title: str) -> list[dict[str, str]]:
    """The rows of the report's table under ``title``, each a dict by column header: cells are two
    spaces or more apart, and hold at most single spaces."""
    lines = text.splitlines()
    start = next(n for n, line in enumerate(lines) if line.startswith(title))
    table = []
    for line in lines[start + 1 :]:
        if not line.startswith("  "):
            break
        table.append(line.strip())
    header, *rows = table
    columns = re.split(r"\s{2,}", header)
    return [dict(zip(columns, re.split(r"\s{2,}", row), strict=True)) for row in rows]


def documented_json() -> dict:
    """The example --json document of docs/monitoring.md."""
    page = (Path(__file__).resolve().parents[1] / "docs" / "monitoring.md").read_text()
    return json.loads(
        page.split("### pgboss_status --json", 1)[1].split("```json\n", 1)[1].split("```", 1)[0]
    )


def check_line(text: str, name: str) -> str:
    """The Checks section's line of check ``name``, without its indentation."""
    return next(line.strip() for line in text.splitlines() if re.match(rf"  {name}\s+(ok|FAIL)\s", line))


def stop(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGTERM)
    process.communicate(timeout=60)


def live_instances() -> dict[int, object]:
    return {i.pid: i for i in boss.get_instances() if i.live}


def test_a_live_worker_and_monitor_pass_every_check_in_text_and_json():
    boss.create_queue("dlq")
    boss.create_queue("waiting", dead_letter="dlq")
    boss.create_queue("echo")
    boss.send("waiting", {"n": 1})
    boss.send("waiting", {"n": 2})
    worker = start_worker("--queue", "echo", **FAST_BEATS)
    monitor = start_monitor(**FAST_BEATS)
    try:
        wait_for(lambda: {worker.pid, monitor.pid} <= set(live_instances()), timeout=60)
        wait_for(lambda: boss.get_queue("waiting").monitor_on is not None, timeout=60)

        result = status()
        assert result.returncode == 0, result.stderr
        text = result.stdout
        assert text.startswith(f"pg-boss schema \"{pgboss_settings.SCHEMA}\" in database 'default' at ")
        queues = {row["QUEUE"]: row for row in section(text, "Queues")}
        assert sorted(queues) == ["dlq", "echo", "waiting"]
        waiting = queues["waiting"]
        assert (waiting["QUEUED"], waiting["READY"], waiting["ACTIVE"], waiting["FAILED"]) == (
            "2",
            "2",
            "0",
            "0",
        )
        assert re.fullmatch(r"(\d+m )?\d+s", waiting["OLDEST READY"])
        assert waiting["DLQ DEPTH"] == "-" and queues["dlq"]["DLQ DEPTH"] == "0"
        assert waiting["WARN OVER"] == "10000" and re.fullmatch(r"(\d+m )?\d+s ago", waiting["COUNTED"])
        assert "  waiting -> dlq" in text.splitlines()
        instances = {row["PID"]: row for row in section(text, "Instances")}
        assert set(instances) == {str(worker.pid), str(monitor.pid)}
        worker_row, monitor_row = instances[str(worker.pid)], instances[str(monitor.pid)]
        assert (worker_row["HOST"], worker_row["ROLE"], worker_row["STATE"]) == (HOST, "worker", "live")
        assert worker_row["QUEUES (CONCURRENCY)"] == "echo (4)"
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(\d+s ago\)", worker_row["LAST HEARTBEAT"])
        assert (monitor_row["ROLE"], monitor_row["QUEUES (CONCURRENCY)"]) == ("monitor", "-")
        assert re.search(
            r"^Monitor: last pass \S+ \S+ UTC \((\d+m )?\d+s ago\), a pass every 60s; 1 live monitor\(s\) in the "
            r"instance registry$",
            text,
            re.MULTILINE,
        )
        assert 'Warnings: not persisted (PGBOSS["PERSIST_WARNINGS"] is off)' in text
        assert re.fullmatch(
            r"monitor\s+ok\s+1 live monitor\(s\), last pass (\d+m )?\d+s ago", check_line(text, "monitor")
        )
        assert check_line(text, "queues").endswith("3 queue(s) within their warning size")
        assert check_line(text, "instances").endswith("2 live, none stale")

        code, document = status_json()
        assert code == 0 and document["ok"] is True and document["version"] == 1
        assert [(c["name"], c["ok"], c["enforced"]) for c in document["checks"]] == [
            ("monitor", True, True),
            ("queues", True, True),
            ("instances", True, True),
        ]
        by_name = {q["name"]: q for q in document["queues"]}
        assert {
            key: by_name["waiting"][key] for key in ("queued", "ready", "dead_letter", "dead_letter_depth")
        } == {
            "queued": 2,
            "ready": 2,
            "dead_letter": "dlq",
            "dead_letter_depth": None,
        }
        assert by_name["dlq"]["dead_letter_depth"] == 0 and by_name["waiting"]["oldest_ready_seconds"] > 0
        assert (
            by_name["waiting"]["over_warning_size"] is False and by_name["waiting"]["warning_size"] == 10000
        )
        roles = {i["pid"]: (i["role"], i["state"], i["queues"]) for i in document["instances"]}
        assert roles == {
            worker.pid: ("worker", "live", [{"queue": "echo", "concurrency": 4, "active": 0}]),
            monitor.pid: ("monitor", "live", []),
        }
        monitor_id = next(i["id"] for i in document["instances"] if i["pid"] == monitor.pid)
        assert document["monitor"]["supervisors"] == [monitor_id]
        assert document["monitor"]["interval_seconds"] == 60
        assert document["warnings"] == {"persisted": False, "window_seconds": 3600, "items": []}
        # The document has the keys docs/monitoring.md documents, at every level it shows.
        documented = documented_json()
        assert list(document) == list(documented)
        assert list(by_name["waiting"]) == list(documented["queues"][0])
        assert list(document["instances"][0]) == list(documented["instances"][0])
        assert list(document["monitor"]) == list(documented["monitor"])
        assert list(document["checks"][0]) == list(documented["checks"][0])

        # --queue narrows the queues, and the instances to the monitors and that queue's workers.
        code, narrowed = status_json("--queue", "waiting")
        assert code == 0
        assert [q["name"] for q in narrowed["queues"]] == ["waiting"]
        assert [i["pid"] for i in narrowed["instances"]] == [monitor.pid]

        # --host asks a liveness probe's question: is a process of this host live?
        assert status("--checks", "instances", "--host", HOST).returncode == 0
        elsewhere = status("--checks", "instances", "--host", "nowhere.invalid")
        assert elsewhere.returncode == 1
        assert elsewhere.stderr.strip().splitlines()[-1] == (
            "CommandError: 1 check(s) failed: instances: no live instance on host nowhere.invalid"
        )
    finally:
        stop(worker)
        stop(monitor)


def test_a_monitor_that_stops_passing_or_stops_fails_the_monitor_check_a_worker_probe_ignores():
    boss.create_queue("echo")
    worker = start_worker("--queue", "echo", **FAST_BEATS)
    monitor = start_monitor(**FAST_BEATS)
    try:
        wait_for(lambda: {worker.pid, monitor.pid} <= set(live_instances()), timeout=60)
        wait_for(lambda: boss.get_queue("echo").monitor_on is not None, timeout=60)
        assert status().returncode == 0

        # A monitor that still beats but has not counted a queue for ten minutes (three passes
        # of 60 seconds missed): its pass loop is stuck.
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {SCHEMA}.queue SET monitor_on = monitor_on - interval '10 minutes', "
                "created_on = created_on - interval '10 minutes'"
            )
        stuck = status()
        assert stuck.returncode == 1
        assert re.fullmatch(
            r"monitor\s+FAIL\s+no monitor pass for 10m \d\ds \(over 3 monitor intervals of 60s\)",
            check_line(stuck.stdout, "monitor"),
        )

        stop(monitor)
        stopped = status()
        assert stopped.returncode == 1
        assert "no live monitor in the instance registry" in check_line(stopped.stdout, "monitor")
        assert (
            stopped.stderr.strip()
            .splitlines()[-1]
            .startswith("CommandError: 1 check(s) failed: monitor: no live monitor in the instance registry")
        )
        assert "Traceback" not in stopped.stderr
        code, document = status_json()
        assert code == 1 and document["ok"] is False
        assert {c["name"]: c["ok"] for c in document["checks"]} == {
            "monitor": False,
            "queues": True,
            "instances": True,
        }
        assert document["monitor"]["supervisors"] == []

        # A worker's liveness probe chooses its checks: the monitor is still judged and shown,
        # but does not fail it.
        probe = status("--checks", "instances", "--host", HOST)
        assert probe.returncode == 0, probe.stderr
        assert check_line(probe.stdout, "monitor").endswith("(not enforced)")
        assert status("--checks", "none").returncode == 0
    finally:
        stop(worker)
        if monitor.returncode is None:
            stop(monitor)


def test_a_queue_over_its_warning_size_fails_the_queues_check_and_its_warning_is_listed():
    boss.create_queue("big", warning_queue_size=2)
    boss.create_queue("small", warning_queue_size=5)
    for n in range(3):
        boss.send("big", {"n": n})
        boss.send("small", {"n": n})
    persist = {"PGBOSS_TEST_PERSIST_WARNINGS": "1"}
    counted = run_monitor("--once", **persist)
    assert counted.returncode == 0, counted.stderr

    result = status("--checks", "queues", **persist)
    assert result.returncode == 1
    assert (
        check_line(result.stdout, "queues") == "queues     FAIL  big has 3 queued, over its warning size of 2"
    )
    queues = {row["QUEUE"]: row for row in section(result.stdout, "Queues")}
    assert (queues["big"]["WARN OVER"], queues["small"]["WARN OVER"]) == ("2 !", "5")
    assert re.search(
        r'^  \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC  queue_backlog: Warning: large queue backlog: queue "big" has 3 jobs',
        result.stdout,
        re.MULTILINE,
    )
    assert result.stderr.strip().splitlines()[-1] == (
        "CommandError: 1 check(s) failed: queues: big has 3 queued, over its warning size of 2"
    )

    code, document = status_json("--checks", "queues", **persist)
    assert code == 1
    assert {q["name"]: q["over_warning_size"] for q in document["queues"]} == {"big": True, "small": False}
    assert document["warnings"]["persisted"] is True
    assert [(w["type"], w["data"]["name"]) for w in document["warnings"]["items"]] == [
        ("queue_backlog", "big")
    ]
    # The other queue's report leaves big's warning out.
    code, small = status_json("--checks", "queues", "--queue", "small", **persist)
    assert code == 0 and small["warnings"]["items"] == []


def test_a_crashed_worker_is_a_stale_instance_until_a_later_life_of_it_is_live():
    boss.create_queue("echo")
    crashed = start_worker("--queue", "echo", **FAST_BEATS)
    wait_for(lambda: crashed.pid in live_instances(), timeout=60)
    crashed.kill()
    crashed.communicate(timeout=30)
    # Three missed beats of a second.
    wait_for(lambda: not any(i.live for i in boss.get_instances()), timeout=30)

    result = status("--checks", "instances")
    assert result.returncode == 1
    [row] = section(result.stdout, "Instances")
    assert (row["PID"], row["STATE"]) == (str(crashed.pid), "stale")
    assert re.fullmatch(
        rf"instances\s+FAIL\s+worker \(pid {crashed.pid} on {re.escape(HOST)}\) is stale: last heartbeat \d+s ago, "
        r"every 1s",
        check_line(result.stdout, "instances"),
    )
    code, document = status_json("--checks", "instances")
    assert code == 1 and [i["state"] for i in document["instances"]] == ["stale"]

    # Its restart (same host, unnamed, same queues) replaces it: the check passes again.
    restarted = start_worker("--queue", "echo", **FAST_BEATS)
    try:
        wait_for(lambda: restarted.pid in live_instances(), timeout=60)
        again = status("--checks", "instances")
        assert again.returncode == 0, again.stderr
        assert "Instances (1 stopped or replaced not shown)" in again.stdout
        assert [row["PID"] for row in section(again.stdout, "Instances")] == [str(restarted.pid)]
    finally:
        stop(restarted)


def test_an_unmigrated_database_says_so_in_one_line():
    result = status(PGBOSS_SCHEMA="never_migrated")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [f"SchemaNotInstalled: {NOT_INSTALLED}"]


def test_an_unknown_queue_or_check_says_so_in_one_line():
    boss.create_queue("echo")
    unknown = status("--queue", "echo", "--queue", "nope")
    assert (unknown.returncode, unknown.stdout) == (1, "")
    assert unknown.stderr.strip().splitlines() == ["CommandError: no queue named 'nope'"]
    bad = status("--checks", "monitor,disk")
    assert bad.returncode == 1
    assert bad.stderr.strip().splitlines() == [
        "CommandError: --checks: disk is not a check; the checks are monitor, queues, instances, or none"
    ]


def test_pg_boss_internal_queues_are_judged_but_listed_only_on_request():
    boss.create_queue("__pgboss__send-it", warning_queue_size=1)
    boss.create_queue("work")
    boss.send("__pgboss__send-it", {"n": 1})
    boss.send("__pgboss__send-it", {"n": 2})
    assert run_monitor("--once").returncode == 0

    result = status("--checks", "queues")
    assert result.returncode == 1
    assert "Queues (1 of pg-boss's internal queues not shown: --internal)" in result.stdout
    assert [row["QUEUE"] for row in section(result.stdout, "Queues")] == ["work"]
    assert check_line(result.stdout, "queues").endswith(
        "__pgboss__send-it has 2 queued, over its warning size of 1"
    )
    listed = status("--checks", "queues", "--internal")
    assert [row["QUEUE"] for row in section(listed.stdout, "Queues")] == ["__pgboss__send-it", "work"]
    code, named = status_json("--checks", "none", "--queue", "__pgboss__send-it")
    assert code == 0 and [q["name"] for q in named["queues"]] == ["__pgboss__send-it"]
    assert named["internal_queues_not_shown"] == 0


def test_a_database_it_cannot_reach_says_so_in_one_line():
    result = status(DATABASE_URL="postgres://postgres@127.0.0.1:1/pgboss")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("CommandError: database 'default': ") and "127.0.0.1" in line
