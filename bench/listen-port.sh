#!/usr/bin/env bash
# bench/listen-port.sh — prints a random loopback port for a benchmark's
# daemon (and the one after it, for a fake beside it), below the kernel's
# range for the local ends of outgoing connections: a port in that range can
# be held by one of them (wrk's, say), and the daemon then cannot listen
# there. Used by bench/e2e.sh and bench/ingest.sh.
#
# Usage: PORT="$(bench/listen-port.sh)"
set -euo pipefail
low="$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)"
echo $((low - 12000 + RANDOM % 10000))
