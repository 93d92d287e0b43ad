#!/usr/bin/env bash
# tags: cluster
# A 2-PS, 2-trainer job through scripts/shadow-slurm under a real Slurm: this
# test starts its own cluster on this machine (munged, slurmctld and two
# slurmd, all in the foreground as children of this script) with a generated
# munge key and a generated slurm.conf whose state, spool, logs, pid files and
# munge socket live in the test's temp dir, on free ports, as root, without
# cgroups (proctrack/pgid, task/none). Its two nodes, HOST-1 and HOST-2 (HOST
# = hostname -s), are two slurmd on this host with the addresses 127.0.0.1 and
# 127.0.0.2, so that placement and endpoints span two nodes. It runs
# `salloc ... scripts/shadow-slurm` on planted data (PSs on one node, trainers
# on the other) and checks result.json, the eval NE bound, the logs and files
# gathered, and that no step outlives the job; --predict --out - through the
# job steps (the bytes of a local --out FILE); then a SIGINT and a kill -9 of
# the launcher under salloc, and a killed trainer under sbatch: no step of the
# job is left either way; then SIGTERM to the launcher (exit 75, the job
# checkpoint gathered from both nodes) and shadow-slurm --resume in a new
# allocation (the example count of a fault-free run). On exit it cancels every job and step of its
# cluster, then stops the slurmds, slurmctld and munged (bounded).
# Skipped, with the reason, where Slurm cannot run: not root, binaries missing
# (make deps installs slurmctld, slurmd, slurm-client and munge), or a daemon
# that does not come up.
. "$(dirname "$0")/lib.sh"

# ---- --sbatch --dry-run: the batch script (no Slurm needed) ----
# It asks Slurm for SIGTERM to the batch shell before the time limit
# (--signal-before, default 120 s), all #SBATCH lines before the first
# command, and execs shadow-slurm with the same arguments (the signal must
# reach the launcher, not a shell that waits for it).
printf 'job:\n  name: sbtest\n  run_dir: %s\n' "$T/run-sb" >"$T/sb.yaml"
SB=$T/run-sb/shadow-slurm.sbatch
for sig in "" 45 0; do
    out=$(env -u SLURM_JOB_ID -u SLURM_JOB_NODELIST "$ROOT/scripts/shadow-slurm" --sbatch \
        ${sig:+--signal-before $sig} "$T/sb.yaml" --bin "$BIN" --quiet --dry-run -- -N 2 -t 5 2>&1) \
        || fail "--sbatch --dry-run ${sig:+--signal-before $sig}: $out"
    [ "$out" = "$(cat "$SB")" ] || fail "--sbatch --dry-run printed another script than $SB: $out"
    want="#SBATCH --signal=B:TERM@${sig:-120}"
    if [ "$sig" = 0 ]; then
        grep -q -- "--signal" "$SB" && fail "--signal-before 0 still asks for a signal: $out"
    else
        grep -qx -- "$want" "$SB" || fail "no '$want' line in the script: $out"
    fi
    [ "$(tail -n 1 "$SB")" = "exec $ROOT/scripts/shadow-slurm $T/sb.yaml --bin $BIN --quiet" ] \
        || fail "the script's last line does not exec shadow-slurm with the job's arguments: $out"
    awk '!/^#/ { cmd = 1 } /^#SBATCH/ && cmd { exit 1 }' "$SB" \
        || fail "an #SBATCH line after a command (sbatch ignores it): $out"
    bash -n "$SB" || fail "the script is not valid bash: $out"
done
out=$("$ROOT/scripts/shadow-slurm" --signal-before 5 "$T/sb.yaml" 2>&1) \
    && fail "--signal-before without --sbatch was accepted"
[[ "$out" == *"goes with --sbatch"* ]] || fail "--signal-before without --sbatch: unclear error: $out"
# Awkward words (a space, quotes, '$', a newline) come back from the
# script's exec line as given: bash reads what shadow-ctl slurm quoted.
odd=$'a b\'c"d $HOME `x` ~y\nz'
out=$(env -u SLURM_JOB_ID -u SLURM_JOB_NODELIST "$ROOT/scripts/shadow-slurm" --sbatch "$T/sb.yaml" \
    --bin "$BIN" --set "checkpoint.dir=$odd" --dry-run -- -N 2 2>&1) \
    || fail "--sbatch --dry-run, odd words: $out"
bash -n "$SB" || fail "the script with odd words is not valid bash: $out"
last=$(tail -n 1 "$SB"); eval "set -- ${last#exec }"
[ "$#" = 6 ] && [ "$1" = "$ROOT/scripts/shadow-slurm" ] && [ "$5" = --set ] \
    && [ "$6" = "checkpoint.dir=$odd" ] || fail "the script's exec line does not read back as given: $last"
set --
# --help and --version come from shadow-ctl slurm through the wrapper
out=$("$ROOT/scripts/shadow-slurm" --help) && [[ "$out" == "usage: shadow-slurm JOB.yaml"* ]] \
    || fail "--help: $out"
want=$("$BIN/shadow-ctl" --version | sed 's/^shadow-ctl/shadow-slurm/')
out=$("$ROOT/scripts/shadow-slurm" --version) && [ "$out" = "$want" ] \
    || fail "--version printed '$out', want '$want'"
ok "--sbatch --dry-run: #SBATCH --signal=B:TERM@120 (@45 with --signal-before 45, none with 0), then exec shadow-slurm (odd words read back as given)"

[ "$(id -u)" = 0 ] || skip "not root (this test runs its own slurmd, which must be root)"
for b in munged munge slurmctld slurmd salloc srun sinfo squeue scancel scontrol; do
    command -v "$b" >/dev/null || skip "$b is not installed (make deps installs the Debian packages slurmctld, slurmd, slurm-client and munge)"
done
echo "slurm: $(slurmctld -V)"

# ---- the cluster ----
S=$T/slurm                  # state and spool; the logs go to $T/*.log (printed on failure)
mkdir -p "$S/state"
chmod 755 "$T"              # munged wants its socket's folder searchable by everyone
NODE=$(hostname -s)
N1=$NODE-1; N2=$NODE-2      # the nodes: two slurmd on this host
CTLD_PORT=$(free_port); PORT1=$(free_port); PORT2=$(free_port)
SPIDS=()                    # the daemons, stopped by slurm_stop
# Only this cluster: nothing from an allocation the tests may run inside.
for v in $(compgen -e | grep '^SLURM_'); do unset "$v"; done
export SLURM_CONF=$S/slurm.conf

# A fresh munge key only this cluster knows (munged wants it private).
head -c 1024 /dev/urandom >"$S/munge.key"
chmod 400 "$S/munge.key"
cat >"$S/slurm.conf" <<EOF
# written by test_cluster_slurm.sh: a private two-node cluster on one host
ClusterName=sstest
SlurmctldHost=$NODE(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$CTLD_PORT
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$S/munge.sock
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool-%n
SlurmctldPidFile=$S/slurmctld.pid
SlurmdPidFile=$S/slurmd-%n.pid
SlurmctldLogFile=$T/slurmctld.log
SlurmdLogFile=$T/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
ReturnToService=2
KillWait=5
MailProg=/bin/true
NodeName=$N1 NodeHostname=$NODE NodeAddr=127.0.0.1 Port=$PORT1 CPUs=2 RealMemory=512 State=UNKNOWN
NodeName=$N2 NodeHostname=$NODE NodeAddr=127.0.0.2 Port=$PORT2 CPUs=2 RealMemory=512 State=UNKNOWN
PartitionName=sstest Nodes=$N1,$N2 Default=YES MaxTime=30 State=UP
EOF

# Our steps' slurmstepd processes: they carry this cluster's SLURM_CONF.
our_stepds() {
    local p
    for p in $(pgrep -x slurmstepd); do
        { tr '\0' '\n' <"/proc/$p/environ"; } 2>/dev/null | grep -qx "SLURM_CONF=$SLURM_CONF" && echo "$p"
    done
}

# slurm_stop: cancel every job of this cluster, wait (bounded: 10 s) until no
# step is left, then stop the daemons: TERM, then KILL after 5 s each.
slurm_stop() {
    local n p i
    if [ -S "$S/munge.sock" ] && [ -n "$(squeue -h -o %i 2>/dev/null)" ]; then
        scancel --full $(squeue -h -o %i) 2>/dev/null
        n=100
        while ((n-- > 0)) && [ -n "$(squeue -h -o %i 2>/dev/null)$(our_stepds)" ]; do sleep 0.1; done
    fi
    for p in $(our_stepds); do kill -KILL "$p" 2>/dev/null; done
    # slurmd, slurmctld, then munged (they still talk to it while stopping)
    for ((i = ${#SPIDS[@]} - 1; i >= 0; i--)); do
        p=${SPIDS[$i]}
        kill -TERM "$p" 2>/dev/null
        n=50; while kill -0 "$p" 2>/dev/null && ((n-- > 0)); do sleep 0.1; done
        kill -KILL "$p" 2>/dev/null
    done
    SPIDS=()
}
trap 'rc=$?; slurm_stop; (exit $rc); cleanup' EXIT

# daemon_died NAME PID LOG: true (and shows its log) when it is not running
daemon_died() {
    kill -0 "$2" 2>/dev/null && return 1
    echo "== $3"; tail -n 20 "$3"
    return 0
}

munged -F --force --key-file="$S/munge.key" --socket="$S/munge.sock" --pid-file="$S/munged.pid" \
    --seed-file="$S/munged.seed" --log-file="$T/munged.log" 2>>"$T/munged.log" &
SPIDS+=($!)
n=50; while ((n-- > 0)) && ! [ -S "$S/munge.sock" ]; do sleep 0.1; done
munge -S "$S/munge.sock" -n </dev/null | unmunge -S "$S/munge.sock" >/dev/null 2>&1 \
    || { daemon_died munged "${SPIDS[0]}" "$T/munged.log"; skip "munged does not start (see above)"; }

# In the foreground (-D) each also logs to stderr: kept apart, shown when it dies.
slurmctld -D -f "$SLURM_CONF" >"$T/slurmctld.out" 2>&1 &
SPIDS+=($!)
for nd in "$N1" "$N2"; do
    slurmd -D -f "$SLURM_CONF" -N "$nd" >"$T/slurmd-$nd.out" 2>&1 &
    SPIDS+=($!)
done
# Ready when sinfo shows both nodes idle (bounded: 30 s).
n=300; state=""
while ((n-- > 0)); do
    state=$(sinfo -h -N -o %T 2>/dev/null | sort | uniq -c | xargs)
    [ "$state" = "2 idle" ] && break
    daemon_died slurmctld "${SPIDS[1]}" "$T/slurmctld.out" && skip "slurmctld exited at start-up (see above)"
    daemon_died "slurmd $N1" "${SPIDS[2]}" "$T/slurmd-$N1.out" && skip "slurmd $N1 exited at start-up (see above)"
    daemon_died "slurmd $N2" "${SPIDS[3]}" "$T/slurmd-$N2.out" && skip "slurmd $N2 exited at start-up (see above)"
    sleep 0.1
done
[ "$state" = "2 idle" ] || { tail -n 20 "$T"/slurm*.log; skip "nodes not both idle after 30 s: $state"; }
ok "Slurm up: nodes $N1 (127.0.0.1) and $N2 (127.0.0.2) idle (slurmctld port $CTLD_PORT)"

# ---- outside an allocation: a clear error ----
out=$(env -u SLURM_JOB_ID -u SLURM_JOB_NODELIST "$ROOT/scripts/shadow-slurm" "$T/none.yaml" 2>&1) \
    && fail "shadow-slurm outside an allocation succeeded: $out"
[[ "$out" == *"salloc or sbatch"* ]] || fail "shadow-slurm outside an allocation: unclear error: $out"
ok "outside an allocation: $out"

# ---- the job: 2 embedding PSs, 2 trainers on planted data ----
export TMPDIR=$T   # the launchers' scratch (a launcher killed with -9 cannot remove it)
"$BIN/shadow-datagen" --rows 300000 --seed 7 --out "$T/train.tsv" \
    --eval-rows 50000 --eval-out "$T/eval.tsv" >"$T/datagen.json" 2>"$T/datagen.log" \
    || { cat "$T/datagen.log"; fail "datagen"; }
bayes=$(json_field "$T/datagen.json" eval.bayes_ne)
[ -n "$bayes" ] || { cat "$T/datagen.json"; fail "no Bayes NE in the datagen output"; }
# The endpoints written here are placeholders: shadow-slurm replaces them.
make_job 2 1 2 "data:" "  train: [$T/train.tsv]" "  eval: [$T/eval.tsv]" \
    "trainer:" "  batch_size: 32" "tables:" "  lr: 0.1"

# --dry-run: the hosts file from the allocation, nothing started
out=$(timeout 60 salloc -N2 --exclusive -t 1 -J ss-slurm-dry "$ROOT/scripts/shadow-slurm" "$JOB" \
    --bin "$BIN" --ps-nodes 1 --set job.run_dir="$T/run-dry" --dry-run 2>&1) || fail "--dry-run: $out"
grep -qx "$N1 trainer addr=127.0.0.1" <<<"$out" && grep -qx "$N2 ps addr=127.0.0.2" <<<"$out" \
    && grep -q -- "--hosts $T/run-dry/slurm-hosts --exec srun" <<<"$out" \
    || fail "--dry-run --ps-nodes 1 printed: $out"
ok "--dry-run: $(grep -c addr= <<<"$out") nodes in the hosts file, the srun launch printed"

t0=$(date +%s)
timeout 300 salloc -N2 --exclusive -t 10 -J ss-slurm-it \
    "$ROOT/scripts/shadow-slurm" "$JOB" --bin "$BIN" --quiet --ps-nodes 1 \
    --remote-run-dir "$T/node-%h" >"$T/salloc.log" 2>&1
rc=$?
cat "$T/salloc.log"
[ "$rc" = 0 ] || fail "salloc shadow-slurm exited with status $rc"
ok "salloc shadow-slurm finished in $(( $(date +%s) - t0 )) s"

R=$T/run
[ -f "$R/result.json" ] || fail "no result.json in $R"
[ "$(json_field "$R/result.json" trainers)" = 2 ] || fail "result.json: trainers is not 2: $(cat "$R/result.json")"
ne=$(json_field "$R/result.json" eval_ne)
limit=$(awk -v b="$bayes" 'BEGIN { printf "%.4f", 1.10 * b }')
[ -n "$ne" ] || fail "result.json has no eval_ne: $(cat "$R/result.json")"
float_lt "$ne" "$limit" || fail "eval NE $ne is not within 10% of the Bayes-optimal $bayes (limit $limit)"
ok "eval NE $ne within 10% of the Bayes-optimal NE $bayes (limit $limit)"
for f in ps-embedding-0 ps-embedding-1 trainer-0 trainer-1; do
    [ -s "$R/logs/$f.log" ] || fail "gathered logs: $R/logs/$f.log missing or empty ($(ls "$R/logs"))"
done
grep -q "ready:" "$R/logs/ps-embedding-1.log" || fail "ps-embedding-1.log has no ready line"
ok "logs gathered: $(ls "$R/logs" | tr '\n' ' ')"
# The processes ran in their node's run directory ($T/node-NODE, as if each
# node had its own disk): the trainers' results and the model on the trainers'
# node, the PSs' parts of the model save (model.new-ID, ID from model/MANIFEST)
# on the other; all gathered into RUN_DIR (model/) through srun.
id=$(sed -n 's/^save_id //p' "$R/model/MANIFEST")
[ -n "$id" ] || fail "no save id in $R/model/MANIFEST"
for f in $N1/result-trainer-0.json $N1/result-trainer-1.json $N1/model/dense.bin \
         $N2/model.new-$id/embedding-0.ckpt $N2/model.new-$id/embedding-1.ckpt; do
    [ -s "$T/node-$f" ] || fail "the processes did not write ${f#*/} in their run directory $T/node-${f%%/*}"
    g=${f#*/}; g=${g/model.new-$id/model}
    cmp -s "$T/node-$f" "$R/$g" || fail "${f#*/} was not gathered from $T/node-${f%%/*} into $R/$g"
done
ok "results and model from $N1, checkpoints from $N2 gathered into the run directory"
# --ps-nodes 1: the PSs on the last node (127.0.0.2), the trainers on the first.
grep -q "^cluster.embedding=\[tcp://127.0.0.2:[0-9]*,tcp://127.0.0.2:[0-9]*\]$" "$R/cluster.args" \
    && grep -q "^cluster.trainers=\[tcp://127.0.0.1:[0-9]*,tcp://127.0.0.1:[0-9]*\]$" "$R/cluster.args" \
    || fail "endpoints not on the nodes' addresses (PSs on $N2 127.0.0.2, trainers on $N1 127.0.0.1): $(cat "$R/cluster.args")"
ok "placement: PSs on $N2, trainers on $N1 ($(grep -h '^cluster.embedding=' "$R/cluster.args"))"

# Every step ran under Slurm and none is left: the accounting of slurmd's log
# names one step per daemon, and nothing of the job runs any more.
# Each node's slurmd started steps of the job: per node a preflight, and its
# two PSs (plus their shutdown) or its two trainers.
jid=$(sed -n 's/.*Granted job allocation \([0-9]*\).*/\1/p' "$T/salloc.log")
s1=$(grep -c "launch task StepId=$jid\." "$T/slurmd-$N1.log")
s2=$(grep -c "launch task StepId=$jid\." "$T/slurmd-$N2.log")
((s1 >= 3 && s2 >= 3)) || fail "steps of job '$jid': $s1 on $N1, $s2 on $N2; expected 3+ on each"
ok "job $jid's steps: $s1 on $N1, $s2 on $N2"
[ -z "$(our_stepds)" ] || fail "slurmstepd processes left after the job: $(our_stepds)"
[ -z "$(squeue -h -o %i)" ] || fail "jobs left in the queue: $(squeue)"
no_leftovers
ok "no step, job or daemon of the job left running"

# --predict --out - under srun: trainer 0's standard output comes back through
# its job step, apart from its log: the bytes of a local --out FILE, and
# nothing else (shadow-slurm's and salloc's notes go to stderr)
launch --predict "$R" --out "$T/pred-local.txt" --set job.run_dir="$T/pred-run" >"$T/pred.log" 2>&1 \
    || { cat "$T/pred.log"; fail "--predict (local) of the job's model failed"; }
timeout 120 salloc -N2 --exclusive -t 5 -J ss-slurm-pred "$ROOT/scripts/shadow-slurm" "$JOB" \
    --bin "$BIN" --quiet --ps-nodes 1 --remote-run-dir "$T/pnode-%h" --set job.run_dir="$T/pred-srun" \
    --predict "$R" --out - >"$T/pred-srun.txt" 2>"$T/pred-srun.log" \
    || { cat "$T/pred-srun.log"; fail "shadow-slurm --predict --out - failed"; }
[ -s "$T/pred-local.txt" ] && cmp -s "$T/pred-srun.txt" "$T/pred-local.txt" \
    || { head -n 3 "$T/pred-srun.txt"; fail "--predict --out - under srun: not the bytes of a local --out FILE"; }
ok "--predict --out - under srun: $(wc -l <"$T/pred-srun.txt") predictions, the bytes of a local --out FILE"

# WRAP OUT GRACE CMD... (run inside an allocation): CMD, its pid in OUT.pid;
# when it has ended, waits up to GRACE s for the launcher's steps (shadow-*)
# to go, then lists the job's steps still known to Slurm in OUT; exits with
# CMD's status. Job control on, so that CMD in the background can get SIGINT.
WRAP='out=$1; grace=$2; shift 2; set -m; "$@" & p=$!; echo $p >"$out.pid"; wait $p; rc=$?
n=$((grace * 10))
while ((n-- > 0)) && squeue -h -s -j "$SLURM_JOB_ID" -o %j | grep -q "^shadow-"; do sleep 0.1; done
squeue -h -s -j "$SLURM_JOB_ID" -o "%i %j" >"$out"; exit $rc'
LONG=(--bin "$BIN" --quiet --set trainer.epochs=100)

# wait_ready LOG: the launcher's "PS(s) ready" line, then a second of training
wait_ready() { wait_log "$1" "PS(s) ready" 60; sleep 1; }

# ---- Ctrl-C (SIGINT) under salloc: the launcher stops every step itself ----
timeout 120 salloc -N2 --exclusive -t 10 -J ss-slurm-int bash -c "$WRAP" wrap "$T/steps-int" 0 \
    "$ROOT/scripts/shadow-slurm" "$JOB" "${LONG[@]}" --set job.run_dir="$T/run-int" >"$T/int.log" 2>&1 &
sp=$!
wait_ready "$T/int.log"
kill -INT "$(cat "$T/steps-int.pid")"
t0=$(date +%s)
wait_exit "$sp" 60; rc=$?
cat "$T/int.log"
[ "$rc" != 0 ] || fail "an interrupted job exited 0"
grep -q "interrupted: stopping the job" "$T/int.log" || fail "no 'interrupted' message after SIGINT"
[ -f "$T/steps-int" ] || fail "the job did not list its steps after the launcher"
grep "shadow-" "$T/steps-int" && fail "steps left after the interrupted launcher exited (listed above)"
no_leftovers
ok "SIGINT: launcher exited $rc within $(( $(date +%s) - t0 )) s, no step of ours left in the job"

# ---- kill -9 of the launcher under salloc: the steps end by themselves ----
# (its srun clients see their standard input end and pass that on; the wrapper
# around each process on its node stops it)
timeout 120 salloc -N2 --exclusive -t 10 -J ss-slurm-kill bash -c "$WRAP" wrap "$T/steps-kill" 15 \
    "$ROOT/scripts/shadow-slurm" "$JOB" "${LONG[@]}" --set job.run_dir="$T/run-kill" >"$T/kill.log" 2>&1 &
sp=$!
wait_ready "$T/kill.log"
kill -KILL "$(cat "$T/steps-kill.pid")"
t0=$(date +%s.%N)
wait_exit "$sp" 60
cat "$T/kill.log"
[ -f "$T/steps-kill" ] || fail "the job did not list its steps after the launcher"
grep "shadow-" "$T/steps-kill" && fail "steps still running 15 s after the launcher was killed (listed above)"
no_leftovers
ok "kill -9 of the launcher: its steps ended by themselves within $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"

# ---- a trainer killed, under sbatch: the job ends with an error, no step left ----
{
    echo "#!/usr/bin/env bash"
    echo "# the batch script: shadow-slurm, then the job's steps still known to Slurm"
    printf '%q ' "$ROOT/scripts/shadow-slurm" "$JOB" "${LONG[@]}" --set job.run_dir="$T/run-fail"
    echo
    echo "rc=\$?"
    printf 'squeue -h -s -j "$SLURM_JOB_ID" -o "%%i %%j" >%q\n' "$T/steps-fail"
    echo "exit \$rc"
} >"$T/batch.sh"
timeout 120 sbatch --wait -N2 --exclusive -t 10 -J ss-slurm-fail -o "$T/fail.log" "$T/batch.sh" \
    >"$T/sbatch.log" 2>&1 &
sp=$!
wait_log "$T/sbatch.log" "Submitted batch job" 20
wait_log "$T/run-fail/slurm-hosts" "addr=" 30
n=300; while ((n-- > 0)) && ! [ -f "$T/fail.log" ]; do sleep 0.1; done
wait_ready "$T/fail.log"
# (its step starts after the PSs' ready line: wait for the process itself, 30 s at most)
n=300; tp=""
while ((n-- > 0)); do
    tp=$(pgrep -f -- "^$BIN/shadow-trainer -c $JOB --rank 1( |\$)") && break
    sleep 0.1
done
[ -n "$tp" ] || fail "no trainer 1 process to kill"
# It runs under a slurmstepd (a job step), not as a child of the launcher.
p=$tp; chain=""
while [ -n "$p" ] && [ "$p" -gt 1 ]; do
    chain="$chain $(ps -o comm= -p "$p")"
    p=$(ps -o ppid= -p "$p" | tr -d ' ')
done
[[ "$chain" == *slurmstepd* ]] || fail "trainer 1 (pid $tp) is not under a slurmstepd: ancestors$chain"
ok "trainer 1 runs as a job step: ancestors$chain"
kill -KILL $tp
wait_exit "$sp" 60; rc=$?
cat "$T/sbatch.log" "$T/fail.log"
[ "$rc" != 0 ] || fail "sbatch --wait exited 0 after trainer 1 was killed"
grep "shadow-launch: trainer 1 " "$T/fail.log" | grep -q "$N2" || fail "the error does not name trainer 1 and its node $N2"
[ -f "$T/steps-fail" ] || fail "the job did not list its steps after the launcher"
grep "shadow-" "$T/steps-fail" && fail "steps left after the failed launcher exited (listed above)"
no_leftovers
ok "trainer 1 killed under sbatch: job failed naming it, no step of ours left"

# ---- --sbatch: the early SIGTERM before the time limit, a job checkpoint ----
# A job that would run for minutes, submitted with a time limit of 1 minute
# and --signal-before 55: Slurm signals the batch script (shadow-launch by
# then) 55 s (up to a minute) before the limit, and the job stops with a
# complete job checkpoint, exit 75, before Slurm's own SIGTERM and SIGKILL.
RS=$T/run-sig
t0=$(date +%s)
timeout 150 "$ROOT/scripts/shadow-slurm" --sbatch --signal-before 55 "$JOB" "${LONG[@]}" \
    --set job.run_dir="$RS" -- --wait -N2 --exclusive -t 1 -J ss-slurm-sig -o "$T/sig.log" \
    >"$T/sig-submit.log" 2>&1
rc=$?
cat "$T/sig-submit.log" "$T/sig.log"
[ "$rc" = 75 ] || fail "the --sbatch job with a 1-minute limit exited $rc, want 75 (a job checkpoint on the early SIGTERM)"
grep -qx "#SBATCH --signal=B:TERM@55" "$RS/shadow-slurm.sbatch" || fail "no --signal line in $RS/shadow-slurm.sbatch"
grep -q "shadow-launch: SIGTERM: stopping the job with a job checkpoint" "$T/sig.log" \
    && grep -q "job checkpoint saved in $RS/jobckpt" "$T/sig.log" || fail "no job checkpoint on the early SIGTERM"
for f in MANIFEST trainer-0.state trainer-1.state embedding-0.ckpt embedding-1.ckpt; do
    [ -s "$RS/jobckpt/$f" ] || fail "jobckpt/$f is missing after the early SIGTERM"
done
no_leftovers
ok "--sbatch, 1-minute limit, --signal-before 55: exit 75 after $(( $(date +%s) - t0 )) s with a job checkpoint of $(sed -n 's/^examples //p' "$RS/jobckpt/MANIFEST") examples"

# ---- SIGTERM under salloc, then shadow-slurm --resume in a new allocation ----
# (s-easgd: the sync PS's center too; each node its own run directory) The
# launcher exits 75 with a complete job checkpoint gathered through srun;
# the resumed job, its hosts file written again, gets each node its part and
# ends with the example count of a fault-free run (every row once).
ROWS=300000
RT=$T/run-term
timeout 200 salloc -N2 --exclusive -t 10 -J ss-slurm-term bash -c "$WRAP" wrap "$T/steps-term" 15 \
    "$ROOT/scripts/shadow-slurm" "$JOB" --bin "$BIN" --quiet --ps-nodes 1 --remote-run-dir "$T/tnode-%h" \
    --set job.run_dir="$RT" --set trainer.epochs=1 --set sync.algorithm=s-easgd \
    --set metrics.interval_s=0.2 >"$T/term.log" 2>&1 &
sp=$!
ex_now() { sed -n 's/.*trainer 0 | \([0-9]*\) ex |.*/\1/p' "$RT/logs/trainer-0.log" 2>/dev/null | tail -n 1; }
n=900
while ((n-- > 0)) && (( $(ex_now || echo 0) + 0 < ROWS / 6 )); do sleep 0.1; done
((n > 0)) || { cat "$T/term.log"; fail "SIGTERM drill: trainer 0 made no progress"; }
kill -TERM "$(cat "$T/steps-term.pid")"
t0=$(date +%s.%N)
wait_exit "$sp" 180; rc=$?
cat "$T/term.log"
[ "$rc" = 75 ] || fail "salloc shadow-slurm exited $rc after SIGTERM to the launcher, want 75"
grep -q "job checkpoint saved in $RT/jobckpt" "$T/term.log" || fail "no job checkpoint message"
grep -q "resume with: .*shadow-slurm --resume $RT" "$T/term.log" || fail "the message does not say how to resume under Slurm"
for f in MANIFEST trainer-0.state trainer-1.state embedding-0.ckpt embedding-1.ckpt sync-0.ckpt; do
    [ -s "$RT/jobckpt/$f" ] || { ls -R "$RT" "$T"/tnode-*; fail "jobckpt/$f was not gathered"; }
done
id=$(sed -n 's/^save_id //p' "$RT/jobckpt/MANIFEST")
cmp -s "$T/tnode-$N2/jobckpt.new-$id/sync-0.ckpt" "$RT/jobckpt/sync-0.ckpt" \
    || fail "the sync PS's file of save $id on $N2 is not the one gathered"
grep "shadow-" "$T/steps-term" && fail "steps left after the stopped launcher exited (listed above)"
EXC=$(sed -n 's/^examples //p' "$RT/jobckpt/MANIFEST")
((EXC > 0 && EXC < ROWS)) || fail "the job checkpoint holds $EXC examples, want between 0 and $ROWS"
no_leftovers
ok "SIGTERM under salloc: exit 75 in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s, job checkpoint of $EXC examples gathered from both nodes"
timeout 200 salloc -N2 --exclusive -t 10 -J ss-slurm-resume "$ROOT/scripts/shadow-slurm" --resume "$RT" \
    --bin "$BIN" >"$T/resume.log" 2>&1 || { cat "$T/resume.log"; fail "shadow-slurm --resume failed"; }
cat "$T/resume.log"
grep -q '"resumed":true' "$RT/result.json" || fail "result.json does not say resumed"
for r in 0 1; do
    d0=$(sed -n 's/.*job checkpoint: state written .*digest \([0-9a-f]*\)).*/\1/p' "$RT/logs.1/trainer-$r.log")
    d1=$(sed -n 's/.*resuming from .*trainer-'$r'.state: .*digest \([0-9a-f]*\)$/\1/p' "$RT/logs/trainer-$r.log")
    [ -n "$d0" ] && [ "$d0" = "$d1" ] || fail "trainer $r wrote dense state digest '$d0', resumed with '$d1'"
done
grep -q "resuming from $T/tnode-$N1/jobckpt.resume/trainer-1.state" "$RT/logs/trainer-1.log" \
    && grep -q "checkpoint $T/tnode-$N2/jobckpt.resume/sync-0.ckpt: restored" "$RT/logs/ps-sync-0.log" \
    || fail "trainer 1 or the sync PS did not restore from the copy pushed to its node"
[ -z "$(ls -d "$T"/tnode-*/jobckpt.resume 2>/dev/null)" ] || fail "a node kept the pushed job checkpoint"
EX1=$(json_field "$RT/result.json" examples)
[ "$EX1" = "$ROWS" ] || fail "the resumed job trained $EX1 examples in all, a fault-free run $ROWS ($EXC before SIGTERM)"
[ ! -e "$RT/jobckpt" ] || fail "the finished job left its job checkpoint"
[ -z "$(our_stepds)" ] || fail "slurmstepd processes left after the resumed job: $(our_stepds)"
no_leftovers
ok "shadow-slurm --resume: $((EX1 - EXC)) + $EXC = $EX1 examples (fault-free $ROWS), eval NE $(json_field "$RT/result.json" eval_ne), dense state digests equal"
pass
