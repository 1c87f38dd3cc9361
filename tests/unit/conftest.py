"""tests/unit runs without PostgreSQL: ``pytest tests/unit`` needs no database and no migrations.

pytest-django sets the test database up only for a test that asks for it (the ``django_db`` mark,
the ``db`` or ``transactional_db`` fixtures), and refuses database access to every other test.
Here even asking fails, with where such a test belongs, so that the lint leg, which runs these
before any PostgreSQL is started, never waits for a database that is not there.

The worker's own logic is tested here over an in-memory store and a clock the test moves
(tests/unit/fakes.py): the fixtures below.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from django_pgboss.worker import Worker
from django_pgboss.worker.registry import Registration
from tests.unit.fakes import ManualClock, MemoryStore


@pytest.fixture(scope="session")
def django_db_setup():
    pytest.fail(
        "a test in tests/unit asked for the database: tests/unit runs without PostgreSQL, so the "
        "test belongs in tests/ beside the feature it covers",
        pytrace=False,
    )


#: The longest a test waits (real seconds) for the worker to reach a state it must reach.
PATIENCE_SECONDS = 20.0


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def store(clock: ManualClock) -> MemoryStore:
    return MemoryStore(clock)


def eventually(condition: Callable[[], bool], what: str, *, ticking: ManualClock | None = None) -> None:
    """Wait (real time, bounded) until ``condition()`` holds; fail naming ``what`` if it never does.

    With ``ticking`` the clock moves on by 0.05 s at each look, as time would: a thread that began
    a timed wait just after the test advanced the clock reaches its end too.
    """
    done = threading.Event()
    for _ in range(int(PATIENCE_SECONDS / 0.005)):
        if condition():
            return
        if ticking is not None:
            ticking.advance(0.05)
        done.wait(0.005)
    raise AssertionError(f"never happened: {what}")  # pragma: no cover


class Running:
    """A Worker over the memory store, running on a thread of its own."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.result: Any = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="unit-worker", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.result = self.worker.run()
        except BaseException as exc:  # handed to the test by join()
            self.error = exc

    def join(self) -> None:
        self.thread.join(PATIENCE_SECONDS)
        assert not self.thread.is_alive(), "the worker did not end"
        if self.error is not None:
            raise self.error


@pytest.fixture
def start(store: MemoryStore, clock: ManualClock) -> Iterator[Callable[..., Running]]:
    """Start a Worker over ``store`` and ``clock`` for the given registrations; every worker the
    test started is stopped without grace at its end, whatever the test did."""
    running: list[Running] = []

    def starter(*registrations: Registration, **options: Any) -> Running:
        options.setdefault("listen", False)
        worker = Worker(list(registrations), store=store, queue_catalog=store, clock=clock, **options)
        run = Running(worker)
        running.append(run)
        return run

    yield starter
    for run in running:
        run.worker.stop(graceful=False)
        run.thread.join(PATIENCE_SECONDS)
