#!/usr/bin/env bash
# embed-ab.sh BASE_REV [embed_ab options]: the PS's row work of this tree
# against BASE_REV's, side by side in one process (bench/embed_ab.c says how).
# Builds BASE_REV's server/ps_embed.c and server/ps_admit.c (with its own
# ps_embed.h and ps_admit.h) with this tree's flags, renames every global
# symbol they define to base_*, links them with this tree's libraries into
# build/rel/bench/embed_ab and runs it; REPS (default 3) runs, one JSON line
# each. Each run also has both shards write a checkpoint into the build folder
# and compares the files byte for byte (every stored row and its state).
# Needs `make` done first (build/rel/lib*.a).
# Example: bench/embed-ab.sh main --pollute-kib 4096
set -eu
cd "$(dirname "$0")/.."
BASE=${1:?usage: bench/embed-ab.sh BASE_REV [embed_ab options]}
shift
B=build/rel
OUT=$B/bench/embed_ab-base
[ -f $B/libserver.a ] && [ -f $B/libshadow.a ] || { echo "embed-ab: run make first" >&2; exit 1; }
mkdir -p "$OUT/server"
for f in ps_embed.c ps_embed.h ps_admit.c ps_admit.h; do
    git show "$BASE:server/$f" >"$OUT/server/$f"
done
PKGS="libzmq libprotobuf-c yaml-0.1 openblas jansson jemalloc"
CFLAGS="-std=c11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Werror -Wno-unused-parameter
        -fno-strict-aliasing -pthread -Icommon -Iserver -I$B/proto $(pkg-config --cflags $PKGS)"
for f in ps_embed ps_admit; do
    cc -I"$OUT/server" $CFLAGS -c "$OUT/server/$f.c" -o "$OUT/$f.o"
done
ld -r "$OUT/ps_embed.o" "$OUT/ps_admit.o" -o "$OUT/base.o"
nm --defined-only -g "$OUT/base.o" | awk '{ print $3 " base_" $3 }' >"$OUT/syms"
objcopy --redefine-syms="$OUT/syms" "$OUT/base.o" "$OUT/base_renamed.o"
cc $CFLAGS -Ibench -c bench/embed_ab.c -o "$OUT/embed_ab.o"
cc -pthread -o $B/bench/embed_ab "$OUT/embed_ab.o" "$OUT/base_renamed.o" $B/libserver.a \
    $B/libshadow.a $(pkg-config --libs $PKGS) -ldnnl -lgomp -lm
for ((i = 0; i < ${REPS:-3}; i++)); do
    $B/bench/embed_ab --seed $((i + 1)) --ckpt-dir "$OUT" "$@"
done
