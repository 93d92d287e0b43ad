#!/usr/bin/env bash
# tags: quick
# model.warmup_share reaches the workers' dense update: with a warm-up of
# 10^8 examples the dense rate stays near 0 for the whole job unless the
# share ends the ramp after 1% of the first pass. Two one-epoch jobs on the
# Criteo sample: the one with the share must score below 0.90 (observed
# 0.880-0.885) and 0.015 below the other (without the dense model learning,
# only the embedding rows do: 0.919-0.962 in 7 runs). Catches the share
# being dropped between the config and the worker (e.g. the place in the
# pass never recorded: 0.919-0.929 with the share in 3 runs).
. "$(dirname "$0")/lib.sh"
criteo_split
make_job 2 1 2 "data:" "  train: [$T/train.tsv]" "  eval: [$T/eval.tsv]" \
    "trainer:" "  epochs: 1" "  eval_every: 0" "model:" "  warmup_examples: 100000000"
for share in 0 0.01; do
    launch --no-plots --set "job.run_dir=$T/run-$share" --set "model.warmup_share=$share" \
        >"$T/launch-$share.log" 2>&1 || { cat "$T/launch-$share.log"; fail "job (share $share) failed"; }
done
off=$(json_field "$T/run-0/result.json" eval_ne)
on=$(json_field "$T/run-0.01/result.json" eval_ne)
float_lt "$on" 0.90 || fail "eval NE $on with the share is not below 0.90: the dense model did not learn"
float_lt "$on" "$(awk -v a="$off" 'BEGIN { print a - 0.015 }')" \
    || fail "eval NE with the share $on is not 0.015 below the NE without it, $off"
ok "a 10^8-example warm-up: eval NE $off; ended by 1% of the first pass: $on"
no_leftovers
pass
