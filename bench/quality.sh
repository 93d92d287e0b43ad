#!/usr/bin/env bash
# bench/quality.sh (make bench-quality) - model quality side by side, over seeds:
#   shadowsync      our default job (conf/local.yaml; only the data paths,
#                   job.seed, job.run_dir, the ports and $OURS_SETS overridden)
#                   choosing its epoch on a validation split of the training
#                   rows (data.valid_fraction $VALID_FRACTION); data.eval is
#                   only the test
#   shadowsync-refit  the number of epochs chosen as shadowsync chose it (its
#                   best_epoch), then the job trained again from scratch on
#                   every training row for that many epochs with no choice
#                   made (the logistic regression's cross-validate-then-refit)
#   shadowsync-select-on-eval  the same job choosing its epoch on data.eval
#                   (no validation split: the bias this shows)
#   pytorch-dlrm    bench/peers/dlrm_torch.py, the same model in plain PyTorch,
#                   its learning rates chosen from a small grid on a validation
#                   split of the training rows
#   logreg-sklearn  bench/peers/logreg_sklearn.py, hashed logistic regression
#                   (C by cross-validation on the training rows)
# on (a) criteo: the real sample ../shared/data/criteo/criteo_train_head10k.tsv,
# first 8,000 rows to train, last 2,000 to evaluate, and (b) planted: rows from
# bin/shadow-datagen (a seed that make run and the tests do not use).
#
# Prints one JSON line per run (ours with "epochs": per epoch, trainer 0's
# validation NE and the eval NE of each model that became the kept one),
# then one summary line per (dataset, system):
# mean and sample std over the seeds of eval_ne, eval_auc and eps, the
# median, min, max and spread (max - min) of eval_ne, and on our lines
# eps_ratio_ours_over_pytorch; then one table of every system (medians and
# spreads), also in $RUN/table.md. The lines also go to $RUN/quality.jsonl,
# and a plot of eval NE (mean, std error bars) to $RUN/quality-ne.png.
#
# Environment:
#   SEEDS="1 2 3 4 5"        seeds (every system, every data set)
#   DATASETS="criteo planted"
#   SYSTEMS="ours dlrm_torch.py logreg_sklearn.py"   which systems run
#   OURS_SETS=""             extra overrides for our job, e.g.
#                            OURS_SETS="model.first_order=true tables.lr=0.1"
#   OURS_SELECT="valid refit eval"  our job choosing on the validation split,
#                            refit on every row for the epochs it chose, and
#                            choosing on data.eval (shadowsync-select-on-eval)
#   VALID_FRACTION=0.08      our validation split: data.valid_fraction (docs/quality.md,
#                            "The validation fraction", for why not 0.1)
#   DLRM_GRID_LR=0.03,0.1 DLRM_GRID_EMB_LR=0.1,0.3   the DLRM's grid (4 fits)
#   PLANTED_ROWS=200k PLANTED_EVAL_ROWS=50k PLANTED_SEED=20261201
#   SS_DATA_DIR=../shared/data   where the real data live (default: that, else test/data)
#   PORTS=6100-6199          loopback ports our jobs may take (free ones are picked)
#   PYTHON                   an interpreter with torch and sklearn (default: the
#                            first of /usr/bin/python3, python3 that has them)
#   RUN=run/quality-DATE     output folder; KEEP_DATA=1 keeps its data/ scratch
set -u
case "${1:-}" in -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
cd "$(dirname "$0")/.."
SEEDS=${SEEDS:-"1 2 3 4 5"}
DATASETS=${DATASETS:-"criteo planted"}
SYSTEMS=${SYSTEMS:-"ours dlrm_torch.py logreg_sklearn.py"}
OURS_SETS=${OURS_SETS:-}
OURS_SELECT=${OURS_SELECT:-"valid refit eval"}
VALID_FRACTION=${VALID_FRACTION:-0.08}
DLRM_GRID_LR=${DLRM_GRID_LR:-0.03,0.1}
DLRM_GRID_EMB_LR=${DLRM_GRID_EMB_LR:-0.1,0.3}
PLANTED_ROWS=${PLANTED_ROWS:-200k}; PLANTED_EVAL_ROWS=${PLANTED_EVAL_ROWS:-50k}
PLANTED_SEED=${PLANTED_SEED:-20261201}
if [ -z "${SS_DATA_DIR:-}" ]; then  # the shared folder beside the clone, else test/data
    SS_DATA_DIR=test/data
    [ -f ../shared/data/criteo/criteo_train_head10k.tsv ] && SS_DATA_DIR=../shared/data
fi
PORTS=${PORTS:-6100-6199}
RUN=${RUN:-run/quality-$(date +%Y%m%d-%H%M%S)}
OUT=$RUN/quality.jsonl
T0=$(date +%s)

die() { echo "quality.sh: $*" >&2; exit 1; }

PY=${PYTHON:-}
if [ -z "$PY" ]; then
    for c in /usr/bin/python3 python3; do
        if "$c" -c "import torch, sklearn, scipy" 2>/dev/null; then PY=$c; break; fi
    done
fi
[ -n "$PY" ] || die "no python3 with torch and sklearn: apt-get install python3-torch python3-sklearn (make bench-quality does it)"
[ -x bin/shadow-trainer ] && [ -x bin/shadow-datagen ] || die "no bin/shadow-trainer or bin/shadow-datagen: run make first"

mkdir -p "$RUN/data" || exit 1
: >"$OUT"
emit() { echo "$1"; echo "$1" >>"$OUT"; }

# free_ports N: N loopback ports in $PORTS nobody listens on
free_ports() {
    local lo=${PORTS%-*} hi=${PORTS#*-} n=$1 p out=()
    for ((p = lo + RANDOM % (hi - lo + 1), k = 0; k <= hi - lo && ${#out[@]} < n; k++)); do
        ((p > hi)) && p=$lo
        (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || out+=("$p")
        p=$((p + 1))
    done
    ((${#out[@]} == n)) || die "fewer than $n free ports in $PORTS"
    echo "${out[@]}"
}

# our_job DATASET SEED TRAIN EVAL SELECT: the default job choosing its epoch
# on a validation split (SELECT valid) or on data.eval (eval); prints its
# run line
our_job() {
    local ds=$1 seed=$2 dir=$RUN/ours-$5-$1-$2 sets=() p w name=shadowsync
    read -r -a p <<<"$(free_ports 5)"
    for w in $OURS_SETS; do [ "$w" = --set ] || sets+=(--set "$w"); done
    case $5 in
        valid) sets+=(--set "data.valid_fraction=$VALID_FRACTION") ;;
        refit) local be
               be=$(sed -n 's/^{.*"best_epoch":\([0-9]*\).*/\1/p' "$RUN/ours-valid-$1-$2/result.json" 2>/dev/null)
               [ -n "$be" ] || { echo "quality.sh: refit needs the valid run first (OURS_SELECT)" >&2; return 1; }
               sets+=(--set "trainer.epochs=$be" --set trainer.eval_every=0 --set trainer.patience=0)
               name=shadowsync-refit ;;
        *) name=shadowsync-select-on-eval ;;
    esac
    if ! scripts/shadow-launch conf/local.yaml --quiet --no-plots --set "job.run_dir=$dir" \
        --set "data.train=$3" --set "data.eval=$4" --set "job.seed=$seed" \
        --set "cluster.embedding=tcp://127.0.0.1:${p[0]},tcp://127.0.0.1:${p[1]}" \
        --set "cluster.sync=tcp://127.0.0.1:${p[2]}" \
        --set "cluster.trainers=tcp://127.0.0.1:${p[3]},tcp://127.0.0.1:${p[4]}" \
        "${sets[@]}" >"$RUN/ours-$5-$ds-$seed.log" 2>&1; then
        echo "quality.sh: our job failed, see $RUN/ours-$5-$ds-$seed.log" >&2
        return 1
    fi
    local vf=null
    [ "$5" = valid ] && vf=$VALID_FRACTION
    "$PY" - "$dir/result.json" "$ds" "$seed" "$OURS_SETS" "$name" "$vf" <<'EOF'
import json, os, sys
r = json.load(open(sys.argv[1]))
t0 = r["per_trainer"][0]  # eval metrics are trainer 0's
# per epoch, from trainer 0's metrics: the validation figures, and data.eval's
# NE of each model that became the kept one (docs/quality.md, the seed spread)
ep = {}
mpath = os.path.join(os.path.dirname(sys.argv[1]), "metrics-trainer-0.jsonl")
for line in open(mpath) if os.path.exists(mpath) else []:
    m = json.loads(line)
    if "epoch" in m:
        e = ep.setdefault(m["epoch"], {"epoch": m["epoch"]})
        e.update({k: m[k] for k in ("valid_ne", "eval_ne", "best") if k in m})
print(json.dumps({"dataset": sys.argv[2], "system": sys.argv[5], "seed": int(sys.argv[3]),
                  "eval_ne": r["eval_ne"], "eval_auc": r["eval_auc"],
                  "eval_logloss": r["eval_logloss"], "eval_calibration": t0.get("eval_calibration"),
                  "valid_ne": r.get("valid_ne"), "best_epoch": r.get("best_epoch"),
                  "selected_on": r.get("selected_on"), "eval_scorings": r.get("eval_scorings"),
                  "examples": r["examples"], "eps": r["eps"], "wall_s": r["wall_s"],
                  "ours_sets": sys.argv[4], "valid_fraction": json.loads(sys.argv[6]),
                  "epochs": [ep[k] for k in sorted(ep)],
                  "train_ne_per_trainer": [t.get("train_ne") for t in r["per_trainer"]]}))
EOF
}

# peer DATASET SCRIPT SEED TRAIN EVAL: a Python peer; prints its run line
peer() {
    local line args=()
    [ "$2" = dlrm_torch.py ] && args=(--grid-lr "$DLRM_GRID_LR" --grid-emb-lr "$DLRM_GRID_EMB_LR")
    line=$("$PY" "bench/peers/$2" --train "$4" --eval "$5" --seed "$3" "${args[@]}" \
           2>"$RUN/$2-$1-$3.log" | tail -n 1)
    case "$line" in
        '{"peer": "'*) echo "$line" | sed "s/^{\"peer\": \"\([^\"]*\)\"/{\"dataset\": \"$1\", \"system\": \"\1\", \"peer\": \"\1\"/" ;;
        *) echo "quality.sh: $2 failed, see $RUN/$2-$1-$3.log" >&2; return 1 ;;
    esac
}

failed=0
BAYES=()
for ds in $DATASETS; do
    case $ds in
        criteo)
            src=$SS_DATA_DIR/criteo/criteo_train_head10k.tsv
            [ -f "$src" ] || die "missing $src (set SS_DATA_DIR)"
            train=$RUN/data/criteo-train.tsv; evalf=$RUN/data/criteo-eval.tsv
            head -n 8000 "$src" >"$train"; tail -n 2000 "$src" >"$evalf" ;;
        planted)
            train=$RUN/data/planted-train.tsv; evalf=$RUN/data/planted-eval.tsv
            info=$(bin/shadow-datagen --rows "$PLANTED_ROWS" --seed "$PLANTED_SEED" --out "$train" \
                   --eval-rows "$PLANTED_EVAL_ROWS" --eval-out "$evalf" 2>/dev/null) || die "shadow-datagen failed"
            b=$(echo "$info" | sed -n 's/.*"eval":{[^}]*"bayes_ne":\([0-9.]*\).*/\1/p')
            [ -n "$b" ] && BAYES+=(--bayes "planted=$b") ;;
        *) die "unknown data set $ds (criteo or planted)" ;;
    esac
    for seed in $SEEDS; do
        for sys in $SYSTEMS; do
            if [ $sys = ours ]; then
                for sel in $OURS_SELECT; do
                    line=$(our_job "$ds" "$seed" "$train" "$evalf" "$sel")
                    if [ -n "$line" ]; then emit "$line"; else failed=1; fi
                done
                continue
            fi
            line=$(peer "$ds" "$sys" "$seed" "$train" "$evalf")
            if [ -n "$line" ]; then emit "$line"; else failed=1; fi
        done
    done
done

"$PY" bench/peers/summary.py "$OUT" "${BAYES[@]}" --plot-data "$RUN/quality-ne.dat" \
    --table "$RUN/table.md" >"$RUN/summary.jsonl" || exit 1
while read -r l; do emit "$l"; done <"$RUN/summary.jsonl"
cat "$RUN/table.md"

if command -v gnuplot >/dev/null 2>&1; then
    gnuplot <<EOF || echo "quality.sh: gnuplot failed" >&2
set terminal pngcairo size 800,560 noenhanced
set output "$RUN/quality-ne.png"
set title "Eval NE: mean and std over seeds $SEEDS (lower is better)"
set ylabel "eval NE (logloss / entropy of the eval click rate)"
set xrange [-0.5:*]
set offsets 0, 0.5, 0.01, 0.01
set grid ytics
set key below horizontal
plot "$RUN/quality-ne.dat" using (\$0-0.2):2:3 with yerrorbars pt 7 ps 1.5 lw 2 title "ShadowSync (default job)", \
     "" using 0:4:5:xtic(1) with yerrorbars pt 5 ps 1.5 lw 2 title "PyTorch DLRM", \
     "" using (\$0+0.2):6:7 with yerrorbars pt 9 ps 1.8 lw 2 title "logistic regression", \
     "" using 0:8 with points pt 2 ps 2.5 lw 2 lc rgb "black" title "Bayes-optimal (planted)"
EOF
fi
[ "${KEEP_DATA:-0}" = 1 ] || rm -rf "$RUN/data"
emit "{\"bench\": \"quality\", \"wall_s\": $(($(date +%s) - T0)), \"seeds\": \"$SEEDS\", \"run\": \"$RUN\", \"plot\": \"$RUN/quality-ne.png\"}"
exit $failed
