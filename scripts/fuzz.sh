#!/bin/sh
# Coverage-guided fuzzing (libFuzzer, with AddressSanitizer) of every parser that reads bytes
# from outside: `make fuzz`, or scripts/fuzz.sh directly.
#
#   FUZZ_SECONDS=60      how long each target runs
#   FUZZ_TARGET=name     run one target (or several, space-separated) instead of all of them:
#                        contract contract-set push gzip json pull-page cursor schema-header token range
#   FUZZ_TIMEOUT=10      seconds one input may take before it counts as a hang
#   FUZZ_RSS_MB=2048     memory a target may use before it counts as a crash
#
# Each target is an entry of fuzz/FuzzTargets, called by its harness fuzz/harnesses/fuzz-NAME.
# The harnesses are built in .build-fuzz (never in .build; Package.swift declares them only
# with OUTPOST_FUZZ set). Each runs on its committed seeds, fuzz/corpus/NAME and
# fuzz/regressions/NAME, copied into .build-fuzz/runs/NAME/corpus, where the inputs it finds
# accumulate from run to run (rm -rf .build-fuzz/runs to start over); nothing is written into
# the repository. A crash or a hang fails the run and prints where the input was written and
# the command that replays it. Once the bug is fixed, commit the input to
# fuzz/regressions/NAME so FuzzRegressionTests (make test) keeps it fixed.
set -eu

cd "$(dirname "$0")/.."
SWIFT=${SWIFT:-swift}
seconds=${FUZZ_SECONDS:-60}
timeout=${FUZZ_TIMEOUT:-10}
rss=${FUZZ_RSS_MB:-2048}
all="contract contract-set push gzip json pull-page cursor schema-header token range"
targets=${FUZZ_TARGET:-$all}
scratch=.build-fuzz

for target in $targets; do
    case " $all " in
        *" $target "*) ;;
        *) echo "fuzz: no target '$target'; the targets are: $all" >&2; exit 64 ;;
    esac
done

# -sanitize=fuzzer instruments every module for coverage and links libFuzzer's main; address
# adds AddressSanitizer to the Swift code. Both go in one -Xswiftc flag: swiftc keeps only the
# last -sanitize=, and SwiftPM's own (--sanitize, needed so it does not rename main in a debug
# executable) come in no fixed order when there are several. Debug keeps Swift's own checks
# (overflow, bounds) on.
build() {
    OUTPOST_FUZZ=1 "$SWIFT" build --scratch-path "$scratch" -c debug --sanitize fuzzer \
        -Xswiftc -sanitize=fuzzer,address -Xswiftc -parse-as-library "$@"
}

mkdir -p "$scratch"
for target in $targets; do
    echo "fuzz: building fuzz-$target"
    build --product "fuzz-$target" > "$scratch/build.log" 2>&1 || {
        grep -v 'Cannot export local symbol' "$scratch/build.log" >&2
        echo "fuzz: building fuzz-$target failed" >&2
        exit 1
    }
done
bin="$scratch/debug"

# The longest input worth trying per target: a little over its largest seed.
max_len() {
    case "$1" in
        contract | contract-set | pull-page) echo 16384 ;;
        push | gzip | json) echo 8192 ;;
        *) echo 2048 ;;
    esac
}

failed=""
summary=""
for target in $targets; do
    work="$scratch/runs/$target"
    mkdir -p "$work/corpus" "$work/artifacts"
    rm -f "$work/artifacts/"*
    cp fuzz/corpus/"$target"/* "$work/corpus/"
    if [ -d "fuzz/regressions/$target" ] && [ -n "$(ls "fuzz/regressions/$target")" ]; then
        cp fuzz/regressions/"$target"/* "$work/corpus/"
    fi
    echo "fuzz: fuzz-$target for ${seconds}s (log: $work/log)"
    status=0
    # Swift's own crash reporter off, so a trap reaches libFuzzer, which saves the input. Leak
    # checks off: LeakSanitizer takes the Swift runtime's lazily made globals for leaks.
    SWIFT_BACKTRACE=enable=no ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0}" "$bin/fuzz-$target" \
        -max_total_time="$seconds" -timeout="$timeout" -rss_limit_mb="$rss" -max_len="$(max_len "$target")" \
        -artifact_prefix="$work/artifacts/" -print_final_stats=1 -detect_leaks=0 \
        "$work/corpus" > "$work/log" 2>&1 || status=$?
    done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$work/log" | tail -n 1 || :)
    # A harness built without coverage runs blind: libFuzzer only warns, this fails.
    if grep -q 'Is the code instrumented for coverage' "$work/log"; then
        echo "fuzz: fuzz-$target saw no coverage: it was built without -sanitize=fuzzer (see $work/log)" >&2
        status=1
    fi
    artifacts=$(ls "$work/artifacts" 2>/dev/null || :)
    if [ "$status" -ne 0 ] || [ -n "$artifacts" ]; then
        failed="$failed $target"
        echo "fuzz: fuzz-$target FAILED (exit $status)" >&2
        grep -E 'Fatal error|ERROR: AddressSanitizer|ERROR: libFuzzer|SUMMARY' "$work/log" | head -n 5 >&2 || :
        for artifact in $artifacts; do
            echo "  input written to $work/artifacts/$artifact" >&2
            echo "  replay: $bin/fuzz-$target $work/artifacts/$artifact" >&2
        done
        [ -n "$artifacts" ] || echo "  no input was saved; see $work/log" >&2
        summary="$summary
  fuzz-$target: FAILED"
    else
        summary="$summary
  fuzz-$target: ${done_line:-no DONE line, see $work/log}"
    fi
done

echo "fuzz: ${seconds}s per target:$summary"
if [ -n "$failed" ]; then
    echo "fuzz: crashes or hangs in:$failed" >&2
    exit 1
fi
echo "fuzz: no crash and no hang"
