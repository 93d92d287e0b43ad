#!/usr/bin/env bash
# The foreground baselines make training wait, the shadow rules do not (the
# README's promise, and the difference the fr-* baselines exist to measure):
# what a sync round waits for is frozen (SIGSTOP) mid-training for FREEZE_S
# seconds, and trainer 0's example count is followed.
#   fr-easgd: every worker syncs with the sync PS every sync.gap of its own
#             iterations: the sync PS frozen, once the workers have reached
#             their next round they all wait, and the count stands still for
#             the whole freeze (SLACK below). After SIGCONT the rounds complete and
#             training goes on.
#   fr-ma:    every sync.gap trainer iterations all workers meet at a gate
#             and the last runs the ring round: trainer 1 frozen, trainer
#             0's workers wait at the gate, the same way.
#   s-easgd, s-ma: the shadow thread waits (for the sync PS, for trainer 1);
#             the workers train on, and the count keeps growing.
# Every job then finishes with every example trained and a final sync.
# sync.timeout_ms (60 s) is far longer than the freeze: no round gives up,
# no trainer is declared dead.
. "$(dirname "$0")/lib.sh"
FREEZE_S=2
# one epoch, 300,000 examples a trainer, frozen at 20,000-odd: far from the
# end of the segment, where every rule meets the other trainers and waits
ROWS=600000
EPOCHS=1
"$BIN/shadow-datagen" --rows $ROWS --seed 13 --out "$T/train.tsv" \
    --eval-rows 5000 --eval-out "$T/eval.tsv" >/dev/null 2>&1 || fail datagen
make_job 1 1 2 "data:" "  train: [$T/train.tsv]" "  eval: [$T/eval.tsv]" \
    "trainer:" "  workers: 2" "  epochs: $EPOCHS" "  batch_size: 128" \
    "sync:" "  timeout_ms: 60000" "  gap: 10" "metrics:" "  interval_s: 0.1"
# what trainer 0 may still train once its count has stood still for a moment
# (a worker slowed down by a loaded machine, not yet at its round): a round's
# worth, 2 workers x gap 10 x 128 examples; a trainer that does not wait
# trains tens of thousands in the freeze
SLACK=2560
SHARE=$((ROWS * EPOCHS / 2))  # trainer 0's examples
M=$T/run/metrics-trainer-0.jsonl
examples() { tail -n 1 "$M" 2>/dev/null | json_field - examples 2>/dev/null; }
# stalled: the last two metrics lines (0.1 s apart) count the same examples
stalled() {
    local a b
    read -r a b < <(tail -n 2 "$M" 2>/dev/null | json_field - examples 2>/dev/null | paste -sd' ')
    [ -n "${a:-}" ] && [ "$a" = "${b:-}" ]
}

for algo in ${FG_ALGOS:-fr-easgd s-easgd fr-ma s-ma}; do
    rm -rf "$T/run"
    launch --set sync.algorithm=$algo >"$T/launch-$algo.log" 2>&1 &
    LP=$!; PIDS+=("$LP")
    # mid-training, after some completed rounds (fr-easgd's workers have
    # their own sync connections open by then)
    wait_for 60 metric_above "$M" sync_rounds 0
    wait_for 60 examples_above "$M" 20000
    case $algo in
        *easgd) what="the sync PS"
                SP=$(pgrep -f -- "shadow-ps -c $JOB --role sync --shard 0( |\$)") || fail "$algo: no sync PS" ;;
        *) what="trainer 1"
           SP=$(pgrep -f -- "shadow-trainer -c $JOB --rank 1( |\$)") || fail "$algo: no trainer 1" ;;
    esac
    kill -STOP "$SP"
    e0=$(examples)
    if [[ $algo == fr-* ]]; then
        # the workers reach their next round (within sync.gap iterations);
        # bounded: a trainer that trains on never stalls
        n=100
        until stalled; do
            ((n-- > 0)) || { kill -CONT "$SP"
                fail "$algo: trainer 0's example count never stood still in 10 s with $what frozen ($e0 -> $(examples)): training did not wait"; }
            sleep 0.1
        done
        e1=$(examples)
        # (not because its data ran out: a trainer that does not wait stops there)
        ((e1 < SHARE)) || { kill -CONT "$SP"
            fail "$algo: trainer 0 stood still only at $e1 examples, the end of its data: training did not wait"; }
        sleep $FREEZE_S  # the freeze under test
        e2=$(examples)
        ((e2 - e1 <= SLACK)) || { kill -CONT "$SP"
            fail "$algo: trainer 0 went $e1 -> $e2 examples while $what was frozen $FREEZE_S s: training did not wait"; }
        kill -CONT "$SP"
        wait_for 30 examples_above "$M" "$e2"
        ok "$algo, $what frozen: trainer 0 went $e0 -> $e1 examples until its workers reached" \
           "their round, then $e1 -> $e2 in $FREEZE_S s (slack $SLACK); training went on after SIGCONT ($(examples) now)"
    else
        # the workers train on while the shadow thread waits (bounded): 5000
        # examples, or half of what is left of trainer 0's share when a
        # loaded machine let the freeze land near its end (where the
        # segment's end meets the other trainers and waits anyway)
        want=$((e0 + 5000))
        ((want < SHARE)) || want=$((e0 + (SHARE - e0) / 2))
        ((want > e0 + 256)) || { kill -CONT "$SP"
            fail "$algo: frozen at $e0 of trainer 0's $SHARE examples, too near the end to tell"; }
        wait_for 30 examples_above "$M" "$want"
        e1=$(examples)
        kill -CONT "$SP"
        ok "$algo, $what frozen: trainer 0 trained on, $e0 -> $e1 examples"
    fi
    wait_exit "$LP" 120 || { cat "$T/launch-$algo.log"; fail "$algo: job failed after SIGCONT"; }
    R=$T/run/result-trainer-0.json
    ex=$(json_field "$T/run/result.json" examples)
    [ "$ex" = $((ROWS * EPOCHS)) ] || fail "$algo: the job trained $ex examples, want $((ROWS * EPOCHS))"
    grep -q '"trainers_lost":\[\]' "$T/run/result.json" || fail "$algo: a trainer was lost"
    grep -q '"sync_final_ok":true' "$R" || { cat "$R"; fail "$algo: final sync incomplete"; }
    ok "$algo: job finished, $ex examples, $(json_field "$R" sync_rounds) sync rounds, final sync ok"
    no_leftovers
done
pass
