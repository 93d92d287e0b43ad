# bench-lib.sh - helpers shared by the benchmark drivers (sourced).
# Needs T (a scratch dir). Writes a job file with free loopback ports and
# runs shadow-launch on it; prints nothing but what the caller echoes.
command -v jq >/dev/null || { echo "bench: jq is not installed (scripts/install-deps.sh)" >&2; exit 1; }

bench_port() {
    local p
    while :; do
        p=$(( (RANDOM * 32768 + RANDOM) % 17000 + 15000 ))  # below the ephemeral range (32768+)
        (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
    done
}

# bench_data ROWS EVAL_ROWS: planted data in $T (once per size)
bench_data() {
    TRAIN=$T/planted-$1.tsv; EVAL=$T/planted-eval-$2.tsv
    [ -s "$TRAIN" ] && [ -s "$EVAL" ] && return 0
    bin/shadow-datagen --rows "$1" --seed 7 --out "$TRAIN" --eval-rows "$2" --eval-out "$EVAL" \
        >"$T/datagen.json" 2>/dev/null || { echo "bench: datagen failed" >&2; exit 1; }
}

# bench_job_yaml FILE NAME RUN_DIR N_TRAINERS N_EMBEDDING [EVAL [INTERVAL [YAML]]]:
# a job file with N_EMBEDDING embedding PSs, 1 sync PS and N_TRAINERS
# trainers on free loopback ports (the launcher may still give ipc:// on one
# host), training on $TRAIN, scoring EVAL (default none), metrics every
# INTERVAL s (default 5), plus the line YAML if given
bench_job_yaml() {
    local tr="" em="" i
    for ((i = 0; i < $4; i++)); do tr="$tr${tr:+, }tcp://127.0.0.1:$(bench_port)"; done
    for ((i = 0; i < $5; i++)); do em="$em${em:+, }tcp://127.0.0.1:$(bench_port)"; done
    cat >"$1" <<YAML
job: {name: $2, run_dir: $3}
cluster:
  embedding: [$em]
  sync: [tcp://127.0.0.1:$(bench_port)]
  trainers: [$tr]
data: {train: [$TRAIN], eval: [${6:-}]}
metrics: {interval_s: ${7:-5.0}}
${8:-}
YAML
}

# bench_job N_TRAINERS: $T/job.yaml with 2 embedding PSs, 1 sync PS
bench_job() { bench_job_yaml "$T/job.yaml" bench "$T/run" "$1" 2 "$EVAL" 1.0 "ps: {threads: 1}"; }

# bench_noplots ROOT: "--no-plots" when ROOT's shadow-launch takes it (older
# trees draw none): a job's plots are not training, and cost about 0.4 s of CPU
bench_noplots() { "$1/scripts/shadow-launch" --help 2>/dev/null | grep -q -- --no-plots && echo --no-plots; }

# bench_shape TREE: the --set arguments that give TREE's conf/local.yaml the
# job shape SHAPE, into the array SHAPE_ARGS, and SHAPE_NOTE (what of the
# shape TREE lacks, or empty). SHAPE=makerun (the default): the job make run
# runs, the launcher's own endpoints (ipc:// in RUN_DIR/ipc on one host) and
# make run's data.valid_fraction (scripts/make-run.sh --print-valid-fraction
# of this tree: the one place it is set). SHAPE=tcp-nosplit: the shape the
# throughput figures had before issue 20's eighth pass (docs/per-core.md),
# free tcp ports of 127.0.0.1 and no validation split. An older TREE without
# cluster.transport (or data.valid_fraction) in its conf/local.yaml gets
# free tcp ports (or no split) instead, named in SHAPE_NOTE.
bench_shape() {
    local conf=$1/conf/local.yaml vf p=() _
    SHAPE_ARGS=(); SHAPE_NOTE=""
    case "${SHAPE:-makerun}" in
        makerun) ;;
        tcp-nosplit) ;;
        *) echo "bench: SHAPE=$SHAPE: makerun or tcp-nosplit" >&2; exit 1 ;;
    esac
    if [ "${SHAPE:-makerun}" = makerun ] && grep -q '^ *transport:' "$conf"; then :
    else
        [ "${SHAPE:-makerun}" = makerun ] && SHAPE_NOTE="no cluster.transport: tcp"
        for _ in 1 2 3 4 5; do p+=("$(bench_port)"); done
        SHAPE_ARGS+=(--set "cluster.embedding=[tcp://127.0.0.1:${p[0]},tcp://127.0.0.1:${p[1]}]"
            --set "cluster.sync=[tcp://127.0.0.1:${p[2]}]"
            --set "cluster.trainers=[tcp://127.0.0.1:${p[3]},tcp://127.0.0.1:${p[4]}]")
    fi
    [ "${SHAPE:-makerun}" = makerun ] || return 0
    vf=$(scripts/make-run.sh --print-valid-fraction) || exit 1
    if grep -q '^ *valid_fraction:' "$conf"; then
        SHAPE_ARGS+=(--set "data.valid_fraction=$vf")
    else
        SHAPE_NOTE="${SHAPE_NOTE:+$SHAPE_NOTE; }no data.valid_fraction: no split"
    fi
}

# bench_run [--set k=v ...]: run the job; result in $T/run/result.json
bench_run() {
    scripts/shadow-launch "$T/job.yaml" --quiet --no-plots "$@" >"$T/launch.log" 2>&1 \
        || { echo "bench: job failed ($*)" >&2; tail -n 20 "$T/launch.log" >&2; return 1; }
}

# bench_field FILE KEY: top-level field KEY of the JSON object in FILE ("-":
# standard input) as JSON text, read by jq (the one place the drivers read
# JSON files); nothing when absent. When FILE is missing or not JSON, jq's
# message and the file go to stderr and it returns 1.
bench_field() {
    local f=$1
    [ "$f" = - ] && f=/dev/stdin
    jq -c --arg k "$2" 'select(type == "object" and has($k)) | .[$k]' "$f" \
        || { echo "bench: cannot read $2 from $1" >&2; return 1; }
}

# bench_sum KEY: sum of KEY over every result-trainer-*.json
bench_sum() {
    local s=0 f
    for f in "$T"/run/result-trainer-*.json; do
        s=$(awk -v a="$s" -v b="$(bench_field "$f" "$1")" 'BEGIN { print a + b }')
    done
    echo "$s"
}

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# bench_ps_exit_sum RUN_DIR ROLE KEY: KEY of the exit stats of each ROLE PS
# in RUN_DIR/logs (ps-ROLE-K.stats.json, written beside its log), summed (0
# when there is none)
bench_ps_exit_sum() {
    local f
    for f in "$1"/logs/ps-"$2"-*.stats.json; do
        [ -f "$f" ] || continue
        bench_field "$f" "$3"
    done | awk '{ s += $1 } END { printf "%.10g\n", s }'
}

# bench_tr_sum RUN_DIR KEY: KEY summed over RUN_DIR/result-trainer-*.json
bench_tr_sum() {
    local f
    for f in "$1"/result-trainer-*.json; do bench_field "$f" "$2"; done |
        awk '{ s += $1 } END { printf "%.10g\n", s }'
}
