#!/usr/bin/env bash
# Scoring never changes the model (issue 22, item 7): eval and predict send
# read-only lookups, which store no row, set no recency bit and count no
# admission. A model trained under tables.max_memory_bytes with admit_after 0
# (every looked-up key used to be stored at once) is scored with --eval-only
# on data of another planted model (its keys mostly unseen): the embedding
# PS ends with the rows it restored, none admitted, none evicted. Scoring
# twice gives the same NE to the last digit.
. "$(dirname "$0")/lib.sh"
"$BIN/shadow-datagen" --rows 20000 --seed 5 --out "$T/train.tsv" \
    --eval-rows 2000 --eval-out "$T/eval.tsv" >/dev/null 2>"$T/datagen.log" \
    || { cat "$T/datagen.log"; fail "datagen"; }
"$BIN/shadow-datagen" --rows 3000 --seed 9 --out "$T/other.tsv" >/dev/null 2>>"$T/datagen.log" \
    || { cat "$T/datagen.log"; fail "datagen (other model)"; }
make_job 1 0 1 "data:" "  train: [$T/train.tsv]" "  eval: [$T/eval.tsv]" \
    "trainer:" "  workers: 2" "  batch_size: 64" "  epochs: 1" "sync:" "  algorithm: none" \
    "ps:" "  stripes: 4" "tables:" "  admit_after: 0" "  max_memory_bytes: 1048576"
launch >"$T/launch-train.log" 2>&1 || { cat "$T/launch-train.log"; fail "training failed"; }
cp -r "$T/run" "$T/saved"

# the embedding PS's log, and its counters at exit (shadow-ps --stats-file:
# written beside the log)
PSLOG=$T/run/logs/ps-embedding-0.log
PSSTATS=$T/run/logs/ps-embedding-0.stats.json
evicted_train=$(json_field "$PSSTATS" rows_evicted_memory)
[ "${evicted_train:-0}" -gt 0 ] || { cat "$PSSTATS"; fail "training evicted nothing: the bound does not bite"; }

# score [args]: --eval-only of the saved model on other.tsv; sets NE, ROWS0, ROWS, ADM, EV
score() {
    rm -rf "$T/run"
    launch --eval-only "$T/saved" --set "data.eval=[$T/other.tsv]" "$@" >"$T/launch-eval.log" 2>&1 \
        || { cat "$T/launch-eval.log"; fail "eval-only failed"; }
    NE=$(json_field "$T/run/result.json" eval_ne)
    ROWS0=$(sed -n 's/.*: restored \([0-9]*\) rows.*/\1/p' "$PSLOG" | head -n 1)  # its restore line
    ROWS=$(json_field "$PSSTATS" rows)
    ADM=$(json_field "$PSSTATS" rows_admitted)
    EV=$(json_field "$PSSTATS" rows_evicted_memory)
}
score
[ -n "$NE" ] && [ -n "$ROWS" ] || { cat "$T/run/result.json" "$PSSTATS"; fail "no NE or row count"; }
echo "eval-only: NE $NE, PS rows at exit $ROWS (restored: ${ROWS0:-?}), admitted $ADM, evicted $EV"
[ "${ADM:-x}" = 0 ] && [ "${EV:-x}" = 0 ] \
    || { cat "$PSSTATS"; fail "scoring admitted $ADM and evicted $EV rows"; }
[ -n "$ROWS0" ] || { grep -i restore "$PSLOG"; fail "the PS logged no 'restored N rows'"; }
[ "$ROWS" = "$ROWS0" ] || fail "rows $ROWS0 restored, $ROWS at exit"
ne1=$NE rows1=$ROWS
score
[ "$NE" = "$ne1" ] && [ "$ROWS" = "$rows1" ] || fail "second scoring: NE $NE rows $ROWS, first $ne1 rows $rows1"
ok "--eval-only under max_memory_bytes: $ROWS rows before and after, 0 admitted, 0 evicted, NE $NE twice"
no_leftovers
pass
