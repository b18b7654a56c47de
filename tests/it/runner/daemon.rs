//! The runner inside the real `teammem serve` process on the local forge: a
//! signed dispatch becomes a `succeeded` job whose receipt the daemon stored,
//! and the wiki (read with the git CLI) holds each PR's number and full sha.

use serde_json::json;

use super::daemon_client::{finished, post_dispatch, wait_for};
use super::one_source::OneSource;
use crate::harness::git::{git, git_trimmed};

const SECRET: &str = "runner e2e dispatch secret, at least 32 bytes long";

#[tokio::test]
async fn a_signed_dispatch_is_run_by_the_daemon_into_the_wiki() {
    let one = OneSource::fixture(SECRET).token("e2e").start();
    let (source, wiki, daemon, token) = (&one.source, &one.wiki, &one.daemon, &one.token);

    let (status, answer) = post_dispatch(
        daemon,
        SECRET,
        &json!({
            "source_repository": "demo/app", "kind": "range",
            "push_before": source.base, "push_after": source.head,
        }),
    )
    .await;
    assert_eq!(status, 202, "{answer}");
    let id = answer["job_id"].as_i64().unwrap();

    // Follow the job to its end (bounded; the job itself takes well under a second).
    let (job, _) = wait_for(daemon, token, id, finished).await;
    assert_eq!(job["state"], "succeeded", "{job}");
    assert_eq!(job["receipt"]["status"], "updated", "{job}");

    let changelog = git_trimmed(wiki, &["show", "master:Changelog.md"]);
    for sha in [&source.merge_12, &source.squash_13] {
        assert!(changelog.contains(sha.as_str()), "{changelog}");
    }
    assert!(changelog.contains("#12") && changelog.contains("#13"));
    git(wiki, &["fsck", "--strict", "--no-progress"]);
    assert!(one.daemon.terminate().success());
}
