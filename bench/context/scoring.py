"""What the economy phase of bench/context.sh measures on each task, for
the generated source (economy.py) and a real one (real.py) alike: recall of
one get_context call at the default budget (its default text form, as an
agent reads it, parsed back by items_of_text) and at 16,000 tokens (JSON)
against a task's ground truth, and the tokens of (a) that call (and of the
JSON form's answer, beside it) and (b) search_wiki for each path plus
reading whole each page its hits name. Python 3 stdlib only.

A task's ground truth is {"prs": {number: (title, why)}, "purposes": {path:
text}, "stale": [(path, fact text)], "test": command or None}. The rules
(printed by report()):
- a PR counts when the answer names it by number and title, whole (a change
  item) or in brief (a line `#NUMBER TITLE` of earlier_changes, alone or
  followed by ` (AUTHOR, DATE)`): an agent then knows it exists and what it
  was; a title the answer cut (ending `…`) counts when the truth starts
  with it;
- its why counts apart, over the PRs with a description: the answer
  carries one (whole, or after ` — ` in a brief line) whose first 40
  characters are in the description (both with Markdown punctuation taken
  out, whitespace collapsed, lower case);
- a purpose counts when the answer's purpose item for that path is a
  non-empty start of the text the file states (code spans' backticks, a
  final `.` or `…` aside);
- a stale fact counts when the answer has it as a fact, `stale`, on that
  path; the test command when a `Test` how-to item holds it.
Titles compare with code spans' backticks taken out and whitespace
collapsed (get_context undoes the wiki's Markdown escapes)."""

import json
import os
import re

import bpe
from mcp_client import tokens

KINDS = ("pr", "why", "purpose", "stale", "test")


def norm(text):
    return " ".join(text.replace("`", "").split())


def loose(text):
    return " ".join(re.sub(r"[\\*_\[\]()<>#`|~]", " ", text).lower().split())


def why_carried(answer_why, truth_why):
    answer, truth = loose(answer_why.rstrip("…")), loose(truth_why)
    return answer != "" and truth != "" and answer[:40] in truth


def score(items, truth, found):
    """Adds to found[kind] = [found, total] what items hold of one task's truth."""
    whole = {item["number"]: item for item in items if item["kind"] == "change"}
    brief = [norm(line) for item in items if item["kind"] == "earlier_changes" for line in item["changes"]]
    for number, (title, why) in truth["prs"].items():
        found["pr"][1] += 1
        found["why"][1] += why.strip() != ""
        title = norm(title)
        named, carried = False, False
        if number in whole:
            shown = norm(whole[number]["title"])
            named = shown == title or (shown.endswith("…") and title.startswith(shown[:-1]))
            carried = named and why_carried(whole[number].get("why", ""), why)
        bare = "#%d %s" % (number, title)
        prefix = bare + " ("
        for line in brief:
            if line == bare or line.startswith(prefix):
                named = True
                rest = line[len(prefix):]
                at = rest.find(") — ")
                carried = carried or (at >= 0 and why_carried(rest[at + 4:], why))
        found["pr"][0] += named
        found["why"][0] += carried
    for path, text in truth["purposes"].items():
        found["purpose"][1] += 1
        want = norm(text).rstrip(".")
        found["purpose"][0] += any(
            item["kind"] == "purpose" and item["path"] == path
            and norm(item["text"]).rstrip("…").rstrip(".") != ""
            and want.startswith(norm(item["text"]).rstrip("…").rstrip("."))
            for item in items)
    for path, text in truth["stale"]:
        found["stale"][1] += 1
        found["stale"][0] += any(item["kind"] == "fact" and item["path"] == path and item["status"] == "stale"
                                 and item["text"].lstrip("- ") == text.replace("`", "") for item in items)
    if truth["test"]:
        found["test"][1] += 1
        found["test"][0] += any(item["kind"] == "how_to" and item["topic"] == "Test" and norm(truth["test"]) in norm(item["text"])
                                for item in items)


WHOLE = re.compile(r"^#(\d+) (.*) \(([^()]*), ([0-9-]*)\) merge [0-9a-f]+ \[[^\]]*\]( \(about [^)]*\))?$")
CITED = re.compile(r"^(purpose|fact) (.+?): (.*?)( \(about [^)]*\))? \[[^\]]*, cites [^\]]*?, (current|stale|re-anchored)[^\]]*\]$")
TEST = re.compile(r"^test \(.*?\): (.*?)( \(\+\d+ more on the page\))?( \(about [^)]*\))? \[[^\]]*\]$")


def items_of_text(text):
    """The items get_context's text form says, as its JSON form's objects
    (what score() reads): whole changes (a `#` line followed by indented
    lines), the brief lines under `earlier changes`, purposes, facts with
    their status, the test command."""
    lines = text.split("\n")
    items, brief = [], None
    for at, line in enumerate(lines):
        indented_next = at + 1 < len(lines) and lines[at + 1].startswith("  ")
        if line.startswith("#") and indented_next:
            brief = None
            whole = WHOLE.match(line)
            if not whole:
                raise SystemExit("a whole change line get_context's text form should not have: %r" % line)
            item = {"kind": "change", "number": int(whole.group(1)), "title": whole.group(2)}
            for rest in lines[at + 1:]:
                if not rest.startswith("  "):
                    break
                if rest.startswith("  why: "):
                    item["why"] = rest[len("  why: "):]
            items.append(item)
        elif line.startswith("#") and brief is not None:
            brief["changes"].append(line)
        elif line.startswith("earlier changes"):
            brief = {"kind": "earlier_changes", "changes": []}
            items.append(brief)
        elif not line.startswith("  "):
            brief = None
            cited, test = CITED.match(line), TEST.match(line)
            if cited:
                items.append({"kind": cited.group(1), "path": cited.group(2), "text": cited.group(3), "status": cited.group(5)})
            elif test:
                items.append({"kind": "how_to", "topic": "Test", "text": test.group(1)})
    return items


def recall(found, pr="pr"):
    """Recall over PRs (named, or with their why when pr="why"), purposes, stale facts and the test command."""
    counted = {k: v for k, v in found.items() if (k not in ("pr", "why") or k == pr) and v[1] > 0}
    hit, total = sum(f for f, _ in counted.values()), sum(t for _, t in counted.values())
    names = {"pr": "PRs named", "why": "PRs with their why", "test": "test command"}
    return hit / max(1, total), "%d/%d: %s" % (hit, total, ", ".join("%s %d/%d" % (names.get(k, k), f, t) for k, (f, t) in counted.items()))


def measure(mcp, repository, tasks, truths):
    """Runs (a) and (b) for every task (a list of paths) against its truth;
    prints recall and (a), (b); returns (a, b, recall at the default budget,
    the costliest answer)."""
    totals = {"a": 0, "json": 0, "b": 0, "max": 0}
    found = {k: [0, 0] for k in KINDS}
    found_max = {k: [0, 0] for k in KINDS}
    over_budget = 0
    change_costs, line_costs, why_line_costs, answer_costs = [], [], [], []
    for files, truth in zip(tasks, truths):
        # (a) is the default (text) answer an agent reads, scored as it
        # reads it; the JSON form (packed by its own cost) is sized beside it.
        text = mcp.tool("get_context", {"repository": repository, "paths": files})
        answer = mcp.tool("get_context", {"repository": repository, "paths": files, "format": "json"})
        if os.environ.get("ANSWERS"):
            with open(os.environ["ANSWERS"], "a") as out:
                out.write(json.dumps({"paths": files, "truth_prs": len(truth["prs"]), "answer": answer, "text": text}) + "\n")
        answer_costs.append(bpe.add("a", bpe.of_value(text)))
        totals["a"] += answer_costs[-1]
        totals["json"] += bpe.add("a as JSON", bpe.of_value(answer))
        over_budget += "\nleft out: " in "\n" + text["text"]
        score(items_of_text(text["text"]), truth, found)
        change_costs += [tokens(item) for item in answer["items"] if item["kind"] == "change"]
        for item in answer["items"]:
            for line in item["changes"] if item["kind"] == "earlier_changes" else []:
                (why_line_costs if " — " in line else line_costs).append(tokens(line))
        # The most it says (the largest budget, full detail): what the default's cut costs.
        largest = mcp.tool("get_context", {"repository": repository, "paths": files, "max_tokens": 16000, "detail": "full", "format": "json"})
        totals["max"] += tokens(largest)
        score(largest["items"], truth, found_max)
        # (b) search the wiki for each path, then read each page its hits name.
        read = set()
        for path in files:
            result = mcp.tool("search_wiki", {"repository": repository, "query": path})
            totals["b"] += bpe.add("b", bpe.of_value(result))
            for hit in result["hits"]:
                for page in hit.get("pages") or [hit["path"]]:
                    if page not in read:
                        read.add(page)
                        totals["b"] += bpe.add("b", bpe.count(mcp.tool("get_wiki_page", {"repository": repository, "path": page})["content"]))
    n = len(tasks)
    rate, detail = recall(found)
    rate_why, detail_why = recall(found, "why")
    rate_max, detail_max = recall(found_max)
    print("  recall rule: a PR counts when the answer names it by number and title, whole or as a line of earlier_changes;"
          " PRs with their why (whole, or after ' — ' in a line) are counted apart; see bench/context/scoring.py")
    print("  %d tasks (%d file paths, %.1f PRs touched them per task on average, at most %d): recall of one get_context at the default budget (2,000) %.3f (%s)"
          % (n, sum(map(len, tasks)), found["pr"][1] / n, max(len(t["prs"]) for t in truths), rate, detail))
    print("  counting a PR only with its why: recall %.3f (%s)" % (rate_why, detail_why))
    print("  answers that left items out for the budget: %d of %d (in the JSON form a whole change item costs %.0f tokens on average, a line in brief %.1f, %.1f with its why);"
          " at max_tokens 16,000 and detail full recall %.3f (%s), %d tokens a task"
          % (over_budget, n, sum(change_costs) / max(1, len(change_costs)), sum(line_costs) / max(1, len(line_costs)),
             sum(why_line_costs) / max(1, len(why_line_costs)), rate_max, detail_max, totals["max"] / n))
    print("  tokens (JSON or text bytes / 4, get_context's estimate): (a) get_context %d (%.0f a task, at most %d; as JSON, packed by its own cost, %.0f a task, %.0f %% more),"
          " (b) search_wiki + pages it names %d (%.0f a task)"
          % (totals["a"], totals["a"] / n, max(answer_costs), totals["json"] / n, 100 * (totals["json"] - totals["a"]) / max(1, totals["a"]),
             totals["b"], totals["b"] / n))
    return totals["a"], totals["b"], rate, max(answer_costs)
