#!/usr/bin/env python3
"""Drives headless Chromium over the DevTools protocol (--remote-debugging-pipe,
standard library only) to press a dashboard button the way a person does.

usage: click.py BROWSER PROFILE_DIR URL BUTTON_TEXT EXPECTED_STATE[,STATE...]

Opens a job page (URL), waits for a <button> whose text is BUTTON_TEXT, clicks
it (the browser submits its form with its own Origin and the page's CSRF
token), then waits until the page it lands on shows the job in one of the
expected states (a retried job may already be running or done when the page
after the redirect renders). Exits non-zero with
one line saying what was missing; never sleeps blindly: every wait polls the
page, bounded by a deadline.
"""
import json
import os
import subprocess
import sys
import time

browser, profile, url, button, expected = sys.argv[1:6]
expected = expected.split(",")
DEADLINE = 30.0

to_browser_r, to_browser_w = os.pipe()
from_browser_r, from_browser_w = os.pipe()
child_fds = {3: to_browser_r, 4: from_browser_w}


def preexec():
    # Via fresh descriptors first: a pipe end may itself be 3 or 4.
    moved = {target: os.dup(fd) for target, fd in child_fds.items()}
    for target, fd in moved.items():
        os.dup2(fd, target)
        os.set_inheritable(target, True)


proc = subprocess.Popen(
    [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
     "--disable-background-networking", "--disable-component-update", "--disable-sync",
     f"--user-data-dir={profile}", "--remote-debugging-pipe", "about:blank"],
    pass_fds=(3, 4), preexec_fn=preexec,
    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
)
os.close(to_browser_r)
os.close(from_browser_w)
reader = os.fdopen(from_browser_r, "rb")
next_id = 0
buffer = b""


def fail(message):
    proc.kill()
    sys.exit(f"click.py: {message}")


def send(method, params=None, session=None, tolerate=False):
    """Sends one command and returns its result (events are skipped); with
    `tolerate`, an error (a page navigating away mid-call) answers None."""
    global next_id, buffer
    next_id += 1
    message = {"id": next_id, "method": method, "params": params or {}}
    if session:
        message["sessionId"] = session
    os.write(to_browser_w, json.dumps(message).encode() + b"\0")
    while True:
        while b"\0" not in buffer:
            chunk = reader.read1(65536)
            if not chunk:
                fail(f"the browser closed the pipe while answering {method}")
            buffer += chunk
        raw, buffer = buffer.split(b"\0", 1)
        reply = json.loads(raw)
        if reply.get("id") == next_id:
            if "error" in reply:
                if tolerate:
                    return None
                fail(f"{method}: {reply['error']}")
            return reply["result"]


def evaluate(session, expression):
    result = send("Runtime.evaluate", {"expression": expression, "returnByValue": True},
                  session, tolerate=True)
    return (result or {}).get("result", {}).get("value")


def wait_for(session, expression, what):
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        if evaluate(session, expression):
            return
        time.sleep(0.05)
    page = evaluate(session, "document.body ? document.body.innerText.slice(0, 400) : ''")
    fail(f"{what} within {DEADLINE:.0f} s; the page shows: {page!r}")


target = send("Target.createTarget", {"url": "about:blank"})["targetId"]
session = send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
send("Page.navigate", {"url": url}, session)
find = ("[...document.querySelectorAll('button')].find(b => b.textContent.trim() === "
        + json.dumps(button) + ")")
wait_for(session, f"location.href === {json.dumps(url)} && !!{find}",
         f"no button {button!r} appeared on {url}")
evaluate(session, "window.__teammem_before = performance.timeOrigin; " + find + ".click(); true")
# The click submits the form; the answer redirects back to a fresh page.
state = "document.querySelector('h1 + p > .state')"
wait_for(session,
         "performance.timeOrigin !== window.__teammem_before && document.readyState === 'complete' && "
         f"{state} !== null && {json.dumps(expected)}.includes({state}.textContent.trim())",
         f"after pressing {button!r} the page did not show the job as {' or '.join(expected)}")
shown = evaluate(session, f"{state}.textContent.trim()")
print(f"pressed {button!r} on {url}: the job is now {shown}")
send("Browser.close")
proc.wait(timeout=10)
