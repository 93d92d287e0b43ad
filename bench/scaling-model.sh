#!/usr/bin/env bash
# scaling-model.sh - the cluster throughput model of docs/scaling.md.
#
# Reads the constants bench/scaling-bench.sh measured (its JSON line with
# "bench":"scaling_constants", in the file CONSTS) and turns them into
# examples/s. Every formula is here and explained in docs/scaling.md;
# nothing here measures.
#
#   scaling-model.sh CONSTS predict light|busy N W E T PLACE CAP_A [CAP_B]
#       a job shape on one machine, with the per-request costs of light load
#       (the small jobs here: threads sleep between requests) or of a busy PS
#       (requests queued): N trainers x W workers, E embedding PSs of T
#       service threads; PLACE split (PSs on CAP_A cores, trainers on CAP_B)
#       or shared (all on CAP_A cores). Caps may be fractions of a core.
#       Prints one JSON object: examples/s, examples per CPU-second, the CPU
#       per example charged to trainers and PSs, the binding limit.
#   scaling-model.sh CONSTS table GBPS [IO_THREADS [BATCH]]
#       N trainer hosts x H PS hosts (1..64) of 16 cores, NIC of GBPS Gbit/s, busy
#       per-request costs: tab-separated N, H, examples/s, the binding limit,
#       the best PS layout (processes x service threads per host).
#       IO_THREADS (default 1, as shadow-trainer has) is the trainer's ZeroMQ
#       I/O threads, BATCH the examples per worker batch (default 128, the
#       keys per example kept as measured at 128): what-ifs.
#   scaling-model.sh CONSTS sync GBPS
#       s-ma and s-easgd rounds/s per trainer and sync bytes against the dense
#       model size and N: tab-separated M, N, ring CPU ms/round, ring
#       rounds/s, ring MB/s per trainer, EASGD rounds/s, EASGD center MB/s
#       (each direction).
#   scaling-model.sh CONSTS plot OUT.png
#       gnuplot of the table: examples/s against N for a few H on 10 GbE, the
#       best H on 25 GbE, and a what-if (4 trainer I/O threads, batch 512).
set -u
[ $# -ge 2 ] || { sed -n '2,30p' "$0" >&2; exit 2; }
CONSTS=$1; MODE=$2; shift 2
if [ "$MODE" = plot ]; then
    [ $# = 1 ] || { echo "usage: scaling-model.sh CONSTS plot OUT.png" >&2; exit 2; }
    command -v gnuplot >/dev/null ||
        { echo "scaling-model: gnuplot is not installed (apt-get install gnuplot-nox)" >&2; exit 1; }
    TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
    plots=()
    "$0" "$CONSTS" table 10 >"$TMP/t10" && "$0" "$CONSTS" table 25 >"$TMP/t25" &&
        "$0" "$CONSTS" table 25 4 512 >"$TMP/tw" || exit 1
    for h in 1 4 16; do
        awk -v h=$h -F'\t' '$2 == h { print $1, $3 / 1e6 }' "$TMP/t10" >"$TMP/h$h"
        plots+=("'$TMP/h$h' using 1:2 with linespoints lw 2 title '$h PS host(s), 10 GbE'")
    done
    best() { awk -F'\t' '$3 > b[$1] { b[$1] = $3 } END { for (n in b) print n, b[n] / 1e6 }' "$1" | sort -n; }
    best "$TMP/t25" >"$TMP/b25"; best "$TMP/tw" >"$TMP/bw"
    plots+=("'$TMP/b25' using 1:2 with linespoints dt 2 lw 2 title 'best PS hosts (1-16), 25 GbE'")
    plots+=("'$TMP/bw' using 1:2 with linespoints dt 3 lw 2 lc rgb 'dark-red' title 'what-if: 4 I/O threads per trainer, batch 512, 25 GbE'")
    awk 'NR == 1 { r = $2 } { print $1, $1 * r }' "$TMP/b25" >"$TMP/lin"
    plots+=("'$TMP/lin' using 1:2 with lines lc rgb 'gray' title 'linear from one trainer host'")
    gnuplot <<GP || exit 1
set terminal pngcairo size 900,580 noenhanced
set grid
set logscale xy 2
set key below
set xlabel 'trainer hosts N (16 cores each)'
set ylabel 'million examples/s'
set title 'predicted examples/s, default model, batch 128 (docs/scaling.md)'
set output '$1'
plot $(IFS=,; echo "${plots[*]}")
GP
    echo "scaling-model: wrote $1"
    exit 0
fi
LINE=$(grep '"bench":"scaling_constants"' "$CONSTS" | tail -n 1)
[ -n "$LINE" ] || { echo "scaling-model: no scaling_constants line in $CONSTS" >&2; exit 1; }
awk -v line="$LINE" -v mode="$MODE" -v args="$*" '
function load(s,   n, i, kv, parts) {
    gsub(/[{}"]/, "", s)
    n = split(s, parts, ",")
    for (i = 1; i <= n; i++) {
        split(parts[i], kv, ":")
        C[kv[1]] = kv[2] + 0
    }
}
# CPU microseconds per example charged to each kind of thread, all trainers
# and all PSs together, with E PS processes of T service threads. A batch
# sends one LOOKUP and one PUSH to every PS: r = 2E/B requests per example.
# busy = 0: per-request costs of the small jobs here (light load: threads
# sleep between requests and every request wakes them); busy = 1: those of
# a PS with requests queued (ps_bench, 16 clients), cold per-key costs.
function demands(E, T, busy,   r, ps) {
    r = 2 * E / C["batch"]
    Dw = C["worker_us"]
    Dto = C["tr_other_us"]
    if (busy) {
        Dtio = C["tr_io_us_0"] + r * C["psb_client_io_req_busy_us"]
        ps = C["keys_per_example"] * (C["psb_lookup_key_us"] + C["psb_push_key_us"]) \
             + r * C["psb_req_busy_us"]
        Dprx = T > 1 ? r * C["psb_proxy_req_busy_us"] : 0
    } else {
        Dtio = C["tr_io_us_0"] + r * C["tr_io_us_req"]
        ps = C["ps_us_0"] + r * C["ps_us_req"]
        Dprx = T > 1 ? r * C["ps_proxy_us_req"] : 0
    }
    Dpio = ps * (busy ? C["psb_io_share_busy"] : C["ps_io_share"])
    Dsvc = ps - Dpio
    Btx = C["keys_per_example"] * C["bytes_to_ps_per_key"] + r * C["header_bytes"]
    Brx = C["keys_per_example"] * C["bytes_from_ps_per_key"] + r * C["header_bytes"]
}
function limit(name, v) { if (v < best) { best = v; why = name } }
# A shape on one machine.
function predict_here(N, W, E, T, place, capA, capB, busy,   syn) {
    demands(E, T, busy)
    syn = N > 1 ? N * C["sync_core"] : 0
    best = 1e30; why = ""
    if (place == "split") {
        limit("trainer core", 1e6 * (capB - syn) / (Dw + Dtio + Dto))
        limit("PS core", 1e6 * capA / (Dsvc + Dpio + Dprx))
    } else {
        limit("shared cores", 1e6 * (capA - syn) / (Dw + Dtio + Dto + Dsvc + Dpio + Dprx))
    }
    limit("worker threads", 1e6 * N * W / Dw)
    limit("trainer I/O threads", 1e6 * N / Dtio)
    limit("PS service threads", 1e6 * E * T / Dsvc)
    limit("PS I/O threads", 1e6 * E * (C["ps_io_threads_per_service_thread"] ? T : 1) / Dpio)
    if (T > 1 && Dprx > 0) limit("PS proxy threads", 1e6 * E / Dprx)
}
# s-ma among N trainers, M floats: shadow-thread CPU per round (us), round
# latency (us: that CPU, plus per ring step a network step and the bytes on
# the wire), rounds/s (held to sync.cpu_share of a core, or by the latency).
function ma_cpu_us(N, M) { return 2 * (N - 1) * C["ma_round_us_msg"] + M * C["ma_round_us_float"] }
function ma_rounds_s(N, M, G,   lat, cpu) {
    lat = ma_cpu_us(N, M) + 2 * (N - 1) * (C["net_step_us"] + 4 * M / N / G * 1e6)
    cpu = C["cpu_share"] * 1e6 / ma_cpu_us(N, M)
    return 1e6 / lat < cpu ? 1e6 / lat : cpu
}
function ma_bytes_s(N, M, G) { return ma_rounds_s(N, M, G) * 2 * (N - 1) / N * 4 * M }
# s-easgd: each trainer sends M floats to the center and gets M back; one
# 16-core sync host holds the center: its CPU and NIC are shared by all N.
function easgd_rounds_s(N, M, G,   cpu, ps, nic) {
    cpu = C["cpu_share"] * 1e6 / (M * C["easgd_round_us_float"])
    ps = 16 * 1e6 / (M * C["easgd_ps_us_float"]) / N
    nic = G / (4 * M) / N
    return cpu < ps ? (cpu < nic ? cpu : nic) : (ps < nic ? ps : nic)
}
# N trainer hosts and H PS hosts of 16 cores, P PS processes of T service
# threads per PS host, NIC goodput G bytes/s per host and direction, IO
# ZeroMQ I/O threads per trainer. Trainer hosts: 16 - 1 - IO workers, IO
# I/O threads, 1 core for the shadow and main threads and the kernel.
function predict_cluster(N, H, P, T, G, IO,   E, syn, nic) {
    E = H * P
    demands(E, T, 1)
    syn = N > 1 ? C["sync_core"] : 0
    nic = N > 1 ? ma_bytes_s(N, C["dense_floats"], G) : 0
    best = 1e30; why = ""
    limit("trainer CPU", 1e6 * N * (16 - syn) / (Dw + Dtio + Dto))
    limit("trainer workers", 1e6 * N * (16 - 1 - IO) / Dw)
    limit("trainer I/O thread", 1e6 * N * IO / Dtio)
    limit("PS CPU", 1e6 * H * 16 / (Dsvc + Dpio + Dprx))
    limit("PS service threads", 1e6 * E * T / Dsvc)
    limit("PS I/O thread", 1e6 * E * (C["ps_io_threads_per_service_thread"] ? T : 1) / Dpio)
    if (T > 1 && Dprx > 0) limit("PS proxy thread", 1e6 * E / Dprx)
    limit("trainer NIC out", N * (G - nic) / Btx)
    limit("trainer NIC in", N * (G - nic) / Brx)
    limit("PS NIC in", H * G / Btx)
    limit("PS NIC out", H * G / Brx)
}
BEGIN {
    load(line)
    n = split(args, A, " ")
    if (mode == "predict") {
        predict_here(A[2], A[3], A[4], A[5], A[6], A[7] + 0, A[8] + 0, A[1] == "busy")
        cpu = Dw + Dtio + Dto + Dsvc + Dpio + Dprx + (A[2] > 1 ? A[2] * C["sync_core"] * 1e6 / best : 0)
        printf "{\"eps\":%.0f,\"examples_per_cpu_s\":%.0f,\"trainer_us_per_example\":%.3f," \
               "\"ps_us_per_example\":%.3f,\"limit\":\"%s\"}\n", best, 1e6 / cpu,
               Dw + Dtio + Dto, Dsvc + Dpio + Dprx, why
        exit
    }
    G = A[1] * 1e9 / 8 * C["wire_efficiency"]
    if (mode == "table") {
        io = n >= 2 ? A[2] : 1
        if (n >= 3) C["batch"] = A[3]
        split("1 2 4 8 16 32 64", NS, " ")
        split("1 2 4 8 16 32 64", HS, " ")
        split("1:14 2:6 4:2 8:1", LAY, " ")
        for (i = 1; i <= 7; i++) for (j = 1; j <= 7; j++) {
            top = -1
            for (l = 1; l <= 4; l++) {
                split(LAY[l], pt, ":")
                predict_cluster(NS[i], HS[j], pt[1], pt[2], G, io)
                if (best > top) { top = best; tw = why; tl = pt[1] "x" pt[2] }
            }
            printf "%d\t%d\t%.0f\t%s\t%s\n", NS[i], HS[j], top, tw, tl
        }
        exit
    }
    if (mode == "sync") {
        split("25566 255660 2556600 25566000", MS, " ")
        split("2 8 32 64", NS, " ")
        for (i = 1; i <= 4; i++) for (j = 1; j <= 4; j++) {
            M = MS[i]; N = NS[j]
            e = easgd_rounds_s(N, M, G)
            printf "%d\t%d\t%.3f\t%.1f\t%.1f\t%.1f\t%.0f\n", M, N, ma_cpu_us(N, M) / 1e3,
                   ma_rounds_s(N, M, G), ma_bytes_s(N, M, G) / 1e6, e, e * N * 4 * M / 1e6
        }
        exit
    }
    print "scaling-model: unknown mode " mode > "/dev/stderr"
    exit 2
}'
