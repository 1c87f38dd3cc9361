"""pg-boss's internal queues in the admin: left out of the lists an operator picks from, unless asked.

pg-boss keeps queues of its own beside the project's, named with the ``__pgboss__`` prefix: the
timekeeper's ``__pgboss__send-it``, where each due cron occurrence waits under its throttle slot
until it is sent to its schedule's queue. No job of the project belongs there, and listed among
the project's queues one reads as a queue of the project. So the queue list, the redrive destinations
and the schedule targets leave them out; each page says so and shows them on request (the queue
list's "pg-boss's internal queues" filter, the redrive page's checkbox, ``?internal=1`` on the
schedule form).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from django_pgboss.constants import INTERNAL_QUEUE_PREFIX as INTERNAL_PREFIX
from django_pgboss.models import Queue

#: The query-string (or form) parameter that shows them: "1".
PARAMETER = "internal"


def is_internal(name: str) -> bool:
    """Whether ``name`` is one of pg-boss's own queues."""
    return name.startswith(INTERNAL_PREFIX)


def asked_for(values: Mapping[str, Any]) -> bool:
    """Whether the request's query string (or form) asks for the internal queues too."""
    return values.get(PARAMETER) == "1"


def queue_names(*, internal: bool, keep: Iterable[str | None] = ()) -> list[str]:
    """The queues to offer, by name: the project's, pg-boss's own too with ``internal``, and
    whatever of ``keep`` exists (the value a page already holds, which it must still show)."""
    names = list(Queue.objects.order_by("name").values_list("name", flat=True))
    kept = {name for name in keep if name}
    return [name for name in names if internal or not is_internal(name) or name in kept]


class InternalQueueFilter(admin.SimpleListFilter):
    """The queue list's filter: pg-boss's internal queues hidden (the default), shown, or alone."""

    title = "pg-boss's internal queues"
    parameter_name = PARAMETER

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("1", "Shown"), ("only", "Only these")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value() == "1":
            return queryset
        if self.value() == "only":
            return queryset.filter(name__startswith=INTERNAL_PREFIX)
        return queryset.exclude(name__startswith=INTERNAL_PREFIX)

    def choices(self, changelist: Any) -> Any:
        # The default is not "All", as a SimpleListFilter's is: it hides them.
        yield {
            "selected": self.value() is None,
            "query_string": changelist.get_query_string(remove=[self.parameter_name]),
            "display": "Hidden",
        }
        for lookup, title in self.lookup_choices:
            yield {
                "selected": self.value() == lookup,
                "query_string": changelist.get_query_string({self.parameter_name: lookup}),
                "display": title,
            }
