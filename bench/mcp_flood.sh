#!/usr/bin/env bash
# bench/mcp_flood.sh — dispatch acceptance while a token holder attacks /mcp
# (issue 34, finding 4). Against a running `teammem serve` on loopback with
# one local-forge source: the answer time of signed dispatches, one at a
# time, first with the daemon idle, then while a read-only token for that one
# repository tries to hold STREAMS event streams on /mcp and floods
# `initialize` (64 KiB of client name each) from FLOOD connections at
# FLOOD_RATE requests/s together (50x the token's allowance by default; 0:
# as fast as they go, a closed loop whose own CPU then competes with the
# daemon's on the same cores). Prints idle p50, flood p50 and their ratio (target: within 2x), the
# p99s, what the attacker got (streams held, 429s and 503s) and the share of
# the machine's CPU the hypervisor stole in each phase.
#
# Invariant: every dispatch is a distinct, correctly signed range that the
# daemon verifies and enqueues (202), in both phases; the attacker runs in
# its own process, so the measuring process is not slowed by it beyond the
# CPU both share with the daemon (the same 2 cores, as an attacker on the
# host would). ATTACKER_NICE=19 runs the attacker at the lowest CPU priority,
# as an attacker on another machine would be: its requests still arrive as
# fast as it can make them, but its own CPU no longer comes out of the
# daemon's share, so the ratio shows what the daemon does with a flood.
#
# Usage: [TEAMMEM_BIN=path] [STREAMS=100] [FLOOD=4] [FLOOD_RATE=1000]
#        [ATTACKER_NICE=0] bench/mcp_flood.sh [DISPATCHES]
set -euo pipefail

DISPATCHES="${1:-300}"
STREAMS="${STREAMS:-100}"
FLOOD="${FLOOD:-4}"
FLOOD_RATE="${FLOOD_RATE:-1000}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK="$(mktemp -d)"
trap 'kill "${DAEMON_PID:-}" "${ATTACK_PID:-}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"' EXIT

# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
teammem_bin

# A local source with 400 commits (enough distinct ranges) and a wiki.
git init -q -b main "$WORK/src"
git -C "$WORK/src" -c user.name=b -c user.email=b@example.org commit -q --allow-empty -m root
python3 - "$WORK/src" <<'PY'
import subprocess, sys
repo = sys.argv[1]
parent = subprocess.check_output(["git", "-C", repo, "rev-parse", "HEAD"]).decode().strip()
lines = []
for i in range(400):
    msg = f"commit {i} (#{i + 1})"
    lines.append(f"commit refs/heads/main\ncommitter B <b@example.org> {1767225600 + i} +0000\ndata {len(msg)}\n{msg}\n")
    if i == 0:
        lines.append(f"from {parent}\n")
    body = f"{i}\n"
    lines.append(f"M 100644 inline f.txt\ndata {len(body)}\n{body}\n")
subprocess.run(["git", "-C", repo, "fast-import", "--quiet", "--force"], input="".join(lines).encode(), check=True)
PY
git -C "$WORK/src" commit-graph write --reachable
git -C "$WORK/src" rev-list --reverse main > "$WORK/shas.txt"
bash "$ROOT/bench/seed-wiki.sh" "$WORK/wiki.git"

SECRET="$(od -An -tx8 -N32 /dev/urandom | tr -d ' \n')"
export TEAMMEM_BENCH_SECRET="$SECRET"
PORT="$(bash "$ROOT/bench/listen-port.sh")"
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
READER="$("$BIN" tokens create --name reader --repository bench/app --config "$WORK/teammem.toml" | tail -n1)"

"$BIN" serve --config "$WORK/teammem.toml" > "$WORK/daemon.log" 2>&1 &
DAEMON_PID=$!
wait_healthy "$PORT" "$WORK/daemon.log"

# The attacker: one session, STREAMS event streams on it (each its own
# connection, held until killed), and FLOOD connections posting initialize
# in a loop. Writes what it got to attack.txt as it goes.
cat > "$WORK/attack.py" <<'PY'
import json, socket, sys, threading, time
port, token, streams, flood, out, rate = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], float(sys.argv[6])
counts = {"held": 0, "refused_429": 0, "refused_503": 0, "other": 0, "initialize_sent": 0}
lock = threading.Lock()

def count(key, n=1):
    with lock:
        counts[key] += n

def request(method, body=b"", session=None, keep=False):
    s = socket.create_connection(("127.0.0.1", port))
    head = [f"{method} /mcp HTTP/1.1", "Host: 127.0.0.1", f"Authorization: Bearer {token}",
            "Accept: application/json, text/event-stream", "Content-Type: application/json",
            f"Content-Length: {len(body)}"]
    if session:
        head += [f"Mcp-Session-Id: {session}", "Mcp-Protocol-Version: 2025-11-25"]
    s.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + body)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    status = int(data.split(b" ", 2)[1]) if data else 0
    if not keep:
        s.close()
    return status, data, s

init = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}).encode()
status, data, _ = request("POST", init)
session = next(l.split(b":", 1)[1].strip().decode() for l in data.split(b"\r\n") if l.lower().startswith(b"mcp-session-id:"))
request("POST", json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode(), session)

held = []
def hold():
    status, _, s = request("GET", session=session, keep=True)
    if status == 200:
        count("held")
        held.append(s)
    else:
        count({429: "refused_429", 503: "refused_503"}.get(status, "other"))
        s.close()
for t in [threading.Thread(target=hold) for _ in range(streams)]:
    t.start()

huge = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x" * 65536, "version": "1"}}}).encode()
def flood_loop():
    # Open loop: each thread sends on its own schedule, whatever the answers take.
    interval = flood / rate if rate > 0 else 0
    due = time.monotonic()
    while True:
        if interval:
            due += interval
            pause = due - time.monotonic()
            if pause > 0:
                time.sleep(pause)
        status, _, _ = request("POST", huge)
        count("initialize_sent")
        count({200: "other", 429: "refused_429", 503: "refused_503"}.get(status, "other"))
for _ in range(flood):
    threading.Thread(target=flood_loop, daemon=True).start()
while True:
    time.sleep(0.5)
    with lock:
        open(out, "w").write(json.dumps(counts))
PY

# Measures DISPATCHES sequential dispatches (distinct ranges from OFFSET on)
# on one keep-alive connection; prints "p50_ms p99_ms non_202".
cat > "$WORK/measure.py" <<'PY'
import hashlib, hmac, http.client, json, sys, time, uuid
port, secret, shas_file, n, offset = int(sys.argv[1]), sys.argv[2].encode(), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
shas = open(shas_file).read().split()
ranges = [(i, j) for span in range(1, 40) for i in range(len(shas) - span) for j in [i + span]]
conn = http.client.HTTPConnection("127.0.0.1", port)
took, bad = [], 0
for k in range(n):
    i, j = ranges[offset + k]
    body = json.dumps({"source_repository": "bench/app", "kind": "range",
                       "push_before": shas[i], "push_after": shas[j]}, separators=(",", ":")).encode()
    sig = "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
    started = time.perf_counter()
    conn.request("POST", "/v1/dispatch", body, {"Content-Type": "application/json",
                 "X-Hub-Signature-256": sig, "X-TeamMem-Delivery": str(uuid.uuid4())})
    response = conn.getresponse()
    response.read()
    took.append(time.perf_counter() - started)
    bad += response.status != 202
took.sort()
print(f"{took[len(took) // 2] * 1000:.2f} {took[int(len(took) * 0.99)] * 1000:.2f} {bad}")
PY

host_cpu() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8, $9, $5 + $6}' /proc/stat; }
stolen() { # BEFORE AFTER: the share of CPU time stolen between two host_cpu samples
    python3 -c 'import sys
b, a = [int(x) for x in sys.argv[1].split()], [int(x) for x in sys.argv[2].split()]
d = [y - x for x, y in zip(b, a)]
print(f"{100 * d[1] / max(sum(d), 1):.1f}")' "$1" "$2"
}

echo "== idle: $DISPATCHES dispatches, one at a time"
BEFORE="$(host_cpu)"
read -r IDLE_P50 IDLE_P99 IDLE_BAD < <(python3 "$WORK/measure.py" "$PORT" "$SECRET" "$WORK/shas.txt" "$DISPATCHES" 0)
IDLE_STEAL="$(stolen "$BEFORE" "$(host_cpu)")"
echo "p50 $IDLE_P50 ms, p99 $IDLE_P99 ms, answers other than 202: $IDLE_BAD, CPU stolen $IDLE_STEAL%"

echo "== flood: the reader tries to hold $STREAMS streams and floods initialize from $FLOOD connections at ${FLOOD_RATE}/s (0: unpaced)"
nice -n "${ATTACKER_NICE:-0}" python3 "$WORK/attack.py" "$PORT" "$READER" "$STREAMS" "$FLOOD" "$WORK/attack.txt" "$FLOOD_RATE" &
ATTACK_PID=$!
# Let the attacker take what it can before measuring.
for _ in $(seq 1 100); do [ -s "$WORK/attack.txt" ] && break; sleep 0.1; done
BEFORE="$(host_cpu)"
SENT_BEFORE="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["initialize_sent"])' "$WORK/attack.txt")"
FLOOD_START="$(date +%s.%N)"
read -r FLOOD_P50 FLOOD_P99 FLOOD_BAD < <(python3 "$WORK/measure.py" "$PORT" "$SECRET" "$WORK/shas.txt" "$DISPATCHES" "$DISPATCHES")
FLOOD_STEAL="$(stolen "$BEFORE" "$(host_cpu)")"
echo "p50 $FLOOD_P50 ms, p99 $FLOOD_P99 ms, answers other than 202: $FLOOD_BAD, CPU stolen $FLOOD_STEAL%"
sleep 0.6  # the attacker writes its counts every half second
echo "attacker: $(cat "$WORK/attack.txt"); initialize sent at $(python3 -c 'import json,sys; print(round((json.load(open(sys.argv[1]))["initialize_sent"] - int(sys.argv[2])) / (float(sys.argv[4]) - float(sys.argv[3]))))' "$WORK/attack.txt" "$SENT_BEFORE" "$FLOOD_START" "$(date +%s.%N)")/s while measured (approximately)"
kill "$ATTACK_PID" 2>/dev/null || true
wait "$ATTACK_PID" 2>/dev/null || true
echo "healthz after: $(curl -fsS --max-time 5 "http://127.0.0.1:$PORT/healthz")"
python3 - "$WORK/data/teammem.db" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
rows, size = db.execute("select count(*), coalesce(sum(length(session_sha256) + length(principal) + length(protocol_version) + length(client_name) + length(client_version)), 0) from mcp_sessions").fetchone()
print(f"mcp_sessions after the flood: {rows} rows, {size} bytes stored")
PY
RATIO="$(python3 -c "print(f'{$FLOOD_P50 / $IDLE_P50:.2f}')")"
echo "dispatch p50 idle $IDLE_P50 ms, under the /mcp flood $FLOOD_P50 ms: ${RATIO}x (target: within 2x); CPU stolen $IDLE_STEAL% / $FLOOD_STEAL%"
if [ "$IDLE_BAD" != 0 ] || [ "$FLOOD_BAD" != 0 ]; then
    echo "ERRORS: some dispatches were not accepted; the daemon's log says why:" >&2
    grep -m5 'refused' "$WORK/daemon.log" >&2 || true
    exit 1
fi
