#!/usr/bin/env bash
# tags: quick
# What the binaries load, and the trainer's table of figures:
# - shadow-ctl (the launcher runs it 20-30 times a job) names no OpenBLAS,
#   oneDNN or OpenMP library: loading them was about 6 ms of each call's CPU
#   (its model-file export sizes the arena with tr_model_shape, not the
#   model). The same check on shadow-trainer, which needs them, must find
#   them, so the check cannot pass by seeing nothing.
# - shadow-trainer --list-metrics needs no job file and prints exactly the
#   "Trainers" rows of docs/metrics.md (test_docs_metrics compares the table
#   itself; this is the binary's flag).
# No cluster: well under a second.
. "$(dirname "$0")/lib.sh"

command -v readelf >/dev/null || skip "no readelf (binutils)"

# needed BINARY: the shared libraries BINARY names, one a line
needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }

heavy='^lib(dnnl|openblas|gomp)[.]'
trainer_libs=$(needed "$BIN/shadow-trainer")
[ "$(grep -cE "$heavy" <<<"$trainer_libs")" -ge 2 ] ||
    fail "shadow-trainer names no oneDNN/OpenBLAS library: the check below would see nothing ($trainer_libs)"
ctl_libs=$(needed "$BIN/shadow-ctl")
if grep -E "$heavy" <<<"$ctl_libs"; then
    fail "shadow-ctl links the dense-math libraries above (something it uses pulls in tr_model or tr_gemm)"
fi
ok "shadow-ctl names $(wc -l <<<"$ctl_libs") libraries, none of oneDNN, OpenBLAS, OpenMP"
if grep -E "$heavy" <<<"$(needed "$BIN/shadow-ps")"; then
    fail "shadow-ps links the dense-math libraries above (a trainer module in libserver or libshadow?)"
fi
ok "shadow-ps names none of oneDNN, OpenBLAS, OpenMP"

# - no binary names libmicrohttpd, whose TLS libraries (about ten) every
#   start loaded (issue 19: about 2 ms of CPU each): ss_metrics.c loads it
#   when a process serves /metrics, and the histograms and the metrics text
#   that shadow-ctl and shadow-super use live apart (ss_metrics_text.c).
#   test_ps_idle checks that a PS loads it exactly when it serves.
http='^libmicrohttpd[.]'
for b in shadow-ps shadow-trainer shadow-ctl shadow-super; do
    if grep -E "$http" <<<"$(needed "$BIN/$b")"; then
        fail "$b links libmicrohttpd (ss_metrics.c should load it with dlopen)"
    fi
done
ok "shadow-ps, shadow-trainer, shadow-ctl and shadow-super name no libmicrohttpd"

rows=$("$BIN/shadow-trainer" --list-metrics) || fail "shadow-trainer --list-metrics exited $?"
doc=$(sed -n '/^## Trainers/,/^## /p' "$ROOT/docs/metrics.md" | grep '^| `')
[ -n "$doc" ] || fail "no Trainers table in docs/metrics.md"
if [ "$rows" != "$doc" ]; then
    diff <(echo "$doc") <(echo "$rows") | head -5
    fail "shadow-trainer --list-metrics differs from docs/metrics.md's Trainers rows"
fi
ok "shadow-trainer --list-metrics prints the $(wc -l <<<"$rows") Trainers rows of docs/metrics.md"
pass
