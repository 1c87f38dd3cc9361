#!/usr/bin/env bash
# A PostgreSQL for the benchmarks, with DURABLE settings: bash bench/cluster.sh start|stop|destroy|url
#
# It is scripts/testdb.sh (Debian's binaries, runuser as root, 127.0.0.1 only, reused when up) on
# its own port (PGBOSS_BENCH_PORT, default 55450), data folder and database, with fsync,
# synchronous_commit and full_page_writes on: a benchmark on a cluster that skips the WAL flush
# would measure a commit path no production queue has. It never touches the test cluster (25433).
set -euo pipefail
port=${PGBOSS_BENCH_PORT:-55450}
export PGBOSS_TEST_PORT=$port
export PGBOSS_TEST_PGDATA=${PGBOSS_BENCH_PGDATA:-${TMPDIR:-/tmp}/django-pgboss-bench-$port}
export PGBOSS_TEST_DBNAME=${PGBOSS_BENCH_DBNAME:-pgboss_bench}
export PGBOSS_TEST_DURABLE=1
export PGBOSS_TEST_LABEL="bench cluster"
exec bash "$(dirname "$0")/../scripts/testdb.sh" "$@"
