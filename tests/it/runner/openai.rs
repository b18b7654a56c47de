//! The openai agent backend against a scripted, stateful OpenAI-compatible fake
//! on loopback: tool calls reach the real writer child, bad calls come back as
//! readable errors, and a lying final receipt fails the job.

use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{Value, json};
use teammem::queue::Completion;
use teammem::worker::JobHandler;

use super::handler::Setup;

type Script = Arc<dyn Fn(usize, &Value) -> Value + Send + Sync>;

#[derive(Clone)]
struct Fake {
    requests: Arc<Mutex<Vec<Value>>>,
    script: Script,
}

async fn completions(State(fake): State<Fake>, Json(body): Json<Value>) -> Json<Value> {
    let step = {
        let mut requests = fake.requests.lock().unwrap();
        requests.push(body.clone());
        requests.len()
    };
    Json((fake.script)(step, &body))
}

pub(super) async fn start(script: Script) -> (String, Arc<Mutex<Vec<Value>>>) {
    let requests = Arc::new(Mutex::new(Vec::new()));
    let app = Router::new()
        .route("/v1/chat/completions", post(completions))
        .with_state(Fake {
            requests: requests.clone(),
            script,
        });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}/v1"), requests)
}

fn calls(calls: Value) -> Value {
    json!({"choices": [{"message": {"role": "assistant", "content": null, "tool_calls": calls}}],
           "usage": {"completion_tokens": 50}})
}

fn call(id: &str, name: &str, arguments: &str) -> Value {
    json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}})
}

fn final_text(text: &str) -> Value {
    json!({"choices": [{"message": {"role": "assistant", "content": text}}],
           "usage": {"completion_tokens": 50}})
}

/// The parsed envelope of the tool message answering `id`.
pub(super) fn tool_answer(request: &Value, id: &str) -> Value {
    let message = request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
        .unwrap_or_else(|| panic!("no tool answer for {id}"));
    serde_json::from_str(message["content"].as_str().unwrap()).unwrap()
}

fn evidence_of(request: &Value) -> Value {
    let data = request["messages"][1]["content"].as_str().unwrap();
    serde_json::from_str::<Value>(data).unwrap()["evidence"].clone()
}

/// A model that reads the snapshot, makes two bad calls, writes a Changelog
/// citing every merge sha, then answers with a receipt (`lie`: a made-up sha).
pub(super) fn script(lie: bool) -> Script {
    Arc::new(move |step, request| match step {
        1 => calls(json!([call(
            "c1",
            "get_wiki_snapshot",
            r#"{"repository":"demo/app"}"#
        )])),
        2 => calls(json!([
            call("c2", "get_wiki_page", "this is not json"),
            call("c3", "drop_the_wiki", "{}"),
        ])),
        3 => {
            let base = tool_answer(request, "c1")["result"]["sha"]
                .as_str()
                .unwrap()
                .to_owned();
            let evidence = evidence_of(request);
            let mut page = String::from("# Changelog\n\n");
            for pull in evidence["pull_requests"].as_array().unwrap() {
                page.push_str(&format!(
                    "- #{} {}\n",
                    pull["number"],
                    pull["merge_sha"].as_str().unwrap()
                ));
            }
            let arguments = json!({"repository": "demo/app", "expected_wiki_repository": "demo/app",
                "expected_base": base, "message": "Record the range",
                "pages": [{"path": "Changelog.md", "content": page}]});
            calls(json!([call(
                "c4",
                "write_wiki_pages",
                &arguments.to_string()
            )]))
        }
        _ => {
            let base = tool_answer(request, "c1")["result"]["sha"]
                .as_str()
                .unwrap()
                .to_owned();
            let written = tool_answer(request, "c4")["result"]["sha"]
                .as_str()
                .unwrap()
                .to_owned();
            let evidence = evidence_of(request);
            let pulls: Vec<Value> = evidence["pull_requests"].as_array().unwrap().iter().map(|p| json!({
                "number": p["number"], "merge_sha": p["merge_sha"], "status": "updated", "pages": ["Changelog.md"]})).collect();
            let receipt = json!({"status": "updated", "wiki_repository": "demo/app",
                "wiki_sha": if lie { "1".repeat(40) } else { written }, "base_sha": base,
                "pull_requests": pulls, "summary": "Recorded the range in the Changelog."});
            final_text(&format!("```json\n{receipt}\n```"))
        }
    })
}

pub(super) fn agent_config(url: &str, steps: u32) -> String {
    format!(
        "\n[agent]\nkind = \"openai\"\nbase_url = \"{url}\"\nmodel = \"fake\"\nmax_steps = {steps}\nmax_output_tokens = 1000\n"
    )
}

#[tokio::test]
async fn the_openai_agent_drives_the_writer_and_its_receipt_is_checked() {
    let (url, requests) = start(script(false)).await;
    let s = Setup::with_extra(&agent_config(&url, 10));
    let before = s.tip();
    let done = s.runner().run(&s.full_range(1)).await.unwrap();
    assert!(matches!(done, Completion::Succeeded { .. }), "{done:?}");
    let changelog = s.page("Changelog.md");
    assert!(changelog.contains(&s.source.merge_12) && changelog.contains(&s.source.squash_13));
    // The job's whole change is one wiki commit: the agent's one write, with
    // nothing added around it.
    let added = s.wiki_git(&["rev-list", "--count", &format!("{before}..master")]);
    assert_eq!(added.trim(), "1", "one commit per job");
    assert_eq!(s.wiki_git(&["rev-parse", "master^"]).trim(), before);

    let requests = requests.lock().unwrap();
    assert_eq!(requests.len(), 4);
    let first = &requests[0];
    assert_eq!(first["model"], "fake");
    let names: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"write_wiki_pages") && names.contains(&"get_job_evidence"),
        "{names:?}"
    );
    // The instructions ask for the job's whole change as one commit.
    assert!(
        first["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("ONE commit")
    );
    // Untrusted text is only inside the data message, never in the instructions.
    assert!(
        !first["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("Ignore all previous")
    );
    assert!(
        first["messages"][1]["content"]
            .as_str()
            .unwrap()
            .contains("Ignore all previous")
    );
    // The bad calls were answered with readable errors.
    let third = &requests[2];
    assert!(
        tool_answer(third, "c2")["error"]
            .as_str()
            .unwrap()
            .contains("not a JSON object")
    );
    assert!(
        tool_answer(third, "c3")["error"]
            .as_str()
            .unwrap()
            .contains("unknown tool")
    );
}

#[tokio::test]
async fn a_lying_receipt_fails_the_job() {
    let (url, _) = start(script(true)).await;
    let s = Setup::with_extra(&agent_config(&url, 10));
    let failure = s.runner().run(&s.full_range(1)).await.unwrap_err();
    assert!(!failure.retryable);
    assert!(
        failure.reason.contains("receipt does not hold") && failure.reason.contains("wiki_sha"),
        "{}",
        failure.reason
    );
    // The claim itself is kept for the maintainer.
    let kept = failure.receipt.expect("the refused receipt is kept");
    assert_eq!(kept["wiki_sha"], "1".repeat(40), "{kept}");
}

#[tokio::test]
async fn the_step_budget_ends_a_run_that_never_answers() {
    let looping: Script = Arc::new(|_, _| {
        calls(json!([call(
            "c1",
            "get_wiki_snapshot",
            r#"{"repository":"demo/app"}"#
        )]))
    });
    let (url, requests) = start(looping).await;
    let s = Setup::with_extra(&agent_config(&url, 3));
    let failure = s.runner().run(&s.full_range(1)).await.unwrap_err();
    assert!(failure.reason.contains("all 3 steps"), "{}", failure.reason);
    assert_eq!(requests.lock().unwrap().len(), 3);
}

#[tokio::test]
async fn the_token_budget_ends_a_run_that_spends_too_much() {
    // Every answer claims more output tokens than the whole run may use
    // (max_output_tokens 1000 x 3 steps).
    let spendthrift: Script = Arc::new(|_, _| {
        let mut answer = calls(json!([call(
            "c1",
            "get_wiki_snapshot",
            r#"{"repository":"demo/app"}"#
        )]));
        answer["usage"]["completion_tokens"] = json!(20_000);
        answer
    });
    let (url, requests) = start(spendthrift).await;
    let s = Setup::with_extra(&agent_config(&url, 3));
    let failure = s.runner().run(&s.full_range(1)).await.unwrap_err();
    assert!(!failure.retryable, "a budget overrun does not retry");
    assert!(
        failure.reason.contains("20000 output tokens") && failure.reason.contains("budget of 3000"),
        "{}",
        failure.reason
    );
    assert_eq!(requests.lock().unwrap().len(), 1, "it stops at once");
}

#[tokio::test]
async fn a_final_message_that_is_not_a_receipt_fails_the_job() {
    let chatty: Script = Arc::new(|_, _| final_text("I have updated the wiki, trust me."));
    let (url, _) = start(chatty).await;
    let s = Setup::with_extra(&agent_config(&url, 3));
    let failure = s.runner().run(&s.full_range(1)).await.unwrap_err();
    assert!(!failure.retryable);
    assert!(
        failure.reason.contains("not valid receipt JSON"),
        "{}",
        failure.reason
    );
}
