"""Settings for the fast tests of tests/unit: no database at all.

Run them with ``pytest tests/unit --ds=tests.unit.settings``: the worker runs over the in-memory
store of tests/unit/fakes.py, and any query would fail (Django's dummy backend), which is the point.
"""

from __future__ import annotations

SECRET_KEY = "django-pgboss-unit-tests"
USE_TZ = True
TIME_ZONE = "UTC"
DATABASES: dict[str, dict[str, str]] = {}
INSTALLED_APPS = ["django_pgboss"]
PGBOSS: dict[str, object] = {}
