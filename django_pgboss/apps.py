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
        # Registers the system checks, lets migration 0001 write on migrate's output and migrate
        # refuse a database that does not fit PGBOSS["BACKEND"]; nothing else runs at start-up.
        from django.db.models.signals import pre_migrate

        from django_pgboss import checks  # noqa: F401
        from django_pgboss.operations import refuse_unfit_backend, remember_migrate_output

        pre_migrate.connect(remember_migrate_output, dispatch_uid="django_pgboss.migrate_output")
        # Sent once per app: connected for this one, so the database is read once per migrate.
        pre_migrate.connect(refuse_unfit_backend, sender=self, dispatch_uid="django_pgboss.unfit_backend")
