#!/bin/sh
# Install the Debian packages ShadowSync needs, only those that are missing.
# Uses sudo when not root; prints the exact command when it cannot install.
# libjansson-dev, jq: JSON read by shadow-ctl (common/ss_json.c) and by the scripts and tests.
# libdnnl-dev: oneDNN, the trainer's AVX-512 and AMX/bf16 matrix products (trainer/tr_gemm.c).
# With no argument: what building and a local job need (make, make run).
# --test: also what make test needs (the fuzzing compiler, and the cluster
# packages below for the cluster tests); --cluster: the cluster packages only
# (make deps-cluster). These install servers (sshd, slurm, munge) that a
# machine with systemd also starts, so make run never installs them.
# With other arguments, installs those packages instead (make bench-quality:
# the Python peers' packages, which nothing else needs).
# clang, libclang-rt-dev (libFuzzer and sanitizer runtimes, only recommended by clang):
# the libFuzzer harnesses of test/fuzz/ (make test runs them briefly).
# openssh-client, openssh-server, iproute2: scripts/shadow-launch --hosts (ssh) and
# test/integration/test_cluster_netns.sh, which runs its own sshd per network
# namespace (on a machine with systemd, installing openssh-server also enables
# the system's ssh service; the test does not use it).
# slurmctld, slurmd, slurm-client, munge: scripts/shadow-slurm, and
# test/integration/test_cluster_slurm.sh, which runs its own private Slurm (its own
# config, munge key and ports in a temp dir; on a machine with systemd, installing
# them also enables the system's munge and slurm services; the test does not use them).
PKGS="libzmq3-dev libprotobuf-c-dev protobuf-c-compiler libyaml-dev libjemalloc-dev
libjansson-dev jq
libopenblas-dev libdnnl-dev libcmocka-dev libmicrohttpd-dev pkg-config gnuplot-nox curl"
TEST_PKGS="clang libclang-rt-dev"
CLUSTER_PKGS="openssh-client openssh-server iproute2 slurmctld slurmd slurm-client munge"
case "${1:-}" in
    "") ;;
    --test) PKGS="$PKGS $TEST_PKGS $CLUSTER_PKGS" ;;
    --cluster) PKGS="$CLUSTER_PKGS" ;;
    *) PKGS="$*" ;;
esac
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
        || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "installing missing packages:$missing"
SUDO=""
if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
        echo "error: not root and no sudo; run as root:" >&2
        echo "  apt-get update && apt-get install -y$missing" >&2
        exit 1
    fi
fi
export DEBIAN_FRONTEND=noninteractive
if ! $SUDO apt-get install -y -q $missing >/tmp/shadowsync-apt.log 2>&1; then
    $SUDO apt-get update -q >>/tmp/shadowsync-apt.log 2>&1
    if ! $SUDO apt-get install -y -q $missing >>/tmp/shadowsync-apt.log 2>&1; then
        tail -20 /tmp/shadowsync-apt.log >&2
        echo "error: package install failed; run by hand:" >&2
        echo "  $SUDO apt-get update && $SUDO apt-get install -y$missing" >&2
        exit 1
    fi
fi
echo "packages installed"
