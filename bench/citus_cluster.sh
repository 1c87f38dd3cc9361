#!/usr/bin/env bash
# The clusters of bench/citus_scale.py, all DURABLE: bash bench/citus_cluster.sh start|stop|destroy
#
#   - one PostgreSQL: bench/cluster.sh on PGBOSS_BENCH_PORT (default 55450), database pgboss_bench;
#   - a Citus coordinator and two workers: scripts/citus.sh on PGBOSS_CITUS_PORT (default 55510)
#     and the next two ports, with two databases, pgboss_bench_local (the "citus" mode: tables on
#     the coordinator) and pgboss_bench_dist (the "citus-distributed" mode).
#
# Every server gets fsync, synchronous_commit and full_page_writes on (PGBOSS_TEST_DURABLE=1, as
# the peers run), and pg_stat_statements preloaded (after citus, which must come first), counting
# top-level statements without utility ones, so that the bench can count the statements a job costs
# on each node. The first start restarts each server once to load it; the setting stays in the data
# folder (ALTER SYSTEM).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
export PGBOSS_TEST_DURABLE=1
BENCH_PORT=${PGBOSS_BENCH_PORT:-55450}
CITUS_PORT=${PGBOSS_CITUS_PORT:-55510}
CITUS_BASE=${PGBOSS_CITUS_PGDATA:-${TMPDIR:-/tmp}/django-pgboss-citus-$CITUS_PORT}

bin_dir() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1; }

psql_on() {
  PGOPTIONS="-c client_min_messages=warning" "$(bin_dir)/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$1" -U postgres -d "$2" -Atc "$3"
}

# Sets the preload list and pg_stat_statements' settings on the server at port $1; prints "restart"
# when the running server does not have them yet.
configure() {
  local port=$1 libraries=$2
  local current
  current=$(psql_on "$port" postgres "SHOW shared_preload_libraries")
  if [ "${current// /}" != "$libraries" ]; then
    # A list of names, each quoted on its own: one quoted 'a,b' would be a single library's name.
    psql_on "$port" postgres "ALTER SYSTEM SET shared_preload_libraries = '${libraries//,/\', \'}'"
    psql_on "$port" postgres "ALTER SYSTEM SET pg_stat_statements.track = 'top'"
    psql_on "$port" postgres "ALTER SYSTEM SET pg_stat_statements.track_utility = off"
    echo restart
  fi
}

citus() { PGBOSS_CITUS_PORT=$CITUS_PORT bash "$repo/scripts/citus.sh" "$@"; }
plain() { PGBOSS_BENCH_PORT=$BENCH_PORT bash "$here/cluster.sh" "$@"; }

start() {
  local port restart=""
  plain start >/dev/null
  if [ -n "$(configure "$BENCH_PORT" pg_stat_statements)" ]; then
    plain stop && plain start >/dev/null
  fi
  PGBOSS_TEST_DBNAME=pgboss_bench_local citus start >/dev/null
  PGBOSS_TEST_DBNAME=pgboss_bench_dist citus start >/dev/null
  for port in "$CITUS_PORT" "$((CITUS_PORT + 1))" "$((CITUS_PORT + 2))"; do
    restart+=$(configure "$port" "citus,pg_stat_statements")
  done
  if [ -n "$restart" ]; then
    citus stop
    PGBOSS_TEST_DBNAME=pgboss_bench_dist citus start >/dev/null
  fi
  echo "bench: PostgreSQL on 127.0.0.1:$BENCH_PORT; Citus coordinator on 127.0.0.1:$CITUS_PORT, workers on $((CITUS_PORT + 1)) and $((CITUS_PORT + 2)) ($CITUS_BASE)" >&2
}

case "${1:-start}" in
  start) start ;;
  stop) citus stop; plain stop ;;
  destroy) citus destroy; plain destroy ;;
  *) echo "usage: $0 start|stop|destroy" >&2; exit 2 ;;
esac
