#!/usr/bin/env bash
# A throwaway Citus cluster for the tests and the benchmarks: a coordinator and two workers, each a
# PostgreSQL of scripts/testdb.sh with Citus preloaded.
#
#   bash scripts/citus.sh start           start it (or reuse it when up); prints DATABASE_URL
#   bash scripts/citus.sh stop            stop the three servers, keeping their data folders
#   bash scripts/citus.sh destroy         stop them and delete their data folders
#   bash scripts/citus.sh url             print DATABASE_URL (the coordinator's database)
#   bash scripts/citus.sh database NAME   make NAME afresh on every node, Citus-ready (see below)
#
# The coordinator listens on PGBOSS_CITUS_PORT (default 25510), the workers on the next two ports,
# all on 127.0.0.1 only, with fsync off unless PGBOSS_TEST_DURABLE=1 (both as scripts/testdb.sh,
# which runs each server). When Citus is not installed for that PostgreSQL, it is built first
# with build-citus.sh from PGBOSS_CITUS_VENDOR (default ../shared/vendor beside the repository),
# which needs root and takes a minute or two.
#
# Citus lives in a database, not in a server: a database on the cluster works only once it exists
# on every node with the citus extension, and the coordinator's copy knows the nodes
# (citus_set_coordinator_host, citus_add_node). `start` prepares the database of DATABASE_URL
# (PGBOSS_TEST_DBNAME, default pgboss) so; `database NAME` drops NAME wherever it exists and
# prepares it anew, which is what scripts/test.sh does for the test database in place of
# pytest-django's --create-db (a CREATE DATABASE on the coordinator alone would make a database
# without Citus, and no worker would have it). With PGBOSS_CITUS_SHARD_COUNT set, the database's
# tables are distributed into that many shards (ALTER DATABASE ... SET citus.shard_count) instead
# of Citus's default 32.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
PORT=${PGBOSS_CITUS_PORT:-25510}
BASE=${PGBOSS_CITUS_PGDATA:-${TMPDIR:-/tmp}/django-pgboss-citus-$PORT}
DB=${PGBOSS_TEST_DBNAME:-pgboss}
VENDOR=${PGBOSS_CITUS_VENDOR:-$repo/../shared/vendor}
NODES=(coordinator worker1 worker2)
if [ -n "${PGBOSS_CITUS_SHARD_COUNT:-}" ] && [[ ! $PGBOSS_CITUS_SHARD_COUNT =~ ^[1-9][0-9]{0,3}$ ]]; then
  echo "citus: PGBOSS_CITUS_SHARD_COUNT must be a whole number from 1 to 9999, not '$PGBOSS_CITUS_SHARD_COUNT'" >&2
  exit 2
fi
PORTS=("$PORT" "$((PORT + 1))" "$((PORT + 2))")

bin_dir() {
  ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1
}

psql_on() {
  # psql_on PORT DATABASE SQL: one statement, stopping at the first error, quiet unless it fails.
  PGOPTIONS="-c client_min_messages=warning" "$(bin_dir)/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$1" -U postgres -d "$2" -Atc "$3"
}

# Runs scripts/testdb.sh on one node: its own port and data folder, named in its messages.
node() {
  local index=$1 action=$2
  PGBOSS_TEST_PORT=${PORTS[$index]} PGBOSS_TEST_PGDATA=$BASE/${NODES[$index]} \
    PGBOSS_TEST_LABEL="citus ${NODES[$index]}" bash "$here/testdb.sh" "$action" >/dev/null
}

ensure_citus_installed() {
  local bin libdir
  bin=$(bin_dir)
  libdir=$("$bin/pg_config" --pkglibdir)
  if [ -f "$libdir/citus.so" ]; then
    return
  fi
  if [ ! -f "$VENDOR/build-citus.sh" ]; then
    echo "citus: Citus is not installed and $VENDOR/build-citus.sh is missing (set PGBOSS_CITUS_VENDOR)" >&2
    exit 1
  fi
  if [ "$(id -u)" != 0 ]; then
    echo "citus: Citus is not installed; build it as root: bash $VENDOR/build-citus.sh" >&2
    exit 1
  fi
  echo "citus: building Citus with $VENDOR/build-citus.sh" >&2
  PG_CONFIG=$bin/pg_config bash "$VENDOR/build-citus.sh" >&2
}

# Starts one node, restarting it once with Citus preloaded the first time (initdb writes a
# postgresql.conf without it; ALTER SYSTEM keeps the setting in the data folder, so a restart by
# scripts/testdb.sh alone, as the suite's restart tests do, brings Citus back up too).
start_node() {
  local index=$1 loaded
  node "$index" start
  loaded=$(psql_on "${PORTS[$index]}" postgres "SHOW shared_preload_libraries")
  if [[ ,$loaded, != *,citus,* ]]; then
    psql_on "${PORTS[$index]}" postgres "ALTER SYSTEM SET shared_preload_libraries = 'citus'"
    node "$index" stop
    node "$index" start
  fi
}

# Creates database $1 on every node where it is missing, with the citus extension, and registers
# the coordinator and the workers in the coordinator's copy. Idempotent.
prepare_database() {
  local name=$1 index exists
  for index in 0 1 2; do
    exists=$(psql_on "${PORTS[$index]}" postgres "SELECT 1 FROM pg_database WHERE datname = '$name'")
    if [ -z "$exists" ]; then
      psql_on "${PORTS[$index]}" postgres "CREATE DATABASE \"$name\""
    fi
    psql_on "${PORTS[$index]}" "$name" "CREATE EXTENSION IF NOT EXISTS citus"
  done
  psql_on "$PORT" "$name" "SELECT citus_set_coordinator_host('127.0.0.1', $PORT)" >/dev/null
  if [ -n "${PGBOSS_CITUS_SHARD_COUNT:-}" ]; then
    psql_on "$PORT" postgres "ALTER DATABASE \"$name\" SET citus.shard_count = ${PGBOSS_CITUS_SHARD_COUNT}"
  fi
  for index in 1 2; do
    if [ -z "$(psql_on "$PORT" "$name" "SELECT 1 FROM pg_dist_node WHERE nodeport = ${PORTS[$index]}")" ]; then
      psql_on "$PORT" "$name" "SELECT citus_add_node('127.0.0.1', ${PORTS[$index]})" >/dev/null
    fi
  done
}

drop_database() {
  local name=$1 index
  for index in 2 1 0; do
    psql_on "${PORTS[$index]}" postgres "DROP DATABASE IF EXISTS \"$name\" WITH (FORCE)"
  done
}

url() { echo "postgres://postgres@127.0.0.1:$PORT/$DB"; }

start() {
  local index
  check_name "$DB"
  mkdir -p "$BASE"
  chmod 755 "$BASE"
  # The coordinator first, plain: testdb.sh installs PostgreSQL when it is missing, and the
  # Citus build needs that PostgreSQL's pg_config.
  node 0 start
  ensure_citus_installed
  for index in 0 1 2; do
    start_node "$index"
  done
  prepare_database "$DB"
  echo "citus: coordinator on 127.0.0.1:$PORT, workers on ${PORTS[1]} and ${PORTS[2]} ($BASE)" >&2
  url
}

check_name() {
  if [[ ! $1 =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]]; then
    echo "citus: database name '$1' is not a plain identifier (letters, digits, underscores)" >&2
    exit 2
  fi
}

case "${1:-start}" in
  start) start ;;
  stop) for index in 2 1 0; do node "$index" stop; done ;;
  destroy)
    for index in 2 1 0; do node "$index" destroy; done
    rm -rf "$BASE"
    ;;
  url) url ;;
  database)
    [ $# -eq 2 ] || { echo "usage: $0 database NAME" >&2; exit 2; }
    check_name "$2"
    drop_database "$2"
    prepare_database "$2"
    ;;
  *) echo "usage: $0 start|stop|destroy|url|database NAME" >&2; exit 2 ;;
esac
