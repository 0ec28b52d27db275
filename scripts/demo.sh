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

bold "Done"
echo "The sync server and client library build on this generated code; their demo joins this one as they land."
