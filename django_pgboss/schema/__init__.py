"""The pg-boss schema as a whole: its catalog, the frozen manifests of versions 43 and 46, drift, and state.

Nothing here runs DDL. :mod:`.catalog` reads what a schema holds, :mod:`.manifest` says what
each schema version must hold, :mod:`.drift` compares the two, :mod:`.state` tells an absent, older, newer,
half-installed or drifted schema apart for the doctor, the system checks and ``migrate pgboss``.
"""
