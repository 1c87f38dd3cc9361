"""Settings of the example project: a small shop whose background work runs on django_pgboss.

DATABASE_URL selects the database (django-environ); without it the project starts its own
embedded PostgreSQL (see embedded_pg.py). PGBOSS_SCHEMA moves pg-boss's tables to another schema.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from urllib.parse import unquote

import django
import environ

BASE_DIR = Path(__file__).resolve().parent
env = environ.Env(DEBUG=(bool, True))

SECRET_KEY = env.str("SECRET_KEY", default="example-project-not-for-production")
DEBUG = env("DEBUG")
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1"])

if "DATABASE_URL" in env:
    DATABASES = {"default": env.db("DATABASE_URL")}
    # A server on a Unix socket is written with its folder percent-encoded as the host
    # (postgresql://postgres@%2Fpath%2Fto%2Fsocket:5432/postgres, as libpq reads it, and as the
    # demo prints it); django-environ leaves it encoded.
    if DATABASES["default"].get("HOST", "").lower().startswith("%2f"):
        DATABASES["default"]["HOST"] = unquote(DATABASES["default"]["HOST"])
else:
    from example_project.embedded_pg import database_settings

    DATABASES = {"default": database_settings()}

PGBOSS = {"SCHEMA": env.str("PGBOSS_SCHEMA", default="pgboss")}
# The database engine (scripts/test.sh sets it to "citus" when the suite runs on the Citus cluster).
if "PGBOSS_BACKEND" in env:
    PGBOSS["BACKEND"] = env.str("PGBOSS_BACKEND")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    # Django 5.2 has no django.tasks: the django-tasks backport stands in for it.
    *(["django_tasks"] if importlib.util.find_spec("django.tasks") is None else []),
    "django_pgboss",
    "example_project.shop",
]

# The warehouse task (shop/tasks.py) runs through Django's task framework on pg-boss.
TASKS = {
    "default": {
        "BACKEND": "django_pgboss.tasks.backend.PgBossBackend",
        "QUEUES": ["warehouse"],
        "OPTIONS": {"WORKER": {"concurrency": 2}},
    }
}

# Order confirmations stay in memory (django.core.mail.outbox); set EMAIL_BACKEND to
# django.core.mail.backends.console.EmailBackend to see them printed. Django 6.1 configures mail
# through MAILERS (its EMAIL_BACKEND setting is deprecated).
_email_backend = env.str("EMAIL_BACKEND", default="django.core.mail.backends.locmem.EmailBackend")
if django.VERSION >= (6, 1):
    MAILERS = {"default": {"BACKEND": _email_backend}}
else:
    EMAIL_BACKEND = _email_backend
DEFAULT_FROM_EMAIL = "shop@example.com"

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "example_project.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
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
WSGI_APPLICATION = "example_project.wsgi.application"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
