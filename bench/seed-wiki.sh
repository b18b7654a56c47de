#!/usr/bin/env bash
# bench/seed-wiki.sh — creates the benchmarks' wiki: a bare repository at
# BARE whose first commit (on master, as GitHub wikis) holds Home.md, so jobs
# have a wiki to write into. Used by bench/e2e.sh and bench/ingest.sh.
#
# Usage: bench/seed-wiki.sh BARE
set -euo pipefail
BARE="$1"
SEED="$(mktemp -d)"
trap 'rm -rf "$SEED"' EXIT
git init -q --bare -b master "$BARE"
git clone -q "$BARE" "$SEED/wiki" 2>/dev/null
printf '# Welcome\n\nThe team memory of the benchmark.\n' > "$SEED/wiki/Home.md"
git -C "$SEED/wiki" checkout -q -b master
git -C "$SEED/wiki" add -A
git -C "$SEED/wiki" -c user.name=b -c user.email=b@example.org commit -q -m "Initial Home page"
git -C "$SEED/wiki" push -q origin master
