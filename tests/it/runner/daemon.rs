//! The runner inside the real `teammem serve` process on the local forge: a
//! signed dispatch becomes a `succeeded` job whose receipt the daemon stored,
//! and the wiki (read with the git CLI) holds each PR's number and full sha.

use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;

use super::fixture::{self, Source};
use crate::harness::daemon::Setup as DaemonSetup;

const SECRET: &str = "runner e2e dispatch secret";

fn signature(body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

#[tokio::test]
async fn a_signed_dispatch_is_run_by_the_daemon_into_the_wiki() {
    let repos = tempfile::tempdir().unwrap();
    let source = Source::create(repos.path());
    let wiki = fixture::wiki(repos.path());
    let setup = DaemonSetup::new(&format!(
        "[[sources]]\nrepository = \"demo/app\"\nlocal_path = \"{}\"\nlocal_wiki_path = \"{}\"\nwebhook_secret_env = \"TEAMMEM_SECRET_DEMO\"\n",
        source.dir.display(),
        wiki.display()
    ));
    let token = setup.create_token("e2e", &[]);
    let daemon = setup.serve(&[("TEAMMEM_SECRET_DEMO", SECRET)]);

    let body = serde_json::to_vec(&json!({
        "source_repository": "demo/app", "kind": "range",
        "push_before": source.base, "push_after": source.head,
    }))
    .unwrap();
    let http = reqwest::Client::new();
    let answer = http
        .post(daemon.url("/v1/dispatch"))
        .header("Content-Type", "application/json")
        .header("X-Hub-Signature-256", signature(&body))
        .header("X-TeamMem-Delivery", uuid::Uuid::new_v4().to_string())
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 202);
    let id = answer.json::<Value>().await.unwrap()["job_id"]
        .as_i64()
        .unwrap();

    // Follow the job to its end (bounded; the job itself takes well under a second).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let job = loop {
        let job: Value = http
            .get(daemon.url(&format!("/v1/jobs/{id}")))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let state = job["state"]
            .as_str()
            .or(job["job"]["state"].as_str())
            .unwrap_or_default()
            .to_owned();
        if !["queued", "running"].contains(&state.as_str()) {
            break job;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "job {id} did not finish: {job}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    let job = if job["job"].is_object() {
        job["job"].clone()
    } else {
        job
    };
    assert_eq!(job["state"], "succeeded", "{job}");
    assert_eq!(job["receipt"]["status"], "updated", "{job}");

    let changelog = fixture::git(&wiki, &["show", "master:Changelog.md"]);
    for sha in [&source.merge_12, &source.squash_13] {
        assert!(changelog.contains(sha.as_str()), "{changelog}");
    }
    assert!(changelog.contains("#12") && changelog.contains("#13"));
    fixture::git(&wiki, &["fsck", "--strict", "--no-progress"]);
    assert!(daemon.terminate().success());
}
