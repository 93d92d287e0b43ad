#!/usr/bin/env bash
# Run every test: unit tests plain, under ASan+UBSan and under TSan, a short
# run of each libFuzzer harness (test/fuzz/: its seeds and regression inputs,
# then FUZZ_TEST_SECONDS of fuzzing; skipped with the reason when clang cannot
# build them), then the integration tests on localhost clusters, then the
# fault drills ($ASAN_DRILLS) again with ASan+UBSan-built daemons. A test
# that cannot run here (exit 77, "SKIP: why" in its log: lib.sh skip) is
# reported SKIP with the reason, not PASS. Prints "N passed, N failed,
# N skipped" last and exits non-zero when anything failed.
#   TESTS_ONLY=unit|fuzz|integration   run one kind only
#   TEST_FILTER=substring         run the tests whose name contains it
set -u
cd "$(dirname "$0")/.."
JOBS=${JOBS:-2}
passed=0; failed=0; skipped=0; failed_names=()
SKIP_RC=77  # a test that cannot run here (test/integration/lib.sh skip)
LOGDIR=$(mktemp -d "${TMPDIR:-/tmp}/shadowsync-tests.XXXXXX")
# real data: the shared folder beside the clone, else the copy in test/data
if [ -z "${SS_DATA_DIR:-}" ]; then
    SS_DATA_DIR=$(pwd)/test/data
    [ -f ../shared/data/criteo/criteo_train_head10k.tsv ] && SS_DATA_DIR=$(cd .. && pwd)/shared/data
fi
export SS_DATA_DIR

record() {  # name rc logfile [seconds]
    local took=${4:+ (${4} s)}
    if [ "$2" = 0 ]; then
        passed=$((passed + 1)); echo "PASS  $1$took"
    elif [ "$2" = "$SKIP_RC" ]; then
        skipped=$((skipped + 1))
        echo "SKIP  $1: $(sed -n 's/^SKIP: //p' "$3" | tail -n 1)$took"
    else
        failed=$((failed + 1)); failed_names+=("$1"); echo "FAIL  $1 (exit $2)$took"
        tail -n 60 "$3" | sed 's/^/    | /'
    fi
}

build() {  # make args...
    if ! make --no-print-directory -j"$JOBS" "$@" >"$LOGDIR/build.log" 2>&1; then
        cat "$LOGDIR/build.log"
        echo "build failed: make $*"
        failed=$((failed + 1)); failed_names+=("build $*")
        return 1
    fi
}

want() { [ -z "${TEST_FILTER:-}" ] || [[ "$1" == *"$TEST_FILTER"* ]]; }

# fault drills that also run with ASan+UBSan-built daemons (issue 9)
ASAN_DRILLS=${ASAN_DRILLS:-"test_train_faults test_sync_faults test_trainer_loss test_resume"}

run_unit() {  # build-dir label
    for t in "$1"/test/test_*; do
        [ -x "$t" ] || continue
        name="unit/$2/$(basename "$t")"
        want "$name" || continue
        log="$LOGDIR/$(echo "$name" | tr / _).log"
        timeout 300 "$t" >"$log" 2>&1
        record "$name" $? "$log"
    done
}

units=$(ls test/unit/test_*.c 2>/dev/null | sed 's#test/unit/\(.*\)\.c#\1#')
if [ "${TESTS_ONLY:-unit}" = unit ] || [ -z "${TESTS_ONLY:-}" ]; then
    if build build unit; then run_unit build/rel plain; fi
    asan_tests=$(for u in $units; do echo build/address-undefined/test/$u; done)
    if build SANITIZE=address,undefined $asan_tests; then
        ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
            run_unit build/address-undefined asan+ubsan
    fi
    tsan_tests=$(for u in $units; do echo build/thread/test/$u; done)
    if build SANITIZE=thread $tsan_tests; then
        TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$(pwd)/test/tsan.supp" \
            run_unit build/thread tsan
    fi
fi

# Every harness at once (they are single-threaded); recorded in order.
if [ -z "${TESTS_ONLY:-}" ] || [ "${TESTS_ONLY:-}" = fuzz ]; then
    fuzz_targets=$(ls test/fuzz/fuzz_*.c 2>/dev/null | sed 's#test/fuzz/fuzz_\(.*\)\.c#\1#')
    if ! why=$(test/fuzz/run.sh --check); then
        echo "SKIP  fuzz: $why"
        skipped=$((skipped + 1))
    elif build fuzz-build; then
        pids=(); names=()
        for t in $fuzz_targets; do
            want "fuzz/$t" || continue
            test/fuzz/run.sh -q "${FUZZ_TEST_SECONDS:-4}" "$t" >"$LOGDIR/fuzz_$t.log" 2>&1 &
            pids+=($!); names+=("$t")
        done
        for i in "${!names[@]}"; do
            wait "${pids[$i]}"
            record "fuzz/${names[$i]}" $? "$LOGDIR/fuzz_${names[$i]}.log"
            head -n 1 "$LOGDIR/fuzz_${names[$i]}.log" | sed 's/^/      /'
        done
    fi
fi

if [ -z "${TESTS_ONLY:-}" ] || [ "${TESTS_ONLY:-}" = integration ]; then
    build build build/rel/test/ps_probe || true
    for t in test/integration/test_*.sh; do
        [ -f "$t" ] || continue
        name="integration/$(basename "$t" .sh)"
        want "$name" || continue
        log="$LOGDIR/$(basename "$t").log"
        t0=$SECONDS
        timeout 600 bash "$t" >"$log" 2>&1
        record "$name" $? "$log" $((SECONDS - t0))
    done
    # The fault drills again with the daemons built with ASan+UBSan: a report
    # from any process of the job (they write to their own files) fails the
    # test even when the job itself ended well.
    SAN_BIN=build/address-undefined/bin
    if build SANITIZE=address,undefined $SAN_BIN/shadow-ps $SAN_BIN/shadow-trainer \
        $SAN_BIN/shadow-ctl $SAN_BIN/shadow-datagen; then
        for t in $ASAN_DRILLS; do
            name="integration/asan+ubsan/$t"
            want "$name" || continue
            log="$LOGDIR/asan_$t.log"; rep="$LOGDIR/asan_$t.reports"
            mkdir -p "$rep"
            t0=$SECONDS
            # test_resume under ASan: s-bmuf alone (the most state to restore; the
            # plain run covers s-ma and s-easgd), to keep make test under 30 min
            RESUME_ALGOS=s-bmuf BIN=$(pwd)/$SAN_BIN ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:log_path=$rep/asan" \
                UBSAN_OPTIONS="print_stacktrace=1:log_path=$rep/ubsan" \
                timeout 600 bash "test/integration/$t.sh" >"$log" 2>&1
            rc=$?
            if [ "$rc" = 0 ] && [ -n "$(ls -A "$rep")" ]; then
                rc=1; { echo "sanitizer reports:"; cat "$rep"/*; } >>"$log"
            fi
            record "$name" $rc "$log" $((SECONDS - t0))
        done
    fi
fi

echo
[ "$failed" -gt 0 ] && printf 'failed: %s\n' "${failed_names[*]}"
echo "logs: $LOGDIR"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
