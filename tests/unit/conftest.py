"""tests/unit runs without PostgreSQL: ``pytest tests/unit`` needs no database and no migrations.

pytest-django sets the test database up only for a test that asks for it (the ``django_db`` mark,
the ``db`` or ``transactional_db`` fixtures), and refuses database access to every other test.
Here even asking fails, with where such a test belongs, so that the lint leg, which runs these
before any PostgreSQL is started, never waits for a database that is not there.
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def django_db_setup():
    pytest.fail(
        "a test in tests/unit asked for the database: tests/unit runs without PostgreSQL, so the "
        "test belongs in tests/ beside the feature it covers",
        pytrace=False,
    )
