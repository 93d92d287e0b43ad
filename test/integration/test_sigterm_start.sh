#!/usr/bin/env bash
# SIGTERM in a daemon's first instant (common/ss_sigstart.h): a PS and a
# trainer that get SIGTERM right after they were started, before their
# handlers are installed, stop the clean way: the PS exits 0 with its
# "stopped" line, the trainer (SIGTERM before training) stops with a job
# checkpoint and exits 75; never a death by signal (status 143).
#
# Two ways to hit that instant, each a loop of start + SIGTERM:
#   held  the SIGTERM is sent once the program runs (its name is in
#         /proc/PID/comm: the execve is done) and /proc/PID/status says it
#         blocks SIGTERM (it holds it until its handler is in) or catches
#         it already. At least one of the kills must land while it is held
#         (a program that never holds it fails there).
#   env   started through env --block-signal=TERM,INT (SIGTERM blocked from
#         before the execve, as a starter may do), the SIGTERM sent as soon
#         as the program runs: it is pending until the program unblocks it
#         after installing its handler (one that never unblocked it would
#         never stop).
# The instant between the execve and the program's first instruction (the
# dynamic linker) is not covered: see ss_sigstart.h.
. "$(dirname "$0")/lib.sh"
N_PS=${SIGSTART_PS_RUNS:-16}   # per way
N_TR=${SIGSTART_TR_RUNS:-5}    # per way
"$BIN/shadow-datagen" --rows 20000 --seed 5 --out "$T/train.tsv" >/dev/null 2>&1 || fail datagen
make_job 1 0 1 "data:" "  train: [$T/train.tsv]" "sync:" "  algorithm: none" \
    "trainer:" "  workers: 1" "  epochs: 1"
HAVE_ENV=0
env --block-signal=TERM true 2>/dev/null && HAVE_ENV=1

# Status bits of process $1 (/proc/PID/status field $2, hex) for SIGTERM.
term_bit() {
    local k v
    while read -r k v; do
        [ "$k" = "$2" ] && { (( 0x$v & 0x4000 )); return; }
    done 2>/dev/null <"/proc/$1/status"
    return 1
}

# Wait (2 s at most) until process $1 runs program $2 and, for the held
# way ($3), blocks or catches SIGTERM; then send it. HELD is set to 1 when
# it was blocked then (held, not caught yet).
kill_early() {
    local pid=$1 name=$2 way=$3 c t_end
    HELD=0
    t_end=$(( ${EPOCHREALTIME/./} + 2000000 ))
    while (( ${EPOCHREALTIME/./} < t_end )); do
        read -r c 2>/dev/null <"/proc/$pid/comm" || break
        [ "$c" = "$name" ] || continue
        if [ "$way" = env ]; then
            kill -TERM "$pid"; return 0
        fi
        if term_bit "$pid" SigBlk:; then
            kill -TERM "$pid"; HELD=1; return 0
        fi
        if term_bit "$pid" SigCgt:; then
            kill -TERM "$pid"; return 0
        fi
    done
    fail "$name (pid $pid) did not run, or neither blocked nor caught SIGTERM within 2 s"
}

# start WAY LOG PROGRAM ARGS...: the program in the background; sets SP
start() {
    local way=$1 log=$2; shift 2
    if [ "$way" = env ]; then
        env --block-signal=TERM --block-signal=INT "$@" >"$log" 2>&1 &
    else
        "$@" >"$log" 2>&1 &
    fi
    SP=$!
    PIDS+=("$SP")
}

WAYS="held"
[ "$HAVE_ENV" = 1 ] && WAYS="held env"
[ "$HAVE_ENV" = 1 ] || skip_case "the env way: env has no --block-signal (coreutils < 8.31)"
HELD_ALL=0

# early_kills WHAT N WAIT_S WANT_RC WANT_LINE CMD...: N starts of CMD per way,
# each sent SIGTERM at once; every run must exit WANT_RC with WANT_LINE logged
early_kills() {
    local what=$1 n=$2 wait_s=$3 want=$4 line=$5 way held t0 i log rc
    shift 5
    for way in $WAYS; do
        held=0; t0=${EPOCHREALTIME/./}
        for ((i = 0; i < n; i++)); do
            log=$T/$what-$way-$i.log
            start "$way" "$log" "$@"
            kill_early "$SP" "$(basename "$1")" "$way"
            held=$((held + HELD))
            wait_exit "$SP" "$wait_s"; rc=$?
            [ "$rc" = "$want" ] || { cat "$log"; fail "$what ($way way, run $i): exit status $rc after an early SIGTERM, want $want (143: killed by it)"; }
            grep -q "$line" "$log" || { cat "$log"; fail "$what ($way way, run $i): no '$line' line"; }
        done
        HELD_ALL=$((HELD_ALL + held))
        ok "$what, $way: $n starts each with an immediate SIGTERM: all exited $want with '$line'$([ "$way" = held ] && echo ", $held of them while it held SIGTERM") ($(( (${EPOCHREALTIME/./} - t0) / 1000 )) ms)"
    done
}

early_kills PS "$N_PS" 30 0 "stopped" "$BIN/shadow-ps" -c "$JOB" --role embedding --shard 0
# the trainer, against a running PS: it stops with a job checkpoint
start_ps embedding 0
early_kills trainer "$N_TR" 60 75 "stopped with a job checkpoint" "$BIN/shadow-trainer" -c "$JOB" --rank 0
grep -q "set by this program" "$T"/trainer-*.log && ok "(the trainer re-executed itself for its BLAS kernels on this machine)"
((HELD_ALL > 0)) || fail "no SIGTERM of the held way came while the program held it: the programs do not hold SIGTERM at their start"
pass
