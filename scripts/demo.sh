#!/usr/bin/env bash
# make demo: Outpost's main job on one machine. A sync server on an embedded SQLite, and
# command-line devices that keep working offline: a learner takes an assessment without a
# network, two field operatives edit the same records offline and their conflicts are resolved
# (then one sees the other's change arrive live), an issue is logged offline with a photo that the
# other tablet fetches,
# the audit log verifies. Then, briefly, the contract compiler that all of it is generated from.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -t 1 ]; then
    bold=$'\033[1m' dim=$'\033[2m' cyan=$'\033[36m' plain=$'\033[0m'
else
    bold="" dim="" cyan="" plain=""
fi
step() { printf '\n%s== %s%s\n' "$bold" "$*" "$plain"; }
note() { printf '%s%s%s\n' "$dim" "$*" "$plain"; }

# ---------------------------------------------------------------------------------------------
step "Building sync-server, sync-device and contractc"
for product in sync-server sync-device contractc; do
    swift build --product "$product" 2>&1 | tail -n 1
done
bin="$(swift build --show-bin-path)"
started=$SECONDS

work="$(mktemp -d)"
# Stops the background process whose pid is $1, if it still runs.
stop_process() {
    if [ -n "$1" ] && kill -0 "$1" 2>/dev/null; then
        kill "$1"
        # A process stopped by a signal has a non-zero status; that is the expected outcome here.
        wait "$1" 2>/dev/null || :
    fi
}
server_pid=""
stop_server() { stop_process "$server_pid"; server_pid=""; }
receiver_pid=""
stop_receiver() { stop_process "$receiver_pid"; receiver_pid=""; }
trap 'stop_server; stop_receiver; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

# Runs `sync-device ARGS --home $work/NAME`, shown as the user would type it, and fails the demo
# unless it exits with the expected status (0 unless `expect N` came just before); its output
# is kept in $work/last-output for checks.
expected=0
expect() { expected=$1; }
# The arguments as typed: quoted when they hold spaces, tokens shortened.
shown() {
    local argument out=()
    for argument in "$@"; do
        if [ "${#argument}" -gt 40 ]; then argument="${argument:0:16}…"; fi
        case "$argument" in *" "*) argument="\"$argument\"" ;; esac
        out+=("$argument")
    done
    echo "${out[*]}"
}
on() {
    local name=$1 status=0
    shift
    printf '%s%s$ sync-device %s%s\n' "$cyan" "$name" "$(shown "$@")" "$plain"
    # With pipefail, the pipeline's status is sync-device's (sed does not fail).
    "$bin/sync-device" "$@" --home "$work/$name" | tee "$work/last-output" | sed 's/^/  /' || status=$?
    if [ "$status" -ne "$expected" ]; then
        echo "demo: \`sync-device $*\` on $name exited $status, expected $expected" >&2
        exit 1
    fi
    if [ "$expected" -ne 0 ]; then note "  (exit $status, as documented in sync-device --help)"; fi
    expected=0
}

# ---------------------------------------------------------------------------------------------
# sync-server stores in PostgreSQL when OUTPOST_POSTGRES_URL is set (make demo-postgres).
storage="an embedded SQLite in a temporary folder"
[ -n "${OUTPOST_POSTGRES_URL:-}" ] && storage="PostgreSQL (OUTPOST_POSTGRES_URL)"
step "The server: sync-server on $storage, on a free loopback port"
data="$work/server"
"$bin/sync-server" seed --data "$data"
"$bin/sync-server" seed --data "$data" --team team-2 > /dev/null
# --outbound-allow: the demo's sink receiver is on loopback, which sinks may not reach otherwise.
"$bin/sync-server" serve --data "$data" --port 0 --rate 0 --outbound-allow 127.0.0.1/32 > "$work/server.log" 2>&1 &
server_pid=$!
server=""
for _ in $(seq 1 100); do
    server="$(grep -o 'listening on http://[0-9.]*:[0-9]*' "$work/server.log" | sed 's/listening on //' || :)"
    [ -n "$server" ] && curl -sf "$server/health" > /dev/null && break
    kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.log"; exit 1; }
    sleep 0.1
done
[ -n "$server" ] || { echo "demo: the server did not start" >&2; cat "$work/server.log"; exit 1; }
echo "sync-server is serving $server (pid $server_pid)"
token() { "$bin/sync-server" token --data "$data" --tenant demo "$@" 2> /dev/null; }
phone_token="$(token --user learner-1 --device phone)"
ana_token="$(token --user op-ana --device tablet-a --team team-1)"
ben_token="$(token --user op-ben --device tablet-b --team team-1)"
note "Device tokens issued for learner-1 (phone), op-ana (tablet-a) and op-ben (tablet-b), both of team-1."

note "A backend's receiver (scripts/sink-receiver.py: checks signatures, deduplicates by Idempotency-Key, validates"
note "xAPI statements with the tincan library) gets the field-ops changes as signed webhooks and the learner's"
note "statements as xAPI; both sinks are added now, so they deliver what the stories below apply."
python3 -c 'import tincan' 2>/dev/null || python3 -m pip install --quiet tincan
printf 'demo-webhook-secret-%s\n' "$RANDOM$RANDOM" > "$work/sink.secret"
printf 'lrs-password\n' > "$work/lrs.password"
python3 scripts/sink-receiver.py --port 0 --port-file "$work/receiver.port" --store "$work/receiver" \
    --secret-file "$work/sink.secret" --xapi-user lrs --xapi-password lrs-password > "$work/receiver.log" 2>&1 &
receiver_pid=$!
for _ in $(seq 1 100); do [ -s "$work/receiver.port" ] && break; sleep 0.1; done
[ -s "$work/receiver.port" ] || { echo "demo: the receiver did not start" >&2; cat "$work/receiver.log" >&2; exit 1; }
receiver="http://127.0.0.1:$(cat "$work/receiver.port")"
"$bin/sync-server" sinks add --data "$data" --outbound-allow 127.0.0.1/32 --tenant demo --id dispatch --url "$receiver/hooks" \
    --secret-file "$work/sink.secret" --contracts Task,TaskStatusChanged,Incident
"$bin/sync-server" sinks add --data "$data" --outbound-allow 127.0.0.1/32 --tenant demo --id lrs --kind xapi --url "$receiver/xAPI" \
    --secret-file "$work/sink.secret" --setting user=lrs --setting-file password="$work/lrs.password" \
    --setting home_page=https://learn.example.com

# ---------------------------------------------------------------------------------------------
step "Story 1: a learner downloads a unit and takes its assessment on the train, without a network"
on phone login --server "$server" --token "$phone_token"
note "Online, the phone syncs: it pulls the content scope (units, lessons, the assessment) and the learner's own scope."
on phone sync
on phone units
note "Before the trip, the learner downloads the battery unit: its lessons and every file, each verified by SHA-256."
on phone download unit-battery-basics
on phone cache list
note "The unit came through the contracts' unit subscription: the device's offline units are the engine's subscriptions, evicted by last use."
on phone subscriptions
note "The train enters a tunnel."
on phone offline on
note "The lesson's files come from the device (file://), checked against their checksums; nothing needs the network."
on phone open lesson-battery-anatomy
grep -q ' file:///' "$work/last-output" || { echo "demo: the downloaded lesson's files did not resolve to file:// paths" >&2; exit 1; }
on phone open lesson-battery-safety
on phone open assessment-battery-basics
on phone answer assessment-battery-basics q1 0
on phone answer assessment-battery-basics q2 "Below 20 %"
on phone answer assessment-battery-basics q3 1
on phone submit assessment-battery-basics
on phone attempts
note "Syncing without a network fails softly: everything stays queued."
expect 3
on phone sync
on phone status
note "A unit not downloaded is not available offline (exit 3, nothing lost)."
expect 3
on phone download unit-field-reporting
note "Out of the tunnel: the network returns and the device syncs by itself; the server scores the attempt."
on phone offline off
on phone attempts

# ---------------------------------------------------------------------------------------------
step "Story 1, continued: the assessment changes while the learner takes it again offline"
note "Before starting, the device shows what the server will hold the learner to: the revision, the last day, the time limit."
on phone open assessment-battery-basics
grep -q 'revision 1 ·' "$work/last-output" || { echo "demo: open did not show the assessment's revision" >&2; exit 1; }
on phone offline on
on phone answer assessment-battery-basics q1 0
on phone answer assessment-battery-basics q2 0
on phone answer assessment-battery-basics q3 0
on phone submit assessment-battery-basics
note "Meanwhile an editor publishes revision 2 of the assessment: the choices of q3 swap places, so its right answer is now 1."
admin_token="$(token --user editor --device console --admin)"
curl -sf -H "Authorization: Bearer $admin_token" -H 'Content-Type: application/json' \
    "$server/admin/v1/content/Assessment" -d @- > "$work/published.json" <<'JSON'
{"id": "assessment-battery-basics", "unit_id": "unit-battery-basics", "title": "Battery swap check",
 "instructions": "Answer all three questions; you need 2 of 3 to pass.",
 "questions": [
   {"id": "q1", "prompt": "What do you do before opening the battery bay?", "choices": ["Switch the vehicle off", "Start the motor", "Nothing"]},
   {"id": "q2", "prompt": "Which charge level means the battery must be swapped?", "choices": ["Below 20 %", "Below 80 %", "Only at 0 %"]},
   {"id": "q3", "prompt": "A swollen battery is…", "choices": ["Swapped as usual", "Reported as a safety issue"]}],
 "answer_key": [{"id": "q1", "correct": 0}, {"id": "q2", "correct": 0}, {"id": "q3", "correct": 1}],
 "question_count": 3, "pass_score": 0.66, "time_limit_seconds": 600}
JSON
grep -q '"revision":2' "$work/published.json" || { echo "demo: publishing other answers did not make revision 2" >&2; cat "$work/published.json" >&2; exit 1; }
note "  (the server now holds revision 2, and keeps revision 1's answer key)"
note "Back online, the phone syncs: the attempt was taken on revision 1, so the server answers the submission with a conflict."
expect 4
on phone offline off
on phone conflicts
grep -q 'moved to revision 2' "$work/last-output" || { echo "demo: the version conflict was not shown" >&2; exit 1; }
conflict_id="$(sed -n 's/^conflict \([0-9][0-9]*\) .*/\1/p' "$work/last-output" | head -n 1)"
note "The learner submits anyway: the attempt is graded against revision 1, the one it was taken on (retake would start again on revision 2)."
on phone resolve "$conflict_id" submit-anyway
on phone sync
on phone attempts assessment-battery-basics
grep -q 'passed, score 3/3.*graded against revision 1' "$work/last-output" || { echo "demo: the attempt was not graded against revision 1" >&2; exit 1; }

# ---------------------------------------------------------------------------------------------
step "Story 2: two field operatives work on the same task list without a signal"
on tablet-a login --server "$server" --token "$ana_token"
on tablet-b login --server "$server" --token "$ben_token"
on tablet-a sync
on tablet-b sync
on tablet-a tasks
on tablet-a incidents
note "Both lose the network in the underground car park."
on tablet-a offline on
on tablet-b offline on
note "Ana completes the battery swap, starts the brake inspection and updates the incident…"
on tablet-a task complete team-1-task-swap-017
on tablet-a task start team-1-task-inspect-017
on tablet-a edit incident team-1-incident-0001 --field state=in_progress --field "description=Pack swapped, the scooter runs again"
note "…while Ben adds a note to the same swap task, starts the same inspection and escalates the same incident."
on tablet-b edit task team-1-task-swap-017 --field "notes=Bring a spare latch"
on tablet-b task start team-1-task-inspect-017
on tablet-b edit incident team-1-incident-0001 --field priority=high --field state=on_hold
note "Ben gets a signal first: all of his changes apply."
on tablet-b offline off
note "Then Ana. Tasks use version_check: her two task changes were based on revisions Ben moved on, so they"
note "come back as conflicts for her to resolve. Incidents use field_merge: her description merges with Ben's"
note "priority, and for the state both changed, Ben's later edit wins (last writer per field)."
expect 4
on tablet-a offline off
note "Ana keeps her completion of the swap (sent again on top of Ben's note) and takes Ben's inspection start."
on tablet-a resolve team-1-task-swap-017 mine
on tablet-a resolve team-1-task-inspect-017 theirs
on tablet-a sync
on tablet-b sync
note "Both tablets now show the same tasks and incident."
on tablet-a tasks
on tablet-b tasks
on tablet-a incidents
on tablet-b incidents
note "Back in the open, both online: Ben's tablet stays open on the task list (its engine keeps the server's"
note "live channel), and Ana's completion appears on it the moment she syncs, not at the next 15-minute timer."
printf '%s%s$ sync-device %s%s\n' "$cyan" "tablet-b" "watch --changes 1 --seconds 60" "$plain"
"$bin/sync-device" watch --changes 1 --seconds 60 --home "$work/tablet-b" > "$work/watch-output" 2>&1 &
watch_pid=$!
for _ in $(seq 1 300); do grep -q 'live: connected' "$work/watch-output" && break; sleep 0.1; done
grep -q 'live: connected' "$work/watch-output" || { echo "demo: tablet-b's live channel did not open" >&2; cat "$work/watch-output" >&2; exit 1; }
on tablet-a task complete team-1-task-inspect-017
on tablet-a sync
watch_status=0
wait "$watch_pid" || watch_status=$?
sed 's/^/  /' "$work/watch-output"
[ "$watch_status" -eq 0 ] && grep -q 'pulled 1 Task' "$work/watch-output" || { echo "demo: tablet-b did not see Ana's change live" >&2; exit 1; }
on tablet-b tasks

# ---------------------------------------------------------------------------------------------
step "A photo from the field: an issue logged offline with its picture, the other tablet fetches it"
photo=scripts/demo-fixtures/cracked-mirror.jpg
note "In the car park again, Ana photographs a cracked mirror and logs the issue with the photo. IssueLogged's"
note "photo_file is a file field (25 MB, JPEG, PNG or HEIC): the photo is copied into the tablet with the event."
on tablet-a offline on
on tablet-a event issue-logged --field service_asset_id=team-1-vehicle-017 --field category=damage \
    --field "description=Left mirror cracked" --field observed_on=today --field "photo_file=@$photo"
issue_id="$(sed -n 's/^recorded IssueLogged \([0-9A-Z]*\);.*/\1/p' "$work/last-output")"
[ -n "$issue_id" ] || { echo "demo: no IssueLogged id in the output" >&2; exit 1; }
note "A file the field does not take is refused before anything is queued (exit 7): this README is no photo."
expect 7
on tablet-a event issue-logged --field service_asset_id=team-1-vehicle-017 --field category=other \
    --field "description=Not a photo" --field observed_on=today --field photo_file=@README.md
note "Back in signal: the photo goes up first (resumable; the server checks its SHA-256 and that it is a JPEG),"
note "then the issue. The server never holds the issue without its photo."
on tablet-a offline off
note "Ben's tablet pulls the issue, which names the photo by its hash, and fetches the photo itself on demand."
on tablet-b sync
on tablet-b file issue-logged "$issue_id" photo_file --out "$work/photo-on-tablet-b.jpg"
printed="$(sed -n 's/^sha256 \([0-9a-f]*\) .*/\1/p' "$work/last-output")"
sha256_of() { python3 -c 'import hashlib,sys; print(hashlib.sha256(open(sys.argv[1],"rb").read()).hexdigest())' "$1"; }
original="$(sha256_of "$photo")"
fetched="$(sha256_of "$work/photo-on-tablet-b.jpg")"
if [ "$printed" != "$original" ] || [ "$fetched" != "$original" ]; then
    echo "demo: the photo's hash does not match: printed $printed, fetched $fetched, original $original" >&2
    exit 1
fi
note "  The SHA-256 printed, that of the file Ben's tablet wrote and that of Ana's photo are the same: ${original:0:16}…"

# ---------------------------------------------------------------------------------------------
step "A dispatcher's phone holds one incident, not the whole team: a subscription"
cara_token="$(token --user op-cara --device phone-c --team team-1)"
note "Cara's phone syncs only her own scope; the team's incidents reach it through subscriptions the contracts declare."
on phone-c login --server "$server" --token "$cara_token" --scope progress:user:op-cara
on phone-c sync
on phone-c rows incident
note "She subscribes to the escalated incident: it arrives with the asset it names, and nothing else of the team."
on phone-c subscribe incident --param id=team-1-incident-0001
on phone-c rows incident
grep -q 'team-1-incident-0001' "$work/last-output" || { echo "demo: the subscribed incident did not reach phone-c" >&2; exit 1; }
on phone-c subscriptions
note "Another team's incident is refused, and nothing of it is kept (exit 6)."
expected=6
on phone-c subscribe incident --param id=team-2-incident-0001
note "Her own assignments come first: the assigned_incidents subscription, at the critical tier. Ana assigns her the incident."
on phone-c subscribe assigned_incidents --priority critical
on tablet-a edit incident team-1-incident-0001 --field assignee_id=op-cara
on tablet-a sync
on phone-c sync
on phone-c subscriptions --json
cp "$work/last-output" "$work/subscriptions.json"
subscription_id() { python3 -c 'import json,sys; print(next(s["id"] for s in json.load(open(sys.argv[1]))["subscriptions"] if s["name"] == sys.argv[2]))' "$work/subscriptions.json" "$1"; }
on phone-c rows incident --subscription "$(subscription_id assigned_incidents)"
grep -q 'team-1-incident-0001' "$work/last-output" || { echo "demo: the assigned incident did not reach phone-c through assigned_incidents" >&2; exit 1; }
note "She ends the incident subscription: her assignment still holds the incident."
on phone-c unsubscribe "$(subscription_id incident)"
on phone-c subscriptions

# ---------------------------------------------------------------------------------------------
step "A backend service reads what the devices changed: the change feed, in commit order"
feed_token="$(token --user billing --device billing-service --integration)"
curl -sf -H "Authorization: Bearer $feed_token" "$server/admin/v1/changes?contracts=Task,TaskStatusChanged&limit=1000" > "$work/feed.json" \
    || { echo "demo: the change feed did not answer" >&2; exit 1; }
python3 - "$work/feed.json" <<'PY' || { echo "demo: the change feed lacks the field-ops changes" >&2; exit 1; }
import json, sys
page = json.load(open(sys.argv[1]))
for change in page["changes"]:
    row = change["row"] or {}
    print(f'  {change["recorded_at"]}  {change["device_id"]:<9} {change["operation"]:<7} {change["contract"]} {change["id"]}'
          + (f'  status={row["status"]}' if "status" in row else ""))
print(f'  cursor {page["cursor"]}: a consumer resumes there (GET /admin/v1/changes?after=…&wait=30), see docs/integration.md')
sys.exit(0 if any(c["contract"] == "Task" for c in page["changes"]) else 1)
PY
note "The receiver got the same changes pushed to it (webhook sink 'dispatch') and the learner's statements"
note "as xAPI (sink 'lrs'): what it recorded, once each, after checking each batch's Outpost-Signature:"
delivered=0
for _ in $(seq 1 150); do
    curl -sf "$receiver/stats" > "$work/receiver-stats.json" || true
    python3 - "$work/receiver-stats.json" <<'PY' && delivered=1 && break
import json, sys
stats = json.load(open(sys.argv[1]))
sys.exit(0 if stats.get("changes", 0) > 0 and stats.get("statements", 0) > 0 else 1)
PY
    sleep 0.2
done
[ "$delivered" -eq 1 ] || { echo "demo: the receiver got no webhook or no xAPI statement" >&2; cat "$work/receiver.log" >&2; exit 1; }
sleep 1
curl -sf "$receiver/changes" > "$work/receiver-changes.json"
curl -sf "$receiver/xAPI/statements" > "$work/receiver-statements.json"
curl -sf "$receiver/stats" > "$work/receiver-stats.json"
python3 - "$work/receiver-changes.json" "$work/receiver-statements.json" "$work/receiver-stats.json" <<'PY'
import json, sys
changes = json.load(open(sys.argv[1]))
statements = json.load(open(sys.argv[2]))["statements"]
stats = json.load(open(sys.argv[3]))
for change in changes:
    row = change["row"] or {}
    print(f'  webhook  {change["operation"]:<7} {change["contract"]} {change["id"]}' + (f'  status={row["status"]}' if "status" in row else ""))
for statement in statements[:4]:
    print(f'  xAPI     {statement["actor"]["account"]["name"]} {statement["verb"]["display"]["en-US"]} {statement["object"]["id"]}')
if len(statements) > 4:
    print(f'  xAPI     … {len(statements) - 4} more statements')
print(f'  {stats["batches"]} signed batches, {stats["duplicates"]} sent again and deduplicated, {stats["bad_signatures"]} bad signatures;'
      f' {len(statements)} xAPI statements valid for tincan ({stats["invalid_statements"]} refused)')
PY
"$bin/sync-server" sinks list --data "$data" --tenant demo | sed 's/^/  /'
stop_receiver

# ---------------------------------------------------------------------------------------------
step "The audit log: every change and its outcome, in a hash chain"
stop_server
"$bin/sync-server" audit verify --data "$data"

# ---------------------------------------------------------------------------------------------
step "Where it all comes from: the contracts in contracts/, compiled by contractc"
contractc="$bin/contractc"
echo "$(find contracts -name '*.yaml' ! -name contracts.yaml | wc -l | tr -d ' ') contracts; the committed Sources/Contracts is what they generate:"
"$contractc" validate
"$contractc" generate --check
echo "Compatibility with every released version still in the field (contracts/contracts.lock):"
"$contractc" check
echo "A breaking change is caught (a released field's type changed, in a copy of contracts/):"
cp -R contracts "$work/changed"
sed -i.orig 's/^  title: { type: string, max_length: 200 }/  title: { type: int }/; s/^version: 3/version: 4/' "$work/changed/entities/unit.yaml"
check_status=0
(cd "$work" && "$contractc" check --contracts changed) > "$work/check.txt" 2>&1 || check_status=$?
head -n 6 "$work/check.txt" | sed 's/^/  /'
[ "$check_status" -eq 1 ] || { echo "demo: contractc check exited $check_status on a breaking change, expected 1" >&2; exit 1; }
note "  (contractc check exited 1)"

step "Done in $((SECONDS - started)) s after the build; the server is stopped and its folder removed"
echo "Next: sync-device --help, docs/server.md, docs/contracts.md, and \`make test\` (the same stories as assertions)."
