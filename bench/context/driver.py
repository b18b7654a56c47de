"""The latency phases of bench/context.sh, through the real `teammem mcp`
(stdio):

  driver.py context BIN CONFIG REPOSITORY LABEL ITERATIONS PATH...
      one get_context call naming the PATHs (the cold call builds the
      commit's index), then ITERATIONS warm ones; prints cold, warm p50/p99
      (client side) against the targets, what the answer held and whether
      the wiki was larger than the index budget (truncated).
  driver.py org BIN CONFIG ITERATIONS
      search_wiki without repository (every configured wiki) cycling through
      a few queries: the cold call (every wiki's index built), warm p50/p99
      against the target, and how many wikis answered.

Exits non-zero when teammem answers with an error; a missed target is
printed, not an exit."""

import sys

from mcp_client import Mcp, percentile, tokens


def context(binary, config, repository, label, iterations, paths):
    mcp = Mcp(binary, config)
    arguments = {"repository": repository, "paths": paths}
    # Timed as agents call it (the default text form); described by the
    # same answer as JSON.
    _, cold = mcp.timed("get_context", arguments)
    times = [mcp.timed("get_context", arguments)[1] for _ in range(iterations)]
    answer = mcp.tool("get_context", dict(arguments, format="json"))
    mcp.close()
    known = sum(1 for p in answer["paths"] if p["kind"] != "unknown")
    kinds = {}
    for item in answer["items"]:
        kinds[item["kind"]] = kinds.get(item["kind"], 0) + 1
    p50, p99 = percentile(times, 0.5), percentile(times, 0.99)
    print("get_context on %s, %d paths (%d known to the wiki): cold %.1f ms (index build), warm p50 %.2f ms, p99 %.2f ms over %d calls"
          % (label, len(paths), known, cold, p50, p99, iterations))
    print("  answer: %d items %s, %d tokens (estimate: JSON bytes / 4), %d left out, truncated %s"
          % (len(answer["items"]), dict(sorted(kinds.items())), tokens(answer), answer["left_out"]["items"],
             str(answer.get("truncated", False)).lower()))
    print("  targets p50 < 10 ms: %s, p99 < 50 ms: %s" % ("met" if p50 < 10 else "MISSED", "met" if p99 < 50 else "MISSED"))


QUERIES = ["retry export queue full", "who knows svc0042", "export batch size", "make test", "svc0007/mod_03.py backoff"]


def org(binary, config, iterations):
    mcp = Mcp(binary, config)
    first, cold = mcp.timed("search_wiki", {"query": QUERIES[0]})
    times = []
    for n in range(iterations):
        times.append(mcp.timed("search_wiki", {"query": QUERIES[n % len(QUERIES)]})[1])
    mcp.close()
    p50, p99 = percentile(times, 0.5), percentile(times, 0.99)
    repositories = {hit.get("repository") for hit in first["hits"]}
    print("search_wiki org scope over %d wikis (%d unavailable, %d left out): cold %.0f ms (every index built), warm p50 %.1f ms, p99 %.1f ms over %d calls; first query's %d hits from %d wikis"
          % (len(first["wikis"]), len(first.get("unavailable", [])), len(first.get("wikis_left_out", [])), cold, p50, p99,
             iterations, len(first["hits"]), len(repositories)))
    print("  target p99 < 100 ms: %s" % ("met" if p99 < 100 else "MISSED"))


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode == "context" and len(sys.argv) >= 8:
        context(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6]), sys.argv[7:])
    elif mode == "org" and len(sys.argv) == 5:
        org(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        sys.exit("usage: driver.py context BIN CONFIG REPOSITORY LABEL ITERATIONS PATH... | driver.py org BIN CONFIG ITERATIONS")
