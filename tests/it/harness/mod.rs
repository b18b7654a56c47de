//! Shared test harness: real servers on loopback that the capability modules drive.

pub mod fake_github; // stateful fake of GitHub's REST API + OIDC issuer, backed by real git repos
