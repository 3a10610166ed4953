#!/bin/sh
# First start: create the cluster in $PGDATA (a volume) with one role and one database, both
# named by POSTGRES_USER / POSTGRES_DB, password POSTGRES_PASSWORD (required), password
# authentication over the network. Later starts reuse it. Runs the server as `postgres`.
set -eu
: "${POSTGRES_USER:=mpstream}" "${POSTGRES_DB:=$POSTGRES_USER}"

if [ "$(id -u)" = 0 ]; then
  mkdir -p "$PGDATA" /run/postgresql
  chown postgres:postgres "$PGDATA" /run/postgresql
  chmod 700 "$PGDATA"
  exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi

if [ ! -s "$PGDATA/PG_VERSION" ]; then
  if [ -z "${POSTGRES_PASSWORD:-}" ]; then
    echo "postgres-entrypoint: set POSTGRES_PASSWORD (the collector's DATABASE_URL uses it)" >&2
    exit 1
  fi
  pwfile=$(mktemp)
  printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
  initdb --username="$POSTGRES_USER" --pwfile="$pwfile" --auth-local=trust \
    --auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 >/dev/null
  rm -f "$pwfile"
  # Containers on the compose network reach it by name; each must give the password.
  echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
  echo "CREATE DATABASE \"$POSTGRES_DB\";" | postgres --single -D "$PGDATA" template1 >/dev/null
  echo "postgres-entrypoint: created database $POSTGRES_DB for $POSTGRES_USER"
fi
exec "$@"
