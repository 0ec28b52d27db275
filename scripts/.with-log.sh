#!/usr/bin/env bash
# Runs a command with a throwaway PostgreSQL 15 beside it, then stops it whatever happens.
#
#   scripts/with-postgres.sh [--fast] -- COMMAND [ARG...]
#
# initdb into a new temporary folder, pg_ctl start on a free port of 127.0.0.1 (and a Unix socket
# in the folder), a database `outpost` owned by the superuser `outpost` (trust authentication:
# loopback only, and the cluster lives as long as the command). The command gets its URL in
# OUTPOST_TEST_POSTGRES_URL (postgres://outpost@127.0.0.1:PORT/outpost?max_connections=4).
# PostgreSQL refuses to run as root: as root the server runs as the system user outpost-pg
# (created if missing), which owns the folder. On exit (normal, error, Ctrl-C) the server is
# stopped and the folder removed; the script exits with the command's status.
#
# --fast turns durability off (fsync, synchronous_commit, full_page_writes): for tests, whose
# data is thrown away. Without it the server runs with PostgreSQL's defaults (benchmarks).
# PG_BIN overrides the binaries' folder (default /usr/lib/postgresql/15/bin).
set -euo pipefail

fast=0
while [ $# -gt 0 ]; do
    case "$1" in
        --fast) fast=1; shift ;;
        --) shift; break ;;
        *) break ;;
    esac
done
if [ $# -eq 0 ]; then
    echo "usage: scripts/with-postgres.sh [--fast] -- COMMAND [ARG...]" >&2
    exit 64
fi

PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
fail() {
    echo "with-postgres: error: $*" >&2
    exit 1
}
for tool in initdb pg_ctl createdb; do
    [ -x "$PG_BIN/$tool" ] || fail "$PG_BIN/$tool is missing: install PostgreSQL 15 (apt-get install postgresql-15) or set PG_BIN"
done

# The user the server runs as.
source "$(dirname "${BASH_SOURCE[0]}")/postgres-user.sh"

folder=$(mktemp -d "${TMPDIR:-/tmp}/outpost-pg.XXXXXX")
data="$folder/data"
log="$folder/server.log"
started=0
cleanup() {
    status=$?
    if [ "$started" -eq 1 ]; then
        "${as_pg[@]}" "$PG_BIN/pg_ctl" -D "$data" -m fast -w stop >/dev/null 2>&1 \
            || "${as_pg[@]}" "$PG_BIN/pg_ctl" -D "$data" -m immediate -w stop >/dev/null 2>&1 || true
    fi
    rm -rf "$folder"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ "${#as_pg[@]}" -gt 0 ]; then
    chown "$pg_user" "$folder"
fi

"${as_pg[@]}" "$PG_BIN/initdb" -D "$data" -U outpost --auth=trust --encoding=UTF8 --locale=C.UTF-8 >"$folder/initdb.log" 2>&1 \
    || { cat "$folder/initdb.log" >&2; fail "initdb failed (log above)"; }

# A free port: bind port 0 and keep what the kernel chose. The listen below fails loudly if
# another process took it in between.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()') \
    || fail "cannot find a free loopback port (python3 is needed)"

options="-c listen_addresses=127.0.0.1 -p $port -c unix_socket_directories=$folder -c max_connections=400 -c log_min_duration_statement=0 -c log_line_prefix=%m_[%p]_"
options+=" -c shared_buffers=256MB -c log_min_messages=warning"
if [ "$fast" -eq 1 ]; then
    options+=" -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
fi
started=1
"${as_pg[@]}" "$PG_BIN/pg_ctl" -D "$data" -l "$log" -o "$options" -w -t 60 start >/dev/null \
    || { cat "$log" >&2 || true; fail "PostgreSQL did not start on 127.0.0.1:$port (server log above)"; }
"${as_pg[@]}" "$PG_BIN/createdb" -h "$folder" -p "$port" -U outpost outpost \
    || fail "cannot create the database 'outpost'"

export OUTPOST_TEST_POSTGRES_URL="postgres://outpost@127.0.0.1:$port/outpost?max_connections=4"
echo "with-postgres: PostgreSQL $("$PG_BIN/pg_ctl" --version | awk '{print $3}') on 127.0.0.1:$port (data in $data$([ "$fast" -eq 1 ] && echo ', durability off'))" >&2

status=0
"$@" || status=$?
exit "$status"
