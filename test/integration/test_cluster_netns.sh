#!/usr/bin/env bash
# tags: cluster
# A job across four "hosts" started by scripts/shadow-launch over ssh.
#
# Each host is a network namespace of its own (2 PS hosts, 2 trainer hosts),
# plus one for the launching host and one holding the bridge that joins them
# (veth pairs); their addresses (10.213.0.0/24) exist only in these
# namespaces. Each host runs an sshd on its address with host keys, a client
# key and configs generated here (nothing of /etc/ssh or ~/.ssh is used).
# Every host writes its run directory apart (--remote-run-dir .../%h/run, as
# on machines without a shared file system), so the launcher must gather them.
#
# Checks:
# 1. planted data (as test_train_planted.sh, one epoch: its best epoch is the
#    first, and the test stays short): eval NE within 10% of the Bayes-optimal NE; RUN_DIR holds every host's outputs (both embedding
#    shards' and the sync PS's checkpoints, the model, both trainers'
#    results, result.json, every log); --eval-only on the gathered RUN_DIR
#    scores the same NE, run locally and over ssh; --predict --out - over
#    ssh streams the bytes of a local --out FILE; nothing left running on
#    any host.
# 1b. a PS killed (-9) on its host mid-run: restarted on that host from its
#    recovery checkpoint (in that host's own run directory); the job finishes.
# 2. trainer host 1's link taken down mid-run (ip link set eth0 down): the
#    documented behaviour (docs/cluster.md) is that the launcher ends the job
#    with a non-zero status and a message naming that host, within 60 s, the
#    reachable hosts' run directories are gathered, and the processes on
#    every host stop (the cut-off host's own once its sshd notices the client
#    is gone: ClientAliveInterval).
# 3. the launcher killed with -9 mid-run: every host's processes stop.
# 4. SIGTERM to the launcher, then shadow-launch --resume (s-ma): exit 75, a
#    complete job checkpoint gathered from the hosts, the resumed job's
#    example count that of a fault-free run, dense state digests equal.
# Skipped (with the reason) when network namespaces cannot be created.
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || skip "not root: cannot create network namespaces"
SSHD=$(command -v sshd || echo /usr/sbin/sshd)
[ -x "$SSHD" ] || skip "sshd is not installed (make deps installs openssh-server)"
command -v ssh-keygen >/dev/null || skip "ssh-keygen is not installed (make deps installs openssh-client)"
command -v ip >/dev/null || skip "ip is not installed (iproute2): cannot create network namespaces"

P=ssn$$  # names of this run's namespaces
NET=10.213.0
HOSTS=(head ps0 ps1 tr0 tr1); ADDR=([0]=1 [1]=11 [2]=12 [3]=21 [4]=22)
NS_CREATED=(); SSHD_PIDS=()
net_cleanup() {
    local ns p
    for p in "${SSHD_PIDS[@]:-}"; do [ -n "$p" ] && kill -9 "$p" 2>/dev/null; done
    for ns in "${NS_CREATED[@]:-}"; do
        [ -n "$ns" ] || continue
        for p in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
    done
    sleep 0.2
    for ns in "${NS_CREATED[@]:-}"; do [ -n "$ns" ] && ip netns del "$ns" 2>/dev/null; done
    cleanup
}
trap net_cleanup EXIT

mkns() { ip netns add "$1" && NS_CREATED+=("$1") && ip -n "$1" link set lo up; }
if ! mkns "$P-br" 2>"$T/netns.err"; then
    skip "cannot create a network namespace: $(cat "$T/netns.err")"
fi
ip -n "$P-br" link add br0 type bridge && ip -n "$P-br" link set br0 up || fail "bridge"
for i in "${!HOSTS[@]}"; do
    h=${HOSTS[$i]}
    mkns "$P-$h" || fail "netns $P-$h"
    ip link add eth0 netns "$P-$h" type veth peer name "v-$h" netns "$P-br" || fail "veth for $h"
    ip -n "$P-br" link set "v-$h" master br0 up || fail "bridge port for $h"
    ip -n "$P-$h" addr add "$NET.${ADDR[$i]}/24" dev eth0 && ip -n "$P-$h" link set eth0 up \
        || fail "address of $h"
done
in_ns() { local h=$1; shift; ip netns exec "$P-$h" "$@"; }
ok "5 namespaces on a bridge: head $NET.1, ps0 $NET.11, ps1 $NET.12, tr0 $NET.21, tr1 $NET.22"

# ssh: keys and configs of our own; one sshd per host namespace.
S=$T/ssh; mkdir -p "$S" && chmod 700 "$S"
ssh-keygen -q -t ed25519 -N "" -f "$S/host_key" || fail "host key"
ssh-keygen -q -t ed25519 -N "" -f "$S/id" || fail "client key"
cp "$S/id.pub" "$S/authorized_keys"
for i in 1 2 3 4; do
    h=${HOSTS[$i]}
    cat >"$S/sshd_$h.conf" <<EOF
ListenAddress $NET.${ADDR[$i]}:22
HostKey $S/host_key
PidFile $S/sshd_$h.pid
AuthorizedKeysFile $S/authorized_keys
StrictModes no
UsePAM no
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
ClientAliveInterval 2
ClientAliveCountMax 3
LogLevel ERROR
EOF
    # sshd needs its privilege separation directory /run/sshd: each gets a
    # private /run (a tmpfs in a mount namespace of its own), so that the
    # machine's /run/sshd is neither needed nor touched (another sshd's
    # cleanup removing it would break ours)
    in_ns "$h" unshare --mount --propagation private sh -c \
        'mount -t tmpfs -o mode=755 tmpfs /run && mkdir -m 755 /run/sshd && exec "$0" -D -e -f "$1"' \
        "$SSHD" "$S/sshd_$h.conf" >"$T/sshd_$h.log" 2>&1 &
    SSHD_PIDS+=($!)
    disown $!  # killed by pid in net_cleanup, quietly
done
cat >"$S/config" <<EOF
Host *
  User root
  IdentityFile $S/id
  IdentitiesOnly yes
  UserKnownHostsFile $S/known_hosts
  GlobalKnownHostsFile /dev/null
  StrictHostKeyChecking accept-new
  LogLevel ERROR
EOF
SSH_OPTS="-F $S/config -o ServerAliveInterval=1 -o ServerAliveCountMax=3"
for i in 1 2 3 4; do
    for _ in $(seq 50); do
        in_ns head ssh $SSH_OPTS -o BatchMode=yes "$NET.${ADDR[$i]}" true </dev/null 2>"$T/ssh.err" && break
        sleep 0.1
    done || true
    in_ns head ssh $SSH_OPTS -o BatchMode=yes "$NET.${ADDR[$i]}" true </dev/null \
        || { cat "$T/ssh.err" "$T/sshd_${HOSTS[$i]}.log"; fail "ssh to ${HOSTS[$i]}"; }
done
ok "sshd on each host namespace; key login from head works"

cat >"$T/hosts" <<EOF
# the PS hosts: embedding shards round-robin, the sync PS on the first
$NET.11 ps
$NET.12 embedding
# the trainer hosts
$NET.21 trainer
$NET.22 trainer
EOF
launch_net() {  # [args...]: shadow-launch in the head namespace over ssh (at most 400 s)
    timeout 400 ip netns exec "$P-head" "$ROOT/scripts/shadow-launch" "$JOB" --bin "$BIN" --quiet --hosts "$T/hosts" \
        --ssh-opts "$SSH_OPTS" --remote-run-dir "$T/hosts-fs/%h/run" "$@"
}
# host_procs NAME: the shadow-* processes running in host NAME's namespace
host_procs() {
    local p
    for p in $(ip netns pids "$P-$1" 2>/dev/null); do
        grep -qa "shadow-" "/proc/$p/cmdline" 2>/dev/null && echo "$p"
    done
}
no_host_procs() {  # SECONDS: every host namespace free of our processes within it
    local n=$(( $1 * 10 )) h busy
    while ((n-- > 0)); do
        busy=""
        for h in "${HOSTS[@]}"; do [ -n "$(host_procs "$h")" ] && busy="$busy $h"; done
        [ -z "$busy" ] && return 0
        sleep 0.1
    done
    fail "processes still running on:$busy"
}

# 1. the planted job of test_train_planted.sh, across the hosts
"$BIN/shadow-datagen" --rows 1000000 --seed 7 --out "$T/train.tsv" \
    --eval-rows 100000 --eval-out "$T/eval.tsv" >"$T/datagen.json" 2>"$T/datagen.log" \
    || { cat "$T/datagen.log"; fail "datagen"; }
bayes=$(json_field "$T/datagen.json" eval.bayes_ne)
make_job 2 1 2 "data:" "  train: [$T/train.tsv]" "  eval: [$T/eval.tsv]" \
    "trainer:" "  batch_size: 32" "  epochs: 1" "tables:" "  lr: 0.1" "sync:" "  algorithm: s-easgd"
t0=$(date +%s.%N)
launch_net >"$T/launch.log" 2>&1 || { cat "$T/launch.log"; fail "job across the namespaces failed"; }
wall=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
cat "$T/launch.log"
R=$T/run
ne=$(json_field "$R/result.json" eval_ne)
limit=$(awk -v b="$bayes" 'BEGIN { printf "%.4f", 1.10 * b }')
float_lt "$ne" "$limit" || fail "eval NE $ne is not within 10% of the Bayes-optimal $bayes (limit $limit)"
ok "job over ssh in $wall s: eval NE $ne within 10% of the Bayes-optimal NE $bayes (limit $limit)"
for f in result.json result-trainer-0.json result-trainer-1.json model/dense.bin model/MANIFEST \
    model/embedding-0.ckpt model/embedding-1.ckpt model/sync-0.ckpt logs/ps-embedding-0.log logs/ps-embedding-1.log \
    logs/ps-sync-0.log logs/trainer-0.log logs/trainer-1.log cluster.args; do
    [ -e "$R/$f" ] || { ls -R "$R" "$T/hosts-fs"; fail "$f was not gathered into the run directory"; }
done
# each came from its own host's directory
# (a PS writes its part of a model save into model.new-ID of its own host)
[ -n "$(ls "$T/hosts-fs/$NET.12/run"/model.new-*/embedding-1.ckpt 2>/dev/null)" ] &&
    [ -z "$(ls "$T/hosts-fs/$NET.11/run"/model.new-*/embedding-1.ckpt 2>/dev/null)" ] \
    || fail "embedding shard 1 was not placed on $NET.12 alone"
[ -f "$T/hosts-fs/$NET.22/run/result-trainer-1.json" ] || fail "trainer 1 did not run on $NET.22"
grep -q "tcp://$NET.12:" "$R/cluster.args" || fail "no endpoint on $NET.12 in cluster.args"
ok "every host's outputs gathered into one run directory"
no_host_procs 10
ok "nothing left running on any host"

# the gathered run directory is a local run's: --eval-only scores the same model
launch --eval-only "$R" --set "job.run_dir=$T/eval-run" >"$T/eval.log" 2>&1 \
    || { cat "$T/eval.log"; fail "--eval-only on the gathered run directory failed"; }
ne2=$(json_field "$T/eval-run/result.json" eval_ne)
awk -v a="$ne" -v b="$ne2" 'BEGIN { d = a - b; exit !(d < 1e-4 && d > -1e-4) }' \
    || fail "--eval-only of the gathered model gives NE $ne2, the job reported $ne"
ok "--eval-only (local) on the gathered run directory: NE $ne2"
launch_net --eval-only "$R" --set "job.run_dir=$T/eval-ssh" >"$T/eval-ssh.log" 2>&1 \
    || { cat "$T/eval-ssh.log"; fail "--eval-only over ssh failed"; }
ne3=$(json_field "$T/eval-ssh/result.json" eval_ne)
awk -v a="$ne" -v b="$ne3" 'BEGIN { d = a - b; exit !(d < 1e-4 && d > -1e-4) }' \
    || fail "--eval-only over ssh gives NE $ne3, the job reported $ne"
ok "--eval-only over ssh (the PS hosts restore the gathered checkpoints): NE $ne3"
# --predict --out - over ssh: trainer 0's standard output comes back through
# its ssh, apart from its log; the same bytes as a local --out FILE
launch --predict "$R" --out "$T/pred-local.txt" --set "job.run_dir=$T/pred-run" >"$T/pred.log" 2>&1 \
    || { cat "$T/pred.log"; fail "--predict (local) on the gathered run directory failed"; }
launch_net --predict "$R" --out - --set "job.run_dir=$T/pred-ssh" >"$T/pred-ssh.txt" 2>"$T/pred-ssh.log" \
    || { cat "$T/pred-ssh.log"; fail "--predict --out - over ssh failed"; }
[ -s "$T/pred-local.txt" ] && cmp -s "$T/pred-ssh.txt" "$T/pred-local.txt" \
    || fail "--predict --out - over ssh: not the bytes of a local --out FILE"
ok "--predict --out - over ssh: $(wc -l <"$T/pred-ssh.txt") predictions, the bytes of a local --out FILE"

# 1b. a PS killed on its host is restarted there, from that host's recovery checkpoint
rm -rf "$R" "$T/hosts-fs"
launch_net --set checkpoint.interval_s=1 >"$T/restart.log" 2>&1 &
LP=$!
PIDS+=("$LP")
wait_log "$R/logs/ps-embedding-1.log" "recovery checkpoint" 120
wait_log "$R/logs/trainer-0.log" "trainer 0 |" 60
victim=""
for p in $(ip netns pids "$P-ps1"); do
    [ "$(cat "/proc/$p/comm" 2>/dev/null)" = shadow-ps ] || continue  # not the ssh wrapper's sh
    tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q -- "--role embedding --shard 1 " && victim=$p
done
[ -n "$victim" ] || fail "no embedding PS 1 on $NET.12"
kill -9 "$victim"
wait_exit "$LP" 200 || { cat "$T/restart.log"; fail "job failed after a PS on $NET.12 was killed"; }
grep -q '"ps_restarts":\[{"ps":"embedding:1","exit":137' "$R/result.json" \
    || { cat "$T/restart.log"; fail "result.json does not list the restart"; }
grep -q "restarting it from its recovery checkpoint" "$T/restart.log" \
    || { cat "$T/restart.log"; fail "the PS was not restarted from its host's recovery checkpoint"; }
ne_r=$(json_field "$R/result.json" eval_ne)
float_lt "$ne_r" "$limit" || fail "eval NE $ne_r after the restart is not within 10% of the Bayes-optimal $bayes"
ok "PS killed on $NET.12: restarted there from its recovery checkpoint, job finished, eval NE $ne_r"
no_host_procs 10

# 2. trainer host 1 loses its link mid-run
rm -rf "$R" "$T/hosts-fs"
(launch_net >"$T/cut.log" 2>&1; echo $? >"$T/cut.rc") &
LP=$!
PIDS+=("$LP")
wait_log "$R/logs/trainer-1.log" "trainer 1 |" 120
t0=$(date +%s.%N)
ip -n "$P-tr1" link set eth0 down || fail "cannot take the link down"
n=600
while [ ! -f "$T/cut.rc" ] && ((n-- > 0)); do sleep 0.1; done
[ -f "$T/cut.rc" ] || { cat "$T/cut.log"; fail "launcher still running 60 s after the link went down"; }
took=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
cat "$T/cut.log"
[ "$(cat "$T/cut.rc")" != 0 ] || fail "launcher exited 0 though trainer host 1 was cut off"
grep "shadow-launch:" "$T/cut.log" | grep -q "$NET.22" \
    || fail "the launcher's message does not name host $NET.22"
ok "link of $NET.22 down: launcher exited $(cat "$T/cut.rc") after $took s: $(grep -m1 "$NET.22" "$T/cut.log" | cut -c1-200)"
grep -q "could not gather" "$T/cut.log" && fail "the reachable hosts were not gathered after the failure"
[ -f "$R/result-trainer-0.json" ] || [ -n "$(ls "$R/ckpt" 2>/dev/null)" ] || [ -n "$(ls "$R"/*.jsonl 2>/dev/null)" ] \
    || { ls -R "$R"; fail "nothing of the reachable hosts in the run directory after the failure"; }
no_host_procs 20
ok "every host's processes stopped, the cut-off host's too; the others' run directories gathered"

# 3. the launcher itself killed (-9) mid-run: every host's processes stop
ip -n "$P-tr1" link set eth0 up || fail "cannot bring the link back"
rm -rf "$R" "$T/hosts-fs"
launch_net >"$T/k9.log" 2>&1 &
LP=$!
PIDS+=("$LP")
wait_log "$R/logs/trainer-1.log" "trainer 1 |" 120
lpid=$(pgrep -f -- "^(bash |[^ ]*shadow-ctl launch )$ROOT/scripts/shadow-launch $JOB") || fail "no launcher to kill"
kill -9 $lpid
no_host_procs 15
ok "launcher killed with -9: the processes on every host stopped (their ssh's stdin closed)"

# 4. SIGTERM to the launcher, then --resume, over ssh (a short s-ma job: 2
# embedding shards on the two PS hosts, 2 trainers). The launcher exits 75
# with a complete job checkpoint gathered from the hosts (trainer 1's state
# from tr1, embedding shard 1's file from ps1); --resume copies each host its
# part and the job ends with the example count of a fault-free run (every row
# once: rows x epochs, as test_resume.sh checks against a fault-free run),
# each trainer resuming with the dense state it saved, bit for bit.
rm -rf "$R" "$T/hosts-fs"
ROWS=300000
"$BIN/shadow-datagen" --rows $ROWS --seed 5 --out "$T/resume.tsv" --eval-rows 50000 \
    --eval-out "$T/resume-eval.tsv" >/dev/null 2>&1 || fail "datagen"
make_job 2 0 2 "data:" "  train: [$T/resume.tsv]" "  eval: [$T/resume-eval.tsv]" \
    "trainer:" "  batch_size: 32" "  epochs: 1" "metrics:" "  interval_s: 0.2" "sync:" "  algorithm: s-ma"
launch_net >"$T/stop.log" 2>&1 &
LP=$!
PIDS+=("$LP")
ex_now() { sed -n 's/.*trainer 0 | \([0-9]*\) ex |.*/\1/p' "$R/logs/trainer-0.log" 2>/dev/null | tail -n 1; }
n=1200  # a third of trainer 0's half of the rows
while ((n-- > 0)) && (( $(ex_now || echo 0) + 0 < ROWS / 6 )); do sleep 0.1; done
((n > 0)) || { cat "$T/stop.log"; fail "SIGTERM drill: trainer 0 made no progress"; }
lpid=$(pgrep -f -- "^(bash |[^ ]*shadow-ctl launch )$ROOT/scripts/shadow-launch $JOB") || fail "no launcher to stop"
t0=$(date +%s.%N)
kill -TERM $lpid
wait_exit "$LP" 180; rc=$?
took=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
cat "$T/stop.log"
[ "$rc" = 75 ] || fail "the launcher exited $rc after SIGTERM over ssh, want 75"
grep -q "job checkpoint saved in $R/jobckpt" "$T/stop.log" || fail "no job checkpoint message"
grep -q "resume with: .*--resume $R" "$T/stop.log" || fail "the message does not say how to resume"
for f in MANIFEST trainer-0.state trainer-1.state embedding-0.ckpt embedding-1.ckpt; do
    [ -s "$R/jobckpt/$f" ] || { ls -R "$R"; fail "jobckpt/$f was not gathered"; }
done
ls -d "$R"/jobckpt.* 2>/dev/null && fail "a jobckpt.* folder is left in the run directory"
id=$(sed -n 's/^save_id //p' "$R/jobckpt/MANIFEST")
cmp -s "$T/hosts-fs/$NET.22/run/jobckpt.new-$id/trainer-1.state" "$R/jobckpt/trainer-1.state" \
    && cmp -s "$T/hosts-fs/$NET.12/run/jobckpt.new-$id/embedding-1.ckpt" "$R/jobckpt/embedding-1.ckpt" \
    || fail "trainer 1's state (from $NET.22) or embedding shard 1's file (from $NET.12) is not save $id's"
for r in 0 1; do
    grep -q "stopped with a job checkpoint" "$R/logs/trainer-$r.log" \
        || fail "trainer $r (on its host) did not stop with the job checkpoint"
done
EXC=$(sed -n 's/^examples //p' "$R/jobckpt/MANIFEST")
((EXC > 0 && EXC < ROWS)) || fail "the job checkpoint holds $EXC examples, want between 0 and $ROWS"
no_host_procs 10
ok "SIGTERM over ssh: exit 75 after $took s, job checkpoint of $EXC examples gathered from the hosts (save $id)"

t0=$(date +%s.%N)
timeout 300 ip netns exec "$P-head" "$ROOT/scripts/shadow-launch" --resume "$R" --bin "$BIN" \
    >"$T/resume.log" 2>&1 || { cat "$T/resume.log"; fail "the resumed job over ssh failed"; }
took=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
cat "$T/resume.log"
grep -q '"resumed":true' "$R/result.json" || fail "result.json does not say resumed"
[ "$(json_field "$R/result.json" resumed_from_examples)" = "$EXC" ] || fail "resumed_from_examples is not $EXC"
for r in 0 1; do
    d0=$(sed -n 's/.*job checkpoint: state written .*digest \([0-9a-f]*\)).*/\1/p' "$R/logs.1/trainer-$r.log")
    d1=$(sed -n 's/.*resuming from .*trainer-'$r'.state: .*digest \([0-9a-f]*\)$/\1/p' "$R/logs/trainer-$r.log")
    [ -n "$d0" ] && [ "$d0" = "$d1" ] || fail "trainer $r wrote dense state digest '$d0', resumed with '$d1'"
done
grep -q "resuming from $T/hosts-fs/$NET.22/run/jobckpt.resume/trainer-1.state" "$R/logs/trainer-1.log" \
    && grep -q "checkpoint $T/hosts-fs/$NET.12/run/jobckpt.resume/embedding-1.ckpt: restored" \
        "$R/logs/ps-embedding-1.log" \
    || fail "trainer 1 or embedding PS 1 did not restore from the copy pushed to its host"
EX1=$(json_field "$R/result.json" examples)
[ "$EX1" = "$ROWS" ] || fail "the resumed job trained $EX1 examples in all, a fault-free run $ROWS ($EXC before SIGTERM)"
[ ! -e "$R/jobckpt" ] || fail "the finished job left its job checkpoint"
[ -z "$(ls -d "$T"/hosts-fs/*/run/jobckpt.resume 2>/dev/null)" ] || fail "a host kept the pushed job checkpoint"
no_host_procs 10
ok "--resume over ssh in $took s: $((EX1 - EXC)) + $EXC = $EX1 examples (fault-free $ROWS), eval NE $(json_field "$R/result.json" eval_ne), dense state digests equal"
pass
