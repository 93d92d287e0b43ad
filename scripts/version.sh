#!/usr/bin/env sh
# version.sh - print "VERSION GIT_REV" of this checkout: the VERSION file and
# git rev-parse --short=12 HEAD, with "-dirty" when tracked files changed;
# "unknown" for what cannot be found (no VERSION file, no git). The Makefile
# builds these into the binaries; the scripts print them for --version.
cd "$(dirname "$0")/.." || exit 1
v=$(cat VERSION 2>/dev/null) || v=""
if r=$(git rev-parse --short=12 HEAD 2>/dev/null); then
    git diff --quiet HEAD 2>/dev/null || r=$r-dirty
else
    r=""
fi
echo "${v:-unknown} ${r:-unknown}"
