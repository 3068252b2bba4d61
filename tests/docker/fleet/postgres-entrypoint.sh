#!/bin/sh
# The official image's interface, as much of it as docs/fleet/compose.yaml uses.
set -eu
mkdir -p "$PGDATA" /run/postgresql
chown -R postgres:postgres "$PGDATA" /run/postgresql
chmod 700 "$PGDATA"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  printf '%s' "$POSTGRES_PASSWORD" > /tmp/pwfile
  chown postgres /tmp/pwfile
  setpriv --reuid=postgres --regid=postgres --init-groups \
    initdb -D "$PGDATA" -U "$POSTGRES_USER" --pwfile=/tmp/pwfile \
    --auth-local=trust --auth-host=scram-sha-256 -E UTF8 --locale=C.UTF-8 >/dev/null
  rm -f /tmp/pwfile
  echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
  setpriv --reuid=postgres --regid=postgres --init-groups pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
  if [ "$POSTGRES_DB" != postgres ]; then
    setpriv --reuid=postgres --regid=postgres --init-groups createdb -h /run/postgresql -U "$POSTGRES_USER" "$POSTGRES_DB"
  fi
  setpriv --reuid=postgres --regid=postgres --init-groups pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
fi
exec setpriv --reuid=postgres --regid=postgres --init-groups postgres -D "$PGDATA" -c listen_addresses='*'
