"""Minimal Django settings for bench/enqueue.py and bench/profile_send.py.

DATABASE_URL points at the durable cluster bench/cluster.sh starts (its default here), never at
the test cluster. Only what migrate and Boss need is installed: django_pgboss, plus auth and
contenttypes because migrate creates their permission rows when it migrates django_pgboss.
"""

from __future__ import annotations

import environ

env = environ.Env()

SECRET_KEY = "django-pgboss-bench"
DEBUG = False  # DEBUG=True would make Django record every query, which the benchmark would then pay for.
USE_TZ = True
TIME_ZONE = "UTC"

DATABASES = {"default": env.db("DATABASE_URL", default="postgres://postgres@127.0.0.1:55450/pgboss_bench")}
# The same database through server-side binding with psycopg's automatic prepared statements (Django
# defaults to client-side binding and no prepared statements). bench/profile_send.py sends through
# it to show what preparing Boss's insert statement is worth without changing django_pgboss.
DATABASES["prepared"] = {
    **DATABASES["default"],
    "OPTIONS": {
        **DATABASES["default"].get("OPTIONS", {}),
        "server_side_binding": True,
        "prepare_threshold": 5,
    },
}

PGBOSS = {"SCHEMA": "pgboss"}

INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "django_pgboss",
]

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
