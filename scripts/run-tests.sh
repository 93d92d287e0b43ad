#!/usr/bin/env bash
# Run the tests, all of them (make test) or a selection (make check, or by
# hand), building only what the selection needs. docs/testing.md has the tiers.
#
# Every test has a name, a kind and tags:
#   unit/plain/test_X              test/unit/test_X.c, release build (build/rel)
#   unit/portable/test_X           the same with SS_ISA=portable (programs tagged portable:
#                                  kernels with vector paths, as on a CPU without AVX-512)
#   unit/asan+ubsan/test_X         built with ASan+UBSan (build/address-undefined)
#   unit/tsan/test_X               built with TSan (build/thread)
#   fuzz/X                         a short run of the libFuzzer harness test/fuzz/fuzz_X.c
#   integration/test_X             test/integration/test_X.sh on a localhost cluster
#   integration/asan+ubsan/test_X  the same with ASan+UBSan-built daemons (scripts tagged
#                                  drill): a sanitizer report from any process fails it
# A test's own tags live in one place: the "# tags: ..." line at the top of an
# integration script, the test's row in test/unit/tags for a unit program.
# The kind of run adds one: quick (unit/plain, unit/portable: every unit program
# is quick), asan, tsan, fuzz. make check runs the tests tagged quick.
#
#   scripts/run-tests.sh [options]
#   --list            print the selected tests (name, kind, tags); build and run nothing
#   --tag TAG         only tests with TAG; repeat for any of several (env TAGS="a b")
#   --kind KIND       unit, fuzz or integration (env TESTS_ONLY)
#   --filter STR      only tests whose name contains STR (env TEST_FILTER)
#   --san LIST        sanitizer runs: asan, tsan, "asan,tsan" or none (env SANITIZERS).
#                     With no selection both run; a selection runs them only when it
#                     names them (--san, --tag asan|tsan, a filter containing asan|tsan)
#   -j N              plain unit runs N at a time, and make's jobs (env JOBS, default 2)
# A test that cannot run here (exit 77, "SKIP: why" in its log: lib.sh skip) is
# reported SKIP with the reason, not PASS; a case a passing test could not run
# ("SKIP case: why", lib.sh skip_case; cmocka's skip()) is listed under its
# PASS line and counted in a line before the last. Every result line gives the test's
# seconds; the five slowest are listed at the end, then "N passed, N failed,
# N skipped" last; exits non-zero when anything failed.
#
# (Test names and make targets hold no spaces: lists of them split on words on
# purpose, and picked() matches names against glob patterns.)
# shellcheck disable=SC2046,SC2053
set -u
cd "$(dirname "$0")/.." || exit 2

usage() { sed -n '2,/^# (Test names/{/^# (Test names/d;s/^# \{0,1\}//;p}' "$0"; }

TAGS=${TAGS:-}
KIND=${TESTS_ONLY:-}
FILTER=${TEST_FILTER:-}
SAN=${SANITIZERS:-}
JOBS=${JOBS:-2}
LIST=0
while [ $# -gt 0 ]; do
    case "$1" in
        --list) LIST=1 ;;
        --tag) TAGS="$TAGS ${2:?--tag needs a tag}"; shift ;;
        --tag=*) TAGS="$TAGS ${1#--tag=}" ;;
        --kind) KIND=${2:?--kind needs unit, fuzz or integration}; shift ;;
        --kind=*) KIND=${1#--kind=} ;;
        --filter) FILTER=${2:?--filter needs a string}; shift ;;
        --filter=*) FILTER=${1#--filter=} ;;
        --san) SAN=${2:?--san needs asan, tsan, asan,tsan or none}; shift ;;
        --san=*) SAN=${1#--san=} ;;
        -j) JOBS=${2:?-j needs a number}; shift ;;
        -j*) JOBS=${1#-j} ;;
        -h|--help) usage; exit 0 ;;
        *) echo "run-tests.sh: unknown argument '$1' (--help lists them)" >&2; exit 2 ;;
    esac
    shift
done
case "$KIND" in
    ""|unit|fuzz|integration) ;;
    *) echo "run-tests.sh: unknown kind '$KIND' (unit, fuzz or integration)" >&2; exit 2 ;;
esac
case "$JOBS" in
    ''|*[!0-9]*|0)
        echo "run-tests.sh: -j/JOBS must be a positive number, not '$JOBS'" >&2; exit 2 ;;
esac

# Which sanitizer runs a selection gets (see --san above).
if [ -z "$SAN" ]; then
    if [ -z "$TAGS$KIND$FILTER" ]; then
        SAN="asan tsan"
    else
        for s in asan tsan; do
            case " $TAGS " in *" $s "*) SAN="$SAN $s" ;; esac
            case "$FILTER" in *"$s"*) SAN="$SAN $s" ;; esac
        done
    fi
fi
SAN=" ${SAN//,/ } "
case "$SAN" in *" none "*) SAN=" " ;; esac
for s in $SAN; do
    case "$s" in asan|tsan) ;;
        *) echo "run-tests.sh: unknown sanitizer run '$s' (asan, tsan or none)" >&2; exit 2 ;;
    esac
done

# ---- the tests ----
NAMES=(); KINDS=(); TAGSOF=()
add() {  # name kind tags: added when the selection takes it
    local t ok=0
    [ -z "$KIND" ] || [ "$KIND" = "$2" ] || return 0
    [ -z "$FILTER" ] || [[ "$1" == *"$FILTER"* ]] || return 0
    if [ -n "${TAGS// /}" ]; then
        for t in $TAGS; do
            case " $3 " in *" $t "*) ok=1 ;; esac
        done
        [ $ok = 1 ] || return 0
    fi
    NAMES+=("$1"); KINDS+=("$2"); TAGSOF+=("$(echo $3)")
}
ran() { [[ "$SAN" == *" $1 "* ]]; }  # sanitizer run asan|tsan asked for

declare -A UNIT_TAGS
line=0
while read -r prog tags; do
    line=$((line + 1))
    case "$prog" in ''|'#'*) continue ;; esac
    if [ ! -f "test/unit/$prog.c" ]; then
        echo "run-tests.sh: test/unit/tags:$line: no unit program $prog (test/unit/$prog.c)" >&2
        exit 2
    fi
    UNIT_TAGS[$prog]=$tags
done <test/unit/tags
UNITS=$(ls test/unit/test_*.c 2>/dev/null | sed 's#test/unit/\(.*\)\.c#\1#')
for u in $UNITS; do add "unit/plain/$u" unit "quick ${UNIT_TAGS[$u]:-}"; done
for u in $UNITS; do
    case " ${UNIT_TAGS[$u]:-} " in
        *" portable "*) add "unit/portable/$u" unit "quick ${UNIT_TAGS[$u]}" ;;
    esac
done
for u in $UNITS; do ! ran asan || add "unit/asan+ubsan/$u" unit "asan ${UNIT_TAGS[$u]:-}"; done
for u in $UNITS; do ! ran tsan || add "unit/tsan/$u" unit "tsan ${UNIT_TAGS[$u]:-}"; done
for f in test/fuzz/fuzz_*.c; do
    [ -f "$f" ] || continue
    f=${f#test/fuzz/fuzz_}; add "fuzz/${f%.c}" fuzz fuzz
done
script_tags() { sed -n '1,20{s/^# tags: *//p}' "$1" | head -n 1; }
for t in test/integration/test_*.sh; do
    [ -f "$t" ] || continue
    add "integration/$(basename "$t" .sh)" integration "$(script_tags "$t")"
done
if ran asan; then
    for t in test/integration/test_*.sh; do
        tags=" $(script_tags "$t") "
        [[ "$tags" == *" drill "* ]] || continue
        add "integration/asan+ubsan/$(basename "$t" .sh)" integration "asan ${tags/ quick / }"
    done
fi

if [ ${#NAMES[@]} = 0 ]; then
    echo "run-tests.sh: no test matches the selection (--list shows the tests and their tags)" >&2
    exit 2
fi
if [ $LIST = 1 ]; then
    for i in "${!NAMES[@]}"; do
        printf '%-42s %-12s %s\n' "${NAMES[$i]}" "${KINDS[$i]}" "${TAGSOF[$i]}"
    done
    exit 0
fi

# ---- results ----
passed=0; failed=0; skipped=0; failed_names=()
SKIP_RC=77  # a test that cannot run here (test/integration/lib.sh skip)
LOGDIR=$(mktemp -d "${TMPDIR:-/tmp}/shadowsync-tests.XXXXXX")
TIMES=$LOGDIR/times.txt  # seconds name, one line per test
: >"$TIMES"
# real data: the shared folder beside the clone, else the copy in test/data
if [ -z "${SS_DATA_DIR:-}" ]; then
    SS_DATA_DIR=$(pwd)/test/data
    [ -f ../shared/data/criteo/criteo_train_head10k.tsv ] && SS_DATA_DIR=$(cd .. && pwd)/shared/data
fi
export SS_DATA_DIR

logof() { echo "$LOGDIR/$(echo "$1" | tr '/+' '__').log"; }

# s_cases_skipped LOG: the cases a passing test skipped, listed under its
# PASS line and counted: "SKIP case: why" (lib.sh skip_case), "SKIP: why"
# printed by a unit program, and cmocka's "[  SKIPPED ] name"
cases_skipped=0
s_cases_skipped() {
    local why n
    why=$(sed -n -e 's/^SKIP case: //p' -e 's/^SKIP: //p' \
        -e '/^\[  SKIPPED \] [0-9]* test(s)/d' -e 's/^\[  SKIPPED \] \(.*\)/cmocka skip() in \1/p' "$1" |
        sort -u)
    [ -n "$why" ] || return 0
    n=$(printf '%s\n' "$why" | wc -l)
    cases_skipped=$((cases_skipped + n))
    printf '%s\n' "$why" | sed 's/^/      case skipped: /'
}

record() {  # name rc logfile [seconds]
    local took=${4:+ (${4} s)}
    [ -n "${4:-}" ] && echo "$4 $1" >>"$TIMES"
    if [ "$2" = 0 ]; then
        passed=$((passed + 1)); echo "PASS  $1$took"
        s_cases_skipped "$3"
    elif [ "$2" = "$SKIP_RC" ]; then
        skipped=$((skipped + 1))
        echo "SKIP  $1: $(sed -n 's/^SKIP: //p' "$3" | tail -n 1)$took"
    else
        failed=$((failed + 1)); failed_names+=("$1"); echo "FAIL  $1 (exit $2)$took"
        tail -n 60 "$3" | sed 's/^/    | /'
    fi
    case "$1" in fuzz/*) head -n 1 "$3" | sed 's/^/      /' ;; esac
}

build() {  # make args...: prints how long make took (the rest of a run is tests)
    local t0=$SECONDS
    if ! make --no-print-directory -j"$JOBS" "$@" >"$LOGDIR/build.log" 2>&1; then
        cat "$LOGDIR/build.log"
        echo "build failed: make $*"
        failed=$((failed + 1)); failed_names+=("build $*")
        return 1
    fi
    local what=release
    case " $* " in *" SANITIZE="*) what=$(echo "$*" | grep -o 'SANITIZE=[^ ]*') ;;
        *' fuzz-build '*) what="fuzz-build" ;;
    esac
    echo "built $what ($((SECONDS - t0)) s)"
}

# The ASan+UBSan runs of the fault drills: the daemons write their reports to
# their own files, so a report fails the test even when the job ended well.
SAN_BIN=build/address-undefined/bin
run_drill() {  # script reports-dir: output to stdout
    local rep=$2 rc
    mkdir -p "$rep"
    # test_resume under ASan: s-bmuf alone (the most state to restore; the
    # plain run covers s-ma and s-easgd), to keep make test under 30 min
    RESUME_ALGOS=s-bmuf BIN=$(pwd)/$SAN_BIN \
        ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:log_path=$rep/asan" \
        UBSAN_OPTIONS="print_stacktrace=1:log_path=$rep/ubsan" \
        timeout 600 bash "$1"
    rc=$?
    if [ "$rc" = 0 ] && [ -n "$(ls -A "$rep")" ]; then
        rc=1; echo "sanitizer reports:"; cat "$rep"/*
    fi
    return $rc
}

TSAN_SUPP=$(pwd)/test/tsan.supp
run_one() {  # name log: runs one test, its output to log
    local n=$1 p=${1##*/}
    case "$n" in
        unit/plain/*) timeout 300 "build/rel/test/$p" ;;
        unit/portable/*) SS_ISA=portable timeout 300 "build/rel/test/$p" ;;
        unit/asan+ubsan/*)
            ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
                timeout 300 "build/address-undefined/test/$p" ;;
        unit/tsan/*)
            TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$TSAN_SUPP" \
                timeout 300 "build/thread/test/$p" ;;
        fuzz/*) test/fuzz/run.sh -q "${FUZZ_TEST_SECONDS:-4}" "$p" ;;
        integration/asan+ubsan/*) run_drill "test/integration/$p.sh" "$2.reports" ;;
        integration/*) timeout 600 bash "test/integration/$p.sh" ;;
    esac >"$2" 2>&1 </dev/null
}

# The seconds of every test that ran here, as of its last run ("seconds name"
# lines): runs of several tests at a time start the slowest first.
TIMES_KEPT=build/test-times
slowest_first() {  # name... -> the names, slowest known first
    printf '%s\n' "$@" | awk -v kept="$TIMES_KEPT" '
        BEGIN { while ((getline l < kept) > 0) { split(l, f, " "); t[f[2]] = f[1] } }
        { print t[$1] + 0, $1 }' | sort -s -k1,1rn | cut -d' ' -f2
}

# run N name...: runs the tests N at a time and records each as it ends.
declare -A RUNNING=() STARTED=()  # pid of a running test -> its name, its start time
run() {
    local n=$1 pid rc name; shift
    [ "$n" = 1 ] || set -- $(slowest_first "$@")
    while [ $# -gt 0 ] || [ ${#RUNNING[@]} -gt 0 ]; do
        if [ $# -gt 0 ] && [ ${#RUNNING[@]} -lt "$n" ]; then
            run_one "$1" "$(logof "$1")" &
            RUNNING[$!]=$1; STARTED[$!]=$EPOCHREALTIME
            shift; continue
        fi
        wait -n -p pid "${!RUNNING[@]}"
        rc=$?
        name=${RUNNING[$pid]}
        record "$name" $rc "$(logof "$name")" \
            "$(awk -v a="${STARTED[$pid]}" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')"
        unset "RUNNING[$pid]" "STARTED[$pid]"
    done
}

# Ctrl-C or TERM: stop the running tests the way their timeout would (TERM to
# the test and to what runs it: an integration test then kills its daemons).
stop_tests() {
    local pid
    for pid in "${!RUNNING[@]}"; do
        pkill -TERM -P "$pid" 2>/dev/null; kill -TERM "$pid" 2>/dev/null
    done
    wait
    echo "interrupted; logs: $LOGDIR"
    exit 130
}
trap stop_tests INT TERM

# picked PATTERN [TAG|-TAG]: the selected tests whose name matches the glob
# PATTERN (and that have TAG, or have not)
picked() {
    local i t
    for i in "${!NAMES[@]}"; do
        [[ "${NAMES[$i]}" == $1 ]] || continue
        t=" ${TAGSOF[$i]} "
        case "${2:-}" in
            -*) [[ "$t" == *" ${2#-} "* ]] && continue ;;
            ?*) [[ "$t" == *" $2 "* ]] || continue ;;
        esac
        echo "${NAMES[$i]}"
    done
}

# ---- build what the selection needs, then run it ----
plain=$(picked 'unit/plain/*'; picked 'unit/portable/*')
if [ -n "$plain" ]; then
    progs=$(for t in $plain; do echo "build/rel/test/${t##*/}"; done | sort -u)
    # the serial ones alone: their timing bounds fail with another test beside them
    if build $progs; then
        run "$JOBS" $(picked 'unit/plain/*' -serial; picked 'unit/portable/*' -serial)
        run 1 $(picked 'unit/plain/*' serial; picked 'unit/portable/*' serial)
    fi
fi
for san in asan tsan; do
    case $san in
        asan) tests=$(picked 'unit/asan+ubsan/*'); tree=address-undefined; flag=address,undefined ;;
        tsan) tests=$(picked 'unit/tsan/*'); tree=thread; flag=thread ;;
    esac
    [ -n "$tests" ] || continue
    # one at a time: the timing bounds of the socket tests were set that way
    build SANITIZE=$flag $(for t in $tests; do echo "build/$tree/test/${t##*/}"; done) \
        && run 1 $tests
done

fuzz=$(picked 'fuzz/*')
if [ -n "$fuzz" ]; then
    # every harness at once (they are single-threaded)
    if ! why=$(test/fuzz/run.sh --check); then
        echo "SKIP  fuzz: $why"
        skipped=$((skipped + 1))
    elif build fuzz-build; then
        run 64 $fuzz
    fi
fi

integ=$(picked 'integration/test_*')
if [ -n "$integ" ]; then
    build build build/rel/test/ps_probe && run 1 $integ
fi
drills=$(picked 'integration/asan+ubsan/*')
if [ -n "$drills" ]; then
    build SANITIZE=address,undefined $SAN_BIN/shadow-ps $SAN_BIN/shadow-trainer $SAN_BIN/shadow-super \
        $SAN_BIN/shadow-ctl $SAN_BIN/shadow-datagen && run 1 $drills
fi

if [ -s "$TIMES" ] && mkdir -p build; then
    touch "$TIMES_KEPT"
    awk '{ t[$2] = $1 } END { for (n in t) print t[n], n }' "$TIMES_KEPT" "$TIMES" \
        >"$TIMES_KEPT.new" && mv "$TIMES_KEPT.new" "$TIMES_KEPT"
fi
echo
if [ -s "$TIMES" ]; then
    echo "slowest:"
    sort -rn "$TIMES" | head -n 5 | awk '{ printf "  %7.1f s  %s\n", $1, $2 }'
fi
[ "$failed" -gt 0 ] && printf 'failed: %s\n' "${failed_names[*]}"
echo "logs: $LOGDIR"
[ "$cases_skipped" = 0 ] || echo "$cases_skipped case(s) skipped inside passing tests (listed under their PASS lines)"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
