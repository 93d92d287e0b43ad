#!/usr/bin/env bash
# tags: quick
# 3 trainers x 2 workers on the real Criteo sample with each of the seven
# sync settings: every job ends with eval NE below NE_BOUND, the sync
# settings report completed rounds and a completed final sync. NE_BOUND 0.92:
# every setting scored 0.885-0.899 over three runs of this test, 0.887-0.902
# in earlier ones (0.95 before let any of them lose 0.05); test_sync_quality
# holds each to its own bound on planted data.
. "$(dirname "$0")/lib.sh"
NE_BOUND=0.92
criteo_split
make_job 2 1 3 "data:" "  train: [$T/train.tsv]" "  eval: [$T/eval.tsv]" \
    "trainer:" "  workers: 2" "  batch_size: 32" "model:" "  lr: 0.02" \
    "sync:" "  gap: 5" "  timeout_ms: 3000"
for algo in none s-easgd s-ma s-bmuf fr-easgd fr-ma fr-bmuf; do
    # BMUF's default block momentum 1 - 1/N = 0.67 amplifies the noise of
    # this tiny sample (83 iterations per trainer): eval NE spreads 0.89..1.08
    # over runs; 0.5 keeps it 0.90..0.95 (0.885-0.894 in the three runs that
    # set NE_BOUND, s-bmuf and fr-bmuf). On 400k planted rows the default
    # is as good as s-ma (see the closing note of the sync issue).
    extra=()
    [[ $algo == *bmuf ]] && extra=(--set sync.block_momentum=0.5)
    launch --set sync.algorithm=$algo "${extra[@]}" >"$T/launch-$algo.log" 2>&1 \
        || { cat "$T/launch-$algo.log"; fail "$algo: job failed"; }
    R=$T/run/result.json
    ne=$(json_field "$R" eval_ne)
    float_lt "$ne" $NE_BOUND || fail "$algo: eval NE $ne is not below $NE_BOUND"
    line="$algo: eval NE $ne AUC $(json_field "$R" eval_auc)"
    if [ $algo != none ]; then
        r0=$T/run/result-trainer-0.json
        rounds=$(json_field "$r0" sync_rounds)
        [ "${rounds:-0}" -gt 0 ] || { cat "$r0"; fail "$algo: no sync rounds"; }
        grep -q '"sync_final_ok":true' "$r0" || { cat "$r0"; fail "$algo: final sync incomplete"; }
        line="$line, $rounds rounds, gap $(json_field "$r0" sync_gap)"
    fi
    ok "$line"
done
# per-component sync: bottom MLP by EASGD, top MLP by BMUF, at the same time
G='[{component: bottom, algorithm: s-easgd, alpha: 0.3}, {component: top, algorithm: s-bmuf}]'
launch --set "sync.groups=$G" >"$T/launch-groups.log" 2>&1 \
    || { cat "$T/launch-groups.log"; fail "groups: job failed"; }
ne=$(json_field "$T/run/result.json" eval_ne)
float_lt "$ne" $NE_BOUND || fail "groups: eval NE $ne is not below $NE_BOUND"
grep -q '"sync_algorithm":"bottom:s-easgd,top:s-bmuf"' "$T/run/result-trainer-0.json" \
    || { cat "$T/run/result-trainer-0.json"; fail "groups: not reported"; }
grep -q '"sync_final_ok":true' "$T/run/result-trainer-0.json" || fail "groups: final sync"
ok "groups bottom:s-easgd + top:s-bmuf: eval NE $ne"

# MA: every trainer completes the final round (each then holds the average;
# test_tr_shadow checks the values), and only trainer 0 scores it, once
launch --set sync.algorithm=s-ma >"$T/launch-ma2.log" 2>&1 || fail "s-ma rerun"
for r in 0 1 2; do
    grep -q '"sync_final_ok":true' "$T/run/result-trainer-$r.json" || fail "s-ma: trainer $r final sync"
done
grep -q '"eval_ne"' "$T/run/result-trainer-2.json" && fail "s-ma: trainer 2 scored the model too"
ok "s-ma: every trainer completed the final round; the average was scored once"
no_leftovers
pass
