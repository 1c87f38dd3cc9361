"""Settings for django_pgboss's own test suite.

DATABASE_URL points at the throwaway cluster scripts/testdb.sh starts; PGBOSS_SCHEMA picks the
schema pg-boss's tables live in, so the suite can prove nothing hard-codes the default.
"""

from __future__ import annotations

import importlib.util

import environ

env = environ.Env()

SECRET_KEY = "django-pgboss-tests"
DEBUG = False
USE_TZ = True
TIME_ZONE = "UTC"

DATABASES = {"default": env.db("DATABASE_URL", default="postgres://postgres@127.0.0.1:25433/pgboss")}
# A second alias on the same test database, for a tasks backend whose OPTIONS name another alias.
# A worker the mixed-fleet test starts as a process keeps its connections (its transactional
# handlers would otherwise open one per job).
if "PGBOSS_TEST_CONN_MAX_AGE" in env:
    DATABASES["default"]["CONN_MAX_AGE"] = env.int("PGBOSS_TEST_CONN_MAX_AGE")
DATABASES["tasks"] = {**DATABASES["default"], "TEST": {"MIRROR": "default"}}

PGBOSS = {"SCHEMA": env.str("PGBOSS_SCHEMA", default="pgboss")}
# The database engine (scripts/test.sh sets it to "citus" when the suite runs on the Citus cluster).
if "PGBOSS_BACKEND" in env:
    PGBOSS["BACKEND"] = env.str("PGBOSS_BACKEND")
# A monitor the flow tests start as a process resolves flows at this interval, not every 5 s.
if "PGBOSS_TEST_FLOW_INTERVAL" in env:
    PGBOSS["FLOW_INTERVAL_SECONDS"] = env.int("PGBOSS_TEST_FLOW_INTERVAL")
# A worker or monitor the instance tests start as a process registers under this name and beats at
# this interval, not every 30 s.
if "PGBOSS_TEST_INSTANCE_NAME" in env:
    PGBOSS["INSTANCE_NAME"] = env.str("PGBOSS_TEST_INSTANCE_NAME")
if "PGBOSS_TEST_INSTANCE_HEARTBEAT" in env:
    PGBOSS["INSTANCE_HEARTBEAT_SECONDS"] = env.int("PGBOSS_TEST_INSTANCE_HEARTBEAT")
# A monitor the status tests start as a process keeps its warnings, and pgboss_status lists them.
if "PGBOSS_TEST_PERSIST_WARNINGS" in env:
    PGBOSS["PERSIST_WARNINGS"] = env.bool("PGBOSS_TEST_PERSIST_WARNINGS")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_pgboss",
    # Django 5.2 has no django.tasks: the backport stands in for it, as a project would install it.
    *(["django_tasks"] if importlib.util.find_spec("django.tasks") is None else []),
    "tests.workapp",
    # Extra apps for a subprocess test to add (e.g. one whose jobs.py cannot be imported).
    *env.list("PGBOSS_TEST_EXTRA_APPS", default=[]),
]

# Django's documented speed-up for tests: a fast password hasher. pytest-django's admin_user (behind
# admin_client) hashes a password for every admin test, and the default PBKDF2 takes a good part of
# a second of CPU each time; no test is about the hash.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]

# The tasks backend under test (tests/test_tasks_backend.py); its tasks are in tests/taskapp/tasks.py.
TASKS = {
    "default": {
        "BACKEND": "django_pgboss.tasks_backend.PgBossBackend",
        "QUEUES": ["default", "tasks-other"],
        "OPTIONS": {
            "QUEUE_OPTIONS": {"retry_limit": 2},
            "WORKER": {"concurrency": 2, "polling_interval_seconds": 0.2},
        },
    }
}

ROOT_URLCONF = "tests.urls"
STATIC_URL = "/static/"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
