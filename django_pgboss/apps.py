"""The pgboss app."""

from __future__ import annotations

from django.apps import AppConfig


class PgBossConfig(AppConfig):
    """django_pgboss, installed under the app label ``pgboss``."""

    name = "django_pgboss"
    label = "pgboss"
    verbose_name = "pg-boss"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Registers the system checks; nothing else runs at start-up.
        from django_pgboss import checks  # noqa: F401
