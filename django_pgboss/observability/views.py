"""The metrics view: Prometheus's text exposition of the queue gauges and django_pgboss's process
metrics, for a project's urls.py::

    from django_pgboss.observability.views import metrics

    urlpatterns = [..., path("pgboss/metrics", metrics)]

It answers an active staff user (a browser with an admin session), and, when
PGBOSS["METRICS_TOKEN"] is set, a request whose Authorization header is ``Bearer <token>``, which
is what Prometheus sends with ``authorization: {credentials: <token>}`` in its scrape config.
Anyone else gets 401 (no credentials) or 403 (a signed-in user who is not staff).

The view needs prometheus-client (the ``metrics`` extra). A URLconf that routes it without the
library fails where Django loads the URLconf (``manage.py check``, the first request) with
ImproperlyConfigured naming the extra, instead of an ImportError from inside this module.
"""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from django_pgboss.conf import pgboss_settings
from django_pgboss.observability.auth import bearer_matches
from django_pgboss.observability.extras import METRICS_MISSING, metrics_available

if not metrics_available():
    raise ImproperlyConfigured(METRICS_MISSING)

from prometheus_client import exposition

from django_pgboss.observability.exposition import Exposition
from django_pgboss.observability.metrics import QueueCollector


def _allowed(request: HttpRequest) -> bool | None:
    """True to answer, False to refuse a signed-in user (403), None for no credentials (401)."""
    if bearer_matches(request.headers.get("Authorization"), pgboss_settings.METRICS_TOKEN):
        return True
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        return bool(user.is_active and user.is_staff)
    return None


@never_cache
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    """The exposition, in the format the request's Accept header asks for (text or OpenMetrics)."""
    allowed = _allowed(request)
    if allowed is None:
        response = HttpResponse("authentication required\n", status=401, content_type="text/plain")
        response["WWW-Authenticate"] = 'Bearer realm="pgboss metrics"'
        return response
    if not allowed:
        return HttpResponse("staff only\n", status=403, content_type="text/plain")
    encoder, content_type = exposition.choose_encoder(request.headers.get("Accept", ""))
    body = encoder(Exposition(queues=QueueCollector()))
    return HttpResponse(body, content_type=content_type)
