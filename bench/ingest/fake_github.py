#!/usr/bin/env python3
"""A minimal stand-in for GitHub's REST API, for bench/ingest.sh only.

It answers exactly the calls teammem makes to verify a dispatched range
(installation lookup and token, repository, run attempt, compare), with
GitHub's JSON shapes, for one repository whose commits are listed oldest
first in a file. It checks nothing (the integration tests' fake in
tests/it/harness/fake_github/ does); it exists so the benchmark measures
teammem's GitHub path on loopback. Usage:

    fake_github.py PORT OWNER/NAME SHAS_FILE RUNS_FILE

RUNS_FILE maps run ids to head SHAs, one "run_id sha" pair per line.
"""

import json
import re
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

port, full_name, shas_file, runs_file = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
owner, name = full_name.split("/")
with open(shas_file) as f:
    order = {sha: i for i, sha in enumerate(f.read().split())}
with open(runs_file) as f:
    runs = {int(run): sha for run, sha in (line.split() for line in f if line.strip())}
REPO_ID = 4242
BASE = f"http://127.0.0.1:{port}"


def repo_json():
    return {
        "id": REPO_ID,
        "node_id": f"R_{REPO_ID}",
        "name": name,
        "full_name": full_name,
        "private": True,
        "owner": {
            "login": owner, "id": 1, "node_id": "U_1",
            "avatar_url": "https://avatars.example/u/1", "gravatar_id": "",
            "url": f"{BASE}/users/{owner}", "html_url": f"https://github.example/{owner}",
            "followers_url": f"{BASE}/users/{owner}/followers",
            "following_url": f"{BASE}/users/{owner}/following{{/other_user}}",
            "gists_url": f"{BASE}/users/{owner}/gists{{/gist_id}}",
            "starred_url": f"{BASE}/users/{owner}/starred{{/owner}}{{/repo}}",
            "subscriptions_url": f"{BASE}/users/{owner}/subscriptions",
            "organizations_url": f"{BASE}/users/{owner}/orgs",
            "repos_url": f"{BASE}/users/{owner}/repos",
            "events_url": f"{BASE}/users/{owner}/events{{/privacy}}",
            "received_events_url": f"{BASE}/users/{owner}/received_events",
            "type": "Organization", "site_admin": False,
        },
        "html_url": f"https://github.example/{full_name}",
        "description": None,
        "fork": False,
        "url": f"{BASE}/repos/{full_name}",
        "default_branch": "main",
        "visibility": "private",
        "archived": False,
        "disabled": False,
        "has_wiki": True,
    }


REPO = json.dumps(repo_json()).encode()
PREFIX = f"/repos/{full_name}"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, body):
        data = json.dumps(body).encode() if not isinstance(body, bytes) else body
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        self.rfile.read(length)
        if re.fullmatch(r"/app/installations/\d+/access_tokens", self.path):
            self.answer(201, {
                "token": "ghs_benchfake",
                "expires_at": "2099-01-01T00:00:00Z",
                "permissions": {},
                "repository_selection": "selected",
            })
        else:
            self.answer(404, {"message": "Not Found"})

    def do_GET(self):
        path = self.path
        if path == PREFIX:
            return self.answer(200, REPO)
        if path == PREFIX + "/installation":
            return self.answer(200, {
                "id": 7, "account": {"login": owner, "id": 1, "type": "Organization"},
                "app_id": 1, "target_type": "Organization", "repository_selection": "selected",
                "permissions": {"metadata": "read", "contents": "write", "actions": "read"},
                "events": [],
            })
        m = re.fullmatch(re.escape(PREFIX) + r"/actions/runs/(\d+)/attempts/(\d+)", path)
        if m:
            run, attempt = int(m.group(1)), int(m.group(2))
            sha = runs.get(run)
            if sha is None:
                return self.answer(404, {"message": "Not Found"})
            repository = repo_json()
            return self.answer(200, {
                "id": run, "name": "Team memory", "node_id": f"WFR_{run}",
                "head_branch": "main", "head_sha": sha,
                "path": ".github/workflows/team-memory-post-merge.yml",
                "display_title": "Team memory", "run_number": run, "run_attempt": attempt,
                "event": "push", "status": "in_progress", "conclusion": None, "workflow_id": 1,
                "url": f"{BASE}{PREFIX}/actions/runs/{run}",
                "html_url": f"https://github.example/{full_name}/actions/runs/{run}",
                "pull_requests": [], "created_at": "2026-01-01T00:00:00Z",
                "updated_at": "2026-01-01T00:00:00Z", "run_started_at": "2026-01-01T00:00:00Z",
                "head_commit": {"id": sha, "tree_id": sha, "message": "x",
                                "timestamp": "2026-01-01T00:00:00Z"},
                "repository": repository, "head_repository": repository,
            })
        m = re.fullmatch(re.escape(PREFIX) + r"/compare/([^.]+)\.\.\.(.+)", path)
        if m:
            base, head = m.group(1), m.group(2)
            tip = len(order) - 1
            b = tip if base == "main" else order.get(base)
            h = tip if head == "main" else order.get(head)
            if b is None or h is None:
                return self.answer(404, {"message": "No commit found for SHA"})
            status = "identical" if b == h else ("ahead" if h > b else "behind")
            return self.answer(200, {
                "url": f"{BASE}{path}", "status": status,
                "ahead_by": max(h - b, 0), "behind_by": max(b - h, 0),
                "total_commits": max(h - b, 0), "commits": [], "files": [],
                "base_commit": {"sha": base}, "merge_base_commit": {"sha": base},
            })
        self.answer(404, {"message": "Not Found"})


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        # wrk hangs up on its open connections when a run ends; anything
        # else is printed as usual.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


Server(("127.0.0.1", int(port)), Handler).serve_forever()
