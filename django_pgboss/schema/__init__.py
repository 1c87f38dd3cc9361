"""The pg-boss schema as a whole: its catalog, the frozen manifest of version 43, drift, and state.

Nothing here runs DDL. :mod:`.catalog` reads what a schema holds, :mod:`.manifest` says what
schema 43 must hold, :mod:`.drift` compares the two, :mod:`.state` tells an absent, older, newer,
half-installed or drifted schema apart for the doctor, the system checks and ``migrate pgboss``.
"""
