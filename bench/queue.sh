#!/usr/bin/env bash
# Queue benchmark (DESIGN §11, issue "Performance"): builds the bench crate in
# bench/queue/ in release mode and runs, in one run, teammem's queue against
# apalis-sqlite (one SQLite file each) and against apalis-postgres (one fresh
# database each on the same PostgreSQL server), then 1 vs 2 vs 3 teammem node
# processes on one database, printing jobs/s, claim latency, ratios and the
# nodes' correctness check. Both sides of a comparison get the same workload
# and settings (see bench/queue/src/main.rs).
#
# For the PostgreSQL phases it starts its own throwaway server: the Debian
# binaries under /usr/lib/postgresql/*/bin, initdb into a temp directory (as
# `postgres`, else `nobody`, when run as root), 127.0.0.1 on a free port,
# trust authentication, default settings (fsync on); stopped and removed on
# exit, failure or Ctrl-C. Then, on that server, the ceiling of a claim per
# free worker with no client in the way: pgbench runs teammem's completion
# and claim statements (bench/queue/pgbench/) as one transaction per job on
# one connection per worker for 10 s, then again with synchronous_commit=off
# (what the WAL flushes cost), and the enqueue rate that would match
# apalis-postgres end to end with claims at that ceiling. Prints the CPU
# stolen by the hypervisor during the run.
#
# Usage: bench/queue.sh [--backend sqlite|postgres|all] [--jobs N]
#        [--workers N] [--destinations N] [--normal-sync]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cargo build --release --quiet --manifest-path "$here/queue/Cargo.toml"
bench="$here/queue/target/release/teammem-queue-bench"

backend=all workers=4
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  if [ "${args[i]}" = --backend ]; then backend="${args[i + 1]:-}"; fi
  if [ "${args[i]}" = --workers ]; then workers="${args[i + 1]:-}"; fi
done

steal() { awk '/^cpu /{print $9}' /proc/stat; }
ticks() { awk '/^cpu /{s=0; for(i=2;i<=NF;i++) s+=$i; print s}' /proc/stat; }

pg_root='' pg_pid=''
stop_server() {
  if [ -n "$pg_pid" ]; then
    kill -INT "$pg_pid" 2>/dev/null || true # fast shutdown
    wait "$pg_pid" 2>/dev/null || true
    pg_pid=
  fi
  if [ -n "$pg_root" ]; then rm -rf "$pg_root"; pg_root=; fi
}
trap stop_server EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

url_args=()
if [ "$backend" != sqlite ]; then
  bin="$(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V | tail -n 1)"
  if [ -z "$bin" ] || [ ! -x "$bin/initdb" ] || [ ! -x "$bin/postgres" ]; then
    echo "bench/queue.sh: PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin; install them with \`apt-get install postgresql\`" >&2
    exit 1
  fi
  as=()
  pg_root="$(mktemp -d /tmp/teammem-queue-pg.XXXXXX)"
  if [ "$(id -u)" = 0 ]; then
    user=postgres
    id -u postgres >/dev/null 2>&1 || user=nobody
    chown "$user" "$pg_root"
    as=(setpriv --reuid="$user" --regid="$(id -g "$user")" --clear-groups --)
  fi
  port="$("$here/listen-port.sh")"
  role=bench
  "${as[@]}" env -i PATH=/usr/bin:/bin "$bin/initdb" --auth=trust --username="$role" \
    --no-locale --encoding=UTF8 --pgdata="$pg_root/data" >"$pg_root/initdb.log" 2>&1 ||
    { cat "$pg_root/initdb.log" >&2; exit 1; }
  "${as[@]}" env -i PATH=/usr/bin:/bin "$bin/postgres" -D "$pg_root/data" \
    -h 127.0.0.1 -p "$port" -k "$pg_root/data" -c logging_collector=off -c lc_messages=C \
    </dev/null >"$pg_root/server.log" 2>&1 &
  pg_pid=$!
  for _ in $(seq 1 300); do
    if grep -q "database system is ready to accept connections" "$pg_root/server.log"; then break; fi
    if ! kill -0 "$pg_pid" 2>/dev/null; then cat "$pg_root/server.log" >&2; exit 1; fi
    sleep 0.1
  done
  grep -q "database system is ready to accept connections" "$pg_root/server.log" ||
    { echo "bench/queue.sh: PostgreSQL did not start in 30 s:" >&2; cat "$pg_root/server.log" >&2; exit 1; }
  url_args=(--postgres "postgres://$role@127.0.0.1:$port/postgres")
fi

s0=$(steal); t0=$(ticks)
results="$(mktemp)"
"$bench" "$@" "${url_args[@]}" | tee "$results"
if [ "$backend" != sqlite ]; then
  psql=("$bin/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U "$role")
  # ceiling DATABASE [PGOPTIONS]: pgbench's claim+complete jobs/s on a fresh
  # DATABASE, or nothing when a client aborted (two claims of one destination
  # meeting at the unique index stop a pgbench client: no figure rather than
  # a low one; pgbench's output goes to stderr then).
  ceiling() {
    "${psql[@]}" -d postgres -c "CREATE DATABASE $1"
    "${psql[@]}" -d "$1" -f "$here/queue/pgbench/setup.sql"
    local out
    out="$(PGOPTIONS="${2:-}" "$bin/pgbench" -h 127.0.0.1 -p "$port" -U "$role" -n \
      -f "$here/queue/pgbench/cycle.sql" -D job=0 -c "$workers" -j 2 -T 10 "$1" 2>&1)" || true
    if grep -q "aborted" <<<"$out"; then echo "$out" >&2; return; fi
    sed -n 's/^tps = \([0-9]*\).*/\1/p' <<<"$out"
  }
  bound="$(ceiling ceiling)"
  unflushed="$(ceiling ceiling_async "-c synchronous_commit=off")"
  echo
  echo "ceiling of a claim per free worker on this server (pgbench, teammem's completion and claim statements, one transaction per job, $workers connections, no client): ${bound:-not measured} jobs/s claim+complete; with synchronous_commit=off (no wait for the WAL): ${unflushed:-not measured} jobs/s"
  # End to end is enqueue, then claim+complete: 1/(1/enqueue + 1/claim).
  # With claims at the bound, matching apalis-postgres end to end takes an
  # enqueue of 1/(1/apalis - 1/bound).
  apalis="$(awk '$1 == "apalis-postgres" && $2 == "enqueue" { print $3, $(NF-3) }' "$results")"
  if [ -n "$bound" ] && [ -n "$apalis" ]; then
    read -r apalis_enqueue apalis_end_to_end <<<"$apalis"
    awk -v bound="$bound" -v e2e="$apalis_end_to_end" -v push="$apalis_enqueue" 'BEGIN {
      if (bound <= e2e) { print "with claims at that bound, no enqueue rate reaches apalis-postgres end to end"; exit }
      need = 1 / (1 / e2e - 1 / bound)
      printf "with claims at that bound, 1x apalis-postgres end to end needs an enqueue of %.0f jobs/s (%.2fx apalis-postgres'"'"'s push)\n", need, need / push
    }'
  fi
fi
rm -f "$results"
s1=$(steal); t1=$(ticks)
echo
echo "conditions: $(nproc) cores, CPU steal $(( (s1 - s0) * 100 / (t1 - t0 + 1) ))% during the run, load average $(cut -d' ' -f1-3 /proc/loadavg)"
