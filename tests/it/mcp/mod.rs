//! The wiki MCP server, driven by rmcp's own client. Wikis are bare
//! repositories made with the `git` CLI, which is also the oracle for writes.
//!
//! The server runs in-process and the client talks to it over a
//! `tokio::io::duplex` pipe: the same framing and the same handler as over stdio.
//! `stdio.rs` drives the real `teammem mcp` process; it joins this table
//! (`mod stdio;`) in the commit that wires `teammem mcp` into the CLI (it passed
//! against a local wiring of `teammem::mcp::run_stdio`).

mod fixture; // git-CLI wikis, configs, writer environments, an rmcp client
mod http; // the writer against smart HTTP with a token: used, never revealed
mod operator; // `teammem wiki ...` functions: same envelope, explicit base, operator trailers
mod protocol; // tools/list per mode (snapshot), annotations, unknown and unparseable calls
mod reads; // the read tools end to end, envelope shape, size limit
mod writer; // the job-bound writer: binding, destination, write and patch, credentials
