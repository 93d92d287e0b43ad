#!/usr/bin/env bash
# tags: quick
# Checkpoints that know their shape, on the real Criteo sample: a job trained
# with 2 embedding and 2 sync shards is scored again (--eval-only) with 1, 2
# and 3 of each. Every PS re-shards (embedding rows) or re-slices (the EASGD
# center) the saved set: the eval NE is the same for every shard count, the
# PSs together restore exactly the saved rows, and the logs say what
# happened. A set missing a file is refused, naming the file.
. "$(dirname "$0")/lib.sh"
criteo_split
make_job 2 2 2 "data:" "  train: [$T/train.tsv]" "  eval: [$T/eval.tsv]" \
    "trainer:" "  workers: 2" "  batch_size: 32" "model:" "  lr: 0.02" \
    "sync:" "  algorithm: s-easgd"

eps() {  # N: a comma list of N endpoints (the launcher gives each process a free port)
    local i out=""
    for ((i = 0; i < $1; i++)); do out="$out${out:+,}tcp://127.0.0.1:$((7000 + i))"; done
    echo "$out"
}
ne_of() { json_field "$T/run/result.json" eval_ne; }
logs=$T/run/logs

launch >"$T/launch-train.log" 2>&1 || { cat "$T/launch-train.log"; fail "training job failed"; }
ne_train=$(ne_of)
cp -r "$T/run" "$T/saved"
ls "$T/saved/model/embedding-0.ckpt" "$T/saved/model/embedding-1.ckpt" "$T/saved/model/sync-0.ckpt" \
    "$T/saved/model/sync-1.ckpt" >/dev/null || fail "the job did not write its checkpoints"
saved_rows=0
for k in 0 1; do
    n=$(sed -n "s/.*embedding-$k.ckpt: wrote \([0-9]*\) rows.*/\1/p" "$T/saved/logs/ps-embedding-$k.log" | tail -n 1)
    [ -n "$n" ] || fail "no 'wrote N rows' line in ps-embedding-$k.log"
    saved_rows=$((saved_rows + n))
done
ok "trained with 2+2 shards: eval NE $ne_train, $saved_rows rows saved"

# the same shard count: each PS reads its own file, as before
launch --eval-only "$T/saved" >"$T/launch-eval2.log" 2>&1 || { cat "$T/launch-eval2.log"; fail "eval-only (2 shards) failed"; }
ne2=$(ne_of)
grep -q "re-sharded" "$logs"/ps-embedding-*.log && fail "2 shards: re-sharded though the count is the same"
ok "eval-only with 2 shards: NE $ne2"

for n in 1 3; do
    launch --eval-only "$T/saved" --set "cluster.embedding=$(eps $n)" --set "cluster.sync=$(eps $n)" \
        >"$T/launch-eval$n.log" 2>&1 || { cat "$T/launch-eval$n.log"; fail "eval-only ($n shards) failed"; }
    ne=$(ne_of)
    awk -v a="$ne" -v b="$ne2" 'BEGIN { d = a - b; exit !(d * d <= 1e-8) }' \
        || fail "$n shards: eval NE $ne, 2 shards gave $ne2"
    rows=0
    for ((k = 0; k < n; k++)); do
        line=$(grep "re-sharded" "$logs/ps-embedding-$k.log") \
            || fail "$n shards: embedding PS $k logged no re-sharding"
        echo "$line" | grep -q "from 2 files (saved with 2 shards, this job has $n; re-sharded)" \
            || fail "$n shards: unexpected log line: $line"
        r=$(echo "$line" | sed -n 's/.*restored \([0-9]*\) rows from.*/\1/p')
        rows=$((rows + r))
        grep -q "re-sliced" "$logs/ps-sync-$k.log" || fail "$n shards: sync PS $k did not re-slice"
    done
    [ "$rows" = "$saved_rows" ] || fail "$n shards: restored $rows rows in all, $saved_rows were saved"
    ok "eval-only with $n shards: NE $ne (2 shards: $ne2), $rows rows restored over $n PSs"
done

# a set with a file missing is refused, naming it
mkdir -p "$T/broken" && cp -r "$T/saved/model" "$T/broken/"
rm "$T/broken/model/embedding-1.ckpt"
if launch --eval-only "$T/broken" --set "cluster.embedding=$(eps 3)" --set "cluster.sync=$(eps 3)" \
    >"$T/launch-broken.log" 2>&1; then
    fail "a restore from an incomplete set succeeded"
fi
grep -q "embedding-1.ckpt is missing" "$logs"/ps-embedding-*.log \
    || { cat "$T/launch-broken.log"; fail "the refusal does not name the missing file"; }
ok "incomplete set refused: $(grep -h "is missing" "$logs"/ps-embedding-*.log | head -n 1 | sed 's/.*checkpoint set [^:]*: //' | cut -c1-120)..."
no_leftovers
pass
