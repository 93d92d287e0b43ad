#!/usr/bin/env bash
# Quality per sync setting on planted data, where the Bayes-optimal NE is
# known (shadow-datagen): 3 trainers x 2 workers train one epoch of 200,000
# rows with each sync algorithm (none, s-*, fr-*) and with groups, and each
# job's eval NE on 50,000 held-out rows must stay under its own bound, a
# multiple of the Bayes-optimal NE. The bounds come from four runs of each
# (on a loaded 2-core machine) plus about the largest run-to-run spread seen
# (0.023, fr-ma): noise does not cross them, a rule that loses 0.03 of NE
# does (0.05 crosses every one). QUALITY_ALGOS narrows the list.
#   observed eval NE / Bayes (4 runs)      bound
#   none      1.081 1.083 1.090 1.086      1.115
#   s-easgd   1.078 1.079 1.085 1.076      1.105
#   s-ma      1.074 1.077 1.072 1.071      1.100
#   s-bmuf    1.066 1.068 1.067 1.064      1.090
#   fr-easgd  1.081 1.074 1.077 1.085      1.105
#   fr-ma     1.068 1.077 1.080 1.092      1.115
#   fr-bmuf   1.068 1.072 1.065 1.063      1.095
#   groups    1.065 1.064 1.066 1.071      1.095
. "$(dirname "$0")/lib.sh"
declare -A BOUND=([none]=1.115 [s-easgd]=1.105 [s-ma]=1.100 [s-bmuf]=1.090 [fr-easgd]=1.105
                  [fr-ma]=1.115 [fr-bmuf]=1.095 [groups]=1.095)
"$BIN/shadow-datagen" --rows 200000 --seed 7 --out "$T/train.tsv" \
    --eval-rows 50000 --eval-out "$T/eval.tsv" >"$T/datagen.json" 2>"$T/datagen.log" \
    || { cat "$T/datagen.log"; fail "datagen"; }
bayes=$(json_field "$T/datagen.json" eval.bayes_ne)
[ -n "$bayes" ] || { cat "$T/datagen.json"; fail "no Bayes NE in the datagen output"; }
make_job 2 1 3 "data:" "  train: [$T/train.tsv]" "  eval: [$T/eval.tsv]" \
    "trainer:" "  workers: 2" "  batch_size: 64" "  epochs: 1" "sync:" "  timeout_ms: 5000"
G='[{component: bottom, algorithm: s-easgd}, {component: top, algorithm: s-bmuf}]'
# one job of ALGO: its eval NE over the Bayes NE on stdout
run_algo() {
    local algo=$1 sets=(--set "sync.algorithm=$1") ne
    [ "$algo" = groups ] && sets=(--set "sync.groups=$G")
    launch "${sets[@]}" >"$T/launch-$algo.log" 2>&1 \
        || { cat "$T/launch-$algo.log" >&2; fail "$algo: job failed"; }
    ne=$(json_field "$T/run/result.json" eval_ne)
    awk -v a="$ne" -v b="$bayes" 'BEGIN { printf "%.4f", a / b }'
}
for algo in ${QUALITY_ALGOS:-none s-easgd s-ma s-bmuf fr-easgd fr-ma fr-bmuf groups}; do
    [ -n "${BOUND[$algo]:-}" ] || fail "no bound for $algo"
    ratio=$(run_algo "$algo")
    R=$T/run/result-trainer-0.json
    if [ "$algo" != none ]; then
        [ "$(json_field "$R" sync_rounds)" -gt 0 ] || { cat "$R"; fail "$algo: no sync rounds"; }
        grep -q '"sync_final_ok":true' "$R" || { cat "$R"; fail "$algo: final sync incomplete"; }
    fi
    # Hogwild timing alone puts about one run in 15-20 of the same job
    # 0.02-0.03 above its siblings (docs/quality.md, "The seed spread"): a
    # run over its bound is judged by the median of it and two more. A rule
    # that really lost 0.03 has all three over it.
    if ! float_lt "$ratio" "${BOUND[$algo]}"; then
        echo "note: $algo: $ratio x Bayes, over its bound ${BOUND[$algo]}: two more runs, the median judged"
        runs="$ratio $(run_algo "$algo") $(run_algo "$algo")"
        ratio=$(printf '%s\n' $runs | sort -g | sed -n 2p)
        float_lt "$ratio" "${BOUND[$algo]}" \
            || fail "$algo: eval NE / Bayes of 3 runs $runs, median $ratio over the bound ${BOUND[$algo]}"
        ok "$algo: runs $runs x Bayes $bayes, median $ratio (bound ${BOUND[$algo]})"
    else
        ok "$algo: eval NE $ratio x Bayes $bayes (bound ${BOUND[$algo]})"
    fi
done
no_leftovers
pass
