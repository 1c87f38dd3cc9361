#!/usr/bin/env bash
# A throwaway PostgreSQL for the tests, from Debian's binaries.
#
#   bash scripts/testdb.sh start    start it (or reuse it when already up); prints DATABASE_URL
#   bash scripts/testdb.sh stop     stop it, keeping its data folder for a fast next start
#   bash scripts/testdb.sh destroy  stop it and delete its data folder
#   bash scripts/testdb.sh url      print DATABASE_URL
#
# PostgreSQL refuses to run as root, so as root the server runs as the postgres user (runuser);
# as another user it runs as that user. It listens on 127.0.0.1 only, on its own port
# (PGBOSS_TEST_PORT, default 25433), with fsync off: a test cluster trades durability for speed.
# PGBOSS_TEST_DURABLE=1 keeps PostgreSQL's durable defaults instead, naming them on the command
# line so a hand-edited postgresql.conf cannot turn them off (bench/cluster.sh uses it: a
# benchmark on a cluster that skips the WAL flush would measure a commit path no production queue
# has). The binaries are installed with apt-get when no /usr/lib/postgresql/*/bin exists.
set -euo pipefail

PORT=${PGBOSS_TEST_PORT:-25433}
PGDATA=${PGBOSS_TEST_PGDATA:-${TMPDIR:-/tmp}/django-pgboss-testdb-$PORT}
DB=${PGBOSS_TEST_DBNAME:-pgboss}
NAME=${PGBOSS_TEST_LABEL:-testdb}
if [ "${PGBOSS_TEST_DURABLE:-0}" = 1 ]; then
  SETTINGS="-c fsync=on -c synchronous_commit=on -c full_page_writes=on"
  INITDB_SYNC=""
else
  SETTINGS="-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
  INITDB_SYNC="--no-sync"
fi

find_bin() {
  local dir
  dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  if [ -z "$dir" ]; then
    if [ "$(id -u)" != 0 ]; then
      echo "$NAME: no PostgreSQL binaries in /usr/lib/postgresql; install them: apt-get install postgresql" >&2
      exit 1
    fi
    echo "$NAME: installing PostgreSQL with apt-get" >&2
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
    as_owner "$bin/initdb" -D "$PGDATA" -U postgres -A trust -E UTF8 --locale=C.UTF-8 $INITDB_SYNC >/dev/null
  fi
  if ! as_owner "$bin/pg_ctl" -D "$PGDATA" status >/dev/null 2>&1; then
    as_owner "$bin/pg_ctl" -D "$PGDATA" -l "$PGDATA/server.log" -w -t 60 \
      -o "-h 127.0.0.1 -p $PORT -k $PGDATA $SETTINGS" \
      start >/dev/null || { cat "$PGDATA/server.log" >&2; exit 1; }
    echo "$NAME: started PostgreSQL $("$bin/postgres" --version | awk '{print $3}') on 127.0.0.1:$PORT ($PGDATA)" >&2
  else
    echo "$NAME: reusing PostgreSQL already running on 127.0.0.1:$PORT" >&2
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
    echo "$NAME: stopped PostgreSQL on 127.0.0.1:$PORT" >&2
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
