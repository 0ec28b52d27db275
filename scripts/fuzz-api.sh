#!/usr/bin/env bash
# Fuzzes the HTTP API against docs/openapi.yaml with schemathesis (PyPI): a sync-server on a
# seeded throwaway folder, a device token and an admin token, FUZZ_EXAMPLES generated requests per
# operation and token. Fails on any 500 and on any response whose status, Content-Type, headers
# or body the document does not describe. SEED=N replays a run (schemathesis prints its seed).
set -euo pipefail
cd "$(dirname "$0")/.."

examples="${FUZZ_EXAMPLES:-100}"
python3 -c 'import schemathesis' 2>/dev/null || python3 -m pip install --quiet schemathesis
swift build --product sync-server
bin="$(swift build --show-bin-path)"

work="$(mktemp -d)"
server_pid=""
cleanup() {
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

"$bin/sync-server" seed --data "$work/data" > /dev/null
printf 'fuzz-api-metrics-token-%s\n' "$RANDOM$RANDOM" > "$work/metrics.token"
"$bin/sync-server" serve --data "$work/data" --port 0 --rate 0 --metrics-token-file "$work/metrics.token" \
    > "$work/server.out" 2> "$work/server.log" &
server_pid=$!
for _ in $(seq 1 100); do
    grep -q "listening on" "$work/server.out" 2>/dev/null && break
    sleep 0.1
done
url="$(grep -o 'http://127\.0\.0\.1:[0-9]*' "$work/server.out" | head -1)"
[ -n "$url" ] || { echo "fuzz-api: sync-server did not start:"; cat "$work/server.out" "$work/server.log"; exit 1; }

seed_option=()
[ -n "${SEED:-}" ] && seed_option=(--seed "$SEED")
checks=not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance,response_headers_conformance
status=0
for who in "--user u-1 --device d-1 --team team-1" "--user admin --device console --admin"; do
    # shellcheck disable=SC2086
    token="$("$bin/sync-server" token --data "$work/data" --tenant demo $who 2> /dev/null | tail -1)"
    echo "== schemathesis as $who against $url ($examples examples per operation)"
    # The live channel answers a stream that stays open until the token expires, which a request
    # of schemathesis would wait for; its answers are tested in LiveSyncTests and LiveChannelTests.
    # The change feed may hold an empty answer for its `wait` (up to 60 s): requests get longer
    # than that before they count as hung.
    st run docs/openapi.yaml --url "$url" -H "Authorization: Bearer $token" --checks "$checks" \
        --exclude-operation-id live --max-examples "$examples" --request-timeout 65 "${seed_option[@]}" || status=1
done
if grep -q 'http.status=500' "$work/server.log"; then
    echo "fuzz-api: the server answered 500:"; grep 'http.status=500\|error' "$work/server.log" | head -20
    status=1
fi
exit "$status"
