"""Drives `teammem mcp` over stdio on the demo's wiki: for each source file,
one get_context call about it (warm after the first), and what reading the
wiki pages get_context draws on (whole, as get_wiki_page returns them)
would cost instead. Tokens are estimated as bytes / 4, the same estimate
get_context budgets with. Prints one line per file, the totals and their
ratio, and get_context's warm p50/p99 (client side)."""

import json
import subprocess
import sys
import time

binary, config, repository = sys.argv[1], sys.argv[2], sys.argv[3]
files = sys.argv[4:]

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


def tool(name, arguments):
    envelope = call("tools/call", {"name": name, "arguments": arguments})["result"]["structuredContent"]
    if not envelope["success"]:
        sys.exit("%s failed: %s" % (name, json.dumps(envelope["error"])))
    return envelope["result"]


def tokens(value):
    return (len(json.dumps(value, ensure_ascii=False).encode()) + 3) // 4


call("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}})
proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
proc.stdin.flush()

page_tokens = {}
total_context = total_pages = 0
times = []
print("%-28s %8s %8s %6s" % ("file", "context", "pages", "items"))
for path in files:
    started = time.perf_counter()
    answer = tool("get_context", {"repository": repository, "paths": [path]})
    times.append((time.perf_counter() - started) * 1000)
    pages = set(answer["left_out"]["read_more"])
    for item in answer["items"]:
        pages.update(item.get("pages", [item.get("page")]))
    pages.discard(None)
    whole = 0
    for page in sorted(pages):
        if page not in page_tokens:
            page_tokens[page] = (len(tool("get_wiki_page", {"repository": repository, "path": page})["content"].encode()) + 3) // 4
        whole += page_tokens[page]
    context = tokens(answer)
    total_context += context
    total_pages += whole
    print("%-28s %8d %8d %6d" % (path, context, whole, len(answer["items"])))

proc.stdin.close()
proc.wait()
warm = sorted(times[1:]) or times
print("total tokens: get_context %d, the pages it draws on read whole %d: ratio %.2f (1 : %.1f)"
      % (total_context, total_pages, total_context / max(total_pages, 1), total_pages / max(total_context, 1)))
print("get_context first call %.1f ms (index built), warm p50 %.1f ms, p99 %.1f ms over %d calls"
      % (times[0], warm[len(warm) // 2], warm[min(len(warm) - 1, int(len(warm) * 0.99))], len(warm)))
