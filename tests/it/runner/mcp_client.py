# A minimal MCP client over stdio for the test agents (and bench/e2e.sh's
# scripted agent): starts the server their generated MCP configuration names
# (`teammem mcp --connect SOCKET`), completes the handshake, and calls tools,
# returning each tool's `structuredContent` envelope. Standard library only.
import json, subprocess


class Writer:
    def __init__(self, config_path):
        server = json.load(open(config_path))["mcpServers"]["teammem-wiki"]
        self.server = server
        self.child = subprocess.Popen([server["command"]] + server["args"], env=server["env"],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.counter = 1
        self._send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "test-agent", "version": "0"}}})
        self._receive(1)
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _send(self, message):
        self.child.stdin.write((json.dumps(message) + "\n").encode())
        self.child.stdin.flush()

    def _receive(self, id):
        while True:
            message = json.loads(self.child.stdout.readline())
            if message.get("id") == id:
                return message

    def call(self, name, arguments):
        """The tool's envelope: success, outcome, result, error."""
        self.counter += 1
        self._send({"jsonrpc": "2.0", "id": self.counter, "method": "tools/call",
                    "params": {"name": name, "arguments": arguments}})
        return self._receive(self.counter)["result"]["structuredContent"]

    def result(self, name, arguments):
        """The tool's result; a failed call raises with its error."""
        envelope = self.call(name, arguments)
        if not envelope.get("success"):
            raise RuntimeError("%s failed: %s" % (name, json.dumps(envelope.get("error"))))
        return envelope["result"]

    def close(self):
        self.child.stdin.close()
        self.child.wait()


def receipt(snapshot, written, pull_requests, pages):
    """A receipt recording every pull request on `pages`."""
    return {"status": "updated", "wiki_repository": snapshot["wiki_repository"], "wiki_sha": written["sha"],
            "base_sha": snapshot["sha"], "summary": "Wrote the team log.",
            "pull_requests": [{"number": p["number"], "merge_sha": p["merge_sha"], "status": "updated",
                               "pages": pages} for p in pull_requests]}
