"""An app whose ready() connects receivers to django_pgboss's signals, for a worker process test:
each signal is written as a line of JSON to the file PGBOSS_TEST_SIGNAL_LOG names."""
