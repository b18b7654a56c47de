"""A minimal MCP client over stdio for the context benchmark: starts
`teammem mcp --config CONFIG`, initializes, and calls tools, returning the
envelope's result (and failing loudly with the tool's error otherwise).
Also the token estimate get_context documents: JSON bytes / 4, rounded up
(`src/wiki/context/answer.rs`, `estimate_tokens`). Python 3 stdlib only."""

import json
import subprocess
import sys
import time


def tokens_of_text(text):
    """Tokens of text as get_context estimates them: UTF-8 bytes / 4, rounded up."""
    return (len(text.encode()) + 3) // 4


def compact(value):
    """A JSON value as a tool result carries it: compact, UTF-8 kept."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def tokens(value):
    """Tokens of a JSON value: its compact JSON's bytes / 4, rounded up."""
    return tokens_of_text(compact(value))


def percentile(times, fraction):
    ordered = sorted(times)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]


class Mcp:
    def __init__(self, binary, config, env=None):
        self.proc = subprocess.Popen(
            [binary, "mcp", "--config", config],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
        )
        self.next_id = 0
        self.call("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                 "clientInfo": {"name": "bench-context", "version": "1"}})
        self.proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        self.proc.stdin.flush()

    def call(self, method, params):
        self.next_id += 1
        self.proc.stdin.write((json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method,
                                           "params": params}) + "\n").encode())
        self.proc.stdin.flush()
        while True:
            line = self.proc.stdout.readline()
            if not line:
                sys.exit("teammem mcp closed its output")
            message = json.loads(line)
            if message.get("id") == self.next_id:
                if "error" in message:
                    sys.exit("%s failed: %s" % (method, json.dumps(message["error"])))
                return message

    def tool(self, name, arguments):
        """The tool's result (the envelope's `result`); exits on an error."""
        result = self.call("tools/call", {"name": name, "arguments": arguments})["result"]
        envelope = result.get("structuredContent") or json.loads(result["content"][0]["text"])
        if not envelope.get("success"):
            sys.exit("%s failed: %s" % (name, json.dumps(envelope.get("error"))))
        return envelope["result"]

    def timed(self, name, arguments):
        """(result, milliseconds from request written to answer read)."""
        started = time.perf_counter()
        result = self.tool(name, arguments)
        return result, (time.perf_counter() - started) * 1000

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
