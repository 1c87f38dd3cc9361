"""SQL for publish and subscribe: queues subscribe to an event name, and publish sends one job to each."""

from __future__ import annotations


def subscribe(schema: str) -> str:
    """Subscribe a queue to an event (again: only refreshes updated_on). Parameters: event, name.

    The refreshed updated_on is the one the insert would have written (EXCLUDED), the same
    job_now() of the statement: Citus refuses a function call in DO UPDATE SET on a reference
    table, and this spelling runs on both."""
    return f"""
    INSERT INTO {schema}.subscription (event, name, created_on, updated_on)
    VALUES (%(event)s, %(name)s, {schema}.job_now(), {schema}.job_now())
    ON CONFLICT (event, name) DO UPDATE SET updated_on = EXCLUDED.updated_on
    """


def unsubscribe(schema: str) -> str:
    """Remove a subscription. Parameters: event, name."""
    return f"DELETE FROM {schema}.subscription WHERE event = %(event)s AND name = %(name)s"


def subscribed_queues(schema: str) -> str:
    """The queues subscribed to an event, in name order. Parameter: event."""
    return f"SELECT name FROM {schema}.subscription WHERE event = %(event)s ORDER BY name"
