#!/usr/bin/env bash
# Periodic job checkpoints (job.checkpoint_interval_s), two things the other
# checkpoint tests do not see:
#   1. A host with PSs and no trainer, sharing no file system with the
#      leading trainer's, keeps only the current checkpoint's parts: each PS
#      writes its part into JOBCKPT.new-ID of its own host's run directory,
#      and the commit on the leading trainer's host swaps in that host's
#      folder only. After each commit the PSs drop their parts of the
#      earlier ones (CHECKPOINT_DONE). Here the PSs run with a run directory
#      of their own (job.run_dir: what the launcher gives a PS on another
#      host), the trainers with theirs: after N checkpoints the PSs' run
#      directory holds exactly one jobckpt.new-ID, the one RUN_DIR/jobckpt's
#      MANIFEST names, with both PSs' files. Before, it held N.
#   2. The pause each checkpoint logs covers all the time the workers did not
#      train: from the drain (the main thread's "periodic job checkpoint due"
#      line) to the first batch each worker trained after its restart (each
#      worker's "first batch since the thread started" line, debug level).
#      Before, it ended at the commit and left the restart out.
. "$(dirname "$0")/lib.sh"
ROWS=200000
"$BIN/shadow-datagen" --rows $ROWS --seed 7 --out "$T/train.tsv" >/dev/null 2>&1 || fail datagen
make_job 2 0 2 "data:" "  train: [$T/train.tsv]" "sync:" "  algorithm: s-ma" \
    "metrics:" "  interval_s: 0.2"
t0=$(date +%s.%N)
mkdir -p "$T/psrun" "$T/run"
start_ps embedding 0 --set "job.run_dir=$T/psrun"
start_ps embedding 1 --set "job.run_dir=$T/psrun"
TP=()
for r in 0 1; do
    # enough epochs that no machine runs out of data before the checkpoints
    # below (each trainer has 100k examples an epoch; CI's machine trained 2
    # epochs in 1.2 s): the job is ended by SIGTERM once trainer 0 has logged
    # 3 periodic checkpoints, so their count does not depend on the speed
    "$BIN/shadow-trainer" -c "$JOB" --rank $r --set job.checkpoint_interval_s=0.3 \
        --set trainer.epochs=100 \
        --set job.log_level=debug >"$T/trainer-$r.log" 2>&1 &
    TP+=($!)
    PIDS+=($!)
done
ckpts() { grep -c "periodic job checkpoint [0-9]*:" "$T/trainer-0.log"; }
three() { (( $(ckpts) >= 3 )); }
wait_for 60 three
grep -q "segment done: 100 epoch" "$T/trainer-0.log" && fail "trainer 0 ran out of its 100 epochs"
# the SIGTERM's own job checkpoint ends the job (exit 75): one more commit, after
# which the PSs drop their parts of the periodic ones as after any other
kill -TERM "${TP[@]}"
for r in 0 1; do
    wait_exit "${TP[$r]}" 60; rc=$?
    [ "$rc" = 75 ] || { tail -n 5 "$T/trainer-$r.log"; fail "trainer $r exited $rc on SIGTERM, want 75"; }
done
N=$(ckpts)
((N >= 3)) || fail "trainer 0 logged $N periodic job checkpoints, want 3 or more"

# ---- 1. the PSs' host: the current checkpoint's folder only
ID=$(sed -n 's/^save_id //p' "$T/run/jobckpt/MANIFEST")
[ -n "$ID" ] || fail "no job checkpoint in $T/run/jobckpt"
got=$(cd "$T/psrun" && ls -d jobckpt.new-* 2>/dev/null | paste -sd' ')
[ "$got" = "jobckpt.new-$ID" ] \
    || fail "after $N checkpoints the PSs' run directory holds '$got', want only jobckpt.new-$ID (the committed one)"
for k in 0 1; do
    [ -s "$T/psrun/jobckpt.new-$ID/embedding-$k.ckpt" ] || fail "PS $k's part of the current checkpoint is gone"
done
ls -d "$T/run"/jobckpt.new-* 2>/dev/null && fail "the trainers' run directory kept a jobckpt.new-* folder"
grep -q "dropped this PS's files of 1 earlier save" "$T/embedding-0.log" \
    || fail "PS 0 does not log dropping its part of an earlier checkpoint"
ok "$N periodic checkpoints: the PSs' own run directory holds jobckpt.new-$ID only (the committed one, both parts)"

# ---- 2. the logged pause covers the workers' restart
# ms since midnight of a log line's time stamp
checked=$(awk '
    function ms(s,  t) { t = substr(s, 12, 12); split(t, a, ":");
        return (a[1] * 3600 + a[2] * 60) * 1000 + a[3] * 1000 }
    # one checkpoint: from its drain line up to the next drain line
    function check() {
        # a checkpoint that found this trainer done with its data (no stop:
        # "stopping and final sync 0 ms") paused nothing of it; not checked
        if (drain && back && p != "" && stop + 0 > 0) {
            gap = back - drain; n++
            printf "checkpoint %d: logged pause %d ms, drain to the last worker training again %d ms\n", n, p, gap > "/dev/stderr"
            if (p + 2 < gap) bad++
        }
        drain = 0; back = 0; saved = 0; p = ""; stop = ""
    }
    /main DEBUG periodic job checkpoint due/ { check(); drain = ms($1) }
    /job checkpoint saved in|job checkpoint: state written/ { saved = 1 }
    /worker-[0-9]* DEBUG training: first batch since the thread started/ {
        if (drain && saved && ms($1) > back) back = ms($1) }
    /periodic job checkpoint [0-9]*: .*training paused/ {
        p = $0; sub(/.*training paused /, "", p); sub(/ ms.*/, "", p)
        stop = $0; sub(/.*stopping and final sync /, "", stop); sub(/ ms.*/, "", stop) }
    END { check(); if (bad) print "bad"; else print n + 0 }' "$T/trainer-0.log" 2>"$T/pauses.txt")
cat "$T/pauses.txt"
[ "$checked" != bad ] || fail "a logged pause is shorter than the time from the drain to the workers training again"
((checked >= 2)) || fail "only $checked checkpoints with a drain and a restart to check, want 2 or more"
grep -q "restarting the workers [0-9]* ms" "$T/trainer-0.log" || fail "the pause line does not show the restart"
ok "$checked pauses checked: each covers the drain, the save and the workers' restart"
ok "$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"
pass
