#!/usr/bin/env bash
# Kinto (Mozilla's store-and-sync server) as a peer for `outpost-bench peer`: installed into a
# throwaway Python virtual environment, run on the same PostgreSQL as our server.
#
#   scripts/kinto-peer.sh install VENV_DIR
#   scripts/kinto-peer.sh start VENV_DIR WORK_DIR POSTGRES_URL PORT
#   scripts/kinto-peer.sh stop WORK_DIR
#
# install: creates VENV_DIR (unless it already holds the pinned versions) and pip-installs
#   kinto[postgresql] and gunicorn, pinned; prints nothing but errors. Needs python3 >= 3.10
#   with its venv module (PYTHON overrides the interpreter) and PyPI.
# start: takes the URL our server takes (postgres://user[:password]@host[:port]/db[?...], as
#   scripts/with-postgres.sh exports in OUTPOST_TEST_POSTGRES_URL; our query items
#   max_connections, schema and connect_wait are dropped, sslmode and a libpq socket `host=` are
#   kept) and creates, on that cluster, a database of Kinto's own (`kinto`, or KINTO_DATABASE)
#   unless it exists: Kinto's tables and functions have generic names (objects, metadata,
#   cache, timestamps, as_epoch...) in the public schema, and so stay apart from ours. It writes
#   WORK_DIR/kinto.ini (storage, permissions and cache on that database; basic auth, any
#   user:password; batches of up to 1000 requests; pages of 1000), runs `kinto migrate`, starts
#   gunicorn bound to 127.0.0.1:PORT with KINTO_WORKERS worker processes (default: the number of
#   cores) of KINTO_THREADS threads each (default 4) in a session of its own (pid, which is also
#   the process group, in WORK_DIR/kinto.pid; log in WORK_DIR/kinto.log), waits until GET /v1/
#   answers (60 s at most), then makes the bucket `bench` and its collection `records`
#   (KINTO_BUCKET, KINTO_COLLECTION) unless they exist, writable by every authenticated user.
#   Records then live at /v1/buckets/bench/collections/records/records.
# stop: stops the process group of WORK_DIR/kinto.pid (TERM, then KILL after 10 s); idempotent.
set -euo pipefail

KINTO_VERSION=26.5.0
GUNICORN_VERSION=27.0.1

fail() {
    echo "kinto-peer: error: $*" >&2
    exit 1
}
usage() {
    echo "usage: scripts/kinto-peer.sh install VENV_DIR | start VENV_DIR WORK_DIR POSTGRES_URL PORT | stop WORK_DIR" >&2
    exit 64
}
[ $# -ge 1 ] || usage
action=$1
shift

# True when VENV_DIR has the pinned kinto (with its PostgreSQL driver) and gunicorn.
installed() {
    [ -x "$1/bin/python" ] && "$1/bin/python" - "$KINTO_VERSION" "$GUNICORN_VERSION" >/dev/null 2>&1 <<'EOF'
import sys
from importlib.metadata import version
import kinto, psycopg2, sqlalchemy, zope.sqlalchemy, gunicorn  # noqa: F401
sys.exit(0 if (version("kinto"), version("gunicorn")) == (sys.argv[1], sys.argv[2]) else 1)
EOF
}

stop() {
    local pidfile="$1/kinto.pid" pid
    [ -f "$pidfile" ] || return 0
    pid=$(cat "$pidfile")
    if [ -n "$pid" ] && kill -0 -- "-$pid" 2>/dev/null; then
        kill -TERM -- "-$pid" 2>/dev/null || true
        for _ in $(seq 100); do
            kill -0 -- "-$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL -- "-$pid" 2>/dev/null || true
    fi
    rm -f "$pidfile"
}

case "$action" in
install)
    [ $# -eq 1 ] || usage
    venv=$1
    installed "$venv" && exit 0
    python=${PYTHON:-python3}
    command -v "$python" >/dev/null || fail "$python is missing (set PYTHON to a python3 >= 3.10)"
    if [ ! -x "$venv/bin/python" ]; then
        "$python" -m venv "$venv" \
            || fail "cannot create a virtual environment in $venv (on Debian: apt-get install python3-venv)"
    fi
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input \
        "kinto[postgresql]==$KINTO_VERSION" "gunicorn==$GUNICORN_VERSION" \
        || fail "pip could not install kinto[postgresql]==$KINTO_VERSION into $venv"
    installed "$venv" || fail "kinto $KINTO_VERSION is still not importable in $venv"
    ;;
start)
    [ $# -eq 4 ] || usage
    venv=$1
    work=$2
    url=$3
    port=$4
    [[ "$port" =~ ^[0-9]+$ ]] || fail "PORT must be a number, not '$port'"
    installed "$venv" || fail "$venv has no kinto $KINTO_VERSION: run scripts/kinto-peer.sh install $venv first"
    command -v psql >/dev/null || fail "psql is missing (apt-get install postgresql-client-15)"
    command -v curl >/dev/null || fail "curl is missing"
    database=${KINTO_DATABASE:-kinto}
    [[ "$database" =~ ^[a-z_][a-z0-9_]*$ ]] || fail "KINTO_DATABASE must be a lowercase identifier, not '$database'"
    workers=${KINTO_WORKERS:-$(nproc)}
    threads=${KINTO_THREADS:-4}
    bucket=${KINTO_BUCKET:-bench}
    collection=${KINTO_COLLECTION:-records}
    credentials=${KINTO_USER:-bench:bench}

    # The server outlives this script: it must not keep a descriptor the caller waits on (a
    # process launcher that learns of its child's end when a pipe closes would wait for Kinto).
    for descriptor in "/proc/$$/fd/"*; do
        descriptor=${descriptor##*/}
        if [ "$descriptor" -gt 2 ] 2>/dev/null; then
            eval "exec $descriptor>&-" 2>/dev/null || true
        fi
    done

    mkdir -p "$work"
    work=$(cd "$work" && pwd)
    stop "$work"
    # Else the wait below could take another server on PORT for ours.
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        fail "127.0.0.1:$port is already in use"
    fi

    # Our URL → a libpq/SQLAlchemy one: the scheme postgresql://, our own query items dropped.
    # Line 1: the URL's own database (to create Kinto's from); line 2: Kinto's database.
    urls=$("$venv/bin/python" - "$url" "$database" <<'EOF'
import sys
from urllib.parse import urlsplit, urlunsplit, parse_qsl, urlencode
url, database = sys.argv[1], sys.argv[2]
parts = urlsplit(url)
if parts.scheme.split("+")[0] not in ("postgres", "postgresql") or not parts.path.strip("/"):
    sys.exit(f"'{url}' is not a PostgreSQL URL such as postgres://user@127.0.0.1:5432/outpost")
query = urlencode([(k, v) for k, v in parse_qsl(parts.query) if k in ("sslmode", "host", "port", "password")], safe="/")
for path in (parts.path, "/" + database):
    print(urlunsplit(("postgresql", parts.netloc, path, query, "")))
EOF
    ) || fail "cannot read the PostgreSQL URL"
    admin_url=$(sed -n 1p <<<"$urls")
    kinto_url=$(sed -n 2p <<<"$urls")
    ini_url=${kinto_url//%/%%} # the .ini's values interpolate %(name)s

    exists=$(psql "$admin_url" -X -q -t -A -v ON_ERROR_STOP=1 -c "SELECT 1 FROM pg_database WHERE datname = '$database'") \
        || fail "cannot connect to PostgreSQL"
    if [ "$exists" != 1 ]; then
        psql "$admin_url" -X -q -v ON_ERROR_STOP=1 -c "CREATE DATABASE \"$database\"" >/dev/null \
            || fail "cannot create the database '$database' (the URL's user needs CREATEDB)"
    fi

    cat >"$work/kinto.ini" <<EOF
# Written by scripts/kinto-peer.sh: Kinto $KINTO_VERSION as a peer for outpost-bench.
[app:main]
use = egg:kinto
# No plugins: no default bucket (the bucket and collection are made explicitly), no accounts, no admin UI.
kinto.includes =
kinto.storage_backend = kinto.core.storage.postgresql
kinto.storage_url = $ini_url
kinto.storage_max_fetch_size = 10000
kinto.storage_pool_size = $((threads + 2))
kinto.storage_max_overflow = 5
kinto.permission_backend = kinto.core.permission.postgresql
kinto.permission_url = $ini_url
kinto.cache_backend = kinto.core.cache.postgresql
kinto.cache_url = $ini_url
kinto.cache_pool_size = $((threads + 2))
# Basic auth: any user:password is a user (its id an HMAC of both).
multiauth.policies = basicauth
kinto.userid_hmac_secret = outpost-bench-kinto-peer
kinto.bucket_create_principals = system.Authenticated
# A record's creator is not written into its own ACL: the bucket's permissions govern.
kinto.explicit_permissions = false
# A push of 500 records is one /v1/batch; a pull page is 1000 records (_limit up to 1000).
kinto.batch_max_requests = 1000
kinto.paginate_by = 1000
kinto.version_prefix_redirect_enabled = false
kinto.trailing_slash_redirect_enabled = false

[loggers]
keys = root

[handlers]
keys = console

[formatters]
keys = plain

[logger_root]
level = WARNING
handlers = console

[handler_console]
class = StreamHandler
args = (sys.stderr,)
level = NOTSET
formatter = plain

[formatter_plain]
format = %(asctime)s %(levelname)s [%(name)s] %(message)s
EOF

    "$venv/bin/kinto" migrate --ini "$work/kinto.ini" >"$work/migrate.log" 2>&1 \
        || { tail -n 40 "$work/migrate.log" >&2; fail "kinto migrate failed (log above)"; }

    # setsid: gunicorn's master leads a session and process group of its own, so `stop` ends
    # it and its workers together, and the caller's Ctrl-C does not reach it.
    : >"$work/kinto.log"
    # KINTO_INI: where Kinto reads its own settings back from (heartbeat, /v1/__version__).
    # --no-control-socket: gunicorn 27 would otherwise listen on ~/.gunicorn/gunicorn.ctl, one
    # path for every instance.
    KINTO_INI="$work/kinto.ini" setsid "$venv/bin/gunicorn" --paste "$work/kinto.ini" \
        --bind "127.0.0.1:$port" --workers "$workers" --worker-class gthread --threads "$threads" \
        --timeout 120 --graceful-timeout 5 --keep-alive 30 --no-control-socket \
        </dev/null >>"$work/kinto.log" 2>&1 &
    pid=$!
    echo "$pid" >"$work/kinto.pid"

    base="http://127.0.0.1:$port/v1"
    deadline=$((SECONDS + 60))
    until curl -fsS -o /dev/null --max-time 2 "$base/" 2>/dev/null; do
        if ! kill -0 "$pid" 2>/dev/null || [ "$SECONDS" -ge "$deadline" ]; then
            tail -n 40 "$work/kinto.log" >&2 || true
            stop "$work"
            fail "Kinto did not answer on 127.0.0.1:$port (log above)"
        fi
        sleep 0.2
    done

    # The bucket and collection, if missing (If-None-Match: * answers 412 when they exist).
    put() {
        local status
        status=$(curl -sS -o "$work/put.out" -w '%{http_code}' -u "$credentials" -X PUT \
            -H 'Content-Type: application/json' -H 'If-None-Match: *' --data "$2" "$base$1") || status=000
        case "$status" in
        201 | 200 | 412) ;;
        *)
            cat "$work/put.out" >&2 2>/dev/null || true
            stop "$work"
            fail "PUT $1 answered $status"
            ;;
        esac
    }
    put "/buckets/$bucket" '{"data": {}, "permissions": {"write": ["system.Authenticated"]}}'
    put "/buckets/$bucket/collections/$collection" '{"data": {}}'
    rm -f "$work/put.out"
    ;;
stop)
    [ $# -eq 1 ] || usage
    stop "$1"
    ;;
*)
    usage
    ;;
esac
