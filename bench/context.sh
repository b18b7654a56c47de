#!/usr/bin/env bash
# bench/context.sh — the token economy of get_context on the demo's wiki
# (`teammem demo --once --keep`, the real daemon and builtin agent): for
# every file of the demo's source, one get_context call through the real
# `teammem mcp` (stdio) against reading whole the wiki pages its answer
# draws on; prints both in tokens (JSON bytes / 4), their ratio, and
# get_context's warm latency.
# Usage: [TEAMMEM_BIN=path] bench/context.sh
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
teammem_bin

"$BIN" demo --once --port 0 --data-dir "$WORK/demo" > "$WORK/demo.log" 2>&1 || { cat "$WORK/demo.log"; exit 1; }
config="$(find "$WORK/demo" -maxdepth 1 -name '*.toml' | head -n 1)"
source_repo="$(find "$WORK/demo/repos" -maxdepth 1 -mindepth 1 -name '*.git' ! -name '*.wiki.git' | head -n 1)"
repository="$(awk -F'"' '/^repository *=/ {print $2; exit}' "$config")"
[ -n "$config" ] && [ -n "$source_repo" ] && [ -n "$repository" ] || { echo "the demo left no configuration or source" >&2; exit 1; }
mapfile -t files < <(git --git-dir "$source_repo" ls-tree -r --name-only HEAD)
python3 "$ROOT/bench/context/driver.py" "$BIN" "$config" "$repository" "${files[@]}"
