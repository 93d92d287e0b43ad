#!/usr/bin/env bash
# model-ab.sh BASE_REV [model_ab options]: this tree's dense step (tr_model.c)
# against BASE_REV's, side by side in one process, on this tree's products
# (tr_gemm), with a bit-for-bit comparison of every loss and gradient
# (bench/model_ab.c). Run `make` first. JSON lines on stdout.
set -eu
cd "$(dirname "$0")/.."
BASE=${1:?usage: bench/model-ab.sh BASE_REV [model_ab options]}
shift
B=build/rel
OUT=$B/bench/model_ab-base
[ -f $B/libtrainer.a ] && [ -f $B/libshadow.a ] || { echo "model-ab: run make first" >&2; exit 1; }
mkdir -p "$OUT/trainer"
for f in tr_model.c tr_model.h; do
    git show "$BASE:trainer/$f" >"$OUT/trainer/$f"
done
PKGS="libzmq libprotobuf-c yaml-0.1 openblas jansson jemalloc"
CFLAGS="-std=c11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Werror -Wno-unused-parameter
        -fno-strict-aliasing -pthread -Icommon -Iserver -Itrainer -I$B/proto $(pkg-config --cflags $PKGS)"
cc -I"$OUT/trainer" $CFLAGS -c "$OUT/trainer/tr_model.c" -o "$OUT/base.o"
nm --defined-only -g "$OUT/base.o" | awk '{ print $3 " base_" $3 }' >"$OUT/syms"
objcopy --redefine-syms="$OUT/syms" "$OUT/base.o" "$OUT/base_renamed.o"
cc $CFLAGS -c bench/model_ab.c -o "$OUT/model_ab.o"
cc -pthread -o $B/bench/model_ab "$OUT/model_ab.o" "$OUT/base_renamed.o" $B/libtrainer.a \
    $B/libshadow.a $(pkg-config --libs $PKGS) -ldnnl -lgomp -lm
$B/bench/model_ab "$@"
