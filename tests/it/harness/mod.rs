//! Test harness: real things started on loopback and in temp directories.

pub mod daemon;
pub mod fake_github; // stateful fake of GitHub's REST API + OIDC issuer, backed by real git repos; one file per resource
pub mod git; // the git CLI as oracle: one helper, no user config, fixed identity
pub mod git_http;
pub mod inproc;
