"""SQL that reads a Citus cluster's metadata, for the citus-distributed schema variant.

The doctor, the system check and migration 0008 read where each pg-boss table lives (distributed,
reference, or on the coordinator) and whether the cluster can hold a distributed job table at all.
Each statement reads only the catalog and Citus's metadata tables; ``placement()`` runs only once
``extension_version()`` has said the extension exists, since its tables come with it.
"""

from __future__ import annotations


def extension_version() -> str:
    """The installed citus extension's version: one row, or none on plain PostgreSQL."""
    return "SELECT extversion FROM pg_extension WHERE extname = 'citus'"


def active_workers() -> str:
    """How many active primary worker nodes the coordinator has registered: one row.

    Group 0 is the coordinator itself, which Citus lists too once citus_set_coordinator_host ran.
    """
    return (
        "SELECT count(*) FROM pg_catalog.pg_dist_node "
        "WHERE isactive AND noderole = 'primary' AND groupid <> 0"
    )


def placement() -> str:
    """Every table of the schema Citus knows: name, kind, distribution column, colocation group.

    Parameter: nspname (the schema's name). The kind is Citus's partmethod: ``h`` hash-distributed,
    ``n`` a reference table (or a Citus-managed local table, whose replication model ``s`` tells it
    apart); a table of the schema missing here is a plain PostgreSQL table on the coordinator.
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
