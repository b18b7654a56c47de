#!/usr/bin/env bash
# bench/ingest.sh — dispatch ingest throughput and latency (signed request →
# verified → durable job) against a running `teammem serve` on loopback, with
# a local-forge source. Prints requests/s, p50/p99 latency and the daemon's RSS.
#
# Invariant: every request is a distinct, correctly signed range dispatch, so
# the numbers measure the whole path (HMAC, parse, gix ancestry walk, SQLite
# commit), not a cache of refusals. Non-2xx answers are reported as errors.
#
# Usage: [TEAMMEM_BIN=path] bench/ingest.sh [DURATION_SECONDS] [CONNECTIONS]
set -euo pipefail

DURATION="${1:-15}"
CONNECTIONS="${2:-16}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK="$(mktemp -d)"
trap 'kill "${DAEMON_PID:-}" 2>/dev/null || true; rm -rf "$WORK"' EXIT

if ! command -v wrk >/dev/null; then
    echo "installing wrk (Debian package)" >&2
    (apt-get update -qq && apt-get install -y -qq wrk) >/dev/null
fi

# TEAMMEM_BIN overrides the binary (e.g. a debug build); default: a release build.
if [ -n "${TEAMMEM_BIN:-}" ]; then
    BIN="$TEAMMEM_BIN"
else
    echo "building teammem (release)" >&2
    cargo build --release --quiet --manifest-path "$ROOT/Cargo.toml"
    BIN="$ROOT/target/release/teammem"
fi

# A local source with 1,500 commits and an initialised wiki.
git init -q -b main "$WORK/src"
git -C "$WORK/src" -c user.name=b -c user.email=b@example.org commit -q --allow-empty -m root
python3 - "$WORK/src" <<'PY'
import subprocess, sys
repo = sys.argv[1]
parent = subprocess.check_output(["git", "-C", repo, "rev-parse", "HEAD"]).decode().strip()
lines = []
for i in range(1500):
    msg = f"commit {i} (#{i + 1})"
    lines.append(f"commit refs/heads/main\ncommitter B <b@example.org> {1767225600 + i} +0000\ndata {len(msg)}\n{msg}\n")
    if i == 0:
        lines.append(f"from {parent}\n")
    body = f"{i}\n"
    lines.append(f"M 100644 inline f.txt\ndata {len(body)}\n{body}\n")
subprocess.run(["git", "-C", repo, "fast-import", "--quiet", "--force"], input="".join(lines).encode(), check=True)
PY
# As `git gc` leaves a served repository: packed, with a commit-graph (gix walks it
# without decoding commits).
git -C "$WORK/src" commit-graph write --reachable
git init -q --bare -b master "$WORK/wiki.git"

SECRET="bench-secret-$(od -An -tx8 -N8 /dev/urandom | tr -d ' ')"
export TEAMMEM_BENCH_SECRET="$SECRET"
PORT=$((20000 + RANDOM % 20000))
cat > "$WORK/teammem.toml" <<TOML
[server]
listen = "127.0.0.1:$PORT"
data_dir = "$WORK/data"

[[sources]]
repository = "bench/app"
local_path = "$WORK/src"
local_wiki_path = "$WORK/wiki.git"
webhook_secret_env = "TEAMMEM_BENCH_SECRET"

[queue]
workers = 1
TOML

# Pre-signed requests: distinct ranges (before, after) of 1..20 commits.
python3 - "$WORK" "$SECRET" <<'PY'
import hashlib, hmac, json, subprocess, sys, uuid
work, secret = sys.argv[1], sys.argv[2].encode()
shas = subprocess.check_output(["git", "-C", f"{work}/src", "rev-list", "--reverse", "main"]).decode().split()
out = open(f"{work}/requests.txt", "w")
n = 0
for span in range(1, 21):
    for i in range(0, len(shas) - span):
        body = json.dumps({"source_repository": "bench/app", "kind": "range",
                           "push_before": shas[i], "push_after": shas[i + span]}, separators=(",", ":"))
        sig = "sha256=" + hmac.new(secret, body.encode(), hashlib.sha256).hexdigest()
        out.write(f"{sig}\t{uuid.uuid4()}\t{body}\n")
        n += 1
print(f"{n} distinct signed dispatches prepared", file=sys.stderr)
PY

cat > "$WORK/dispatch.lua" <<'LUA'
local reqs = {}
local i = 0
init = function(args)
  local file = io.open(args[1], "r")
  local tid = tonumber(args[2]) or 0
  for line in file:lines() do
    local sig, del, body = line:match("^([^\t]+)\t([^\t]+)\t(.*)$")
    reqs[#reqs + 1] = {sig = sig, del = del, body = body}
  end
  file:close()
end
local counter = 0
setup = function(thread)
  counter = counter + 1
  thread:set("offset", counter * 7919)
end
request = function()
  i = i + 1
  local r = reqs[((i + (offset or 0)) % #reqs) + 1]
  return wrk.format("POST", "/v1/dispatch", {
    ["Content-Type"] = "application/json",
    ["X-Hub-Signature-256"] = r.sig,
    ["X-TeamMem-Delivery"] = r.del,
  }, r.body)
end
LUA

"$BIN" serve --config "$WORK/teammem.toml" > "$WORK/daemon.log" 2>&1 &
DAEMON_PID=$!
for _ in $(seq 1 100); do
    curl -fsS "http://127.0.0.1:$PORT/healthz" >/dev/null 2>&1 && break
    sleep 0.1
done
curl -fsS "http://127.0.0.1:$PORT/healthz" >/dev/null || { cat "$WORK/daemon.log"; exit 1; }
echo "daemon RSS idle: $(awk '/VmRSS/ {print $2 " " $3}' /proc/$DAEMON_PID/status)"

wrk -t2 -c"$CONNECTIONS" -d"${DURATION}s" --latency -s "$WORK/dispatch.lua" \
    "http://127.0.0.1:$PORT" -- "$WORK/requests.txt" | tee "$WORK/wrk.txt"

echo "daemon RSS after load: $(awk '/VmRSS/ {print $2 " " $3}' /proc/$DAEMON_PID/status), peak $(awk '/VmHWM/ {print $2 " " $3}' /proc/$DAEMON_PID/status)"
echo "jobs stored: $(python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('select count(*) from jobs').fetchone()[0])" "$WORK/data/teammem.db")"
if grep -q "Non-2xx" "$WORK/wrk.txt"; then
    echo "ERRORS: some dispatches were refused" >&2
    exit 1
fi
