#!/usr/bin/env bash
# scripts/shadow-launch on one machine: free ports by default, so that two
# jobs from the same job file (two run directories) run at once and both
# finish; shadow-ctl --run RUN_DIR reaches a live job; a second launch into a
# run directory in use is refused; --fixed-ports keeps the job file's
# endpoints; shadow-ctl ports hands out distinct bindable ports; a hosts file
# of loopback addresses with --exec local places the processes by role, and
# --base-port numbers each host's ports from a base; hosts-file errors name
# the line; a hosts file of ::1 runs the job on IPv6 endpoints; shadow-ctl
# plan --launch gives the launcher the job in one call; shadow-ctl report
# writes result.json field for field.
. "$(dirname "$0")/lib.sh"
"$BIN/shadow-datagen" --rows 150000 --seed 3 --out "$T/train.tsv" \
    --eval-rows 20000 --eval-out "$T/eval.tsv" >/dev/null 2>&1 || fail datagen
# every endpoint of the job file on one port FP: unusable as written (two PSs
# cannot both bind it), fine for the launcher, which chooses free ports
make_job 2 1 2 "data:" "  train: [$T/train.tsv]" "  eval: [$T/eval.tsv]" "trainer:" "  epochs: 1" \
    "metrics:" "  interval_s: 0.2"
FP=$(free_port)
sed -i "s#tcp://127.0.0.1:[0-9]*#tcp://127.0.0.1:$FP#" "$JOB"

# shadow-ctl ports: N distinct ports, each bindable (nobody listens there)
mapfile -t ports < <("$BIN/shadow-ctl" ports 8)
[ ${#ports[@]} = 8 ] || fail "shadow-ctl ports 8 printed ${#ports[@]} ports"
[ "$(printf '%s\n' "${ports[@]}" | sort -u | wc -l)" = 8 ] || fail "ports not distinct: ${ports[*]}"
for p in "${ports[@]}"; do
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && fail "port $p is in use"
done
"$BIN/shadow-ctl" ports 2 --host 192.0.2.1 >/dev/null 2>"$T/ports.err" && fail "ports on a foreign address"
grep -q "192.0.2.1" "$T/ports.err" || fail "ports error does not name the address"
ok "shadow-ctl ports: 8 distinct free ports (${ports[*]:0:3} ...); a foreign address is refused"

# two jobs at once, 4 epochs each (1 epoch of 150,000 rows takes under 1 s on
# a fast machine: job a must still run at the ping below, job b at its check)
t0=$(date +%s)
launch --set "job.run_dir=$T/a" --set trainer.epochs=4 >"$T/a.log" 2>&1 &
A=$!; PIDS+=("$A")
launch --set "job.run_dir=$T/b" --set trainer.epochs=4 >"$T/b.log" 2>&1 &
B=$!; PIDS+=("$B")
wait_log "$T/a/logs/trainer-0.log" "trainer 0 |" 60
kill -0 "$B" 2>/dev/null || { cat "$T/b.log"; fail "job b was over before job a trained: they did not overlap"; }
"$BIN/shadow-ctl" --run "$T/a" -t embedding ping >"$T/ping.out" 2>&1 \
    || { cat "$T/ping.out"; fail "shadow-ctl --run RUN_DIR ping of the live job"; }
ok "shadow-ctl --run RUN_DIR reaches the live job: $(head -n 1 "$T/ping.out" | cut -c1-80)"
# a launch into a run directory another launch holds (the lock taken here, so
# that the check does not depend on how long job a runs)
mkdir -p "$T/c" && exec 9>"$T/c/.launch.lock" && flock 9
launch --set "job.run_dir=$T/c" >"$T/c.log" 2>&1 && fail "a second launch into a run directory in use"
exec 9>&-
grep -q "in use" "$T/c.log" || { cat "$T/c.log"; fail "refusal does not say the run directory is in use"; }
ok "a second launch into the same run directory is refused: $(head -n 1 "$T/c.log" | cut -c1-100)"
wait_exit "$A" 180 || { cat "$T/a.log"; fail "job a failed"; }
wait_exit "$B" 180 || { cat "$T/b.log"; fail "job b failed"; }
for j in a b; do
    [ "$(json_field "$T/$j/result.json" examples)" = 600000 ] || fail "job $j did not train every row 4 times"
done
# one host, cluster.transport auto: the PSs and the trainers' ring on ipc://
# sockets in the run directory, the admin endpoints on free tcp ports
eps() { grep -o "127.0.0.1:[0-9]*\|ipc://[^],]*" "$1/cluster.args" | sort; }
pa=$(eps "$T/a"); pb=$(eps "$T/b")
# 2 embedding PSs, 1 sync PS, 2 trainers and their 2 admin endpoints
[ "$(printf '%s\n' $pa | wc -l)" = 7 ] || fail "job a: not 7 endpoints: $pa"
[ "$(printf '%s\n' $pa | grep -c "^ipc://$T/a/ipc/")" = 5 ] \
    || fail "job a: the PSs and trainers not on ipc:// in its run directory: $pa"
[ -z "$(comm -12 <(echo "$pa") <(echo "$pb"))" ] || fail "the two jobs shared ports"
ok "two jobs at once both finished in $(( $(date +%s) - t0 )) s on distinct endpoints" \
    "(NE $(json_field "$T/a/result.json" eval_ne), $(json_field "$T/b/result.json" eval_ne))"
no_leftovers

# cluster.transport tcp with ps.threads 2: free ports drawn as runs (shadow-ctl
# ports --span), each PS on 2 ports in a row (one socket per service thread)
mapfile -t sp < <("$BIN/shadow-ctl" ports 3 --span 4)
[ ${#sp[@]} = 3 ] || fail "shadow-ctl ports 3 --span 4 printed ${#sp[@]} ports"
for p in "${sp[@]}"; do
    for k in 0 1 2 3; do
        (exec 3<>"/dev/tcp/127.0.0.1/$((p + k))") 2>/dev/null && fail "port $((p + k)) of run $p is in use"
    done
done
launch --set "job.run_dir=$T/tcp" --set cluster.transport=tcp --set ps.threads=2 >"$T/tcp.log" 2>&1 \
    || { cat "$T/tcp.log"; fail "job with cluster.transport tcp, ps.threads 2"; }
grep -q "^cluster.embedding=\[tcp://127.0.0.1:[0-9]*,tcp://127.0.0.1:[0-9]*\]$" "$T/tcp/cluster.args" \
    || fail "cluster.transport tcp: $(cat "$T/tcp/cluster.args")"
for k in 0 1; do
    grep -q "bound at tcp://127.0.0.1:[0-9]* and 1 more, through tcp://127.0.0.1:" \
        "$T/tcp/logs/ps-embedding-$k.log" || fail "embedding PS $k: not one socket per service thread"
done
[ "$(json_field "$T/tcp/result.json" examples)" = 150000 ] || fail "the tcp job did not train every row"
ok "cluster.transport tcp, ps.threads 2: $(grep -o 'bound at .*threads' "$T/tcp/logs/ps-embedding-0.log" | head -n 1)"
no_leftovers

# --fixed-ports: the job file's endpoints as written (all one port: the second PS cannot bind)
launch --fixed-ports --set "job.run_dir=$T/f" >"$T/f.log" 2>&1 && fail "fixed colliding ports worked"
grep -q ":$FP" "$T/f/logs/ps-embedding-1.log" \
    || { cat "$T/f.log"; fail "--fixed-ports did not use the job file's port $FP"; }
ok "--fixed-ports uses the job file's endpoints (port $FP twice: refused, as it must be)"
no_leftovers

# a hosts file of loopback addresses, run locally: each process where its role says
printf '127.0.0.1 ps   # embedding and sync\n127.0.0.2 embedding\n127.0.0.3 trainer\n' >"$T/hosts"
launch --hosts "$T/hosts" --exec local --set "job.run_dir=$T/h" >"$T/h.log" 2>&1 \
    || { cat "$T/h.log"; fail "job on loopback hosts failed"; }
args=$(tr '\n' ' ' <"$T/h/cluster.args")
[[ "$args" == *"cluster.embedding=[tcp://127.0.0.1:"*",tcp://127.0.0.2:"* ]] \
    || fail "embedding shards not round-robin over 127.0.0.1, 127.0.0.2: $args"
[[ "$args" == *"cluster.trainers=[tcp://127.0.0.3:"*",tcp://127.0.0.3:"* ]] \
    || fail "trainers not on 127.0.0.3: $args"
ok "hosts file with --exec local: placement by role ($(grep -o 'cluster.embedding=[^ ]*' <<<"$args"))"
no_leftovers

# --base-port B: each host's endpoints on B, B+1, ... in the order embedding, sync, trainers,
# trainers' admin endpoints
B=$(free_port)
launch --hosts "$T/hosts" --exec local --base-port "$B" --set "job.run_dir=$T/bp" >"$T/bp.log" 2>&1 \
    || { cat "$T/bp.log"; fail "job with --base-port $B failed"; }
args=$(tr '\n' ' ' <"$T/bp/cluster.args")
want="cluster.embedding=[tcp://127.0.0.1:$B,tcp://127.0.0.2:$B] --set cluster.sync=[tcp://127.0.0.1:$((B + 1))]"
want="$want --set cluster.trainers=[tcp://127.0.0.3:$B,tcp://127.0.0.3:$((B + 1))]"
want="$want --set cluster.trainer_admin=[tcp://127.0.0.3:$((B + 2)),tcp://127.0.0.3:$((B + 3))]"
[[ "$args" == *"$want"* ]] || fail "--base-port $B: endpoints $args, want $want"
ok "--base-port $B: $want"
no_leftovers

# hosts file errors name the file and line
printf '127.0.0.1 ps\n127.0.0.2 trainer gpu\n' >"$T/badhosts"
launch --hosts "$T/badhosts" --exec local >"$T/bad.log" 2>&1 && fail "a hosts file with an unknown role was taken"
grep -q "badhosts:2: unknown role 'gpu'" "$T/bad.log" || { cat "$T/bad.log"; fail "error does not name line 2"; }
printf '127.0.0.1 embedding\n' >"$T/notr"
launch --hosts "$T/notr" --exec local >"$T/notr.log" 2>&1 && fail "no host for the trainers, yet it ran"
grep -q "takes the trainer role" "$T/notr.log" || { cat "$T/notr.log"; fail "error does not name the role"; }
ok "hosts file: $(cat "$T/bad.log" | cut -c1-90); $(cut -c1-60 "$T/notr.log")"

# IPv6: a hosts file naming ::1 (shadow-ctl plan reads IPv6 addresses): every endpoint is
# tcp://[::1]:PORT, quoted in the --set lists, and the job trains over them
if grep -q '^0\{31\}1 ' /proc/net/if_inet6 2>/dev/null; then
    "$BIN/shadow-datagen" --rows 20000 --seed 4 --out "$T/v6.tsv" >/dev/null 2>&1 || fail datagen
    printf '::1 all   # this machine, by its IPv6 loopback address\n' >"$T/hosts6"
    launch --hosts "$T/hosts6" --exec local --set "data.train=[$T/v6.tsv]" \
        --set "job.run_dir=$T/v6" >"$T/v6.log" 2>&1 || { cat "$T/v6.log"; fail "job on ::1 failed"; }
    args=$(tr '\n' ' ' <"$T/v6/cluster.args")
    [[ "$args" == *'cluster.embedding=["tcp://[::1]:'*'","tcp://[::1]:'*'"] --set cluster.sync=["tcp://[::1]:'* ]] \
        || fail "IPv6 endpoints not tcp://[::1]:PORT: $args"
    [[ "$args" == *'cluster.trainer_admin=["tcp://[::1]:'* ]] || fail "admin endpoints not on ::1: $args"
    grep -q '"examples":20000,' "$T/v6/result.json" \
        || fail "job on ::1 did not train its 20000 rows: $(cat "$T/v6/result.json")"
    ok "IPv6 hosts file: $(grep -o 'cluster.embedding=[^ ]*' <<<"$args"), 20000 examples trained"
    no_leftovers
else
    echo "note: no IPv6 loopback address here: the IPv6 hosts file is not tried"
fi

# shadow-ctl plan --launch: the launcher's one read of the job file (it asked
# shadow-ctl config get key by key, ~20 processes a job): a relative run_dir
# made absolute from the current folder, the sync groups' label, the traits
# of the C table, the ports a tcp PS takes, and the admin secret only for a
# local job that has none; --check-data names a missing file (exit 3)
G='[{component: bottom, algorithm: s-easgd}, {component: top, algorithm: s-bmuf}]'
plan() { (cd "$T" && "$BIN/shadow-ctl" plan -c "$JOB" "$@") >"$T/pl.out" 2>&1; }
plan --launch --set job.run_dir=rel/run --set "sync.groups=$G" || { cat "$T/pl.out"; fail "plan --launch"; }
traits=$("$BIN/shadow-ctl" -c "$JOB" --set "sync.groups=$G" sync-traits)
for want in "config run_dir $T/rel/run" "config algo bottom:s-easgd,top:s-bmuf" "config traits $traits" \
    "config cluster.embedding.count 2" "config cluster.trainers.count 2" "config data.eval $T/eval.tsv" \
    "config eval_stdin 0" "config port_span 1" "config admin_token 1" "config handshake_token 1" \
    "transport ipc"; do
    grep -qxF "$want" "$T/pl.out" || { cat "$T/pl.out"; fail "plan --launch: no line '$want'"; }
done
plan --launch --set cluster.transport=tcp --set ps.threads=3 --set data.eval=- &&
    grep -qx "config port_span 3" "$T/pl.out" && grep -qx "config eval_stdin 1" "$T/pl.out" &&
    grep -qx "config algo $("$BIN/shadow-ctl" -c "$JOB" config get sync.algorithm)" "$T/pl.out" \
    || { cat "$T/pl.out"; fail "plan --launch: tcp, ps.threads 3"; }
plan --launch --exec ssh && grep -qx "config admin_token 0" "$T/pl.out" \
    || { cat "$T/pl.out"; fail "plan --launch: an ssh job got the local admin secret"; }
echo secret >"$T/tok" && chmod 600 "$T/tok"
plan --launch --set "security.token_file=$T/tok" && grep -qx "config admin_token 1" "$T/pl.out" &&
    grep -qx "config handshake_token 0" "$T/pl.out" \
    || { cat "$T/pl.out"; fail "plan --launch: the job's own token_file was replaced"; }
# the settings every process gets ("set" lines, once the endpoints are
# known): YAML lists (an IPv6 endpoint quoted), the trainers' admin endpoints
# unless --eval-only, the admin secret's file only for a local job
printf '::1 all\n' >"$T/v6hosts"
e='"tcp://[::1]:20000","tcp://[::1]:20001"'
plan --launch --hosts "$T/v6hosts" --base-port 20000 --set ps.threads=1 &&
    grep -qxF "set cluster.embedding=[$e]" "$T/pl.out" &&
    grep -qxF 'set cluster.trainer_admin=["tcp://[::1]:20005","tcp://[::1]:20006"]' "$T/pl.out" &&
    grep -qxF "set security.token_file=$(sed -n 's/^config run_dir //p' "$T/pl.out")/admin.token" \
        "$T/pl.out" \
    || { cat "$T/pl.out"; fail "plan --launch: set lines of a local IPv6 job"; }
plan --launch --hosts "$T/v6hosts" --base-port 20000 --set ps.threads=1 --eval-only --exec ssh &&
    grep -qxF "set cluster.embedding=[$e]" "$T/pl.out" && ! grep -q '^set .*\(trainer_admin\|token\)' "$T/pl.out" \
    || { cat "$T/pl.out"; fail "plan --launch: set lines of an --eval-only ssh job"; }
plan --launch && ! grep -q '^set ' "$T/pl.out" \
    || { cat "$T/pl.out"; fail "plan --launch: set lines before the ports are known"; }
plan --launch --check-data all --set "data.train=[$T/nope.tsv]"; rc=$?
[ "$rc" = 3 ] && grep -q "data.train: cannot read $T/nope.tsv" "$T/pl.out" \
    || { cat "$T/pl.out"; fail "plan --check-data: exit $rc for a missing file"; }
plan --launch --check-data eval --set "data.train=[$T/nope.tsv]" \
    || { cat "$T/pl.out"; fail "plan --check-data eval read data.train"; }
ok "shadow-ctl plan --launch: $(grep -c '^config ' "$T/pl.out") config lines in one call; run_dir, groups, traits, port span, secrets, data check"

# shadow-ctl preflight, what the launcher runs on each host first (it was a
# sh script): the token of the last launch, this build's version, free ports;
# the files of an earlier launch removed, an earlier job checkpoint only from
# a run directory of the host's own (another token)
P=$T/pf
mkdir -p "$P/run/jobckpt" "$P/run/jobckpt.new-7" "$P/ck/recovery"
touch "$P/run/result-trainer-0.json" "$P/ck/recovery/embedding-0.ckpt" "$P/ck/recovery/sync-0.ckpt" \
    "$P/ck/recovery/keep.txt"
echo other >"$P/run/.launch-token"
"$BIN/shadow-ctl" preflight "$P/run" "$JOB" mine --bin "$BIN" --ckpt-dir "$P/ck" --ports 2 >"$P/out" \
    || fail "preflight"
mapfile -t pf <"$P/out"
[ "${pf[0]}" = other ] && [ "${pf[1]}" = "$("$BIN/shadow-ps" --version)" ] && [ ${#pf[@]} = 4 ] \
    || fail "preflight printed: ${pf[*]}"
for f in run/jobckpt run/jobckpt.new-7 run/result-trainer-0.json ck/recovery/embedding-0.ckpt \
    ck/recovery/sync-0.ckpt; do
    [ ! -e "$P/$f" ] || fail "preflight left $f"
done
[ -e "$P/ck/recovery/keep.txt" ] || fail "preflight removed a file that is no recovery checkpoint"
mkdir -p "$P/run/jobckpt"; echo mine >"$P/run/.launch-token"
"$BIN/shadow-ctl" preflight "$P/run" "$JOB" mine --bin "$BIN" >"$P/out" && [ -d "$P/run/jobckpt" ] \
    && [ "$(head -n 1 "$P/out")" = mine ] || fail "preflight removed the launcher's own job checkpoint"
"$BIN/shadow-ctl" preflight "$P/run" "$T/nojob.yaml" mine --bin "$BIN" >/dev/null 2>&1; rc=$?
[ "$rc" = 4 ] || fail "preflight without the job file: exit $rc, want 4"
ok "shadow-ctl preflight: token, version, 2 ports; old results, recovery and foreign job checkpoints removed"

# a failed preflight's hint is worded by shadow-ctl preflight --why (given the
# preflight's own arguments): each exit status the preflight documents, 127
# (no shadow-ctl there) and the --exec mode's own failure (ssh's 255)
why() { "$BIN/shadow-ctl" preflight --why "$1" --exec "$2" --target u@h /r/run j.yaml t --bin /o/bin \
            --host 10.1.2.3; }
[ "$(why 3 ssh)" = "cannot create the run directory /r/run" ] \
    && [ "$(why 4 ssh)" = "no job file j.yaml there (every host needs it at the same path)" ] \
    && [ "$(why 5 ssh)" = "$(why 127 srun)" ] && [[ "$(why 5 ssh)" == "no /o/bin/shadow-ps or shadow-ctl there "* ]] \
    && [ "$(why 6 local)" = "cannot find free ports on 10.1.2.3 (is it an address of that host?)" ] \
    && [ "$(why 255 ssh)" = "ssh failed (ssh -o BatchMode=yes u@h must log in without a password)" ] \
    && [ "$(why 255 srun)" = "exit 255" ] && [ "$(why 1 ssh)" = "exit 1" ] \
    || fail "preflight --why: $(for r in 3 4 5 6 255 1; do why $r ssh; done)"
why x ssh >/dev/null 2>&1; rc=$?
[ "$rc" = 2 ] || fail "preflight --why x: exit $rc, want 2"
# the launcher says it: ssh to a loopback port where nothing listens (a port
# shadow-ctl ports just found free) fails with ssh's 255 at once
port=$("$BIN/shadow-ctl" ports 1)
echo '127.0.0.1 all' >"$T/pf-hosts"
timeout 60 "$ROOT/scripts/shadow-launch" "$JOB" --bin "$BIN" --quiet --hosts "$T/pf-hosts" --exec ssh \
    --ssh-opts "-o Port=$port -o ConnectTimeout=5" --set "job.run_dir=$T/pf-ssh" >"$T/pf-ssh.log" 2>&1; rc=$?
[ "$rc" = 1 ] && grep -qx 'shadow-launch: host 127.0.0.1: ssh failed (ssh -o BatchMode=yes 127.0.0.1 must log in without a password)' "$T/pf-ssh.log" \
    || { cat "$T/pf-ssh.log"; fail "launch over a refused ssh: exit $rc"; }
ok "preflight --why words each failure (3-6, 127, ssh's 255); the launcher prints it"

# shadow-super's launcher helpers (common/ss_backend.h): a command on a host
# as --exec reaches it (local: as it is, its status back), the job's CPUs per
# Slurm node, a MANIFEST value
out=$("$BIN/shadow-super" --on-host local --target localhost -- sh -c 'echo "$1"; exit 3' x "a b"); rc=$?
[ "$out" = "a b" ] && [ "$rc" = 3 ] || fail "--on-host local: '$out', exit $rc (want 'a b', 3)"
"$BIN/shadow-super" --on-host rsh -- true 2>/dev/null && fail "--on-host with an unknown mode ran"
out=$("$BIN/shadow-super" --slurm-cpus "8(x2),4" n1 n2 n3 n4 | tr '\n' ' ')
[ "$out" = "n1 8 n2 8 n3 4 n4 1 " ] || fail "--slurm-cpus '8(x2),4': '$out'"
"$BIN/shadow-super" --slurm-cpus "8(x" n1 2>"$P/cpn.err" && fail "--slurm-cpus took '8(x'"
grep -q "SLURM_JOB_CPUS_PER_NODE '8(x'" "$P/cpn.err" || fail "--slurm-cpus '8(x': $(cat "$P/cpn.err")"
mkdir -p "$P/mf"; printf 'save_id abc\nexamples 12\n' >"$P/mf/MANIFEST"
[ "$("$BIN/shadow-super" --manifest "$P/mf" examples)" = 12 ] || fail "--manifest examples"
[ -z "$("$BIN/shadow-super" --manifest "$P/none" save_id)" ] || fail "--manifest of no MANIFEST"
ok "shadow-super --on-host local, --slurm-cpus, --manifest"
# shadow-ctl resolve (shadow-slurm's NodeAddr): as the plan resolves a host, IPv4 first
[ "$("$BIN/shadow-ctl" resolve 127.0.0.1)" = 127.0.0.1 ] || fail "resolve 127.0.0.1"
[ "$("$BIN/shadow-ctl" resolve ::1)" = ::1 ] || fail "resolve ::1"
[ "$("$BIN/shadow-ctl" resolve localhost)" = 127.0.0.1 ] || fail "resolve localhost: not its IPv4 address"
"$BIN/shadow-ctl" resolve no-such-host.invalid 2>"$P/res.err" && fail "resolve of no host succeeded"
grep -q "resolve: no-such-host.invalid: " "$P/res.err" || fail "resolve: $(cat "$P/res.err")"
ok "shadow-ctl resolve: addresses as they are, localhost as 127.0.0.1, no host refused"

# shadow-ctl report: result.json exactly as the launcher always wrote it (a
# trainer without eval or a validation split: null, not an empty value); restarts listed in order
D=$T/rep; mkdir -p "$D"
echo '{"rank":0,"examples":10,"eps":2.25,"train_ne":0.9,"output_model":"average","best_epoch":2,"eval_ne":0.8,"eval_auc":0.7,"eval_logloss":0.5,"eval_calibration":1.1,"evals":2,"epochs_done":2}' >"$D/result-trainer-0.json"
echo '{"rank":1,"examples":32,"eps":1.5,"train_ne":0.95,"output_model":"average"}' >"$D/result-trainer-1.json"
printf '{"ps":"embedding:1","exit":137,"at_s":3.5,"checkpoint_age_s":1}\n' >"$D/restarts"
"$BIN/shadow-ctl" report "$D" --job j --sync s-ma --trainers 2 --wall-s 4.250 --restarts "$D/restarts" \
    >"$D/summary" || fail "report"
want='{"job":"j","sync_algorithm":"s-ma","trainers":2,"output_model":"average","eval_ne":0.8,"eval_auc":0.7,"eval_logloss":0.5,"eval_calibration":1.1,"best_epoch":2,"valid_ne":null,"valid_auc":null,"valid_logloss":null,"selected_on":null,"eval_scorings":null,"model_saved":null,"model_epoch":null,"resumed":false,"ps_restarts":[{"ps":"embedding:1","exit":137,"at_s":3.5,"checkpoint_age_s":1}],"trainers_lost":[],"examples":42,"eps":3.8,"wall_s":4.250,"per_trainer":['"$(cat "$D/result-trainer-0.json"),$(cat "$D/result-trainer-1.json")"']}'
[ "$(cat "$D/result.json")" = "$want" ] || { echo "got:  $(cat "$D/result.json")"; echo "want: $want"; fail "result.json"; }
grep -q "best epoch        2 of 2" "$D/summary" && grep -q "PS restarts       1" "$D/summary" \
    || { cat "$D/summary"; fail "summary"; }
# a resumed job (shadow-launch --resume): said, with the examples it resumed from
"$BIN/shadow-ctl" report "$D" --trainers 2 --resumed-from 17 >"$D/summary" || fail "report --resumed-from"
grep -q '"eval_scorings":null,"model_saved":null,"model_epoch":null,"resumed":true,"resumed_from_examples":17,"ps_restarts":\[\]' "$D/result.json" \
    || { cat "$D/result.json"; fail "resumed: result.json"; }
grep -q "resumed           from a job checkpoint at 17 examples" "$D/summary" || { cat "$D/summary"; fail "resumed: summary"; }
"$BIN/shadow-ctl" report "$D" --trainers 2 --resumed-from 1x >/dev/null 2>&1 && fail "--resumed-from 1x accepted"
rm "$D/result-trainer-0.json"
"$BIN/shadow-ctl" report "$D" --trainers 2 >"$D/out" 2>&1 && fail "report without trainer 0's result"
grep -q "trainer 0 wrote no result" "$D/out" || fail "report error does not name the missing result"
echo '{"rank":0,"examples":1,"eps":1,"train_ne":0.9,"output_model":"replica"}' >"$D/result-trainer-0.json"
"$BIN/shadow-ctl" report "$D" --quiet || fail "report of a job without eval"
grep -q '"eval_ne":null,' "$D/result.json" || fail "no eval: eval_ne is not null"
# trainer 0 lost (no result of its own): trainer 1 scored, totals skip rank 0
rm "$D/result-trainer-0.json"
printf '{"rank":0,"exit":137,"at_s":2.5}\n' >"$D/lost"
"$BIN/shadow-ctl" report "$D" --trainers 2 --lost "$D/lost" >"$D/summary" || fail "report with a lost trainer"
grep -q '"output_model":"average","eval_ne":null,' "$D/result.json" &&
    grep -q '"trainers_lost":\[{"rank":0,"exit":137,"at_s":2.5}\],"examples":32,"eps":1.5,' "$D/result.json" ||
    { cat "$D/result.json"; fail "lost trainer: result.json"; }
grep -q "trainers lost     1 (rank 0 (exit 137)); the others finished without it" "$D/summary" ||
    { cat "$D/summary"; fail "lost trainer: summary"; }
# --if-error (a failed job's report): result.json only when trainer 0's
# result names an error (its output model was not saved), exit 3 otherwise
rm -f "$D"/result*.json
echo '{"rank":0,"examples":1,"eps":1,"train_ne":0.9,"output_model":"replica"}' >"$D/result-trainer-0.json"
"$BIN/shadow-ctl" report "$D" --if-error >"$D/out" 2>&1; rc=$?
[ "$rc" = 3 ] && [ ! -e "$D/result.json" ] || { cat "$D/out"; fail "report --if-error without an error: exit $rc"; }
echo '{"rank":0,"examples":1,"eps":1,"train_ne":0.9,"output_model":"replica","error":"disk full"}' \
    >"$D/result-trainer-0.json"
"$BIN/shadow-ctl" report "$D" --if-error >"$D/out" 2>&1 && [ ! -s "$D/out" ] \
    && grep -q '"error":"disk full"' "$D/result.json" || { cat "$D/out"; fail "report --if-error with an error"; }
# exit 4 when the model folder holds the output model all the same, 5 when
# it holds an earlier one (model_epoch, copied into result.json)
echo '{"rank":0,"examples":1,"eps":1,"train_ne":0.9,"output_model":"replica","error":"restore refused","model_saved":true,"model_epoch":2,"best_epoch":2}' \
    >"$D/result-trainer-0.json"
"$BIN/shadow-ctl" report "$D" --if-error >"$D/out" 2>&1; rc=$?
[ "$rc" = 4 ] && [ "$(jq -r .model_saved "$D/result.json")" = true ] || { cat "$D/out"; fail "report --if-error, model saved: exit $rc"; }
echo '{"rank":0,"examples":1,"eps":1,"train_ne":0.9,"output_model":"replica","error":"disk full","model_saved":false,"model_epoch":1,"best_epoch":2}' \
    >"$D/result-trainer-0.json"
"$BIN/shadow-ctl" report "$D" --if-error >"$D/out" 2>&1; rc=$?
[ "$rc" = 5 ] && [ "$(jq -r .model_epoch "$D/result.json")" = 1 ] || { cat "$D/out"; fail "report --if-error, an earlier model kept: exit $rc"; }
ok "shadow-ctl report: result.json field for field; resumed and from what; a missing result named; no eval gives null; a lost trainer skipped and listed; --if-error (exit 3, 0, 4, 5)"
pass
