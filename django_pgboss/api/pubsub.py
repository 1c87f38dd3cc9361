"""Publish and subscribe: publish() sends one job to every queue subscribed to an event name
(pg-boss's pub/sub events; the package's Django signals are django_pgboss.signals).

:class:`EventStore` holds the statements behind Boss's event methods (Boss documents them).
"""

from __future__ import annotations

from typing import Any

from django_pgboss import arguments
from django_pgboss.api.sending import JobSender
from django_pgboss.arguments import queue_name as validate_queue_name
from django_pgboss.db.context import DatabaseContext
from django_pgboss.plans import pubsub as pubsub_plans


class EventStore:
    """Subscribe, unsubscribe and publish over one database context; ``sender`` sends the jobs."""

    def __init__(self, context: DatabaseContext, sender: JobSender) -> None:
        self.context = context
        self.sender = sender

    def subscribe(self, event: str, name: str) -> None:
        """See Boss.subscribe()."""
        arguments.event_name(event)
        validate_queue_name(name)
        self.context.route(name)  # QueueNotFound rather than a foreign-key error
        self.context.execute(
            pubsub_plans.subscribe(self.context.quoted_schema), {"event": event, "name": name}
        )

    def unsubscribe(self, event: str, name: str) -> None:
        """See Boss.unsubscribe()."""
        arguments.event_name(event)
        validate_queue_name(name)
        self.context.execute(
            pubsub_plans.unsubscribe(self.context.quoted_schema), {"event": event, "name": name}
        )

    def publish(self, event: str, data: Any = None, **options: Any) -> dict[str, str | None]:
        """See Boss.publish()."""
        arguments.event_name(event)
        # Checked before anything is read, so bad data is refused even with no subscriber.
        arguments.job_payload(data, options, where="publish()")
        with self.context.atomic():
            rows = self.context.all(
                pubsub_plans.subscribed_queues(self.context.quoted_schema), {"event": event}
            )
            names = [row[0] for row in rows]
            return {name: self.sender.send(name, data, **options) for name in names}
