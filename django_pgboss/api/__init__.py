"""The public API: ``Boss`` (queues, jobs, events, schedules) and the dead-letter operations it
composes. Application code reaches it as ``django_pgboss.boss``."""
