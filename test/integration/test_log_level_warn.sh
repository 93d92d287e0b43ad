#!/usr/bin/env bash
# A job with job.log_level warn (or error) runs: the lines the launcher's
# supervisor reads in the logs (a PS's "ready:", ss_super.h) are written
# whatever the level, while the other INFO lines are not. Before, no PS
# wrote "ready:" at warn and every such job failed at start ("not ready
# after 30 s").
. "$(dirname "$0")/lib.sh"
"$BIN/shadow-datagen" --rows 20000 --seed 9 --out "$T/train.tsv" >/dev/null 2>&1 || fail datagen
make_job 1 0 1 "data:" "  train: [$T/train.tsv]" \
    "trainer:" "  workers: 1" "  epochs: 1" "sync:" "  algorithm: none"
sed -i "s|^  name: it\$|  name: it\n  log_level: warn|" "$JOB"
grep -q "^  log_level: warn" "$JOB" || fail "job file: no log_level line"
launch >"$T/launch.log" 2>&1; rc=$?
[ "$rc" = 0 ] || { cat "$T/launch.log"; fail "the job with job.log_level warn exited $rc"; }
PSLOG=$T/run/logs/ps-embedding-0.log
grep -q " INFO ready: " "$PSLOG" || fail "no ready: line in $PSLOG"
if grep " INFO " "$PSLOG" | grep -v " INFO ready: " | grep -q .; then
    fail "INFO lines other than ready: at log_level warn: $(grep ' INFO ' "$PSLOG" | head -3)"
fi
[ -f "$T/run/model/dense.bin" ] || fail "no model saved"
ok "job.log_level warn: started (ready: written), finished, model saved; no other INFO line"
no_leftovers
pass
