"""Drives `teammem mcp` over stdio: initialize, one cold search_wiki, then
ITERATIONS warm ones cycling through QUERIES; prints p50/p99 in ms (client
side, request written to answer read) and the first hit of each query."""

import json
import subprocess
import sys
import time

binary, config, iterations = sys.argv[1], sys.argv[2], int(sys.argv[3])
QUERIES = ["component 42", "page 517", "notes revision", "component 96 line"]

proc = subprocess.Popen(
    [binary, "mcp", "--config", config],
    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
)
next_id = 0


def call(method, params):
    global next_id
    next_id += 1
    proc.stdin.write((json.dumps({"jsonrpc": "2.0", "id": next_id, "method": method, "params": params}) + "\n").encode())
    proc.stdin.flush()
    while True:
        line = proc.stdout.readline()
        if not line:
            sys.exit("teammem mcp closed its output")
        message = json.loads(line)
        if message.get("id") == next_id:
            return message


call("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}})
proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
proc.stdin.flush()


def search(query):
    answer = call("tools/call", {"name": "search_wiki", "arguments": {"repository": "bench/app", "query": query}})
    envelope = answer["result"].get("structuredContent") or json.loads(answer["result"]["content"][0]["text"])
    if not envelope.get("success"):
        sys.exit(f"search failed: {envelope}")
    return envelope["result"]


start = time.perf_counter()
search(QUERIES[0])
cold = (time.perf_counter() - start) * 1000
times = []
for n in range(iterations):
    start = time.perf_counter()
    search(QUERIES[n % len(QUERIES)])
    times.append((time.perf_counter() - start) * 1000)
times.sort()
p50 = times[len(times) // 2]
p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
for query in QUERIES:
    hits = search(query)["hits"]
    print(f"  {query!r}: first hit {hits[0]['path'] if hits else None}")
print(f"search_wiki on the 1,000-page wiki: cold {cold:.1f} ms (index build), warm p50 {p50:.2f} ms, p99 {p99:.2f} ms over {iterations} calls (target p50 < 5 ms)")
proc.stdin.close()
proc.wait(timeout=10)
