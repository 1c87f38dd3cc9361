"""The raw-SQL layer: one pure function per statement, each returning SQL text.

Every value is a bound parameter, always named (``%(name)s``, bound from a dict); the only text a
function pastes in is an identifier that has passed through :mod:`django_pgboss.db.identifiers`
(the quoted schema, a job table). Named rather than positional: the statements are assembled from
optional parts (filters, the attempt fence, NOTIFY), where positional parameters would have to be
counted in the same order as the text was built, and several statements use one value more than
once (the queue name in a fetch), which a name binds once. Each function's docstring lists its
parameter names. Fragments that several statements share (the advisory-lock id, the job column
lists, start_after and the throttle slot) live in :mod:`django_pgboss.plans.fragments`. Each module
holds one concern: queues, jobs, ... . The functions know nothing of connections or Django.
The hot ones are memoised (functools.lru_cache): being pure, the same arguments give the same
text, and building it is then free on the paths that run per job.
"""
