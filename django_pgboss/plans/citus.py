"""SQL that reads what a database offers Citus's way: the extension, the node's role, the workers.

Read by ``schema/backend.py`` for the PGBOSS["BACKEND"] checks. Each reads only catalogs and
Citus's metadata; the second only where the first found the extension (its function and
pg_dist_node exist only then).
"""

from __future__ import annotations


def citus_extension() -> str:
    """The citus extension's version in this database, or no row. No parameters."""
    return "SELECT extversion FROM pg_extension WHERE extname = 'citus'"


def citus_nodes() -> str:
    """Whether this node is a coordinator, and how many active primary workers it knows. No
    parameters; only where the extension is installed.

    citus_is_coordinator() is true on the node of group 0 once any node is registered; a worker
    (whose group the metadata sync set) and a Citus server nobody registered are not one. The
    workers are the primaries outside group 0, the coordinator's.
    """
    return """
    SELECT citus_is_coordinator(),
      (SELECT count(*) FROM pg_dist_node WHERE groupid <> 0 AND noderole = 'primary' AND isactive)
    """
