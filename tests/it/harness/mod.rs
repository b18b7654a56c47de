//! Test harness: real things started on loopback and in temp directories.

pub mod daemon; // the real `teammem` binary on a temp data dir, its address read from stdout
pub mod fake_github; // stateful fake of GitHub's REST API + OIDC issuer, backed by real git repos; one file per resource
pub mod git; // the git CLI as oracle: one helper, no user config, fixed identity
pub mod history; // a long source history generated with git fast-import: 1,500 PRs, 22 areas, squash and true merges, a maintenance branch, deletions, renames
pub mod git_http; // smart-HTTP git server (git http-backend) with Basic auth, request log, faults
pub mod inproc; // the daemon in-process, with a job handler the test gates
pub mod cut_proxy; // a TCP proxy to a real server whose every connection can be cut and refused for a while (a database outage)
pub mod postgres; // one real PostgreSQL server per test process (initdb + pg_ctl as an unprivileged user), a fresh database per test

/// A `/metrics` answer with each sample's leading `node` label removed, so
/// that tests can name series as the code records them. Panics when a
/// sample carries no `node` label: every sample must.
pub fn without_node_label(metrics: &str) -> String {
    let mut out = String::new();
    for line in metrics.lines() {
        if line.is_empty() || line.starts_with('#') {
            out.push_str(line);
        } else {
            let start = line
                .find("{node=\"")
                .unwrap_or_else(|| panic!("no node label: {line}"));
            let end = start + 7 + line[start + 7..].find('"').expect("closed label");
            out.push_str(&line[..start]);
            match &line[end + 1..] {
                rest if rest.starts_with(',') => {
                    out.push('{');
                    out.push_str(&rest[1..]);
                }
                rest => out.push_str(rest.strip_prefix('}').expect("label set closed")),
            }
        }
        out.push('\n');
    }
    out
}
