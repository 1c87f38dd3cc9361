"""SQL that reads what a database offers Citus's way: the extension, the node's role, the workers,
and where each of the schema's tables is placed.

Read by ``schema/backend.py`` for the PGBOSS["BACKEND"] checks, and by ``schema/state.py`` for the
citus-distributed variant's placement (the doctor, the system check, migration 0008). Each reads
only catalogs and Citus's metadata; all but the first only where the first found the extension
(its functions and metadata tables exist only then).
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


def placement() -> str:
    """Every table of the schema Citus knows: name, kind, distribution column, colocation group.

    Parameter: nspname (the schema's name); only where the extension is installed. The kind is
    ``distributed`` (hash-distributed), ``reference`` (a copy on every node) or ``local`` (a
    Citus-managed table on the coordinator); a table of the schema missing here is a plain
    PostgreSQL table on the coordinator.
    """
    return """
    SELECT c.relname,
           CASE WHEN p.partmethod = 'h' THEN 'distributed'
                WHEN p.partmethod = 'n' AND p.repmodel = 't' THEN 'reference'
                ELSE 'local' END,
           CASE WHEN p.partmethod = 'h' THEN column_to_column_name(p.logicalrelid, p.partkey) END,
           p.colocationid
    FROM pg_catalog.pg_dist_partition p
    JOIN pg_class c ON c.oid = p.logicalrelid
    JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = %(nspname)s
    ORDER BY c.relname
    """
