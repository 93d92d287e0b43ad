#!/usr/bin/env bash
# The foreground baselines make training wait, the shadow rules do not (the
# README's promise, and the difference the fr-* baselines exist to measure):
# the sync PS is frozen (SIGSTOP) mid-training and held FREEZE_S seconds.
#   fr-easgd: every worker syncs with the sync PS every sync.gap of its own
#             iterations, in its own thread: once the workers have reached
#             their next round they all wait for the frozen PS, and the
#             trainer's example count stands still for the whole freeze.
#             After SIGCONT the rounds complete and training goes on.
#   s-easgd:  the shadow thread waits for the PS; the workers train on, and
#             the example count keeps growing while the PS is frozen.
# Both jobs then finish with every example trained and a final sync.
# sync.timeout_ms (60 s) is far longer than the freeze: no round gives up.
. "$(dirname "$0")/lib.sh"
FREEZE_S=2
ROWS=100000
EPOCHS=3
"$BIN/shadow-datagen" --rows $ROWS --seed 13 --out "$T/train.tsv" \
    --eval-rows 5000 --eval-out "$T/eval.tsv" >/dev/null 2>&1 || fail datagen
make_job 1 1 1 "data:" "  train: [$T/train.tsv]" "  eval: [$T/eval.tsv]" \
    "trainer:" "  workers: 2" "  epochs: $EPOCHS" "sync:" "  timeout_ms: 60000" \
    "metrics:" "  interval_s: 0.1"
M=$T/run/metrics-trainer-0.jsonl
examples() { tail -n 1 "$M" 2>/dev/null | json_field - examples 2>/dev/null; }
# stalled: the last two metrics lines (0.1 s apart) count the same examples
stalled() {
    local a b
    read -r a b < <(tail -n 2 "$M" 2>/dev/null | json_field - examples 2>/dev/null | paste -sd' ')
    [ -n "${a:-}" ] && [ "$a" = "${b:-}" ]
}

for algo in fr-easgd s-easgd; do
    rm -rf "$T/run"
    launch --set sync.algorithm=$algo >"$T/launch-$algo.log" 2>&1 &
    LP=$!; PIDS+=("$LP")
    # mid-training, after some completed rounds (fr-easgd's workers have
    # their own sync connections open by then)
    wait_for 60 metric_above "$M" sync_rounds 2
    wait_for 60 examples_above "$M" 20000
    SP=$(pgrep -f -- "shadow-ps -c $JOB --role sync --shard 0( |\$)") || fail "$algo: no sync PS"
    kill -STOP "$SP"
    e0=$(examples)
    if [ $algo = fr-easgd ]; then
        # the workers reach their next round (within sync.gap iterations);
        # bounded: a trainer that trains on never stalls
        n=100
        until stalled; do
            ((n-- > 0)) || { kill -CONT "$SP"
                fail "$algo: the example count never stood still in 10 s with the sync PS frozen ($e0 -> $(examples)): training did not wait"; }
            sleep 0.1
        done
        e1=$(examples)
        sleep $FREEZE_S  # the freeze under test
        e2=$(examples)
        [ "$e2" = "$e1" ] || { kill -CONT "$SP"
            fail "$algo: $e1 -> $e2 examples while the sync PS was frozen $FREEZE_S s: training did not wait"; }
        kill -CONT "$SP"
        wait_for 30 examples_above "$M" "$e2"
        ok "$algo: $e0 -> $e1 examples until the workers reached their round, then $e1 for the" \
           "$FREEZE_S s freeze; training went on after SIGCONT ($(examples) now)"
    else
        # the workers train on while the shadow thread waits (bounded)
        wait_for 30 examples_above "$M" $((e0 + 20000))
        e1=$(examples)
        kill -CONT "$SP"
        ok "$algo: $e0 -> $e1 examples while the sync PS was frozen"
    fi
    wait_exit "$LP" 120 || { cat "$T/launch-$algo.log"; fail "$algo: job failed after SIGCONT"; }
    R=$T/run/result-trainer-0.json
    ex=$(json_field "$T/run/result.json" examples)
    [ "$ex" = $((ROWS * EPOCHS)) ] || fail "$algo: the job trained $ex examples, want $((ROWS * EPOCHS))"
    grep -q '"sync_final_ok":true' "$R" || { cat "$R"; fail "$algo: final sync incomplete"; }
    ok "$algo: job finished, $ex examples, $(json_field "$R" sync_rounds) sync rounds, final sync ok"
    no_leftovers
done
pass
