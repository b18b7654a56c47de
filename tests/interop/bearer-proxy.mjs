// A loopback reverse proxy for the MCP conformance runner and the Inspector,
// which .ci/mcp-interop.sh runs without a way to add an Authorization header:
// every request is forwarded (method, path, headers, body, streamed answer) to
// the daemon with `Authorization: Bearer <token>` added.
//
// A Host naming this proxy is rewritten to the daemon's loopback address and an
// Origin naming this proxy to the daemon's public origin, as if the client had
// called the daemon directly; any other Host or Origin passes unchanged, so the
// daemon's own checks still judge what the client sent (the DNS-rebinding
// scenario depends on that).
//
// usage: TEAMMEM_INTEROP_TOKEN=... TEAMMEM_INTEROP_ORIGIN=https://... \
//        node bearer-proxy.mjs <listen-port or 0> <daemon-port>
// Prints "proxy listening on <port>" once it accepts connections. The token
// comes from the environment, never from argv.
import http from "node:http";

const [listenPort, upstreamPort] = process.argv.slice(2).map(Number);
const token = process.env.TEAMMEM_INTEROP_TOKEN;
const publicOrigin = process.env.TEAMMEM_INTEROP_ORIGIN;
if (!token || !publicOrigin || !upstreamPort || Number.isNaN(listenPort)) {
  console.error(
    "usage: TEAMMEM_INTEROP_TOKEN=<token> TEAMMEM_INTEROP_ORIGIN=<daemon public origin> node bearer-proxy.mjs <listen-port> <daemon-port>",
  );
  process.exit(2);
}

let ownPort = 0;
const own = (value, scheme) =>
  value === `${scheme}127.0.0.1:${ownPort}` || value === `${scheme}localhost:${ownPort}`;

const server = http.createServer((req, res) => {
  const headers = { ...req.headers, authorization: `Bearer ${token}` };
  if (own(headers.host, "")) headers.host = `127.0.0.1:${upstreamPort}`;
  if (own(headers.origin, "http://")) headers.origin = publicOrigin;
  const upstream = http.request(
    { host: "127.0.0.1", port: upstreamPort, method: req.method, path: req.url, headers },
    (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    },
  );
  upstream.on("error", (e) => {
    if (!res.headersSent) res.writeHead(502, { "content-type": "text/plain" });
    res.end(`proxy: the daemon did not answer: ${e.code ?? e.message}`);
  });
  res.on("close", () => upstream.destroy());
  req.pipe(upstream);
});
server.listen(listenPort, "127.0.0.1", () => {
  ownPort = server.address().port;
  console.log(`proxy listening on ${ownPort}`);
});
