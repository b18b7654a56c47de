"""The economy's tokens counted a second way: in tiktoken's o200k_base and
cl100k_base encodings, by the count_tokens example
(bench/context/count_tokens.rs, which bench/context.sh builds and names in
COUNT_TOKENS), summed under the names of what an agent would read ("a",
"b", "c"). get_context budgets with an estimate (bytes / 4) that errs low on
hex shas, dates and numbers, which answers hold more of than source does, so
the ratios are printed counted both ways. Without COUNT_TOKENS nothing is
counted and report() says so. Python 3 stdlib only."""

import json
import os
import subprocess

from mcp_client import compact, tokens_of_text

_process = None
_sums = {}


def count(text):
    """(estimate, o200k_base, cl100k_base) tokens of text; the last two are 0
    without COUNT_TOKENS."""
    global _process
    binary = os.environ.get("COUNT_TOKENS")
    if not binary:
        return tokens_of_text(text), 0, 0
    if _process is None:
        _process = subprocess.Popen([binary], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    _process.stdin.write((json.dumps(text) + "\n").encode())
    _process.stdin.flush()
    o200k, cl100k = map(int, _process.stdout.readline().split())
    return tokens_of_text(text), o200k, cl100k


def of_value(value):
    """count() of a JSON value as a tool result carries it."""
    return count(compact(value))


def add(name, counts):
    """Adds counts (from count() or of_value()) to what name sums; returns the estimate."""
    total = _sums.setdefault(name, [0, 0, 0])
    for at, value in enumerate(counts):
        total[at] += value
    return counts[0]


def report(tasks, a="a", others=("b", "c")):
    """Prints the sums a task in both encodings, how far the estimate errs on
    each, and a's ratio to each of others in o200k_base."""
    if not os.environ.get("COUNT_TOKENS"):
        print("  BPE counts: none (COUNT_TOKENS names no tokenizer; bench/context.sh builds one)")
        return
    parts = ["%s %.0f / %.0f (estimate %+.0f %%)" % (name, o / tasks, c / tasks, 100 * (e - o) / max(1, o))
             for name, (e, o, c) in sorted(_sums.items())]
    ratios = ["(%s)/(%s) = 1/%.1f" % (a, other, _sums[other][1] / max(1, _sums[a][1])) for other in others if other in _sums]
    print("  counted in BPE tokens a task (o200k_base / cl100k_base): %s; ratios in o200k_base: %s" % ("; ".join(parts), ", ".join(ratios)))
