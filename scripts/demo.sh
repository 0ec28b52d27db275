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
