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
# - --out -: the same bytes on standard output (2 and 3 workers, bad lines,
#   through gzip), and nothing else there (the launcher's progress and
#   summary, the trainer's summary go to stderr); a reader that closes the
#   pipe early (| head -n 5) stops the job before it scored its input: the
#   launcher exits 141, no temporary file and no process is left;
# - libsvm and libffm: a model trained on them scores the same file with
#   its labels stripped (data.labels false) to byte-identical predictions;
#   bad lines there (a leftover label, an empty line) get nan, or nothing
#   with --skip-bad;
# - training (and --eval-only) with data.labels false is refused (by the
#   launcher before it starts anything, and by the trainer); a run directory
#   without a model gives a clear error and starts nothing;
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

# --out -: standard output carries the predictions alone, the same bytes
# as --out FILE; the summaries go to stderr
launch --predict "$T/saved" --out - >"$T/so.txt" 2>"$T/so.log" || { cat "$T/so.log"; fail "--out - failed"; }
cmp "$T/so.txt" "$T/pred.txt" || fail "--out -: not the bytes of --out FILE"
grep -q "predict: $N predictions in .* $N line(s) written to standard output" "$T/so.log" \
    || { cat "$T/so.log"; fail "--out -: no predict summary on stderr"; }
grep -q "eval NE" "$T/so.log" || { cat "$T/so.log"; fail "--out -: the launcher's summary is not on stderr"; }
# 3 workers, bad lines as nan, trainer 0's progress echoed (no --quiet), through gzip
"$ROOT/scripts/shadow-launch" "$JOB" --bin "$BIN" --predict "$T/saved" --out - \
    --set data.eval="$T/bad.tsv" --set trainer.workers=3 2>"$T/so3.log" | gzip >"$T/so3.gz"
st=("${PIPESTATUS[@]}")
[ "${st[*]}" = "0 0" ] || { cat "$T/so3.log"; fail "--out - | gzip: exit statuses ${st[*]}"; }
gzip -dc "$T/so3.gz" | cmp -s - "$T/pred-bad.txt" \
    || fail "--out - with 3 workers and bad lines, through gzip: not the bytes of --out FILE"
launch --predict "$T/saved" --out - --set data.eval="$T/bad.tsv" --skip-bad >"$T/so-skip.txt" \
    2>"$T/so-skip.log" || { cat "$T/so-skip.log"; fail "--out - --skip-bad failed"; }
cmp -s "$T/so-skip.txt" "$T/pred-skip.txt" || fail "--out - --skip-bad: not the bytes of --out FILE"
ls -A "$T/run" | grep -q tmp && { ls -A "$T/run"; fail "--out -: temporary files left in the run dir"; }
ok "--out -: byte-identical to --out FILE (2 and 3 workers, bad lines, --skip-bad, through gzip); summaries on stderr"

# a reader that closes the pipe early: the job stops promptly (before it
# scored its 300,000 rows), exit 141, nothing left
for ((i = 0; i < 100; i++)); do cat "$T/eval.tsv"; done >"$T/big.tsv"
t0=$(date +%s.%N)
timeout 60 "$ROOT/scripts/shadow-launch" "$JOB" --bin "$BIN" --quiet --predict "$T/saved" --out - \
    --set data.eval="$T/big.tsv" 2>"$T/head.log" | head -n 5 >"$T/head.txt"
st=("${PIPESTATUS[@]}")
t1=$(date +%s.%N)
[ "${st[*]}" = "141 0" ] || { cat "$T/head.log"; fail "| head -n 5: exit statuses ${st[*]}, want 141 0"; }
head -n 5 "$T/pred.txt" | cmp -s - "$T/head.txt" || fail "| head -n 5: not the first 5 predictions"
grep -q "the reader of standard output closed it early; prediction stopped (after writing [0-9]* prediction line(s))" \
    "$T/head.log" || { cat "$T/head.log"; fail "| head: no clear message"; }
sent=$(grep -o "closed by its reader after [0-9]*" "$T/run/logs/trainer-0.log" | grep -o "[0-9]*$")
[ -n "$sent" ] && ((sent < 100 * N)) \
    || fail "| head: the trainer wrote ${sent:-?} of $((100 * N)) lines before it stopped"
ls -A "$T/run" | grep -q tmp && { ls -A "$T/run"; fail "| head: temporary files left in the run dir"; }
no_leftovers
ok "| head -n 5: exit 141 after $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }') s, $sent of $((100 * N)) lines written, nothing left"

# libsvm and libffm: the same lines without their labels give the same bytes
awk 'BEGIN { srand(11); for (i = 0; i < 6000; i++) { n = 1 + int(rand() * 5); s = ""; z = 0
        for (j = 0; j < n; j++) { k = int(rand() * 60); s = s " " k ":" (1 + int(rand() * 3)); z += k < 15 }
        print (rand() < (z ? 0.7 : 0.2) ? 1 : 0) s } }' >"$T/svm.txt"
awk '{ printf "%s", $1; for (i = 2; i <= NF; i++) { split($i, a, ":"); printf " %d:%s", a[1] % 3, $i }
       print "" }' "$T/svm.txt" >"$T/ffm.txt"
for fmt in libsvm libffm; do
    f=$T/${fmt#lib}.txt
    head -n 5000 "$f" >"$T/$fmt-train.txt"
    tail -n 1000 "$f" >"$T/$fmt-eval.txt"
    cut -d' ' -f2- "$T/$fmt-eval.txt" >"$T/$fmt-nl.txt"
    # bad lines without labels: a leftover label at 101, an empty line at 501
    awk 'NR == 101 { print "1 " $0 } NR == 501 { print "" } { print }' "$T/$fmt-nl.txt" >"$T/$fmt-nlbad.txt"
    F=(--set data.format=$fmt)
    [ $fmt = libffm ] && F+=(--set data.fields=3)
    launch "${F[@]}" --set data.train="$T/$fmt-train.txt" --set data.eval="$T/$fmt-eval.txt" \
        --set job.run_dir="$T/run-$fmt" >"$T/$fmt-train.log" 2>&1 || { cat "$T/$fmt-train.log"; fail "$fmt: training failed"; }
    P=("${F[@]}" --set job.run_dir="$T/run-$fmt-p")
    predict_fmt() { launch --predict "$T/run-$fmt" "${P[@]}" "$@" >"$T/p.log" 2>&1 || { cat "$T/p.log"; fail "$fmt: predict $* failed"; }; }
    predict_fmt --out "$T/$fmt-lab.p" --set data.eval="$T/$fmt-eval.txt"
    grep -q "predict eval: rows 1000 " "$T/p.log" || { cat "$T/p.log"; fail "$fmt: no eval line"; }
    [ "$(sort -u "$T/$fmt-lab.p" | wc -l)" -gt 20 ] || fail "$fmt: the predictions hardly differ between rows"
    predict_fmt --out "$T/$fmt-nl.p" --set data.eval="$T/$fmt-nl.txt" --set data.labels=false
    cmp -s "$T/$fmt-nl.p" "$T/$fmt-lab.p" || fail "$fmt: predictions without labels differ"
    grep -q "predict eval:" "$T/p.log" && fail "$fmt: metrics printed for unlabeled input"
    predict_fmt --out "$T/$fmt-nlbad.p" --set data.eval="$T/$fmt-nlbad.txt" --set data.labels=false
    [ "$(sed -n 101p "$T/$fmt-nlbad.p")" = nan ] && [ "$(sed -n 502p "$T/$fmt-nlbad.p")" = nan ] \
        || fail "$fmt: the bad unlabeled lines are not nan in their place"
    grep -q "2 bad line(s) written as nan; the first: .*$fmt-nlbad.txt:101: item 1 '1': expected .*a label first? set data.labels: true" \
        "$T/p.log" || { cat "$T/p.log"; fail "$fmt: the bad line is not explained"; }
    grep -v '^nan$' "$T/$fmt-nlbad.p" | cmp -s - "$T/$fmt-lab.p" || fail "$fmt: bad lines moved the others"
    predict_fmt --out "$T/$fmt-skip.p" --set data.eval="$T/$fmt-nlbad.txt" --set data.labels=false --skip-bad
    cmp -s "$T/$fmt-skip.p" "$T/$fmt-lab.p" || fail "$fmt: --skip-bad without labels: not one line per example"
done
ok "libsvm and libffm: the eval file without labels gives byte-identical predictions; bad lines nan or skipped"

# refusals
launch --set data.labels=false >"$T/ll.log" 2>&1; rc=$?
[ $rc = 2 ] || { cat "$T/ll.log"; fail "the launcher did not refuse training with data.labels false (exit $rc)"; }
grep -q "data.labels is false (the lines hold no label): that goes with --predict RUN_DIR only" "$T/ll.log" \
    || { cat "$T/ll.log"; fail "no clear refusal by the launcher"; }
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
# scored by one worker in batches of 16. However fast the machine, the
# signal lands mid-scoring: once the first predictions are out (the 1 MiB
# stream buffer, about half of them), the trainer is stopped, the launcher
# gets SIGTERM, and the trainer goes on once its SIGTERM is pending.
# interrupt_scoring GLOB: that, when a file matching GLOB has a byte.
interrupt_scoring() {
    local tp
    wait_for 60 nonempty "$1"
    tp=$(pgrep -f -- "shadow-trainer -c $JOB .*--rank 0") || fail "no trainer 0 to stop"
    kill -STOP "$tp"
    kill -TERM "$LP"
    wait_for 10 sig_pending "$tp" 15
    kill -CONT "$tp"
}
rm -f "$T/run/logs/trainer-0.log"  # the last run's: wait for this run's lines
"$ROOT/scripts/shadow-launch" "$JOB" --bin "$BIN" --quiet --predict "$T/saved" --out "$T/pred-int.txt" \
    --set data.eval="$T/big.tsv" --set trainer.workers=1 --set trainer.batch_size=16 \
    >"$T/int.log" 2>&1 &
LP=$!; PIDS+=("$LP")
interrupt_scoring "$T/pred-int.txt?*"
wait_exit "$LP" 20 && fail "the interrupted predict run exited 0"
grep -q "stopped by a signal: no predictions were written" "$T/run/logs/trainer-0.log" \
    || { tail -n 5 "$T/run/logs/trainer-0.log"; fail "predict was not stopped by the signal"; }
ls "$T"/pred-int.txt* 2>/dev/null && fail "an interrupted run left its output or temporary files"
ok "interrupted while scoring: no output, no temporary file"
# the same streamed to standard output: what went out is a prefix of the
# predictions, the message says how many lines, nothing is left
rm -f "$T/run/logs/trainer-0.log"
"$ROOT/scripts/shadow-launch" "$JOB" --bin "$BIN" --quiet --predict "$T/saved" --out - \
    --set data.eval="$T/big.tsv" --set trainer.workers=1 --set trainer.batch_size=16 \
    >"$T/int-so.txt" 2>"$T/int-so.log" &
LP=$!; PIDS+=("$LP")
interrupt_scoring "$T/int-so.txt"
wait_exit "$LP" 20 && fail "the interrupted predict run (--out -) exited 0"
# (logged as a warning at once, and again as the run's error if the trainer
# gets that far before the launcher stops it: the first says it)
got=$(grep -o "stopped by a signal: standard output got only the first [0-9]* line(s)" \
    "$T/run/logs/trainer-0.log" | head -n 1 | grep -o "[0-9]* line" | grep -o "[0-9]*")
[ -n "$got" ] || { tail -n 5 "$T/run/logs/trainer-0.log"; fail "--out -: not stopped by the signal"; }
[ "$(wc -l <"$T/int-so.txt")" = "$got" ] || fail "--out -: $(wc -l <"$T/int-so.txt") lines out, the log says $got"
for ((i = 0; i < 100; i++)); do cat "$T/pred.txt"; done | head -n "$got" | cmp -s - "$T/int-so.txt" \
    || fail "--out -: the lines out before the signal are not the first predictions"
ls -A "$T/run" | grep -q tmp && { ls -A "$T/run"; fail "--out -: temporary files left after a signal"; }
ok "interrupted while streaming: the first $got predictions went out (a prefix), the log says so, nothing left"

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
    skip_case "full disk (needs root to mount a tmpfs)"
fi
no_leftovers
pass
