# Outpost — every entry point a developer or CI needs.
#   make test             check the style (make lint), build (executables included), run every test
#                         (end-to-end ones too, and the storage suite on a throwaway PostgreSQL 15,
#                         scripts/with-postgres.sh), the console in a browser (make test-console),
#                         and check the generated code is current
#   make test-examples    each example (examples/*) as the package of its own it is: its generated
#                         module checked with the plugin, built, its end-to-end tests run (in make test)
#   make test-adopting    docs/adopting.md run as written in an empty folder: a new package on Outpost
#                         syncs a note between two devices (scripts/run-tutorial.py; in make test)
#   make test-console     the operator console in headless Chromium, driven by selenium, against a real
#                         sync-server and sync-device devices (Tests/Console); SCREENSHOTS=DIR writes
#                         a PNG of each page (docs/console holds the committed ones)
#   make format           swift format every hand-written Swift file in place (.swift-format; the
#                         engines' with .swift-format-engines)
#   make lint             fail on any file swift format would change, and on an engine's public
#                         declaration without a doc comment (part of make test)
#   make demo             a server on SQLite and sync-device devices through the learner and field-ops stories
#   make demo-postgres    the same demo with the server on a throwaway PostgreSQL
#   make soak             the crash suite (real processes killed with kill -9) with SOAK_ITERATIONS
#                         kills per crash point instead of make test's few (OUTPOST_CRASH_SEED=N
#                         for another seed); prints where the kills landed; then PostgreSQL
#                         faults under load with a 30 s outage (make test's is 6 s)
#   make sim              the deterministic simulation (Tests/SimulationTests), release build: SEEDS
#                         seeded schedules (FIRST_SEED=…, STEPS=…, DEVICES=…, JOBS=…); SEED=N replays
#                         one, SCHEDULE=file replays a shrunk schedule a failure wrote, TRACE=1 prints
#                         every step and exchange
#   make codegen          regenerate Sources/Contracts from contracts/, and contracts/contract.schema.json;
#                         the same for every example (EXAMPLES: examples/inspections/contracts →
#                         examples/inspections/Sources/InspectionContracts)
#   make check-generated  fail if a generated module or a contracts folder's JSON Schema differs
#                         from what the compiler writes (the sample's and every example's)
#   make compat           fail if a contract change would break a device in the field (contractc
#                         check, on every contracts folder)
#   make lock             record the current contract versions as released (contractc lock) of
#                         contracts/, or of CONTRACTS=examples/inspections/contracts
#   make bench            the performance figures recorded in docs/PERFORMANCE.md (starts its own PostgreSQL)
#   make server           sync-server on a seeded data folder (DATA=…, PORT=…)
#   make fuzz             libFuzzer with AddressSanitizer on every parser of outside bytes (contracts,
#                         push bodies, JSON, pull pages, cursors, schema header, tokens, Range),
#                         FUZZ_SECONDS per target (FUZZ_TARGET=name for one); fails on a crash or a
#                         hang and prints the command that replays it (scripts/fuzz.sh)
#   make fuzz-api         schemathesis against a live sync-server and docs/openapi.yaml: no 500, every
#                         response as documented (FUZZ_EXAMPLES=N per operation, SEED=N to replay)
#   make docs             the DocC documentation of the engines (ContractRuntime, SyncProtocol,
#                         ContractCompiler, SyncServer, SyncClient) into .build/docs, with the
#                         swift-docc-plugin; any docc warning (a broken ``link``, an undocumented
#                         parameter of a documented function) fails it

SWIFT      ?= swift
CONTRACTS  ?= contracts
GENERATED  ?= Sources/Contracts
# The example apps, each with its own contracts/ and the module generated from them in
# Sources/<Name>Contracts (the one folder there).
EXAMPLES   ?= examples/inspections
# Every contracts folder with the module generated from it, as contracts:module pairs.
# The engines' own test contracts, generated into the EngineTestContracts target.
ENGINE_TEST_CONTRACTS := Tests/Support/EngineContracts
CONTRACT_SETS := $(CONTRACTS):$(GENERATED) $(foreach example,$(EXAMPLES),$(example)/contracts:$(wildcard $(example)/Sources/*Contracts)) \
	$(ENGINE_TEST_CONTRACTS)/contracts:$(ENGINE_TEST_CONTRACTS)/Sources
BIN        := $(shell $(SWIFT) build --show-bin-path 2>/dev/null)
CONTRACTC  := $(BIN)/contractc

.PHONY: all build contractc codegen check-generated check-alerts compat lock test test-console test-examples test-adopting demo demo-postgres soak sim bench server fuzz fuzz-api docs format lint clean

all: build

build:
	$(SWIFT) build

contractc:
	@$(SWIFT) build --product contractc

codegen: contractc
	@set -e; for set in $(CONTRACT_SETS); do \
		contracts=$${set%%:*}; generated=$${set#*:}; \
		[ -n "$$generated" ] || { echo "error: no Sources/*Contracts folder beside $$contracts/ to generate into"; exit 1; }; \
		echo "$(CONTRACTC) generate --contracts $$contracts --output $$generated"; \
		$(CONTRACTC) generate --contracts "$$contracts" --output "$$generated"; \
		$(CONTRACTC) schema --contracts "$$contracts"; \
	done

# Regenerates each contracts folder into a temporary folder and diffs it with the committed code.
check-generated: contractc
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	for set in $(CONTRACT_SETS); do \
		contracts=$${set%%:*}; generated=$${set#*:}; \
		rm -rf "$$tmp/out"; \
		$(CONTRACTC) generate --contracts "$$contracts" --output "$$tmp/out" > /dev/null || exit 1; \
		if diff -ru --exclude='.*' "$$generated" "$$tmp/out"; then \
			echo "check-generated: $$generated matches $$contracts/"; \
		else \
			echo ""; \
			echo "error: $$generated is out of date with $$contracts/ (diff above)."; \
			echo "help: run 'make codegen' and commit both the contracts and $$generated."; \
			exit 1; \
		fi; \
		$(CONTRACTC) schema --contracts "$$contracts" --check || exit 1; \
	done
	@# The same check through SwiftPM's command plugin, as an adopter's package runs it.
	@for set in $(CONTRACT_SETS); do \
		contracts=$${set%%:*}; generated=$${set#*:}; \
		$(SWIFT) package --allow-writing-to-package-directory generate-contracts \
			--contracts "$$contracts" --output "$$generated" --check > /dev/null || exit 1; \
		echo "check-generated: swift package generate-contracts agrees for $$contracts/"; \
	done

# Compatibility with every released version still supported (each folder's contracts.lock).
compat: contractc
	@set -e; for set in $(CONTRACT_SETS); do \
		echo "$(CONTRACTC) check --contracts $${set%%:*}"; $(CONTRACTC) check --contracts "$${set%%:*}"; \
	done

# One contracts folder at a time: a release is of one app (CONTRACTS=examples/inspections/contracts
# for the example).
lock: contractc
	$(CONTRACTC) lock --contracts $(CONTRACTS)

# The storage conformance suite and the multi-process tests need a PostgreSQL: the script starts
# one for the run (OUTPOST_TEST_POSTGRES_URL) and stops it afterwards, pass or fail. The servers
# the tests start log warnings and errors only (one line per request otherwise); LOG_LEVEL=info
# make test shows everything.
# The Swift sources swift format keeps in one style (.swift-format): all but the generated
# modules, which only the contract compiler writes, and the compiler's golden fixtures.
FORMAT_FILES = $(shell find Sources client server codegen bench fuzz Tests examples -name '*.swift' \
	-not -path '*/.build*' -not -path 'Sources/Contracts/*' -not -path 'examples/*/Sources/*Contracts/*' \
	-not -path 'Tests/Support/EngineContracts/Sources/*' -not -path '*/Fixtures/*' | sort)
# The engines' modules, whose public API adopters build on: the same style, and every public
# declaration documented (.swift-format-engines: .swift-format with
# AllPublicDeclarationsHaveDocumentation on). Each file is in exactly one of the two lists.
ENGINE_DIRS  = Sources/ContractRuntime Sources/SyncProtocol client/SyncClient client/SyncClientNIO \
	server/SyncServer server/SyncServerCommands codegen/ContractCompiler
ENGINE_FILES = $(filter $(addsuffix /%,$(ENGINE_DIRS)),$(FORMAT_FILES))
OTHER_FILES  = $(filter-out $(ENGINE_FILES),$(FORMAT_FILES))

format:
	@echo "swift format: $(words $(ENGINE_FILES)) engine files, $(words $(OTHER_FILES)) others"
	@$(SWIFT) format format --in-place --configuration .swift-format-engines $(ENGINE_FILES)
	@$(SWIFT) format format --in-place --configuration .swift-format $(OTHER_FILES)

lint:
	@echo "swift format lint --strict: $(words $(ENGINE_FILES)) engine files (.swift-format-engines), $(words $(OTHER_FILES)) others"
	@$(SWIFT) format lint --strict --configuration .swift-format-engines $(ENGINE_FILES)
	@$(SWIFT) format lint --strict --configuration .swift-format $(OTHER_FILES)

# The Prometheus alert rules shipped in docs/alerts: valid, and firing on what their unit tests say.
check-alerts:
	@command -v promtool >/dev/null || { echo "check-alerts: promtool is missing (Debian: apt-get install prometheus)" >&2; exit 1; }
	cd docs/alerts && promtool check rules outpost.rules.yml && promtool test rules outpost.rules.test.yml

# Tests running at once in the test process. Unbounded, a full run on 2 cores started every
# suite together and loopback requests timed out behind one another; 8 at once took no longer.
TEST_WIDTH ?= 8
test: lint check-generated compat check-alerts
	$(SWIFT) build --build-tests
	LOG_LEVEL=$${LOG_LEVEL:-warning} SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH=$(TEST_WIDTH) \
		scripts/with-postgres.sh --fast -- $(SWIFT) test --skip-build
	$(MAKE) test-console
	$(MAKE) test-examples
	$(MAKE) test-adopting

# Each example, a package of its own on Outpost's public products (examples/*/Package.swift), as
# an adopter's is: its generated module checked through the plugin, everything built, its tests
# run (its own server as a real process, on SQLite and on a throwaway PostgreSQL).
test-examples:
	@set -e; for example in $(EXAMPLES); do \
		echo "test-examples: $$example"; \
		cd "$(CURDIR)/$$example"; \
		$(SWIFT) package --allow-writing-to-package-directory generate-contracts --output "$$(ls -d Sources/*Contracts)" --check; \
		$(SWIFT) build --build-tests; \
		LOG_LEVEL=$${LOG_LEVEL:-warning} "$(CURDIR)/scripts/with-postgres.sh" --fast -- $(SWIFT) test --skip-build; \
	done

# docs/adopting.md run as written, in an empty temporary folder: a new package with a contract of
# its own, generated with the plugin, a server and a device built, two devices syncing a note.
test-adopting:
	python3 scripts/run-tutorial.py docs/adopting.md

# The console in a real browser: Debian's chromium and chromium-driver, PyPI's selenium.
SCREENSHOTS ?=
test-console:
	@$(SWIFT) build --product sync-server 2>&1 | tail -n 1
	@$(SWIFT) build --product sync-device 2>&1 | tail -n 1
	python3 Tests/Console/console_browser_test.py --bin "$(BIN)" $(if $(SCREENSHOTS),--screenshots $(SCREENSHOTS))

demo:
	@scripts/demo.sh

# scripts/demo.sh with the server on a throwaway PostgreSQL (OUTPOST_POSTGRES_URL).
demo-postgres:
	@scripts/with-postgres.sh --fast -- sh -c 'OUTPOST_POSTGRES_URL="$$OUTPOST_TEST_POSTGRES_URL" scripts/demo.sh'

SOAK_ITERATIONS ?= 100
soak:
	$(SWIFT) build --build-tests
	OUTPOST_SOAK_ITERATIONS=$(SOAK_ITERATIONS) OUTPOST_LARGE_FILE_MIB=1024 $(SWIFT) test --skip-build --filter 'CrashTests'
	OUTPOST_FAULT_OUTAGE_SECONDS=30 scripts/with-postgres.sh --fast -- $(SWIFT) test --skip-build --filter PostgresFaultTests

bench:
	$(SWIFT) build -c release --product contractc
	$(SWIFT) build -c release --product sync-server
	$(SWIFT) build -c release --product outpost-bench
	scripts/with-postgres.sh -- $$($(SWIFT) build -c release --show-bin-path)/outpost-bench

# Seeds run SWIFT_DETERMINISTIC_HASHING=1, so a replay iterates every dictionary as the run did.
SEEDS      ?= 1000
FIRST_SEED ?= 1
STEPS      ?= 80
DEVICES    ?= 3
JOBS       ?= 2
# -enable-testing: the test bundle holds suites that @testable import, which a release build refuses without it.
sim:
	$(SWIFT) build -c release --build-tests -Xswiftc -enable-testing
	SWIFT_DETERMINISTIC_HASHING=1 OUTPOST_SIM_SEEDS=$(SEEDS) OUTPOST_SIM_FIRST_SEED=$(FIRST_SEED) OUTPOST_SIM_STEPS=$(STEPS) \
	OUTPOST_SIM_DEVICES=$(DEVICES) OUTPOST_SIM_JOBS=$(JOBS) OUTPOST_SIM_TRACE=$(TRACE) \
	$(if $(SEED),OUTPOST_SIM_SEED=$(SEED)) $(if $(SCHEDULE),OUTPOST_SIM_SCHEDULE=$(abspath $(SCHEDULE))) \
	$(SWIFT) test -c release --skip-build --filter 'SimulationTests.SimulationTests/seededSchedules'

DATA ?= .outpost-data
PORT ?= 8080
server:
	$(SWIFT) build --product sync-server
	$(BIN)/sync-server seed --data $(DATA)
	$(BIN)/sync-server serve --data $(DATA) --port $(PORT)

clean:
	rm -rf .build

FUZZ_SECONDS ?= 60
FUZZ_TARGET  ?=
fuzz:
	FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_TARGET="$(FUZZ_TARGET)" scripts/fuzz.sh

# Requests generated per operation and token (not EXAMPLES, the example folders of codegen).
FUZZ_EXAMPLES ?= 100
fuzz-api:
	FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) scripts/fuzz-api.sh

# The engines' DocC catalogs (Sources/ContractRuntime/ContractRuntime.docc,
# Sources/SyncProtocol/SyncProtocol.docc, codegen/ContractCompiler/ContractCompiler.docc,
# server/SyncServer/SyncServer.docc, client/SyncClient/SyncClient.docc) and their public symbols'
# doc comments, built by the swift-docc-plugin (a dependency in Package.swift, resolved from where
# the other packages come from; docc itself ships with the toolchain). --warnings-as-errors is
# docc's own: a warning fails the target it is in, and the command.
DOCS_TARGETS ?= ContractRuntime SyncProtocol ContractCompiler SyncServer SyncClient
DOCS_OUTPUT  ?= .build/docs
docs:
	$(SWIFT) package --allow-writing-to-directory $(DOCS_OUTPUT) generate-documentation \
		$(foreach target,$(DOCS_TARGETS),--target $(target)) --output-path $(DOCS_OUTPUT) --warnings-as-errors
