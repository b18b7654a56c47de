//! The wiki MCP server, driven by rmcp's own client. Wikis are bare
//! repositories made with the `git` CLI, which is also the oracle for writes.
//!
//! Most tests run the server in-process and talk to it over a
//! `tokio::io::duplex` pipe (the same framing and handler as over stdio);
//! `stdio.rs` drives the real `teammem mcp` process.

mod context; // get_context through teammem mcp and /mcp on a generated history: purpose, current and stale facts, PRs newest first, budget, bad input, scope, a hostile wiki
mod confine; // confined job writes over the real writer process: protected pages, people's pages, byte budget
mod history; // a generated history the real daemon recorded (shop, 15 PRs, a person's page)
mod fixture; // git-CLI wikis, configs, writer environments, an rmcp client
mod http; // the writer against smart HTTP with a token: used, never revealed
mod pages; // get_wiki_page folded (citations with line and status) and raw byte for byte; org-scope search per token
mod operator; // `teammem wiki ...` functions: same envelope, explicit base, operator trailers
mod questions; // search_wiki asked 47 questions and keyword queries on the demo's and a generated wiki: 80 % first
mod protocol; // tools/list per mode (snapshot), annotations, unknown and unparseable calls
mod reads; // the read tools end to end, envelope shape, size limit
mod resources; // pages and a path's context as resources: list across a cursor, read, templates, subscribe/listen and updates when the tip moves, scope; both eras, in process and /mcp
mod search; // ranked search on 1,000 pages through the real process: order, snippet, heading, as_of, stale_facts
mod stdio; // the real `teammem mcp` process: writer over stdio, stdout framing only
mod writer; // the job-bound writer: binding, destination, write and patch, credentials
