"""Minimal Django settings for the benchmarks in bench/ (enqueue.py, profile_send.py, drain.py).

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
PGBOSS = {"SCHEMA": "pgboss"}

INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "django_pgboss",
]

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
