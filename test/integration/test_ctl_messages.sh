#!/usr/bin/env bash
# tags: quick
# Messages a new user meets (issue 22): shadow-ctl names an unknown command
# and suggests the closest; "shadow-ctl --run RUN_DIR stats" on a finished
# job says at once that it is not running (it used to wait for the request
# timeout); shadow-launch's "--set KEY VALUE" (no '=') says how to write it,
# a second job file is named, and a missing data file is named before any
# process starts. Nothing is started.
. "$(dirname "$0")/lib.sh"
make_job 1 0 1

"$BIN/shadow-ctl" -c "$JOB" stat >"$T/unknown.out" 2>&1 && fail "an unknown command succeeded"
grep -q "unknown command 'stat': did you mean 'stats'?" "$T/unknown.out" \
    || { cat "$T/unknown.out"; fail "no suggestion for 'stat'"; }
ok "unknown command named with a suggestion: $(cat "$T/unknown.out")"
# every command is suggested and listed (one table, tools/ctl_main.c s_cmds)
for w in exprt:export prefligt:preflight; do
    "$BIN/shadow-ctl" -c "$JOB" "${w%%:*}" >"$T/unknown.out" 2>&1 && fail "'${w%%:*}' succeeded"
    grep -q "did you mean '${w#*:}'?" "$T/unknown.out" || { cat "$T/unknown.out"; fail "no '${w#*:}' for '${w%%:*}'"; }
done
"$BIN/shadow-ctl" -c "$JOB" zzzzzzzzzz >"$T/unknown.out" 2>&1 && fail "'zzzzzzzzzz' succeeded"
for c in ping stats checkpoint shutdown config check-data keygen ports report preflight plan export sync-traits resolve; do
    grep -q "commands:.* $c[,;]" "$T/unknown.out" || { cat "$T/unknown.out"; fail "the list lacks $c"; }
done
ok "export and preflight suggested; the list names every command"

# a finished launch: cluster.args and result.json (the launcher writes it last)
mkdir -p "$T/done"
printf '%s\n' -c "$JOB" --set "job.run_dir=$T/done" >"$T/done/cluster.args"
echo '{"examples":1}' >"$T/done/result.json"
# (a request timeout of 30 s against a bound of 5 s: waiting it out cannot
# pass, and a slow start on a loaded machine has room; it was 2 s against 10)
t0=$(date +%s%N)
"$BIN/shadow-ctl" --run "$T/done" --timeout-ms 30000 stats >"$T/done.out" 2>&1 && fail "stats of a finished job succeeded"
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
grep -q "is not running: it finished" "$T/done.out" || { cat "$T/done.out"; fail "no 'not running'"; }
((ms < 5000)) || fail "took $ms ms to say the job is not running (the request timeout is 30000 ms)"
ok "--run of a finished job: 'not running' in $ms ms"

"$ROOT/scripts/shadow-launch" "$JOB" --bin "$BIN" --set trainer.epochs 2 >"$T/set.out" 2>&1 \
    && fail "--set without '=' launched a job"
grep -q "give KEY=VALUE in one word (--set trainer.epochs=2)" "$T/set.out" \
    || { cat "$T/set.out"; fail "--set KEY VALUE: no helpful message"; }
ok "shadow-launch --set KEY VALUE: $(cat "$T/set.out")"
# a missing data file is named before any PS starts (it used to end a
# 2-trainer job under the trainer-loss rule)
"$ROOT/scripts/shadow-launch" "$JOB" --bin "$BIN" --set "data.train=[$T/nope.tsv]" \
    >"$T/nodata.out" 2>&1 && fail "a job without its data file started"
grep -q "data.train: cannot read $T/nope.tsv" "$T/nodata.out" || { cat "$T/nodata.out"; fail "missing file not named"; }
! ls "$T"/run/logs/ps-* >/dev/null 2>&1 || fail "a PS was started for a job without its data"
ok "missing data file named before anything starts: $(cat "$T/nodata.out")"
# the launcher reads the data paths by the trainer's rule (shadow-ctl
# check-data), not by a restatement in bash: data.valid is checked too and a
# folder is no data file (both used to start every PS), and a brace glob the
# trainer expands is taken (bash took it for a file name)
TRAIN=$ROOT/test/data/criteo/criteo_train_head10k.tsv
for bad in "data.valid=[$T/nope-valid.tsv]" "data.train=[$T]"; do
    rm -rf "$T/run"
    "$ROOT/scripts/shadow-launch" "$JOB" --bin "$BIN" --set "data.train=[$TRAIN]" --set "$bad" \
        >"$T/bad.out" 2>&1 && fail "$bad: the job started"
    grep -q "${bad%%=*}: cannot read $T[/a-z.-]* (" "$T/bad.out" \
        || { cat "$T/bad.out"; fail "$bad: not named"; }
    ! ls "$T"/run/logs/ps-* >/dev/null 2>&1 || { cat "$T/bad.out"; fail "$bad: a PS was started"; }
done
"$BIN/shadow-ctl" -c "$JOB" --set "data.train=[\"${TRAIN%/*}/{nope1,nope2}.tsv\"]" \
    check-data data.train >"$T/brace.out" 2>&1 && fail "a brace glob that matches nothing passed"
"$BIN/shadow-ctl" -c "$JOB" --set "data.train=[\"${TRAIN%/*}/{criteo_train_head10k}.tsv\"]" \
    check-data data.train || fail "a brace glob the trainer reads was refused"
ok "data.valid and a folder named before anything starts; a brace glob taken as the trainer takes it"
# after a trainer loss, "examples trained" counts the lost trainer's work to
# its last progress row (it used to leave it out)
D=$T/rep; mkdir -p "$D"
echo '{"rank":0,"examples":100,"eps":2,"train_ne":0.9,"output_model":"average"}' >"$D/result-trainer-0.json"
printf '{"t":1,"examples":10}\n{"t":2,"examples":40}\n' >"$D/metrics-trainer-1.jsonl"
printf '{"rank":1,"exit":137,"at_s":2.5}\n' >"$D/lost"
"$BIN/shadow-ctl" report "$D" --trainers 2 --lost "$D/lost" >"$D/summary" || { cat "$D/summary"; fail "report"; }
grep -q '"examples":140,"eps":2.0,"examples_by_lost_trainers":40,' "$D/result.json" \
    && grep -q "examples trained  140" "$D/summary" \
    && grep -q "include 40 by the lost trainer" "$D/summary" || { cat "$D/result.json" "$D/summary"; fail "lost trainer's examples"; }
ok "a lost trainer's examples are counted (100 + 40 to its last progress row)"
# report reads JSON through a parser: a result cut short is named with where
# it breaks (it used to be half-read), a name with a quote stays JSON
echo '{"rank":0,"examples":100,"eps":2,' >"$D/result-trainer-0.json"
"$BIN/shadow-ctl" report "$D" --trainers 1 >"$D/cut.out" 2>&1 && fail "report took a result cut short"
grep -q "report: $D/result-trainer-0.json: line 2, column 0: string or '}' expected" "$D/cut.out" \
    || { cat "$D/cut.out"; fail "cut result: error does not name the file and place"; }
echo '{"rank":0,"examples":"100","eps":2}' >"$D/result-trainer-0.json"
"$BIN/shadow-ctl" report "$D" --trainers 1 >"$D/type.out" 2>&1 && fail "report took examples as a string"
grep -q "result-trainer-0.json: field examples is a string, not an integer" "$D/type.out" \
    || { cat "$D/type.out"; fail "string examples: error does not name the field"; }
echo '{"rank":0,"examples":100,"eps":2,"output_model":"average"}' >"$D/result-trainer-0.json"
"$BIN/shadow-ctl" report "$D" --trainers 1 --job 'a "b" \c' --quiet || fail "report of a job name with quotes"
[ "$(json_field "$D/result.json" job)" = 'a "b" \c' ] || { cat "$D/result.json"; fail "job name not kept as JSON"; }
ok "report: $(head -n 1 "$D/cut.out"); $(head -n 1 "$D/type.out"); a quoted job name stays JSON"

# the per-epoch evals reach the terminal, not only trainer 0's log
"$BIN/shadow-datagen" --rows 4000 --seed 2 --out "$T/small.tsv" >/dev/null 2>&1 || fail datagen
"$ROOT/scripts/shadow-launch" "$JOB" --bin "$BIN" --set "data.train=[$T/small.tsv]" \
    --set "data.eval=[$T/small.tsv]" --set trainer.epochs=2 >"$T/epochs.out" 2>&1 \
    || { cat "$T/epochs.out"; fail "a small job failed"; }
grep -q "eval after 1 epoch(s): NE" "$T/epochs.out" && grep -q "eval after 2 epoch(s): NE" "$T/epochs.out" \
    || { cat "$T/epochs.out"; fail "per-epoch evals not shown"; }
ok "per-epoch evals on the launcher's output: $(grep -c "eval after" "$T/epochs.out") lines"
no_leftovers
pass
