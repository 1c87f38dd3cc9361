"""db/cursors.thread_connection(): Django's connection of the calling thread, read the short way."""

from __future__ import annotations

import asyncio
import threading

import pytest
from django.db import connections

from django_pgboss.db.cursors import thread_connection


@pytest.fixture
def handler_lookups(monkeypatch):
    """The aliases Django's connection handler is asked for (connections[alias]) during a test."""
    asked: list[str] = []
    handler = type(connections)
    lookup = handler.__getitem__

    def counted(self, alias):
        asked.append(alias)
        return lookup(self, alias)

    monkeypatch.setattr(handler, "__getitem__", counted)
    return asked


def test_a_thread_with_a_connection_finds_it_without_asking_the_handler(handler_lookups):
    main = connections["default"]
    handler_lookups.clear()
    assert thread_connection("default") is main
    # The short way is taken: were asgiref to store connections otherwise, every statement would
    # still run, a microsecond slower, and this would say so.
    assert handler_lookups == []


def test_a_threads_first_lookup_asks_the_handler_which_makes_its_own_connection(handler_lookups):
    main = connections["default"]
    handler_lookups.clear()
    found = {}

    def on_another_thread():
        found["first"] = thread_connection("default")
        found["second"] = thread_connection("default")
        found["asked"] = list(handler_lookups)

    thread = threading.Thread(target=on_another_thread)
    thread.start()
    thread.join()
    assert found["first"] is found["second"]
    assert found["first"] is not main
    assert found["asked"] == ["default"]


def test_a_connection_put_in_the_handlers_place_is_the_one_found():
    main = connections["default"]
    replacement = connections.create_connection("default")
    connections["default"] = replacement
    try:
        assert thread_connection("default") is replacement
    finally:
        connections["default"] = main
    assert thread_connection("default") is main


def test_on_a_running_event_loop_each_context_gets_the_handlers_answer(handler_lookups, monkeypatch):
    # Django's own switch lets a connection be used on a loop; asgiref then keeps one per context.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    main = connections["default"]
    handler_lookups.clear()

    async def on_the_loop():
        return thread_connection("default"), connections["default"]

    found, djangos = asyncio.run(on_the_loop())
    assert found is djangos
    assert found is not main
    assert handler_lookups == ["default", "default"]
