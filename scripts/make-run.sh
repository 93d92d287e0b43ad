#!/usr/bin/env bash
# make run: generate (once) a planted data set, run conf/local.yaml on it
# (or on TRAIN/EVAL files given by the user) and print the results.
# TRAIN and EVAL (files, globs, comma-separated lists) are relative to the
# directory make was called from: the Makefile passes it as SS_CALLER_DIR,
# so that "make -C path/to/shadowsync run TRAIN=my.tsv" finds ./my.tsv.
# Arguments after TRAIN and EVAL go to scripts/shadow-launch (tests use them
# for free ports). VALID_FRACTION (default 0.02; 0: none) of the training
# lines is set aside to choose the epoch kept (data.valid_fraction).
# "make-run.sh --print-valid-fraction" prints that fraction and exits: the
# benchmarks that run make run's job read it there (bench/bench-lib.sh).
set -eu
CALLER=${SS_CALLER_DIR:-$(pwd)}
cd "$(dirname "$0")/.."
VALID_FRACTION=${VALID_FRACTION:-0.02}  # the one place of make run's default
if [ "${1:-}" = --print-valid-fraction ]; then
    echo "$VALID_FRACTION"
    exit 0
fi

# Print the list $1 with each relative entry made absolute against $CALLER;
# fail naming an entry without glob characters that does not exist.
resolve() {
    local out="" e
    set -f
    local IFS=,
    for e in $1; do
        e=$(echo "$e" | sed 's/^ *//; s/ *$//')
        [ -n "$e" ] || continue
        [ "${e#/}" != "$e" ] || e=$CALLER/$e
        case "$e" in
            *[*?[{]*) ;;
            *) [ -e "$e" ] || { echo "make run: $2 file not found: $e (a relative path is" \
                "relative to the directory make was called from)" >&2; return 1; } ;;
        esac
        out=${out:+$out,}$e
    done
    set +f
    echo "$out"
}
# json_field FILE PATH: the field at jq PATH (".eval.bayes_ne") of the JSON
# object in FILE, nothing when absent; fails naming FILE when it is not JSON.
json_field() {
    jq -r "$2 // empty" "$1" || { echo "make run: cannot read $2 from $1 (remove it to" \
        "generate the data again)" >&2; return 1; }
}
TRAIN=${1:-}; EVAL=${2:-}
shift $(($# < 2 ? $# : 2))
[ -z "$TRAIN" ] || TRAIN=$(resolve "$TRAIN" TRAIN)
[ -z "$EVAL" ] || EVAL=$(resolve "$EVAL" EVAL)
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
    BAYES=$(json_field data/planted.json .eval.bayes_ne) || exit 1
    echo "make run: planted data in data/: $ROWS training rows, $EVAL_ROWS eval rows;"
    echo "          the best NE any model can reach on the eval rows (Bayes-optimal) is $BAYES"
elif [ -z "$EVAL" ]; then
    echo "make run: TRAIN=$TRAIN given without EVAL=...: evaluating on the training file" >&2
    EVAL=$TRAIN
fi
RUN_DIR=$PWD/run/local-$(date +%Y%m%d-%H%M%S)  # absolute, like every path of the summary
# the epoch kept is chosen on VALID_FRACTION of the training lines, not on EVAL
# the launcher draws the plots (scripts/shadow-plot), with the Bayes-optimal NE
SHADOW_PLOT_BAYES=${BAYES:-} scripts/shadow-launch conf/local.yaml --set "job.run_dir=$RUN_DIR" \
    --set "data.train=$TRAIN" --set "data.eval=$EVAL" \
    --set "data.valid_fraction=$VALID_FRACTION" "$@"
if [ -n "${BAYES:-}" ]; then
    echo "   Bayes-optimal NE  $BAYES   (the planted model itself: no model can do better)"
fi
