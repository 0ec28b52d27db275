#!/usr/bin/env bash
# A throwaway PostgreSQL 15 cluster a test can stop and start: for the fault tests, which take
# the database away from running servers (the shared one of scripts/with-postgres.sh serves
# every other test at the same time and must stay up).
#
#   scripts/postgres-cluster.sh start FOLDER     # (a folder its parent lets others enter, e.g. under /tmp) creates the cluster on first use, starts it, prints its URL
#   scripts/postgres-cluster.sh stop FOLDER [fast|immediate]
#   scripts/postgres-cluster.sh url FOLDER
#   scripts/postgres-cluster.sh remove FOLDER    # stops it (immediate) and deletes FOLDER
#
# The cluster keeps its port across restarts (FOLDER/port), listens on 127.0.0.1 only with
# trust authentication, keeps PostgreSQL's durability (a test that stops it `immediate`, as a
# crash does, relies on every acknowledged commit surviving), and, as root, as the system user
# outpost-pg (PostgreSQL refuses root), created if missing. PG_BIN overrides the binaries' folder.
set -euo pipefail
PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
fail() {
    echo "postgres-cluster: error: $*" >&2
    exit 1
}
[ $# -ge 2 ] || { echo "usage: scripts/postgres-cluster.sh start|stop|url|remove FOLDER [fast|immediate]" >&2; exit 64; }
action=$1
folder=$2
# The server outlives this script: it must not keep a descriptor the caller waits on (a
# process launcher that learns of its child's end when a pipe closes would wait for PostgreSQL).
for descriptor in /proc/$$/fd/*; do
    descriptor=${descriptor##*/}
    [ "$descriptor" -gt 2 ] 2>/dev/null && eval "exec $descriptor>&-" 2>/dev/null || true
done
mode=${3:-fast}
data="$folder/data"

# The user the server runs as.
source "$(dirname "${BASH_SOURCE[0]}")/postgres-user.sh"

url() { echo "postgres://outpost@127.0.0.1:$(cat "$folder/port")/outpost"; }

case "$action" in
start)
    mkdir -p "$folder"
    first=0
    if [ ! -d "$data" ]; then
        first=1
        [ "${#as_pg[@]}" -gt 0 ] && chown "$pg_user" "$folder"
        "${as_pg[@]}" "$PG_BIN/initdb" -D "$data" -U outpost --auth=trust --encoding=UTF8 --locale=C.UTF-8 >"$folder/initdb.log" 2>&1 \
            || { cat "$folder/initdb.log" >&2; fail "initdb failed"; }
        python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()' >"$folder/port" \
            || fail "cannot find a free loopback port (python3 is needed)"
    fi
    port=$(cat "$folder/port")
    options="-c listen_addresses=127.0.0.1 -p $port -c unix_socket_directories=$folder -c max_connections=200"
    # Durability on: the tests stop it as a crash does (immediate), and a commit must survive that.
    options+=" -c log_min_messages=warning"
    "${as_pg[@]}" "$PG_BIN/pg_ctl" -D "$data" -l "$folder/server.log" -o "$options" -w -t 60 start >/dev/null \
        || { cat "$folder/server.log" >&2 || true; fail "PostgreSQL did not start on 127.0.0.1:$port"; }
    if [ "$first" -eq 1 ]; then
        "${as_pg[@]}" "$PG_BIN/createdb" -h "$folder" -p "$port" -U outpost outpost || fail "cannot create the database 'outpost'"
    fi
    url
    ;;
stop)
    [ -d "$data" ] || fail "no cluster in $folder"
    "${as_pg[@]}" "$PG_BIN/pg_ctl" -D "$data" -m "$mode" -w -t 60 stop >/dev/null || fail "PostgreSQL did not stop"
    ;;
url)
    url
    ;;
remove)
    if [ -d "$data" ]; then
        "${as_pg[@]}" "$PG_BIN/pg_ctl" -D "$data" -m immediate -w stop >/dev/null 2>&1 || true
    fi
    rm -rf "$folder"
    ;;
*)
    fail "unknown action '$action' (start, stop, url, remove)"
    ;;
esac
