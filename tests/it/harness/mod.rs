//! Shared test harness: real servers on loopback that the integration tests
//! start per test (no mocks of the parts under test).

pub mod git_http;
