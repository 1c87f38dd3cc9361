"""The admin: model admins (model_admins.py; the monitor's records in monitor_admins.py, the
instance registry in instance_admin.py), the extra pages they link to (views/, one module per page
family) and the SVG throughput charts (charts.py). Django's admin autodiscovery imports this
package, which registers the model admins."""

from __future__ import annotations

from django_pgboss.admin import (  # noqa: F401  (register the ModelAdmins)
    instance_admin,
    model_admins,
    monitor_admins,
    schedule_admin,
)
