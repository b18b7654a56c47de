//! The wiki MCP server, driven by rmcp's own client. Wikis are bare
//! repositories made with the `git` CLI, which is also the oracle for writes.
//!
//! Until `teammem mcp` is wired into the binary, the server runs in-process and
//! the client talks to it over a `tokio::io::duplex` pipe: the same framing and
//! the same handler as over stdio.

mod fixture; // git-CLI wikis, configs, writer environments, an rmcp client
mod protocol; // tools/list per mode (snapshot), annotations, unknown and unparseable calls
mod reads; // the read tools end to end, envelope shape, size limit
mod writer; // the job-bound writer: binding, destination, write and patch, credentials
