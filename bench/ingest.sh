#!/usr/bin/env bash
# bench/ingest.sh — dispatch ingest throughput and latency (signed request →
# verified → durable job) against a running `teammem serve` on loopback, with
# two sources: a local-forge one (the one the targets are for), then a GitHub
# one verified against a minimal fake of GitHub's REST API on loopback
# (bench/ingest/fake_github.py). Prints requests/s, p50/p99 latency, the
# daemon's RSS and CPU per dispatch for each, and the share of the machine's
# CPU the hypervisor stole during the run (on a shared host the latency tail
# follows it: bench/README.md).
#
# Invariant: every request is a distinct, correctly signed range dispatch, so
# the numbers measure the whole path (HMAC, parse, gix ancestry walk, SQLite
# commit), not a cache of refusals. Non-2xx answers are reported as errors.
#
# Two runs per source:
# - saturation: CONNECTIONS connections, each sending its next dispatch as
#   soon as the last is answered (closed loop): the most the daemon accepts,
#   and the latency of a daemon that is never idle;
# - offered load (local forge): RATE dispatches/s from OFFERED_CONNECTIONS
#   connections, each pausing a random (exponential) think time between
#   dispatches so that together they offer about RATE/s, like many workflows
#   posting independently. This is the latency the targets are about (at a
#   given rate, not at saturation). wrk measures from the moment it sends, so
#   a slow answer does not count the pause it delays (coordinated omission);
#   the many connections keep that effect small and the script prints the
#   rate it reached.
#
# Usage: [TEAMMEM_BIN=path] [RATE=1000] [OFFERED_CONNECTIONS=200]
#        bench/ingest.sh [DURATION_SECONDS] [CONNECTIONS]
set -euo pipefail

DURATION="${1:-15}"
CONNECTIONS="${2:-16}"
RATE="${RATE:-1000}"
OFFERED_CONNECTIONS="${OFFERED_CONNECTIONS:-200}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK="$(mktemp -d)"
# The daemon may be finishing a job's push into the wiki: wait for it to exit
# before removing its files.
trap 'kill "${DAEMON_PID:-}" "${FAKE_PID:-}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"' EXIT

if ! command -v wrk >/dev/null; then
    echo "installing wrk (Debian package)" >&2
    (apt-get update -qq && apt-get install -y -qq wrk) >/dev/null
fi

# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
teammem_bin

# A local source with 3,000 commits and an initialised wiki.
git init -q -b main "$WORK/src"
git -C "$WORK/src" -c user.name=b -c user.email=b@example.org commit -q --allow-empty -m root
python3 - "$WORK/src" <<'PY'
import subprocess, sys
repo = sys.argv[1]
parent = subprocess.check_output(["git", "-C", repo, "rev-parse", "HEAD"]).decode().strip()
lines = []
for i in range(3000):
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
# The wiki: a bare repository whose first commit holds Home.md, so the worker
# runs the jobs (beside the ingest, as in production) instead of failing each.
bash "$ROOT/bench/seed-wiki.sh" "$WORK/wiki.git"
git -C "$WORK/src" rev-list --reverse main > "$WORK/shas.txt"

# The GitHub source: the same history, served by the fake; an App key for it.
openssl genrsa -out "$WORK/app.pem" 2048 2>/dev/null
chmod 600 "$WORK/app.pem"

SECRET="bench-secret-$(od -An -tx8 -N16 /dev/urandom | tr -d ' \n')"
export TEAMMEM_BENCH_SECRET="$SECRET"
PORT="$(bash "$ROOT/bench/listen-port.sh")"
GH_PORT=$((PORT + 1))
cat > "$WORK/teammem.toml" <<TOML
[server]
listen = "127.0.0.1:$PORT"
data_dir = "$WORK/data"

[github]
api_url = "http://127.0.0.1:$GH_PORT"
git_url = "http://127.0.0.1:$GH_PORT"
app_id = 1
private_key = { file = "$WORK/app.pem" }

[[sources]]
repository = "bench/gh"
webhook_secret_env = "TEAMMEM_BENCH_SECRET"

[[sources]]
repository = "bench/app"
local_path = "$WORK/src"
local_wiki_path = "$WORK/wiki.git"
webhook_secret_env = "TEAMMEM_BENCH_SECRET"

[queue]
workers = 1
TOML

# Pre-signed requests: distinct ranges (before, after) of 1..20 commits, for
# the local source (alternately into the saturation and the offered-load
# file, so no run replays another's dispatches); for the GitHub source each
# with its own run, whose head is push_after (the fake answers the run
# lookups from runs.txt).
python3 - "$WORK" "$SECRET" <<'PY'
import hashlib, hmac, json, sys, uuid
work, secret = sys.argv[1], sys.argv[2].encode()
shas = open(f"{work}/shas.txt").read().split()
local = [open(f"{work}/requests.txt", "w"), open(f"{work}/requests-offered.txt", "w")]
github = open(f"{work}/requests-github.txt", "w")
runs = open(f"{work}/runs.txt", "w")
n = 0
for span in range(1, 21):
    for i in range(0, len(shas) - span):
        n += 1
        for source, out, run in (("bench/app", local[n % 2], None), ("bench/gh", github, n)):
            dispatch = {"source_repository": source, "kind": "range",
                        "push_before": shas[i], "push_after": shas[i + span]}
            if run is not None:
                dispatch.update(source_run_id=run, source_run_attempt=1)
                runs.write(f"{run} {shas[i + span]}\n")
            body = json.dumps(dispatch, separators=(",", ":"))
            sig = "sha256=" + hmac.new(secret, body.encode(), hashlib.sha256).hexdigest()
            out.write(f"{sig}\t{uuid.uuid4()}\t{body}\n")
print(f"{n} distinct signed dispatches prepared per source", file=sys.stderr)
PY


cat > "$WORK/dispatch.lua" <<'LUA'
-- Each wrk thread sends every other request of the file (thread k: k, k+2,
-- ...), so no two threads send the same dispatch; answers other than 202
-- (a replay would be 200) are counted and printed.
local reqs = {}
local sent = 0
init = function(args)
  local file = io.open(args[1], "r")
  for line in file:lines() do
    local sig, del, body = line:match("^([^\t]+)\t([^\t]+)\t(.*)$")
    reqs[#reqs + 1] = {sig = sig, del = del, body = body}
  end
  file:close()
end
-- THINK_MS > 0: an exponential pause of that mean before each dispatch, each
-- thread with its own random sequence.
local think = tonumber(os.getenv("THINK_MS") or "0")
delay = function()
  if think <= 0 then return 0 end
  if not seeded then math.randomseed(7919 * (index + 1)); seeded = true end
  return math.floor(-think * math.log(1 - math.random()) + 0.5)
end
local threads = {}
local stride = tonumber(os.getenv("WRK_THREADS"))
setup = function(thread)
  thread:set("index", #threads)
  thread:set("not_accepted", 0)
  table.insert(threads, thread)
end
request = function()
  local r = reqs[((index + sent * stride) % #reqs) + 1]
  sent = sent + 1
  return wrk.format("POST", "/v1/dispatch", {
    ["Content-Type"] = "application/json",
    ["X-Hub-Signature-256"] = r.sig,
    ["X-TeamMem-Delivery"] = r.del,
  }, r.body)
end
response = function(status)
  if status ~= 202 then not_accepted = not_accepted + 1 end
end
done = function()
  local total = 0
  for _, thread in ipairs(threads) do total = total + thread:get("not_accepted") end
  io.write(string.format("answers other than 202 Accepted: %d\n", total))
end
LUA

python3 "$ROOT/bench/ingest/fake_github.py" "$GH_PORT" bench/gh "$WORK/shas.txt" "$WORK/runs.txt" &
FAKE_PID=$!
"$BIN" serve --config "$WORK/teammem.toml" > "$WORK/daemon.log" 2>&1 &
DAEMON_PID=$!
wait_healthy "$PORT" "$WORK/daemon.log"
echo "daemon RSS idle: $(awk '/VmRSS/ {print $2 " " $3}' /proc/$DAEMON_PID/status)"

# The machine's CPU counters (/proc/stat, in clock ticks): busy (user, nice,
# system, irq, softirq), stolen by the hypervisor, and idle with iowait; and
# the daemon's own CPU time with that of its reaped job processes.
host_cpu() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8, $9, $5 + $6}' /proc/stat; }
daemon_cpu() { awk '{print $14 + $15 + $16 + $17}' "/proc/$DAEMON_PID/stat"; }
load() { # NAME REQUESTS_FILE CONNECTIONS THINK_MS
    echo "== $1 ($3 connections$([ "$4" -gt 0 ] && echo ", ${4} ms mean think time"))"
    local host_before daemon_before
    host_before="$(host_cpu)"
    daemon_before="$(daemon_cpu)"
    WRK_THREADS=2 THINK_MS="$4" wrk -t2 -c"$3" -d"${DURATION}s" --latency -s "$WORK/dispatch.lua" \
        "http://127.0.0.1:$PORT" -- "$2" | tee "$WORK/wrk-$1.txt"
    echo "daemon RSS after $1: $(awk '/VmRSS/ {print $2 " " $3}' /proc/$DAEMON_PID/status), peak $(awk '/VmHWM/ {print $2 " " $3}' /proc/$DAEMON_PID/status)"
    # Stolen time is CPU the hypervisor gave to other guests while this one
    # had work: on a shared host the latency tail follows it (see bench/README.md).
    python3 - "$host_before" "$(host_cpu)" "$daemon_before" "$(daemon_cpu)" \
        "$(getconf CLK_TCK)" "$WORK/wrk-$1.txt" <<'PY' | tee -a "$WORK/wrk-$1.txt"
import re, sys
before, after = [int(x) for x in sys.argv[1].split()], [int(x) for x in sys.argv[2].split()]
busy, stolen, idle = (b - a for a, b in zip(before, after))
total = max(busy + stolen + idle, 1)
daemon_ms = (int(sys.argv[4]) - int(sys.argv[3])) * 1000 / int(sys.argv[5])
sent = re.search(r"(\d+) requests in", open(sys.argv[6]).read())
per = f"{daemon_ms / int(sent.group(1)):.2f} ms per dispatch" if sent and int(sent.group(1)) else "no dispatches"
print(f"host CPU during the run: {100 * busy / total:.0f}% busy, {100 * stolen / total:.1f}% stolen by the hypervisor")
print(f"daemon CPU (with its job processes): {per}")
PY
}
# Each connection offers one dispatch per (think time + answer) ms; 8 ms is
# about the answer time at the target rate. The offered-load run goes first,
# on a daemon with an empty queue, so it measures that rate alone (not the
# backlog the saturation run leaves).
THINK=$(( OFFERED_CONNECTIONS * 1000 / RATE - 8 ))
[ "$THINK" -ge 1 ] || { echo "RATE too high for $OFFERED_CONNECTIONS connections" >&2; exit 2; }
load local-forge-offered "$WORK/requests-offered.txt" "$OFFERED_CONNECTIONS" "$THINK"
# The daemon's own view of that run (its histograms start empty): the time it
# took to answer dispatches, its queue's group commits and the WAL syncs after
# them.
curl -fsS "http://127.0.0.1:$PORT/metrics" > "$WORK/metrics-offered.txt"
python3 - "$WORK/metrics-offered.txt" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
def quantiles(name, labels=""):
    buckets = []
    for le, n in re.findall(re.escape(name) + r'_bucket\{' + re.escape(labels) + r'le="([^"]+)"\} (\d+)', text):
        buckets.append((float(le), int(n)))
    total = buckets[-1][1] if buckets else 0
    if not total:
        return "none"
    out = []
    for q in (0.5, 0.99):
        rank, lower, below = q * total, 0.0, 0
        for upper, n in buckets:
            if n >= rank:
                if upper == float("inf"):
                    out.append(f"p{int(q * 100)} > {lower * 1000:g} ms")
                else:
                    share = (rank - below) / max(n - below, 1)
                    out.append(f"p{int(q * 100)} ~{(lower + (upper - lower) * share) * 1000:.1f} ms")
                break
            lower, below = upper, n
    within = dict(buckets).get(0.02, 0)
    return f"{total} observed, {', '.join(out)}, {100 * within / total:.2f}% within 20 ms"
print("daemon-side dispatch answer time:", quantiles("teammem_ingest_request_seconds", 'route="dispatch",'))
print("daemon-side queue commits (BEGIN..COMMIT; the WAL sync follows, beside the next batch):", quantiles("teammem_queue_commit_seconds"))
print("daemon-side WAL syncs (each answers the batches committed before it):", quantiles("teammem_queue_sync_seconds"))
print("daemon-side WAL checkpoints by the writer (between batches):", quantiles("teammem_queue_checkpoint_seconds", 'connection="writer",'))
PY
# Under sustained load the WAL must keep starting over (see
# src/queue/group_commit.rs); its file size is its high-water mark.
echo "queue WAL file after the offered-load run: $(( $(stat -c %s "$WORK/data/teammem.db-wal") / 1048576 )) MiB"
load local-forge-saturation "$WORK/requests.txt" "$CONNECTIONS" 0
load github-fake-saturation "$WORK/requests-github.txt" "$CONNECTIONS" 0
awk -v rate="$RATE" '
    /Requests\/sec/ { reached = $2 }
    / 99%/ { p99 = $2 }
    /stolen by the hypervisor/ { stolen = $(NF - 4) }
    END { printf "offered load %d/s: reached %.0f/s, p99 %s, host CPU stolen %s (targets: >= 1000/s, p99 < 20 ms)\n", rate, reached, p99, stolen }
' "$WORK/wrk-local-forge-offered.txt"

echo "jobs stored: $(python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('select count(*) from jobs').fetchone()[0])" "$WORK/data/teammem.db")"
if grep -q "Non-2xx" "$WORK"/wrk-*.txt; then
    grep -l "Non-2xx" "$WORK"/wrk-*.txt >&2
    echo "ERRORS: some dispatches were refused; the daemon's log says why:" >&2
    grep -m5 'refused' "$WORK/daemon.log" >&2 || true
    exit 1
fi
if grep -q "answers other than 202 Accepted: [1-9]" "$WORK"/wrk-*.txt; then
    echo "ERRORS: some dispatches were not accepted as new (a replayed request?)" >&2
    exit 1
fi
