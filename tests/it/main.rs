//! The integration tests: one binary, one module per capability.

mod harness; // loopback servers the tests drive: smart-HTTP git (git http-backend)
mod wiki; // the wiki engine against real git repositories, the git CLI as oracle
