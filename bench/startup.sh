#!/usr/bin/env bash
# bench/startup.sh — start-up time and idle memory of `teammem serve`: the time
# from spawning the process to the first `200` from `/readyz` (database opened,
# migrations applied, workers running), on a fresh data directory (first start:
# creates and migrates the database) and on the same directory again (restart),
# and the daemon's resident memory (VmRSS) once it has sat idle for 2 s.
# Targets: ready < 200 ms, idle RSS < 30 MB. Prints the median of RUNS starts.
#
# Invariant: each start is a separate process with one local-forge source, so
# the numbers include configuration parsing, SQLite, the worker pool and the
# HTTP listener; readiness is polled every millisecond, so the figure is at
# most about 1 ms late. Run it on a quiet machine, with a release build.
#
# Usage: [TEAMMEM_BIN=path] bench/startup.sh [RUNS]
set -euo pipefail

RUNS="${1:-7}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
teammem_bin

# A local source and wiki: the daemon opens neither at start, but the
# configuration is the realistic shape.
git init -q --bare -b main "$WORK/src.git"
git init -q --bare -b master "$WORK/wiki.git"

python3 - "$BIN" "$WORK" "$RUNS" <<'PY'
import os, signal, socket, statistics, subprocess, sys, time, urllib.request

binary, work, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

def config(data_dir, port):
    path = os.path.join(work, "teammem.toml")
    with open(path, "w") as f:
        f.write(f'''[server]
listen = "127.0.0.1:{port}"
data_dir = "{data_dir}"

[[sources]]
repository = "bench/app"
local_path = "{work}/src.git"
local_wiki_path = "{work}/wiki.git"
webhook_secret_env = "TEAMMEM_BENCH_SECRET"
''')
    return path

def ready(port):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as r:
            return r.status == 200
    except Exception:
        return False

def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0

def start(data_dir, measure_rss):
    port = free_port()
    path = config(data_dir, port)
    env = dict(os.environ, TEAMMEM_BENCH_SECRET="bench-secret-" + "0" * 32, TEAMMEM_LOG="warn")
    began = time.perf_counter()
    proc = subprocess.Popen([binary, "serve", "--config", path], env=env,
                            stdout=subprocess.DEVNULL)
    try:
        while not ready(port):
            if proc.poll() is not None:
                sys.exit(f"teammem serve exited with {proc.returncode} before it was ready")
            if time.perf_counter() - began > 30:
                sys.exit("teammem serve was not ready within 30 s")
            time.sleep(0.001)
        elapsed_ms = (time.perf_counter() - began) * 1000
        rss = None
        if measure_rss:
            time.sleep(2)  # idle: no requests, no jobs
            rss = rss_kib(proc.pid) / 1024
        return elapsed_ms, rss
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)

first, restart, idle = [], [], []
for i in range(runs):
    data_dir = os.path.join(work, f"data-{i}")
    ms, _ = start(data_dir, False)
    first.append(ms)
    ms, rss = start(data_dir, True)
    restart.append(ms)
    idle.append(rss)

def verdict(ok):
    return "met" if ok else "NOT MET"

med_first, med_restart, med_rss = (statistics.median(x) for x in (first, restart, idle))
print(f"binary: {binary}")
print(f"runs: {runs} (median; min..max)")
print(f"ready, first start (new database + migrations): {med_first:.1f} ms "
      f"({min(first):.1f}..{max(first):.1f}); target < 200 ms: {verdict(med_first < 200)}")
print(f"ready, restart (existing database):             {med_restart:.1f} ms "
      f"({min(restart):.1f}..{max(restart):.1f}); target < 200 ms: {verdict(med_restart < 200)}")
print(f"idle RSS after 2 s:                             {med_rss:.1f} MB "
      f"({min(idle):.1f}..{max(idle):.1f}); target < 30 MB: {verdict(med_rss < 30)}")
PY
