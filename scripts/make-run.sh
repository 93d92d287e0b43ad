#!/usr/bin/env bash
# make run: generate (once) a planted data set, run conf/local.yaml on it
# (or on TRAIN/EVAL files given by the user) and print the results.
set -eu
cd "$(dirname "$0")/.."
TRAIN=${1:-}; EVAL=${2:-}
ROWS=${ROWS:-1000000}; EVAL_ROWS=${EVAL_ROWS:-200000}
if [ -z "$TRAIN" ]; then
    mkdir -p data
    TRAIN=data/planted-train.tsv; EVAL=data/planted-eval.tsv
    if [ ! -s "$TRAIN" ] || [ ! -s "$EVAL" ] || [ ! -s data/planted.json ]; then
        echo "make run: generating $ROWS planted training rows and $EVAL_ROWS eval rows (once)"
        bin/shadow-datagen --rows "$ROWS" --seed 7 --out "$TRAIN.tmp" \
            --eval-rows "$EVAL_ROWS" --eval-out "$EVAL.tmp" >data/planted.json.tmp
        mv "$TRAIN.tmp" "$TRAIN"; mv "$EVAL.tmp" "$EVAL"; mv data/planted.json.tmp data/planted.json
    fi
    BAYES=$(sed -n 's/.*"eval":{[^}]*"bayes_ne":\([0-9.]*\).*/\1/p' data/planted.json)
    echo "make run: planted data in data/: $ROWS training rows, $EVAL_ROWS eval rows;"
    echo "          the best NE any model can reach on the eval rows (Bayes-optimal) is $BAYES"
elif [ -z "$EVAL" ]; then
    echo "make run: TRAIN=$TRAIN given without EVAL=...: evaluating on the training file" >&2
    EVAL=$TRAIN
fi
RUN_DIR=run/local-$(date +%Y%m%d-%H%M%S)
scripts/shadow-launch conf/local.yaml --set "job.run_dir=$RUN_DIR" \
    --set "data.train=$TRAIN" --set "data.eval=$EVAL"
[ -n "${BAYES:-}" ] && echo "   Bayes-optimal NE  $BAYES   (the planted model itself: no model can do better)"
if command -v gnuplot >/dev/null 2>&1 && [ -x scripts/shadow-plot ]; then
    scripts/shadow-plot "$RUN_DIR" >/dev/null 2>&1 && echo "   plots             $RUN_DIR/*.png"
fi
