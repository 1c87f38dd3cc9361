"""docs/async.md's examples, run as written: the async view that enqueues inside its transaction,
the async handler calling an HTTP client (against a local HTTP server), and the async task."""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
from django.db import IntegrityError
from django.test import AsyncRequestFactory

from django_pgboss import boss
from django_pgboss.tasks.compat import SOURCE, TaskResultStatus
from django_pgboss.worker import Worker, registry
from tests.helpers import job_row, rows
from tests.test_docs import marked_blocks, run_block
from tests.test_tasks_backend import work_tasks

PAGE = "async.md"


def blocks() -> list[str]:
    return marked_blocks(PAGE, 3)


@pytest.fixture
def restore_registry():
    saved = dict(registry._registry)
    yield
    registry._registry.clear()
    registry._registry.update(saved)


@pytest.mark.django_db
def test_the_async_view_commits_the_user_and_its_job_together():
    boss.create_queue("welcome")
    boss.create_queue("audit")
    views = run_block(blocks()[0], PAGE)
    request = AsyncRequestFactory().post("/sign-up", {"username": "ada"})
    response = async_to_sync(views["sign_up"])(request)
    body = json.loads(response.content)
    user = User.objects.get(username="ada")
    assert body["user"] == user.pk
    [welcome] = boss.find_jobs("welcome")
    assert welcome.data == {"user_id": user.pk}
    assert boss.get_job_by_id("audit", body["audit_job"]).data == {"event": "sign_up", "user_id": user.pk}

    # The same username again: the user's insert fails, and the welcome job goes with it.
    with pytest.raises(IntegrityError):
        async_to_sync(views["sign_up"])(AsyncRequestFactory().post("/sign-up", {"username": "ada"}))
    assert len(boss.find_jobs("welcome")) == 1


class _Recorder(BaseHTTPRequestHandler):
    received: list[dict] = []

    def do_POST(self):
        length = int(self.headers["Content-Length"])
        body = json.loads(self.rfile.read(length))
        type(self).received.append(body)
        status = 404 if self.path == "/missing" else 200
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def http_server():
    _Recorder.received = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.django_db(transaction=True)
def test_the_async_handler_posts_each_webhook_with_an_http_client(http_server, restore_registry):
    pytest.importorskip("httpx")
    boss.create_queue("webhooks", retry_limit=0)
    run_block(blocks()[1], PAGE)
    ids = boss.insert(
        "webhooks",
        [{"data": {"url": f"{http_server}/hook", "payload": {"n": n}}} for n in range(5)],
        return_ids=True,
    )
    missing = boss.send("webhooks", {"url": f"{http_server}/missing", "payload": {"n": 99}})
    Worker([registry.registrations()["webhooks"]], burst=True).run()
    assert sorted(body["n"] for body in _Recorder.received) == [0, 1, 2, 3, 4, 99]
    for job_id in ids:
        assert job_row(job_id, "state", "output") == ("completed", {"status": 200})
    state, output = job_row(missing, "state", "output")
    assert state == "failed" and output["name"] == "HTTPStatusError"


@pytest.mark.django_db(transaction=True)
def test_the_async_task_is_enqueued_from_async_code_run_and_read_back(tmp_path, monkeypatch):
    block = blocks()[2]
    assert block.startswith("# shop/tasks.py\n")
    if SOURCE != "django.tasks":
        block = block.replace("from django.tasks import task", "from django_tasks import task")
    (tmp_path / "docshop").mkdir()
    (tmp_path / "docshop" / "__init__.py").write_text("")
    (tmp_path / "docshop" / "tasks.py").write_text(block)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        from docshop import tasks as doc_tasks

        User.objects.create(username="member-1")
        User.objects.create(username="member-2")
        result_id = async_to_sync(doc_tasks.start_count)("member-")
        assert rows("SELECT data->>'task' FROM {s}.job WHERE id = %s", [result_id]) == [
            ("docshop.tasks.count_members",)
        ]
        assert async_to_sync(doc_tasks.read_count)(result_id) == (TaskResultStatus.READY, None)
        work_tasks()
        assert async_to_sync(doc_tasks.read_count)(result_id) == (TaskResultStatus.SUCCESSFUL, 2)
    finally:
        for module in ("docshop.tasks", "docshop"):
            sys.modules.pop(module, None)
