#!/usr/bin/env bash
# Run the libFuzzer harnesses built by `make fuzz-build` (build/fuzz/fuzz_*).
#
#   test/fuzz/run.sh SECONDS [TARGET...]     each target for SECONDS, one after
#                                            another, growing build/fuzz/corpus/TARGET
#   test/fuzz/run.sh -q SECONDS [TARGET...]  quick check for make test: every target at
#                                            once, seeds and regressions first, a
#                                            throw-away corpus
#   test/fuzz/run.sh --check                 exit 0 if clang can build libFuzzer
#                                            harnesses, else print why and exit 1
#
# Per target it prints the executions, executions per second and coverage
# (cov: edges, ft: features, from libFuzzer's last stats line) and exits
# non-zero if any target crashed, leaked, hung or allocated too much; the
# input that did it is saved as build/fuzz/artifacts/TARGET-crash-* (or
# leak-, timeout-, oom-) and the log beside it. Reproduce with
# build/fuzz/fuzz_TARGET FILE. The committed seeds live in
# test/fuzz/corpus/TARGET/ (seed-*: written by `make fuzz-seeds`; regress-*:
# inputs that once found a bug).
set -u
cd "$(dirname "$0")/../.." || exit 2
FUZZ_CC=${FUZZ_CC:-clang}
BUILD=build/fuzz

check() {
    local tmp rc
    if ! command -v "$FUZZ_CC" >/dev/null 2>&1; then
        echo "$FUZZ_CC not found (make deps installs clang)"
        return 1
    fi
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/ss-fuzz-check.XXXXXX")
    printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n)\n%s\n' \
        '{ (void)d; (void)n; return 0; }' >"$tmp/t.c"
    "$FUZZ_CC" -fsanitize=fuzzer,address,undefined "$tmp/t.c" -o "$tmp/t" >"$tmp/log" 2>&1
    rc=$?
    [ $rc = 0 ] ||
        echo "$FUZZ_CC cannot link -fsanitize=fuzzer,address,undefined: $(head -c 300 "$tmp/log")"
    rm -rf "$tmp"
    return $rc
}

# Options of one target: ps_msg inputs hold whole messages.
options() {
    case "$1" in
    ps_msg) echo "-max_len=20000" ;;
    *) echo "" ;;
    esac
}

# Run target $1 for $2 seconds with work corpus $3; log to $4.
run_one() {
    local t=$1 secs=$2 work=$3 log=$4
    mkdir -p "$work"
    # shellcheck disable=SC2046
    UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1} \
        "$BUILD/fuzz_$t" -max_total_time="$secs" -print_final_stats=1 -timeout=10 \
        -rss_limit_mb=2048 -malloc_limit_mb=512 -artifact_prefix="$BUILD/artifacts/$t-" \
        $(options "$t") "$work" "test/fuzz/corpus/$t" >"$log" 2>&1
}

# One summary line for target $1 from log $2 and exit status $3.
summary() {
    local t=$1 log=$2 rc=$3 execs rate last cov ft corp
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    last=$(grep -E '^#[0-9]+[[:space:]]+[A-Z]+[[:space:]]+cov:' "$log" | tail -1)
    cov=$(echo "$last" | sed -n 's/.* cov: \([0-9]*\).*/\1/p')
    ft=$(echo "$last" | sed -n 's/.* ft: \([0-9]*\).*/\1/p')
    corp=$(echo "$last" | sed -n 's/.* corp: \([0-9]*\)\/.*/\1/p')
    if [ "$rc" = 0 ]; then
        printf '%-8s %10s execs %7s/s  cov: %-5s ft: %-6s corpus: %s\n' "$t" "${execs:-?}" \
            "${rate:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}"
    else
        printf '%-8s FAILED (exit %s) after %s execs; log %s\n' "$t" "$rc" "${execs:-?}" "$log"
        grep -E '^(SUMMARY|fuzz check failed|==[0-9]+==ERROR)|Test unit written' "$log" \
            | head -5 | sed 's/^/    /'
    fi
}

# All of the work in one function, so that bash has read the whole script before
# it starts (editing it while make test runs cannot change what runs).
main() {
    if [ "${1:-}" = --check ]; then
        check
        exit
    fi
    quick=0
    if [ "${1:-}" = -q ]; then
        quick=1
        shift
    fi
    seconds=${1:?usage: test/fuzz/run.sh [-q] SECONDS [TARGET...]}
    shift
    targets=("$@")
    if [ ${#targets[@]} = 0 ]; then
        for f in test/fuzz/fuzz_*.c; do
            t=${f#test/fuzz/fuzz_}
            targets+=("${t%.c}")
        done
    fi
    mkdir -p "$BUILD/artifacts"

    for t in "${targets[@]}"; do
        if [ ! -x "$BUILD/fuzz_$t" ] || [ ! -d "test/fuzz/corpus/$t" ]; then
            echo "no harness $BUILD/fuzz_$t or corpus test/fuzz/corpus/$t (make fuzz-build)" >&2
            exit 2
        fi
    done

    failed=0
    if [ $quick = 1 ]; then
        tmp=$(mktemp -d "${TMPDIR:-/tmp}/ss-fuzz-quick.XXXXXX")
        pids=()
        for t in "${targets[@]}"; do
            run_one "$t" "$seconds" "$tmp/corpus-$t" "$tmp/$t.log" &
            pids+=($!)
        done
        for i in "${!targets[@]}"; do
            t=${targets[$i]}
            wait "${pids[$i]}"
            rc=$?
            log="$tmp/$t.log"
            if [ $rc != 0 ]; then
                failed=1
                log="$BUILD/artifacts/$t.log"
                cp "$tmp/$t.log" "$log"
            fi
            summary "$t" "$log" $rc
            [ $rc = 0 ] || tail -n 40 "$log"
        done
        rm -rf "$tmp"
    else
        for t in "${targets[@]}"; do
            log="$BUILD/artifacts/$t.log"
            run_one "$t" "$seconds" "$BUILD/corpus/$t" "$log"
            rc=$?
            summary "$t" "$log" $rc
            [ $rc = 0 ] || failed=1
        done
    fi
    exit $failed
}

main "$@"
