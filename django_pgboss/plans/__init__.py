"""The raw-SQL layer: one pure function per statement, each returning SQL text.

Every value is a bound parameter (``%s``); the only text a function pastes in is an identifier that
has passed through :mod:`django_pgboss.identifiers` (the quoted schema, a job table). Each module
holds one concern: queues, jobs, ... . The functions know nothing of connections or Django.
The hot ones are memoised (functools.lru_cache): being pure, the same arguments give the same
text, and building it is then free on the paths that run per job.
"""
