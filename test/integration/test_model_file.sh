#!/usr/bin/env bash
# tags: quick
# The model in one file (docs/model-file.md): shadow-ctl export, shadow-score,
# and standard input for --predict.
# - Criteo TSV (the real sample, 2 embedding PSs), Avazu csv (header, no
#   dense features: conf/avazu.yaml) and libsvm (multi-valued field, mean
#   pooling, first-order terms): the exported file scored by shadow-score is
#   byte-identical to --predict of the model set (from a file and from a
#   pipe, 1 or 3 threads; bad lines nan in place, or skipped; 1-, 7-, 64-
#   and 256-line batches);
# - cat FILE | shadow-launch --predict RUN_DIR --out - --set data.eval=-
#   equals --predict on FILE (2 workers; and --out FILE);
# - refused, naming the part, writing nothing: a model set with an embedding
#   file missing, one with a corrupted row, a model over --max-bytes (the size
#   said); by the scorer: a truncated file, a flipped byte in the rows, in the
#   header, a file that is not a model, a data.* setting that changes the
#   model's shape, a key that is not data.*; input with no good line or too
#   many bad ones exits 1 (as --predict fails), the lines written as nan.
. "$(dirname "$0")/lib.sh"
criteo_split
SCORE=$BIN/shadow-score

# same A B WHAT: the two files are byte-identical (and not empty)
same() { [ -s "$1" ] && cmp "$1" "$2" || fail "$3: $1 and $2 differ"; }
# refused WHAT PATTERN CMD...: CMD exits 1 and says PATTERN
refused() {
    local what=$1 pat=$2; shift 2
    "$@" >"$T/r.out" 2>"$T/r.err"; local rc=$?
    [ $rc = 1 ] || { cat "$T/r.err"; fail "$what: exit $rc, want 1"; }
    grep -q -- "$pat" "$T/r.err" || { cat "$T/r.err"; fail "$what: no '$pat' in the message"; }
}

# ---- Criteo TSV
make_job 2 0 1 "data:" "  train: [$T/train.tsv]" "  eval: [$T/eval.tsv]" \
    "trainer:" "  workers: 2" "  batch_size: 64" "  epochs: 1" "sync:" "  algorithm: none"
launch >"$T/train.log" 2>&1 || { cat "$T/train.log"; fail "training failed"; }
{ head -n 700 "$T/eval.tsv"; echo "not a line"; tail -n +701 "$T/eval.tsv"; echo "x"; } >"$T/bad.tsv"
launch --predict "$T/run" --out "$T/pred.txt" --set data.eval="$T/bad.tsv" \
    --set job.run_dir="$T/run-p" >"$T/p.log" 2>&1 || { cat "$T/p.log"; fail "predict failed"; }
[ "$(sed -n 701p "$T/pred.txt")" = nan ] || fail "predict: line 701 is not nan"
"$BIN/shadow-ctl" export "$T/run/model" -o "$T/criteo.ssm" >"$T/export.log" 2>&1 \
    || { cat "$T/export.log"; fail "export failed"; }
grep -q "exported .* rows of 17 floats in 26 tables" "$T/export.log" || { cat "$T/export.log"; fail "no export summary"; }
ls "$T"/criteo.ssm.tmp* 2>/dev/null && fail "export left a temporary file"
"$SCORE" "$T/criteo.ssm" "$T/bad.tsv" >"$T/score.txt" 2>"$T/score.log" || { cat "$T/score.log"; fail "shadow-score failed"; }
same "$T/score.txt" "$T/pred.txt" "criteo: shadow-score FILE against --predict"
grep -q "2000 predictions in .* 2002 line(s) written" "$T/score.log" || { cat "$T/score.log"; fail "no score summary"; }
grep -q "2 bad line(s); the first, at byte [0-9]* of .*bad.tsv: " "$T/score.log" || { cat "$T/score.log"; fail "bad lines not named"; }
"$SCORE" -q --threads 3 --batch 64 "$T/criteo.ssm" "$T/bad.tsv" >"$T/score-t3.txt" || fail "--threads 3 failed"
same "$T/score-t3.txt" "$T/pred.txt" "criteo: shadow-score --threads 3"
cat "$T/bad.tsv" | "$SCORE" --quiet --batch 7 "$T/criteo.ssm" >"$T/score-pipe.txt" 2>"$T/score.log" \
    || { cat "$T/score.log"; fail "shadow-score from a pipe failed"; }
same "$T/score-pipe.txt" "$T/pred.txt" "criteo: shadow-score - (a pipe, batches of 7)"
[ -s "$T/score.log" ] && fail "--quiet printed: $(cat "$T/score.log")"
"$SCORE" -q --batch 1 --skip-bad "$T/criteo.ssm" - <"$T/bad.tsv" >"$T/score-skip.txt" || fail "--skip-bad failed"
grep -v '^nan$' "$T/pred.txt" | cmp -s - "$T/score-skip.txt" || fail "--skip-bad: not the predictions without the nan lines"
cut -f2- "$T/eval.tsv" | "$SCORE" -q --set data.labels=false "$T/criteo.ssm" >"$T/score-nl.txt" \
    || fail "unlabeled scoring failed"
grep -v '^nan$' "$T/pred.txt" | cmp -s - "$T/score-nl.txt" || fail "data.labels=false: other predictions"
ok "criteo: shadow-score (file, 3 threads, pipe, batches of 256, 64, 7 and 1, --skip-bad, no labels) = --predict, 2 bad lines nan"

# standard input for --predict
cat "$T/bad.tsv" | "$ROOT/scripts/shadow-launch" "$JOB" --bin "$BIN" --quiet --predict "$T/run" --out - \
    --set data.eval=- --set job.run_dir="$T/run-p" >"$T/stdin.txt" 2>"$T/stdin.log" \
    || { cat "$T/stdin.log"; fail "cat FILE | --predict --out - failed"; }
same "$T/stdin.txt" "$T/pred.txt" "cat FILE | --predict RUN_DIR --out - (data.eval -)"
cat "$T/bad.tsv" | launch --predict "$T/run" --out "$T/stdin-f.txt" --set data.eval=- \
    --set trainer.workers=3 --set job.run_dir="$T/run-p" >"$T/stdin.log" 2>&1 \
    || { cat "$T/stdin.log"; fail "cat FILE | --predict --out FILE failed"; }
same "$T/stdin-f.txt" "$T/pred.txt" "cat FILE | --predict RUN_DIR --out FILE, 3 workers"
grep -q "2 bad line(s) written as nan; the first: standard input" "$T/stdin.log" \
    || { cat "$T/stdin.log"; fail "the bad line of standard input is not named"; }
launch --set data.eval=- >"$T/stdin-train.log" 2>&1 </dev/null && fail "training with data.eval - was not refused"
grep -q "data.eval '-' (standard input) is scored with --predict RUN_DIR" "$T/stdin-train.log" \
    || { cat "$T/stdin-train.log"; fail "no clear refusal of data.eval - without --predict"; }
ok "cat FILE | shadow-launch --predict RUN_DIR (--out - and --out FILE) = --predict FILE; training refuses it"

# ---- refusals of export: nothing written, the part named
cp -r "$T/run/model" "$T/m1"
rm "$T/m1/embedding-1.ckpt"
refused "a missing embedding file" "embedding-1.ckpt is missing: the model set is incomplete" \
    "$BIN/shadow-ctl" export "$T/m1" -o "$T/x.ssm" -c "$JOB"
cp "$T/run/model/embedding-1.ckpt" "$T/m1/"
sz=$(stat -c %s "$T/m1/embedding-1.ckpt")
printf '\x55' | dd of="$T/m1/embedding-1.ckpt" bs=1 seek=$((sz - 9)) conv=notrunc 2>/dev/null
refused "a corrupted embedding file" "embedding-1.ckpt is corrupted or unreadable" \
    "$BIN/shadow-ctl" export "$T/m1" -o "$T/x.ssm" -c "$JOB"
refused "a model over --max-bytes" "too large for one file a scorer can load: [0-9]* rows, a file of [0-9]* bytes" \
    "$BIN/shadow-ctl" export "$T/run/model" -o "$T/x.ssm" --max-bytes 100000
refused "no job file" "no job file: give -c JOB.yaml" "$BIN/shadow-ctl" export "$T/m1" -o "$T/x.ssm"
ls "$T"/x.ssm* 2>/dev/null && fail "a refused export wrote something"
ok "export refuses a missing part, a corrupted part, a model over --max-bytes, no job file; writes nothing"

# ---- refusals of the scorer
n=$(stat -c %s "$T/criteo.ssm")
head -c $((n - 100)) "$T/criteo.ssm" >"$T/trunc.ssm"
refused "truncated" "trunc.ssm: truncated: $((n - 100)) bytes, the header says $n" "$SCORE" "$T/trunc.ssm" "$T/eval.tsv"
cp "$T/criteo.ssm" "$T/flip.ssm"
printf '\x01' | dd of="$T/flip.ssm" bs=1 seek=$((n / 2)) conv=notrunc 2>/dev/null
refused "a flipped byte" "flip.ssm is corrupted (payload checksum)" "$SCORE" "$T/flip.ssm" "$T/eval.tsv"
cp "$T/criteo.ssm" "$T/hdr.ssm"
printf '\x09' | dd of="$T/hdr.ssm" bs=1 seek=40 conv=notrunc 2>/dev/null
refused "a flipped header byte" "hdr.ssm: the header is corrupted (checksum)" "$SCORE" "$T/hdr.ssm" "$T/eval.tsv"
refused "not a model file" "is not a ShadowSync model file" "$SCORE" "$T/eval.tsv" "$T/eval.tsv"
refused "a data setting that changes the shape" "does not give the shape of its dense model" \
    "$SCORE" --set data.format=csv --set data.delimiter=tab \
    --set 'data.columns=[label, dense*12, ignore, categorical*26]' "$T/criteo.ssm" "$T/eval.tsv"
refused "a key that is not data.*" "only data.\* keys may be set" "$SCORE" --set model.embedding_dim=8 "$T/criteo.ssm" "$T/eval.tsv"
[ -s "$T/r.out" ] && fail "a refused model file printed predictions"
refused "labelled lines read as unlabeled" "2000 of 2000 lines bad, more than data.max_bad_fraction" \
    "$SCORE" --set data.labels=false "$T/criteo.ssm" "$T/eval.tsv"
[ "$(grep -c '^nan$' "$T/r.out")" = 2000 ] || fail "the bad lines were not written as nan"
: >"$T/empty.tsv"
refused "an empty input" "no line to score: 0 line(s) in the input" "$SCORE" "$T/criteo.ssm" "$T/empty.tsv"
ok "shadow-score refuses a truncated file, a flipped payload or header byte, a non-model, a shape-changing setting; exits 1 on all-bad or empty input"

# ---- Avazu csv (header, no dense features)
AV=$ROOT/test/data/avazu/avazu_sample.csv
# (the launcher gives each process a free port: the ports written here are not used)
AVSETS=(--set "cluster.embedding=tcp://127.0.0.1:7000" --set "cluster.sync=[]"
        --set "cluster.trainers=tcp://127.0.0.1:7001" --set sync.algorithm=none
        --set "data.train=$AV" --set "data.eval=$AV" --set trainer.epochs=2)
"$ROOT/scripts/shadow-launch" "$ROOT/conf/avazu.yaml" --bin "$BIN" --quiet "${AVSETS[@]}" \
    --set "job.run_dir=$T/avazu" >"$T/avazu.log" 2>&1 || { cat "$T/avazu.log"; fail "the Avazu job failed"; }
"$ROOT/scripts/shadow-launch" "$ROOT/conf/avazu.yaml" --bin "$BIN" --quiet "${AVSETS[@]}" \
    --set "job.run_dir=$T/avazu-p" --predict "$T/avazu" --out "$T/av-pred.txt" >"$T/avazu-p.log" 2>&1 \
    || { cat "$T/avazu-p.log"; fail "Avazu predict failed"; }
"$BIN/shadow-ctl" export "$T/avazu/model" -o "$T/avazu.ssm" >"$T/export.log" 2>&1 || { cat "$T/export.log"; fail "Avazu export failed"; }
"$SCORE" "$T/avazu.ssm" "$AV" >"$T/av-score.txt" 2>"$T/score.log" || { cat "$T/score.log"; fail "Avazu score failed"; }
same "$T/av-score.txt" "$T/av-pred.txt" "avazu: shadow-score against --predict"
grep -q "1 header line(s) skipped" "$T/score.log" || { cat "$T/score.log"; fail "Avazu: the header is not reported"; }
[ "$(wc -l <"$T/av-score.txt")" = 100 ] || fail "Avazu: not 100 predictions"
ok "avazu csv (header, 22 categorical, no dense): shadow-score = --predict on 100 rows"

# ---- libsvm: one multi-valued field, mean pooling, first-order terms
awk 'BEGIN { srand(11); for (i = 0; i < 3000; i++) { n = 1 + int(rand() * 5); s = ""; z = 0
        for (j = 0; j < n; j++) { k = int(rand() * 60); s = s " " k ":" (1 + int(rand() * 3)); z += k < 15 }
        print (rand() < (z ? 0.7 : 0.2) ? 1 : 0) s } }' >"$T/svm.txt"
head -n 2500 "$T/svm.txt" >"$T/svm-train.txt"
{ tail -n 500 "$T/svm.txt"; echo "1 x:y"; echo "1 1000:2"; } >"$T/svm-eval.txt"
S=(--set data.format=libsvm --set model.pooling=mean --set data.train="$T/svm-train.txt")
launch "${S[@]}" --set data.eval="$T/svm-eval.txt" --set job.run_dir="$T/svm" >"$T/svm.log" 2>&1 \
    || { cat "$T/svm.log"; fail "libsvm training failed"; }
launch "${S[@]}" --set data.eval="$T/svm-eval.txt" --set job.run_dir="$T/svm-p" --predict "$T/svm" \
    --out "$T/svm-pred.txt" >"$T/svm-p.log" 2>&1 || { cat "$T/svm-p.log"; fail "libsvm predict failed"; }
"$BIN/shadow-ctl" export "$T/svm/model" -o "$T/svm.ssm" >"$T/export.log" 2>&1 || { cat "$T/export.log"; fail "libsvm export failed"; }
"$SCORE" -q "$T/svm.ssm" "$T/svm-eval.txt" >"$T/svm-score.txt" || fail "libsvm score failed"
same "$T/svm-score.txt" "$T/svm-pred.txt" "libsvm: shadow-score against --predict"
[ "$(sed -n 501p "$T/svm-score.txt")" = nan ] || fail "libsvm: the bad line is not nan"
[ "$(sort -u "$T/svm-score.txt" | wc -l)" -gt 20 ] || fail "libsvm: the predictions hardly differ"
ok "libsvm (mean pooling, a key never stored): shadow-score = --predict on 502 lines"
no_leftovers
pass
