//! `request`: ask a running daemon to reconcile one merged pull request,
//! and optionally follow the job until it ends.
//!
//! Invariant: the API token is read from `TEAMMEM_TOKEN`, never from an
//! argument (arguments show in process listings).

use clap::Args;

use super::Failure;

#[derive(Debug, Args)]
pub(super) struct RequestArgs {
    /// The daemon's URL, e.g. `https://teammem.example.org`
    #[arg(long, env = "TEAMMEM_URL")]
    server: String,
    /// The source repository (owner/name)
    #[arg(long)]
    repository: String,
    /// The merged pull request's number
    #[arg(long = "pr")]
    pull_number: u64,
    /// Follow the job until it ends; exit 0 only if it succeeded or had nothing to change
    #[arg(long)]
    wait: bool,
}

pub(super) async fn run_request(args: RequestArgs) -> Result<(), Failure> {
    let token = std::env::var("TEAMMEM_TOKEN")
        .ok()
        .filter(|t| !t.trim().is_empty())
        .ok_or_else(|| {
            Failure::usage(
                "set TEAMMEM_TOKEN to a teammem API token (or a GitHub token, when the daemon allows them); tokens are never taken as arguments",
            )
        })?;
    if !crate::config::is_repository_name(&args.repository) {
        return Err(Failure::usage(format!(
            "--repository: expected owner/name, got {:?}",
            args.repository
        )));
    }
    let server = args.server.trim_end_matches('/').to_string();
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(std::time::Duration::from_secs(60))
        .build()
        .map_err(|e| Failure::runtime(format!("cannot build an HTTP client: {e}")))?;
    let answer = http
        .post(format!("{server}/v1/requests"))
        .bearer_auth(token.trim())
        .json(&serde_json::json!({
            "repository": args.repository,
            "pull_number": args.pull_number,
        }))
        .send()
        .await
        .map_err(|e| Failure::runtime(format!("cannot reach {server}: {e}")))?;
    let status = answer.status();
    let body: serde_json::Value = answer.json().await.unwrap_or_default();
    if !status.is_success() {
        return Err(Failure::runtime(format!(
            "the daemon refused the request ({status}): {}",
            body["error"]["message"]
                .as_str()
                .unwrap_or("no explanation given")
        )));
    }
    let id = body["job_id"]
        .as_i64()
        .ok_or_else(|| Failure::runtime(format!("unexpected answer from the daemon: {body}")))?;
    let duplicate = if status.as_u16() == 200 {
        " (requested before)"
    } else {
        ""
    };
    crate::outln!(
        "job {id}: {}{duplicate}",
        body["state"].as_str().unwrap_or("?")
    );
    if !args.wait {
        return Ok(());
    }
    let mut last_state = String::new();
    loop {
        let r = http
            .get(format!("{server}/v1/jobs/{id}"))
            .bearer_auth(token.trim())
            .send()
            .await
            .map_err(|e| Failure::runtime(format!("cannot reach {server}: {e}")))?;
        if !r.status().is_success() {
            return Err(Failure::runtime(format!(
                "reading job {id} failed with {}",
                r.status()
            )));
        }
        let doc: serde_json::Value = r.json().await.unwrap_or_default();
        let state = doc["job"]["state"].as_str().unwrap_or("").to_string();
        if state != last_state {
            crate::outln!("job {id}: {state}");
            last_state = state.clone();
        }
        match state.as_str() {
            "succeeded" | "no_change" => {
                if let Some(sha) = doc["job"]["receipt"]["wiki_sha"].as_str() {
                    crate::outln!("wiki at {sha}");
                }
                return Ok(());
            }
            "failed" | "rejected" | "cancelled" | "skipped" => {
                let why = doc["job"]["last_error"].as_str().unwrap_or("");
                return Err(Failure::runtime(format!("job {id} ended {state} {why}")));
            }
            _ => tokio::time::sleep(std::time::Duration::from_secs(2)).await,
        }
    }
}
