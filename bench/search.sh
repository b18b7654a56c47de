#!/usr/bin/env bash
# bench/search.sh — search_wiki through the real `teammem mcp` (stdio) on a
# 1,000-page wiki made with the git CLI (bench/wiki/make_wiki.py): one cold
# call (the per-snapshot index is built), then warm calls; prints p50/p99 and
# the conditions (cores, CPU steal during the run). Target: warm p50 < 5 ms.
# Usage: [TEAMMEM_BIN=path] bench/search.sh [ITERATIONS]   (default 500)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
ITERATIONS="${1:-500}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
teammem_bin

git init -q --bare -b master "$WORK/wiki.git"
python3 "$ROOT/bench/wiki/make_wiki.py" 1000 | git -C "$WORK/wiki.git" fast-import --quiet
git init -q -b main "$WORK/app"
mkdir -m 700 "$WORK/data"
cat > "$WORK/teammem.toml" <<TOML
[server]
data_dir = "$WORK/data"

[[sources]]
repository = "bench/app"
local_path = "$WORK/app"
local_wiki_path = "$WORK/wiki.git"
webhook_secret_env = "TEAMMEM_BENCH_SECRET"
TOML

steal() { awk '/^cpu /{print $9}' /proc/stat; }
ticks() { awk '/^cpu /{s=0; for(i=2;i<=NF;i++) s+=$i; print s}' /proc/stat; }
s0=$(steal); t0=$(ticks)
TEAMMEM_BENCH_SECRET=unused python3 "$ROOT/bench/search/driver.py" "$BIN" "$WORK/teammem.toml" "$ITERATIONS"
s1=$(steal); t1=$(ticks)
echo "conditions: $(nproc) cores, CPU steal $(( (s1 - s0) * 100 / (t1 - t0 + 1) ))% during the run, binary $BIN"
