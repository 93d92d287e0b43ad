# lib.sh - helpers for integration tests on localhost clusters.
#
# Source it from a test script. It makes a temp dir ($T), finds free ports on
# 127.0.0.1, writes a job file ($JOB) from conf/local.yaml plus overrides,
# starts daemons in the background, waits for their "ready" log line, and
# ALWAYS kills what it started on exit; when the test fails it prints every
# log. Bounded: every wait has a timeout. KEEP_T=1 keeps $T afterwards (to
# read the logs of a run by hand).
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN=${BIN:-$ROOT/bin}
PROBE=${PROBE:-$ROOT/build/rel/test/ps_probe}
command -v jq >/dev/null || { echo "FAIL: jq is not installed (scripts/install-deps.sh)"; exit 1; }
T=$(mktemp -d "${TMPDIR:-/tmp}/ss-it.XXXXXX")
PIDS=()
TEST_OK=0
if [ -z "${SS_DATA_DIR:-}" ]; then  # the shared folder beside the clone, else test/data
    SS_DATA_DIR=$ROOT/test/data
    [ -f "$ROOT/../shared/data/criteo/criteo_train_head10k.tsv" ] && SS_DATA_DIR=$ROOT/../shared/data
fi

cleanup() {
    local rc=$?
    for p in "${PIDS[@]:-}"; do
        [ -n "$p" ] && kill -9 "$p" 2>/dev/null
    done
    wait 2>/dev/null
    if [ "$TEST_OK" != 1 ]; then
        echo "---- test failed (exit $rc); logs from $T ----"
        for f in "$T"/*.log "$T"/run/logs/*.log; do
            [ -f "$f" ] || continue
            echo "== $f"; tail -n 40 "$f"
        done
    fi
    # a tmpfs of run_on_tmpfs: lazily when a file on it is still open
    [ -z "${MNT_TMPFS:-}" ] || umount "$MNT_TMPFS" 2>/dev/null || umount -l "$MNT_TMPFS" 2>/dev/null
    [ -n "${KEEP_T:-}" ] || rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# same_as_eval_only NE CASE: the run's model folder ($T/run/model), scored on
# its own (--eval-only of a copy: PSs started from it, its dense.bin), gives
# the eval NE NE that the job reported (CASE names the case in messages)
same_as_eval_only() {
    rm -rf "$T/saved$2"
    cp -r "$T/run" "$T/saved$2"
    launch --eval-only "$T/saved$2" >"$T/eval-only-$2.log" 2>&1 \
        || { cat "$T/eval-only-$2.log"; fail "case $2: eval-only failed"; }
    local got
    got=$(json_field "$T/run/result.json" eval_ne)
    awk -v a="$got" -v b="$1" 'BEGIN { exit !((a - b) ^ 2 < 1e-18) }' \
        || fail "case $2: the job reported eval NE $1, its model folder scores $got on its own"
}

# stop_launch: the EXIT trap of a test that runs a launcher in the background
# (`trap stop_launch EXIT`; its pid in LP, "" once it ended): TERM twice (the
# first asks for a job checkpoint, the second tears the job down), -9 to
# anything of $JOB's left, then cleanup with the test's exit status
LP=""
stop_launch() {
    local rc=$?
    [ -n "$LP" ] && kill -TERM "$LP" 2>/dev/null && sleep 0.5 && kill -TERM "$LP" 2>/dev/null &&
        sleep 1
    [ -n "${JOB:-}" ] && pkill -9 -f -- "-c $JOB " 2>/dev/null
    (exit "$rc")
    cleanup
}

fail() { echo "FAIL: $*"; exit 1; }
ok() { echo "ok: $*"; }
pass() { TEST_OK=1; echo "PASS"; exit 0; }
# skip WHY: this test cannot run here (not root, a tool missing); exit 77,
# which scripts/run-tests.sh reports as SKIP with WHY, never as PASS
skip() { TEST_OK=1; echo "SKIP: $*"; exit 77; }
# skip_case WHY: one case of a test that otherwise runs cannot run here (a
# tool missing, not root) or was not reached; the test goes on, and
# scripts/run-tests.sh lists the case beside its PASS and counts it
skip_case() { echo "SKIP case: $*"; }

# A port nobody listens on; remembers what it handed out.
USED_PORTS=" "
free_port() {
    local p
    while :; do
        p=$(( (RANDOM * 32768 + RANDOM) % 17000 + 15000 ))  # below the ephemeral range (32768+)
        case "$USED_PORTS" in *" $p "*) continue ;; esac
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
            USED_PORTS="$USED_PORTS$p "
            echo "$p"; return
        fi
    done
}

# make_job N_EMB N_SYNC N_TRAINERS [extra yaml lines...]: writes $JOB
make_job() {
    local ne=$1 ns=$2 nt=$3 i; shift 3
    JOB=$T/job.yaml
    PS_BOUND=()  # a new job: its PSs' first starts bind port 0 again (start_ps)
    {
        echo "job:"; echo "  name: it"; echo "  run_dir: $T/run"
        echo "cluster:"
        echo "  embedding:"; for ((i = 0; i < ne; i++)); do echo "    - tcp://127.0.0.1:$(free_port)"; done
        echo "  sync:"; for ((i = 0; i < ns; i++)); do echo "    - tcp://127.0.0.1:$(free_port)"; done
        echo "  trainers:"; for ((i = 0; i < nt; i++)); do echo "    - tcp://127.0.0.1:$(free_port)"; done
        for l in "$@"; do echo "$l"; done
    } >"$JOB"
}

# wait_line_now FILE PATTERN SECONDS: returns 0 as soon as a line matching
# PATTERN is written to FILE (tail -F: inotify, not a poll), 1 after SECONDS
wait_line_now() { timeout "$3" tail -n +1 -F "$1" 2>/dev/null | grep -m 1 -q -- "$2"; }
# ps_pid ROLE SHARD: the pid of this job's PS of that role and shard
ps_pid() { pgrep -f -- "-c $JOB --role $1 --shard $2( |\$)"; }

# wait_log FILE PATTERN [SECONDS]
wait_log() {
    local f=$1 pat=$2 n=$(( ${3:-20} * 10 ))
    while ((n-- > 0)); do
        grep -q "$pat" "$f" 2>/dev/null && return 0
        sleep 0.1
    done
    fail "timed out waiting for '$pat' in $f"
}

# bound_endpoint LOG: the endpoint a PS reported in the last ready line of
# LOG ("bound at tcp://127.0.0.1:41234 ..."; with ps.threads > 1 the first of
# its run of ports)
bound_endpoint() {
    grep "ready:" "$1" 2>/dev/null | tail -n 1 | sed -n 's/.* bound at \(tcp:[^ ]*\).*/\1/p'
}

# set_endpoint OLD NEW: replaces endpoint OLD by NEW in $JOB (written whole
# and renamed: a process reading the job meanwhile sees the old or the new one)
set_endpoint() {
    local old=${1//./\\.}
    sed -E "s#$old([],[:space:]]|\$)#$2\1#" "$JOB" >"$JOB.new" && mv "$JOB.new" "$JOB"
    grep -qF -- "$2" "$JOB" || fail "set_endpoint: $1 is not in $JOB"
}

# places_itself ARGS...: true when a daemon's arguments choose its address
# (--bind, or a --set of a cluster.* key)
places_itself() {
    local a
    for a in "$@"; do
        case "$a" in -b | --bind | --bind=* | cluster.* | --set=cluster.*) return 0 ;; esac
    done
    return 1
}

# start_ps ROLE SHARD [args...]: starts shadow-ps, waits for ready; sets
# LAST_PID. The first start of a PS binds port 0: the system picks a free
# port (no probe that another program may beat to it), the PS reports it in
# its ready line, and that port replaces the PS's placeholder in $JOB (a port
# make_job probed), for every client started after and for later starts of
# this PS (a restart binds the same port, as running clients expect; after
# fresh_port ROLE SHARD the next start takes a new one). With ps.threads > 1
# thread t binds the picked port + t: taken meanwhile, the start is tried
# again (3 times). Args that place the PS themselves (places_itself) bind as
# they say.
declare -A PS_BOUND=()
start_ps() {
    local role=$1 shard=$2 try; shift 2
    for try in 1 2 3; do
        s_start_ps_once "$role" "$shard" "$@" && return 0
    done
    fail "$role PS $shard: its picked port + 1.. taken 3 times (see $T/$role-$shard.log)"
}

# fresh_port ROLE SHARD: the next start_ps of this PS binds a new port (no
# client still holds the one it had)
fresh_port() { unset "PS_BOUND[$1-$2]"; }

# s_start_ps_once ROLE SHARD [args...]: one try of start_ps; returns 1 when a
# PS on a picked port could not bind its threads' ports (try again)
s_start_ps_once() {
    local role=$1 shard=$2; shift 2
    local log=$T/$role-$shard.log n before adv="" got bind=()
    if [ -z "${PS_BOUND[$role-$shard]:-}" ] && ! places_itself "$@"; then
        adv=$(ctl config get "cluster.$role.$shard") || fail "no cluster.$role.$shard in $JOB"
        bind=(--bind "${adv%:*}:0")
    fi
    # the log is appended to: wait for a ready line of this start, not of an earlier one
    before=$(grep -c "ready:" "$log" 2>/dev/null); before=${before:-0}
    "$BIN/shadow-ps" -c "$JOB" --role "$role" --shard "$shard" "${bind[@]}" "$@" >>"$log" 2>&1 &
    LAST_PID=$!
    PIDS+=("$LAST_PID")
    eval "PID_${role}_${shard}=$LAST_PID"
    n=200
    while ((n-- > 0)); do
        got=$(grep -c "ready:" "$log" 2>/dev/null)  # none yet: the log may not exist yet
        if (( ${got:-0} > before )); then
            [ -n "$adv" ] || return 0
            got=$(bound_endpoint "$log")
            [ -n "$got" ] || fail "$role PS $shard: no 'bound at tcp://...' in its ready line"
            PS_BOUND[$role-$shard]=${adv%:*}:${got##*:}
            set_endpoint "$adv" "${PS_BOUND[$role-$shard]}"
            return 0
        fi
        if ! kill -0 "$LAST_PID" 2>/dev/null; then
            [ -n "$adv" ] && tail -n 3 "$log" | grep -q "Address already in use" && return 1
            fail "$role PS $shard exited during start-up (see $log)"
        fi
        sleep 0.1
    done
    fail "$role PS $shard not ready after 20 s (see $log)"
}

# wait_for SECONDS CMD [ARGS...]: runs CMD every 0.05 s until it succeeds;
# fails the test after SECONDS (a bounded wait on a condition, in place of a
# fixed sleep that hopes the condition holds by then)
wait_for() {
    local n=$(( $1 * 20 )); shift
    while ((n-- > 0)); do
        "$@" && return 0
        sleep 0.05
    done
    fail "timed out waiting for: $*"
}

# sig_pending PID SIGNUM: true when signal SIGNUM is pending for process PID
# (sent, not yet handled: e.g. while the process is stopped)
sig_pending() {
    local m
    m=$(sed -n 's/^ShdPnd:[[:space:]]*//p' "/proc/$1/status" 2>/dev/null)
    [ -n "$m" ] && (( (0x$m >> ($2 - 1)) & 1 ))
}

# nonempty GLOB: true when a file matching GLOB has a byte or more
nonempty() {
    local f
    for f in $1; do [ -s "$f" ] && return 0; done
    return 1
}

# metric_above METRICS_JSONL FIELD N: true when the last line of a trainer's
# metrics file (metrics-trainer-R.jsonl) has FIELD (a count: examples,
# sync_rounds) above N (a line still being written is not JSON yet: read as
# no count)
metric_above() {
    local e
    e=$(tail -n 1 "$1" 2>/dev/null | json_field - "$2" 2>/dev/null)
    [ "${e:-0}" -gt "$3" ]
}

# examples_above METRICS_JSONL N: metric_above for examples (a trainer is
# mid-training once it counts some)
examples_above() { metric_above "$1" examples "$2"; }

# wait_exit PID SECONDS: waits for a process to end; returns its status
wait_exit() {
    local pid=$1 n=$(( $2 * 10 ))
    while ((n-- > 0)); do
        if ! kill -0 "$pid" 2>/dev/null; then wait "$pid"; return $?; fi
        sleep 0.1
    done
    fail "process $pid did not exit within $2 s"
}

ctl() { "$BIN/shadow-ctl" -c "$JOB" "$@"; }

# json_field FILE KEYS [WITH]: fields of the JSON object in FILE, read by jq
# (the one place tests read JSON). KEYS: a key ("eval_ne"), a path into
# nested objects ("eval.bayes_ne", "stats.examples"), or several of those
# separated by commas, printed on one line separated by spaces. Strings are
# printed without quotes, null as "null", an absent field as nothing; an
# object without WITH (default: the first of KEYS) prints no line. A
# JSON-lines file (metrics-trainer-R.jsonl, --json output) gives a line per
# object; FILE "-" reads standard input. When FILE is missing or not JSON,
# jq's message and the file go to stderr and it returns 1.
JSON_FIELD_JQ='def get($p): reduce ($p | split("."))[] as $k ([.];
        if length == 1 and (.[0] | type) == "object" and (.[0] | has($k)) then [.[0][$k]]
        else [] end);
    ($keys | split(",")) as $ks
    | select(get(if $with == "" then $ks[0] else $with end) | length == 1)
    | [$ks[] as $p | get($p) | if length == 0 then "" elif (.[0] | type) == "string" then .[0]
        else .[0] | tojson end]
    | join(" ")'
json_field() {
    local f=$1
    [ "$f" = - ] && f=/dev/stdin
    jq -r --arg keys "$2" --arg with "${3:-}" "$JSON_FIELD_JQ" "$f" \
        || { echo "json_field: cannot read $2 from $1" >&2; return 1; }
}

# float_lt A B: true when A < B
float_lt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 < b + 0) }'; }

# launch [args...]: scripts/shadow-launch on $JOB with the test's bin dir,
# drawing no plots (--no-plots: a job's plots cost 0.3-0.4 s of CPU, and
# make test launches about 110 jobs); PLOTS=1 launch ... draws them, as a
# user's job does (test_plots)
launch() {
    if [ "${PLOTS:-0}" = 1 ]; then
        "$ROOT/scripts/shadow-launch" "$JOB" --bin "$BIN" --quiet "$@"
    else
        "$ROOT/scripts/shadow-launch" "$JOB" --bin "$BIN" --quiet --no-plots "$@"
    fi
}

# no_leftovers: fails if any process of this test's job is still running
# 1 s after (polled: the time a process already killed takes to be gone)
no_leftovers() {
    local n=20
    while pgrep -f "$JOB" >/dev/null && ((n-- > 0)); do sleep 0.05; done
    if pgrep -f "$JOB" >/dev/null; then
        pgrep -fa "$JOB"
        fail "processes left running"
    fi
}

# listening PORT: true when something accepts connections on 127.0.0.1:PORT
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# run_on_tmpfs [NOTE]: for a full disk: $T/run (make_job's job.run_dir; set
# MNT) becomes a 64 MiB tmpfs, unmounted when the test ends, with logs/ a
# link to $T/logs (the logs stay whole when the disk is full). Root only: not
# root, or no tmpfs, skips the test (NOTE, e.g. "part 1 passed", is added to
# the reason).
run_on_tmpfs() {
    MNT=$T/run
    [ "$(id -u)" = 0 ] || skip "not root: cannot mount a tmpfs${1:+ ($1)}"
    mkdir -p "$MNT" "$T/logs"
    mount -t tmpfs -o size=64m tmpfs "$MNT" 2>"$T/mount.err" \
        || skip "cannot mount a tmpfs: $(cat "$T/mount.err")${1:+ ($1)}"
    MNT_TMPFS=$MNT
    ln -s "$T/logs" "$MNT/logs"
}

# fill_to BYTES: fills the tmpfs of run_on_tmpfs ($MNT/filler) until BYTES
# are left
fill_to() {
    local avail
    rm -f "$MNT/filler"
    avail=$(df -B1 --output=avail "$MNT" | tail -n 1)
    fallocate -l $((avail - $1)) "$MNT/filler" || fail "cannot fill the tmpfs to $1 bytes free"
}

# criteo_split: the real Criteo sample's first 8,000 rows to $T/train.tsv and
# last 2,000 to $T/eval.tsv (a chronological split)
criteo_split() {
    local src=$SS_DATA_DIR/criteo/criteo_train_head10k.tsv
    [ -f "$src" ] || fail "missing $src (set SS_DATA_DIR)"
    head -n 8000 "$src" >"$T/train.tsv"
    tail -n 2000 "$src" >"$T/eval.tsv"
}

# plain_client ENDPOINT: a client without CURVE (a ZMTP 3.0 greeting with
# the NULL mechanism, as any keyless ZeroMQ client sends) at tcp://HOST:PORT;
# returns once the server has closed the connection (5 s at most). Fails when
# nothing listens there.
plain_client() {
    local hp=${1#tcp://}
    timeout 5 bash -c 'exec 3<>"/dev/tcp/$1/$2" || exit 1
        printf "\xff\x00\x00\x00\x00\x00\x00\x00\x01\x7f\x03\x00NULL" >&3
        head -c 48 /dev/zero >&3
        cat <&3 >/dev/null' _ "${hp%:*}" "${hp##*:}" 2>/dev/null
    case $? in 0) ;; 124) fail "plain_client $1: the server kept the connection open" ;;
        *) fail "plain_client $1: cannot connect" ;; esac
}

# attempts N LOST: runs the test's function attempt as attempt 1, 2, ...
# (its argument) until one returns 0; attempt fails the test itself when
# something is wrong and returns nonzero when the race it needs was lost
# (LOST says how, e.g. "the save was done before the freeze landed").
# After N lost attempts the test is skipped. ATTEMPT: the one that counted.
attempts() {
    local n=$1 lost=$2
    for ((ATTEMPT = 1; ; ATTEMPT++)); do
        attempt "$ATTEMPT" && return 0
        ((ATTEMPT < n)) || skip "$lost in $n jobs of $n (machine too loaded)"
        echo "attempt $ATTEMPT: $lost; again"
    done
}

# frozen_at_save I: for the save tests' attempt I: launches the job in the
# background (pid LP, output $T/launch-I.log; $T/run cleared first), and
# freezes (SIGSTOP) embedding PSs 0 and 1 (pids P0, P1) the moment trainer
# 0's log ($LOG) says its dense model is saved: the PSs' checkpoints come
# next
frozen_at_save() {
    rm -rf "$T/run"
    launch >"$T/launch-$1.log" 2>&1 &
    LP=$!; PIDS+=("$LP")
    wait_log "$LOG" "training:" 30
    P0=$(ps_pid embedding 0) || fail "no PS 0"
    P1=$(ps_pid embedding 1) || fail "no PS 1"
    wait_line_now "$LOG" "dense model saved" 60 || fail "no 'dense model saved' line in 60 s"
    kill -STOP "$P0" "$P1"
}

# model_whole FILE...: fails unless $T/run/model holds every FILE
model_whole() {
    local f
    for f in "$@"; do
        [ -f "$T/run/model/$f" ] || { ls "$T/run/model"; fail "model/$f missing"; }
    done
}

# log_ms PATTERN FILE: the time stamp of FILE's first line matching PATTERN
# (a log line's first field) in milliseconds since the epoch; empty when
# there is none
log_ms() {
    local t
    t=$(grep -m 1 -- "$1" "$2" 2>/dev/null | cut -d' ' -f1)
    [ -n "$t" ] && date -u -d "$t" +%s%3N
}
