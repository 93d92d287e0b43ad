#!/usr/bin/env bash
# scripts/shadow-plot and the launcher's plots (issue 22): the series the
# script plots, from metrics files written here with known values (--data
# keeps them): one row per epoch with the kept one marked (result.json's
# best_epoch; the last "best" row without one; the validation NE when the
# run has a split), an NE axis fitted to the NE after the first tenth of the
# run (not to the first point, near 1.3), examples/s smoothed over a window
# (the raw figures jump), and PNG files written; then a launched job draws
# its plots itself and names them with absolute paths in its summary.
. "$(dirname "$0")/lib.sh"
command -v gnuplot >/dev/null || skip "gnuplot is not installed"
PLOT=$ROOT/scripts/shadow-plot

# metrics of 2 trainers, 0.5 s apart, 20 s: train NE from 1.30 down to
# 0.80 (1.30 at t = 0.5 only), 1,000 examples per interval with the raw
# examples/s jumping between 1,000 and 3,000; 3 epochs at 6, 12 and 18 s,
# epoch 2 the best
R=$T/run1
mkdir -p "$R"
for r in 0 1; do
    awk -v r="$r" 'BEGIN {
        for (i = 1; i <= 40; i++) {
            t = i / 2; ne = i == 1 ? 1.30 : 0.80 + 0.1 * (40 - i) / 40 + r / 1000
            printf "{\"rank\":%d,\"t\":%g,\"examples\":%d,\"eps\":%d,\"train_ne\":%.4f}\n",
                r, t, 1000 * i, i % 2 ? 1000 : 3000, ne
            if (r == 0 && i % 12 == 0)
                printf "{\"rank\":0,\"t\":%g,\"epoch\":%d,\"examples\":%d,\"eval_ne\":%s,\"best\":%s}\n",
                    t, i / 12, 1000 * i, i == 24 ? "0.79" : "0.8", i == 36 ? "false" : "true"
        }
    }' >"$R/metrics-trainer-$r.jsonl"
done
echo '{"best_epoch":2}' >"$R/result.json"
"$PLOT" --bayes 0.75 --data "$T/d1" "$R" >"$T/plot1.out" 2>&1 || { cat "$T/plot1.out"; fail "shadow-plot failed"; }
grep -qF "wrote $R/train_ne.png and $R/eps.png" "$T/plot1.out" || { cat "$T/plot1.out"; fail "summary line"; }
for f in train_ne eps; do
    [ "$(head -c 4 "$R/$f.png" | tail -c 3)" = PNG ] || fail "$R/$f.png is not a PNG"
done
[ -e "$R/sync.png" ] && fail "sync.png drawn for a run without sync figures"
printf '6 1 0.8 0\n12 2 0.79 1\n18 3 0.8 0\n' >"$T/want-epochs"
diff "$T/want-epochs" "$T/d1/epochs.dat" || fail "epoch rows (t epoch ne kept) differ"
ok "epochs: one row each, epoch 2 marked kept ($(tr '\n' ';' <"$T/d1/epochs.dat"))"
# the axis: 0.75 (Bayes) .. 0.891 (trainer 1 at t = 2 s, a tenth of the
# run) padded by a tenth of the span; the first point's 1.30 is left out
read -r lo hi <"$T/d1/ne-range.dat"
[ "$lo $hi" = "0.7359 0.9051" ] || fail "NE axis [$lo, $hi], want [0.7359, 0.9051]"
ok "NE axis [$lo, $hi]: fitted to the NE after the first tenth, not to the first point 1.30"
# examples/s: 1,000 examples each 0.5 s is 2,000/s, whatever the raw figure
raw=$(awk '$1 >= 5 { print $2 }' "$T/d1/eps-0.dat" | sort -u | tr '\n' ' ')
smooth=$(awk '$1 >= 5 { print $3 }' "$T/d1/eps-0.dat" | sort -u | tr '\n' ' ')
[ "$raw" = "1000 3000 " ] || fail "raw examples/s: $raw"
[ "$smooth" = "2000 " ] || fail "smoothed examples/s: $smooth, want 2000"
ok "examples/s smoothed: $raw-> $smooth"

# a validation split chooses: its NE is the epoch's; no result.json yet:
# the last row marked best is the kept one
R=$T/run2
mkdir -p "$R"
{
    echo '{"rank":0,"t":1,"examples":10,"eps":10,"train_ne":0.9}'
    echo '{"rank":0,"t":2,"examples":20,"eps":10,"train_ne":0.85}'
    echo '{"rank":0,"t":3,"epoch":1,"valid_ne":0.83,"best":true}'
    echo '{"rank":0,"t":3.5,"epoch":1,"eval_ne":0.81}'
    echo '{"rank":0,"t":4,"examples":30,"eps":10,"train_ne":0.84}'
    echo '{"rank":0,"t":5,"epoch":2,"valid_ne":0.835,"best":false}'
    echo '{"rank":0,"t":5.5,"epoch":2,"eval_ne":0.805}'
    echo '{"rank":0,"t":6,"examples":40,"eps":10,"train_ne":0.83'  # being written: passed over
} >"$R/metrics-trainer-0.jsonl"
"$PLOT" --data "$T/d2" "$R" >"$T/plot2.out" 2>&1 || { cat "$T/plot2.out"; fail "shadow-plot failed (run2)"; }
printf '3 1 0.83 1\n5 2 0.835 0\n' >"$T/want-epochs2"
diff "$T/want-epochs2" "$T/d2/epochs.dat" || fail "epoch rows with a validation split differ"
ok "with a validation split: its NE per epoch, epoch 1 kept (the last best row)"
"$PLOT" --bayes x "$R" >/dev/null 2>&1 && fail "--bayes x accepted"

# a launched job draws its plots and names them with absolute paths (lib.sh's
# launch passes --no-plots unless PLOTS=1)
"$BIN/shadow-datagen" --rows 20000 --seed 3 --out "$T/train.tsv" \
    --eval-rows 2000 --eval-out "$T/eval.tsv" >/dev/null 2>&1 || fail datagen
make_job 1 0 1 "data:" "  train: [$T/train.tsv]" "  eval: [$T/eval.tsv]" \
    "trainer:" "  epochs: 2" "  workers: 1" "sync:" "  algorithm: none" \
    "metrics:" "  interval_s: 0.1"
SHADOW_PLOT_BAYES=0.7 PLOTS=1 launch >"$T/launch.log" 2>&1 || { cat "$T/launch.log"; fail "job failed"; }
line=$(grep "^   plots  " "$T/launch.log") || { cat "$T/launch.log"; fail "no plots line in the summary"; }
for f in train_ne eps; do
    grep -qF " $T/run/$f.png" <<<"$line" || fail "plots line does not name $T/run/$f.png: $line"
    [ -s "$T/run/$f.png" ] || fail "$T/run/$f.png not written"
done
ok "the launcher drew the plots: $line"
# --no-plots (what the benches pass): no plot, no plots line
rm -rf "$T/run"
PLOTS=1 launch --no-plots >"$T/launch2.log" 2>&1 || { cat "$T/launch2.log"; fail "job with --no-plots failed"; }
grep -q "^   plots  " "$T/launch2.log" && fail "--no-plots still named plots"
ls "$T/run"/*.png >/dev/null 2>&1 && fail "--no-plots still drew $(ls "$T/run"/*.png)"
ok "--no-plots: none drawn"
no_leftovers
pass
