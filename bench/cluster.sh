#!/usr/bin/env bash
# A PostgreSQL for the enqueue benchmark, from Debian's binaries, with DURABLE settings.
#
#   bash bench/cluster.sh start    start it (or reuse it when already up); prints DATABASE_URL
#   bash bench/cluster.sh stop     stop it, keeping its data folder for a fast next start
#   bash bench/cluster.sh destroy  stop it and delete its data folder
#   bash bench/cluster.sh url      print DATABASE_URL
#
# Unlike scripts/testdb.sh, nothing here trades durability for speed: fsync, synchronous_commit
# and full_page_writes keep PostgreSQL's defaults (on), because an enqueue benchmark on a cluster
# that skips the WAL flush would measure a commit path no production queue has. The server is
# started with those three settings named explicitly (-c ...=on) so that a postgresql.conf edited
# by hand cannot silently turn them off; bench/enqueue.py prints them back from the server.
#
# It has its own port (PGBOSS_BENCH_PORT, default 55450) and data folder, so it never touches the
# test cluster (55433). As root the server runs as the postgres user (runuser), because PostgreSQL
# refuses to run as root; it listens on 127.0.0.1 only.
set -euo pipefail

PORT=${PGBOSS_BENCH_PORT:-55450}
PGDATA=${PGBOSS_BENCH_PGDATA:-${TMPDIR:-/tmp}/django-pgboss-bench-$PORT}
DB=${PGBOSS_BENCH_DBNAME:-pgboss_bench}

find_bin() {
  local dir
  dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  if [ -z "$dir" ]; then
    if [ "$(id -u)" != 0 ]; then
      echo "bench cluster: no PostgreSQL binaries in /usr/lib/postgresql; install them: apt-get install postgresql" >&2
      exit 1
    fi
    echo "bench cluster: installing PostgreSQL with apt-get" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends postgresql >/dev/null
    dir=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
  fi
  echo "$dir"
}

as_owner() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

url() { echo "postgres://postgres@127.0.0.1:$PORT/$DB"; }

start() {
  local bin
  bin=$(find_bin)
  if [ ! -s "$PGDATA/PG_VERSION" ]; then
    mkdir -p "$(dirname "$PGDATA")"
    if [ "$(id -u)" = 0 ]; then
      install -d -o postgres -g postgres -m 700 "$PGDATA"
    else
      install -d -m 700 "$PGDATA"
    fi
    as_owner "$bin/initdb" -D "$PGDATA" -U postgres -A trust -E UTF8 --locale=C.UTF-8 >/dev/null
  fi
  if ! as_owner "$bin/pg_ctl" -D "$PGDATA" status >/dev/null 2>&1; then
    as_owner "$bin/pg_ctl" -D "$PGDATA" -l "$PGDATA/server.log" -w -t 60 \
      -o "-h 127.0.0.1 -p $PORT -k $PGDATA -c fsync=on -c synchronous_commit=on -c full_page_writes=on" \
      start >/dev/null || { cat "$PGDATA/server.log" >&2; exit 1; }
    echo "bench cluster: started PostgreSQL $("$bin/postgres" --version | awk '{print $3}') on 127.0.0.1:$PORT ($PGDATA)" >&2
  else
    echo "bench cluster: reusing PostgreSQL already running on 127.0.0.1:$PORT" >&2
  fi
  "$bin/pg_isready" -q -h 127.0.0.1 -p "$PORT" -t 30
  if ! "$bin/psql" -h 127.0.0.1 -p "$PORT" -U postgres -Atc "SELECT 1 FROM pg_database WHERE datname = '$DB'" postgres | grep -q 1; then
    "$bin/createdb" -h 127.0.0.1 -p "$PORT" -U postgres "$DB"
  fi
  url
}

stop() {
  local bin
  bin=$(find_bin)
  if [ -s "$PGDATA/PG_VERSION" ] && as_owner "$bin/pg_ctl" -D "$PGDATA" status >/dev/null 2>&1; then
    as_owner "$bin/pg_ctl" -D "$PGDATA" -w -m fast stop >/dev/null
    echo "bench cluster: stopped PostgreSQL on 127.0.0.1:$PORT" >&2
  fi
}

destroy() {
  stop
  rm -rf "$PGDATA"
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  destroy) destroy ;;
  url) url ;;
  *) echo "usage: $0 start|stop|destroy|url" >&2; exit 2 ;;
esac
