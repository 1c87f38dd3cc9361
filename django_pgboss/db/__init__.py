"""The database layer: Django connection cursors for our statements and the one quoting choke point
for identifiers (schema and job-table names)."""
