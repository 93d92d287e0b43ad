#!/usr/bin/env bash
# Batch prediction (shadow-launch --predict RUN_DIR --out FILE) of a model
# trained on planted data:
# - one line per example, in input order; the logloss and mean prediction
#   computed from the written predictions and the file's labels equal the
#   eval's (--eval-only of the same model, result.json) within 1e-6 relative;
# - the file with its lines reversed gives the same predictions reversed
#   (the workers' byte ranges fall elsewhere: order is kept, not luck);
# - the same rows without the label column (data.labels false) give
#   byte-identical predictions; csv without a label column too;
# - bad lines: "nan" in their place by default, no line with --skip-bad, and
#   the summary counts them and names the first;
# - training (and --eval-only) with data.labels false is refused; a run directory without a
#   model gives a clear error and starts nothing;
# - a full disk (root: a small tmpfs) fails the run naming ENOSPC and leaves
#   neither FILE nor a temporary file; so does an interrupted run;
# - nothing is left running.
. "$(dirname "$0")/lib.sh"
"$BIN/shadow-datagen" --rows 20000 --seed 5 --out "$T/train.tsv" \
    --eval-rows 3000 --eval-out "$T/eval.tsv" >"$T/datagen.json" 2>"$T/datagen.log" \
    || { cat "$T/datagen.log"; fail "datagen"; }
make_job 1 0 1 "data:" "  train: [$T/train.tsv]" "  eval: [$T/eval.tsv]" \
    "trainer:" "  workers: 2" "  batch_size: 64" "  epochs: 1" "sync:" "  algorithm: none"
launch >"$T/launch-train.log" 2>&1 || { cat "$T/launch-train.log"; fail "training failed"; }
cp -r "$T/run" "$T/saved"
N=$(wc -l <"$T/eval.tsv")

# the eval's own figures: --eval-only of the saved model
launch --eval-only "$T/saved" >"$T/launch-eval.log" 2>&1 \
    || { cat "$T/launch-eval.log"; fail "eval-only failed"; }
R=$T/run/result.json
ev_ll=$(json_field "$R" eval_logloss)
ev_cal=$(json_field "$R" eval_calibration)
[ -n "$ev_ll" ] && [ -n "$ev_cal" ] || { cat "$R"; fail "no eval figures in $R"; }

# predict [launch args...]: --predict the saved model; the summary in $T/p.log
predict() {
    launch --predict "$T/saved" "$@" >"$T/p.log" 2>&1 || { cat "$T/p.log"; fail "predict $* failed"; }
}
predict --out "$T/pred.txt"
[ -f "$T/pred.txt" ] || fail "no prediction file"
[ "$(wc -l <"$T/pred.txt")" = "$N" ] || fail "$(wc -l <"$T/pred.txt") predictions for $N examples"
grep -q "predict: $N predictions in .* predictions/s" "$T/p.log" || { cat "$T/p.log"; fail "no summary line"; }
grep -q "predict eval: rows $N " "$T/p.log" || { cat "$T/p.log"; fail "no eval line in the summary"; }
ls "$T"/pred.txt.tmp* 2>/dev/null && fail "temporary files left beside the output"
# logloss (clipped as tr_eval.h says) and mean prediction from the file
read -r f_ll f_mean f_rate < <(cut -f1 "$T/eval.tsv" | paste - "$T/pred.txt" | awk '
    { q = $2; if (q < 1e-7) q = 1e-7; if (q > 1 - 1e-7) q = 1 - 1e-7
      ll += $1 > 0.5 ? -log(q) : -log(1 - q); s += $2; y += $1; n++ }
    END { printf "%.12g %.12g %.12g\n", ll / n, s / n, y / n }')
ev_mean=$(awk -v c="$ev_cal" -v r="$f_rate" 'BEGIN { printf "%.12g", c * r }')
rel() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-6 * (b < 0 ? -b : b)) }'; }
rel "$f_ll" "$ev_ll" || fail "logloss of the written predictions $f_ll, the eval's $ev_ll"
rel "$f_mean" "$ev_mean" || fail "mean of the written predictions $f_mean, the eval's $ev_mean"
ok "$N predictions; from the file: logloss $f_ll (eval $ev_ll), mean $f_mean (eval $ev_mean)"

# reversed input: the same predictions, reversed
tac "$T/eval.tsv" >"$T/rev.tsv"
predict --out "$T/pred-rev.txt" --set data.eval="$T/rev.tsv"
tac "$T/pred-rev.txt" | cmp -s - "$T/pred.txt" || fail "reversed input: predictions not the reverse"
# other cuts of the input into workers' ranges and batches
predict --out "$T/pred-w3.txt" --set trainer.workers=3
cmp -s "$T/pred-w3.txt" "$T/pred.txt" || fail "3 workers: other predictions than 2 workers'"
predict --out "$T/pred-rev1.txt" --set data.eval="$T/rev.tsv" --set trainer.workers=1
tac "$T/pred-rev1.txt" | cmp -s - "$T/pred.txt" || fail "reversed input, 1 worker: predictions not the reverse"
ok "reversed input gives the reversed predictions (2 and 1 workers); 3 workers the same as 2"

# no label column: data.labels false
cut -f2- "$T/eval.tsv" >"$T/nolabel.tsv"
predict --out "$T/pred-nl.txt" --set data.eval="$T/nolabel.tsv" --set data.labels=false
cmp -s "$T/pred-nl.txt" "$T/pred.txt" || fail "unlabeled criteo_tsv: predictions differ"
grep -q "predict eval:" "$T/p.log" && fail "metrics printed for unlabeled input"
# the same as csv with a header and no label column
{ printf 'i%s,' $(seq 1 13); printf 'c%s,' $(seq 1 25); echo c26
  tr '\t' ',' <"$T/nolabel.tsv"; } >"$T/nolabel.csv"
predict --out "$T/pred-csv.txt" --set data.eval="$T/nolabel.csv" --set data.labels=false \
    --set data.format=csv --set 'data.columns=[dense*13, categorical*26]'
cmp -s "$T/pred-csv.txt" "$T/pred.txt" || fail "unlabeled csv: predictions differ"
grep -q "1 header line(s) skipped" "$T/p.log" || { cat "$T/p.log"; fail "header not reported"; }
ok "unlabeled criteo_tsv and csv (header skipped) give byte-identical predictions"

# bad lines: nan in place (default), or skipped
{ head -n 1000 "$T/eval.tsv"; echo "not a line"; tail -n +1001 "$T/eval.tsv"; echo "x"; } >"$T/bad.tsv"
predict --out "$T/pred-bad.txt" --set data.eval="$T/bad.tsv"
[ "$(wc -l <"$T/pred-bad.txt")" = $((N + 2)) ] || fail "bad lines: not one output line per input line"
[ "$(sed -n 1001p "$T/pred-bad.txt")" = nan ] && [ "$(tail -n 1 "$T/pred-bad.txt")" = nan ] \
    || fail "bad lines are not nan in their place"
grep -v '^nan$' "$T/pred-bad.txt" | cmp -s - "$T/pred.txt" || fail "bad lines: the other predictions moved"
grep -q "2 bad line(s) written as nan; the first: .*bad.tsv:1001:" "$T/p.log" \
    || { cat "$T/p.log"; fail "bad lines not counted and named in the summary"; }
predict --out "$T/pred-skip.txt" --set data.eval="$T/bad.tsv" --skip-bad
cmp -s "$T/pred-skip.txt" "$T/pred.txt" || fail "--skip-bad: not one line per example"
ok "2 bad lines: nan at lines 1001 and $((N + 2)), or skipped with --skip-bad"

# refusals
"$BIN/shadow-trainer" -c "$JOB" --rank 0 --set data.labels=false >"$T/tl.log" 2>&1 \
    && fail "training with data.labels false was not refused"
grep -q "training needs labelled data" "$T/tl.log" || { cat "$T/tl.log"; fail "no clear refusal"; }
"$BIN/shadow-trainer" -c "$JOB" --eval-only --model "$T/saved/model" --set data.labels=false \
    >"$T/el.log" 2>&1 && fail "--eval-only with data.labels false was not refused"
grep -q "write predictions with --predict FILE instead" "$T/el.log" \
    || { cat "$T/el.log"; fail "no clear refusal of --eval-only without labels"; }
mkdir -p "$T/empty"
launch --predict "$T/empty" --out "$T/x.txt" >"$T/nomodel.log" 2>&1 && fail "predict without a model ran"
grep -q "has no saved model" "$T/nomodel.log" || { cat "$T/nomodel.log"; fail "no clear error without a model"; }
[ -e "$T/x.txt" ] && fail "output written without a model"
ok "training and --eval-only with data.labels false, and predicting without a model, are refused"

# interrupted (SIGTERM to the launcher while trainer 0 scores; a background
# job of a script ignores SIGINT): no output, no
# temporary file, nothing left running. The input is the eval file 100 times,
# scored by one worker in batches of 16, so that scoring lasts seconds.
for ((i = 0; i < 100; i++)); do cat "$T/eval.tsv"; done >"$T/big.tsv"
rm -f "$T/run/logs/trainer-0.log"  # the last run's: wait for this run's lines
"$ROOT/scripts/shadow-launch" "$JOB" --bin "$BIN" --quiet --predict "$T/saved" --out "$T/pred-int.txt" \
    --set data.eval="$T/big.tsv" --set trainer.workers=1 --set trainer.batch_size=16 \
    >"$T/int.log" 2>&1 &
LP=$!; PIDS+=("$LP")
wait_log "$T/run/logs/trainer-0.log" "model: " 20
sleep 0.5
kill -TERM "$LP"
wait_exit "$LP" 20 && fail "the interrupted predict run exited 0"
grep -q "stopped by a signal: no predictions were written" "$T/run/logs/trainer-0.log" \
    || { tail -n 5 "$T/run/logs/trainer-0.log"; fail "predict was not stopped by the signal (too fast?)"; }
ls "$T"/pred-int.txt* 2>/dev/null && fail "an interrupted run left its output or temporary files"
ok "interrupted while scoring: no output, no temporary file"

# a full disk: no output, no temporary file
if [ "$(id -u)" = 0 ] && mkdir -p "$T/mnt" && mount -t tmpfs -o size=12k tmpfs "$T/mnt" 2>/dev/null; then
    trap 'umount "$T/mnt" 2>/dev/null; cleanup' EXIT
    launch --predict "$T/saved" --out "$T/mnt/pred.txt" >"$T/full.log" 2>&1 && fail "a full disk went unnoticed"
    grep -qi "no space left on device" "$T/full.log" "$T/run/logs/trainer-0.log" \
        || { cat "$T/full.log"; fail "ENOSPC not named"; }
    [ -z "$(ls -A "$T/mnt")" ] || { ls -l "$T/mnt"; fail "files left on the full disk"; }
    # an output past the 1 MiB stream buffer: a worker's own write fails mid-run
    launch --predict "$T/saved" --out "$T/mnt/pred.txt" --set data.eval="$T/big.tsv" \
        >"$T/full2.log" 2>&1 && fail "a full disk (mid-run) went unnoticed"
    grep -q "cannot write predictions (worker .*No space left on device; no predictions were written to $T/mnt/pred.txt" \
        "$T/run/logs/trainer-0.log" || { tail -n 3 "$T/run/logs/trainer-0.log"; fail "mid-run ENOSPC not named"; }
    [ -z "$(ls -A "$T/mnt")" ] || { ls -l "$T/mnt"; fail "files left on the full disk (mid-run)"; }
    umount "$T/mnt"
    ok "full disk (at the end, and mid-run in a worker): the run failed naming ENOSPC, no file left"
else
    echo "skip: full-disk case (needs root to mount a tmpfs)"
fi
no_leftovers
pass
