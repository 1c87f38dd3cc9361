"""The admin: model admins (model_admins.py), the extra pages they link to (views/, one module per
page family) and the SVG throughput charts (charts.py). Django's admin autodiscovery imports this package, which registers
the model admins."""

from __future__ import annotations

from django_pgboss.admin import instance_admin, model_admins, schedule_admin  # noqa: F401  (register the ModelAdmins)
