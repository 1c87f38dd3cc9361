"""The no-op handler bench/peers.py drains with ``manage.py pgboss_work`` (see jobs.py)."""
