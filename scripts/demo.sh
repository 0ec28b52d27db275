#!/usr/bin/env bash
# make demo: the contract compiler end to end on the project's own contracts.
set -euo pipefail
cd "$(dirname "$0")/.."

bold() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

bold "Building contractc"
swift build --product contractc 2>&1 | tail -n 1
contractc="$(swift build --show-bin-path)/contractc"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

bold "Validating contracts/ ($(find contracts -name '*.yaml' ! -name contracts.yaml | wc -l | tr -d ' ') contracts)"
"$contractc" validate

bold "Generating Swift and SQL into a scratch copy of Sources/Contracts"
"$contractc" generate --output "$work/Contracts"
find "$work/Contracts" -name '*.swift' | sed "s|$work/||" | sort | sed 's/^/  /'

bold "Generating again: nothing changes"
"$contractc" generate --output "$work/Contracts"

bold "What the committed code says about Unit"
grep -h "UNIT_SCHEMA" "$work/Contracts/SchemaVersions.swift"
awk '/identifier: "units\./,/"""#,/' "$work/Contracts/ClientMigrations.swift" | sed -n '1,22p' | sed 's/^ \{8\}//'

bold "The committed Sources/Contracts matches contracts/"
"$contractc" generate --check

bold "Compatibility with every released version still in the field (contracts/contracts.lock)"
"$contractc" check
echo "Unit's client migrations, derived from its released versions in the lock:"
grep -o '"units\.v[0-9]*\.[a-z]*"' "$work/Contracts/ClientMigrations.swift" | sed 's/^/  /'

bold "A breaking change is caught: changing a released field's type in a copy of contracts/"
cp -R contracts "$work/changed"
sed -i 's/^  title: { type: string, max_length: 200 }/  title: { type: int }/; s/^version: 3/version: 4/' "$work/changed/entities/unit.yaml"
check_status=0
(cd "$work" && "$contractc" check --contracts changed) > "$work/check.txt" 2>&1 || check_status=$?
cat "$work/check.txt"
echo "contractc check exited with status $check_status."
[ "$check_status" -eq 1 ]

bold "A folder of broken contracts: every problem, located, with a fix"
cp -R Tests/ContractCompilerTests/Fixtures/invalid/every-rule/contracts "$work/broken"
status=0
(cd "$work" && "$contractc" validate --contracts broken) > "$work/diagnostics.txt" 2>&1 || status=$?
head -n 24 "$work/diagnostics.txt"
echo "…"
tail -n 1 "$work/diagnostics.txt"
echo "contractc exited with status $status (1 = the contracts have errors)."
[ "$status" -eq 1 ]

# sync-server stores in PostgreSQL when OUTPOST_POSTGRES_URL is set (make demo-postgres).
storage="an embedded SQLite"; [ -n "${OUTPOST_POSTGRES_URL:-}" ] && storage="PostgreSQL (OUTPOST_POSTGRES_URL)"
bold "The reference server on $storage, in a temporary folder, on a free loopback port"
swift build --product sync-server 2>&1 | tail -n 1
server="$(swift build --show-bin-path)/sync-server"
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
data="$work/server-data"
"$server" seed --data "$data"
"$server" serve --data "$data" --port "$port" > "$work/server.log" 2>&1 &
server_pid=$!
stop_server() {
    if kill -0 "$server_pid" 2>/dev/null; then
        kill "$server_pid"
        # A process stopped by a signal has a non-zero status; that is the expected outcome here.
        wait "$server_pid" 2>/dev/null || :
    fi
}
trap 'stop_server; rm -rf "$work"' EXIT
for _ in $(seq 1 50); do curl -sf "http://127.0.0.1:$port/health" > /dev/null && break; sleep 0.2; done
curl -sf "http://127.0.0.1:$port/health"; echo

token="$("$server" token --data "$data" --tenant demo --user learner-1 --device phone-1 --team team-1 2>/dev/null)"
auth=(-H "Authorization: Bearer $token")
echo "A device pulls the content scope (units and lessons, shaped for its schema):"
curl -sf "${auth[@]}" -H "X-Outpost-Schema: Unit=3,Lesson=2" "http://127.0.0.1:$port/sync/v1/pull?scope=content&limit=3" \
    | python3 -c 'import json, sys; page = json.load(sys.stdin); print("  " + ", ".join(f"{name}: {len(rows)}" for name, rows in sorted(page["upserts"].items())) + f"; has_more={page['"'"'has_more'"'"']}")'

echo "It pushes a learning record, then resends the same push (as after a lost answer): the second answer is the stored one, applied once:"
body='{"client_id":"phone-1","schema":{"Statement":1},"mutations":[{"seq":1,"client_mutation_id":"01JDEMO0000000000000000001","entity":"Statement","op":"create","id":"st-1","payload":{"id":"st-1","verb":"completed","object_id":"lesson-battery-safety","stated_at":"2026-11-22T08:00:00.000Z"}}]}'
for attempt in 1 2; do
    curl -sf "${auth[@]}" -H "Content-Type: application/json" -d "$body" "http://127.0.0.1:$port/sync/v1/push" \
        | python3 -c 'import json, sys; r = json.load(sys.stdin); print(f"  attempt '"$attempt"': " + ", ".join(f"seq {x['"'"'seq'"'"']} {x['"'"'status'"'"']}" for x in r["results"]) + f", last_seq {r['"'"'last_seq'"'"']}")'
done
echo "Pulling another user's scope is refused:"
curl -s "${auth[@]}" "http://127.0.0.1:$port/sync/v1/pull?scope=progress:user:someone-else" | sed 's/^/  /'; echo

stop_server
"$server" audit verify --data "$data"

bold "Done"
echo "The devices' story (offline learner and field operative with sync-device) joins this demo with the client's command-line device."
