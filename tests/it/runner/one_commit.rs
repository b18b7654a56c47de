//! One job, one wiki commit, for the agent kind that can do anything: a
//! scripted `command` agent run by the real runner against a local wiki.
//! Its writes are staged on the job's own tree (its reads see them) and
//! published together as one commit when the job succeeds; a job that fails
//! or is cancelled between two writes publishes nothing; a wiki that a
//! person moved before the job could publish gets the job's one commit on
//! top of the person's, after the agent ran again on the new tip; the agent
//! can neither see nor call the runner's publish tool. The git CLI is the
//! oracle.

use serde_json::Value;
use teammem::queue::Completion;
use teammem::runner::work_dir;
use teammem::worker::JobHandler;

use super::command::agent_table;
use super::handler::Setup;

/// Three staged writes (two pages, then a patch of the first, each on the
/// previous write's sha), a read of `HEAD` in between, a probe of the
/// runner's publish tool, then `after_writes` (Python), then the receipt.
fn agent(after_writes: &str) -> String {
    format!(
        r##"
import json, os, sys, time
from mcp_client import Writer, receipt
config_path, receipt_path = sys.argv[1], sys.argv[2]
work = os.path.dirname(receipt_path)
data = json.loads(sys.stdin.read().strip().splitlines()[-1])
writer = Writer(config_path)
repo = data["repository"]
snapshot = writer.result("get_wiki_snapshot", {{"repository": repo}})
common = {{"repository": repo, "expected_wiki_repository": snapshot["wiki_repository"]}}
first = writer.result("write_wiki_pages", dict(common, expected_base=snapshot["sha"], message="First page",
    pages=[{{"path": "Staged-one.md", "content": "# One\n\nfirst\n"}}]))
open(os.path.join(work, "first-write"), "w").close()
second = writer.result("write_wiki_pages", dict(common, expected_base=first["sha"], message="Second page",
    pages=[{{"path": "Staged-two.md", "content": "# Two\n"}}]))
seen = writer.result("get_wiki_page", {{"repository": repo, "path": "Staged-one.md"}})
now = writer.result("get_wiki_snapshot", {{"repository": repo}})
third = writer.result("patch_wiki_pages", dict(common, expected_base=second["sha"], message="Patch the first",
    patches={{"Staged-one.md": {{"expected_sha": seen["sha"], "replacements": [{{"old": "first", "new": "first, patched"}}]}}}}))
writer.counter += 1
writer._send({{"jsonrpc": "2.0", "id": writer.counter, "method": "tools/list", "params": {{}}}})
listed = [t["name"] for t in writer._receive(writer.counter)["result"]["tools"]]
writer.counter += 1
writer._send({{"jsonrpc": "2.0", "id": writer.counter, "method": "tools/call",
    "params": {{"name": "publish_job_changes", "arguments": {{"repository": repo}}}}}})
publish = writer._receive(writer.counter)
probe = {{"listed": listed, "publish_refused": "error" in publish, "head_is_staged": now["sha"] == second["sha"]}}
{after_writes}
done = receipt(snapshot, third, data["evidence"]["pull_requests"], ["Staged-one.md"])
done["summary"] = json.dumps(probe)
with open(receipt_path, "w") as f:
    json.dump(done, f)
writer.close()
"##
    )
}

fn setup(script: &str) -> (Setup, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.py");
    std::fs::write(&path, script).unwrap();
    let s = Setup::with_extra(&agent_table(&path, &[], 60));
    (s, dir)
}

/// The commits on the wiki's branch after `start`, oldest first: (sha, message).
fn commits_after(s: &Setup, start: &str) -> Vec<(String, String)> {
    let log = s.wiki_git(&[
        "log",
        "--reverse",
        "--format=%H%x00%B%x01",
        &format!("{start}..HEAD"),
    ]);
    log.split('\u{1}')
        .filter(|entry| !entry.trim().is_empty())
        .map(|entry| {
            let (sha, message) = entry.trim_start().split_once('\0').unwrap();
            (sha.to_owned(), message.to_owned())
        })
        .collect()
}

#[tokio::test]
async fn a_job_of_several_writes_publishes_one_commit_and_its_reads_see_what_it_staged() {
    let (s, _dir) = setup(&agent(""));
    let start = s.tip();
    let done = s.runner().run(&s.full_range(1)).await.unwrap();
    let Completion::Succeeded { receipt } = done else {
        panic!("{done:?}")
    };
    let commits = commits_after(&s, &start);
    assert_eq!(commits.len(), 1, "one commit for three writes: {commits:?}");
    let (sha, message) = &commits[0];
    assert_eq!(receipt["wiki_sha"], sha.as_str(), "{receipt}");
    assert!(message.contains("Teammem-Job: 1"), "{message}");
    for written in ["First page", "Second page", "Patch the first"] {
        assert!(message.contains(written), "{message}");
    }
    assert_eq!(s.page("Staged-one.md"), "# One\n\nfirst, patched");
    assert_eq!(s.page("Staged-two.md"), "# Two");
    git_fsck(&s);

    // What the agent saw, reported in its receipt's summary.
    let probe: Value = serde_json::from_str(receipt["summary"].as_str().unwrap()).unwrap();
    // The job read its own staged tip as HEAD.
    assert_eq!(probe["head_is_staged"], true, "{probe}");
    // The publish tool is the runner's: not listed, not callable.
    let listed = probe["listed"].as_array().unwrap();
    assert!(
        listed.iter().any(|t| t == "write_wiki_pages")
            && !listed.iter().any(|t| t == "publish_job_changes"),
        "{probe}"
    );
    assert_eq!(probe["publish_refused"], true, "{probe}");
}

#[tokio::test]
async fn a_job_that_fails_after_its_writes_publishes_nothing() {
    let (s, _dir) = setup(&agent("sys.exit(3)"));
    let start = s.tip();
    let failure = s.runner().run(&s.full_range(1)).await.unwrap_err();
    assert!(
        failure.reason.contains("exit status: 3"),
        "{}",
        failure.reason
    );
    assert_eq!(s.tip(), start, "a failed job publishes nothing");
    assert!(commits_after(&s, &start).is_empty());
}

#[tokio::test]
async fn a_job_cancelled_between_two_writes_publishes_nothing() {
    // The agent stops after its first write, until it is killed.
    let script = agent("").replace(
        "open(os.path.join(work, \"first-write\"), \"w\").close()\n",
        "open(os.path.join(work, \"first-write\"), \"w\").close()\nwhile True:\n    time.sleep(60)\n",
    );
    let (s, _dir) = setup(&script);
    let start = s.tip();
    let runner = s.runner();
    let job = s.full_range(1);
    let marker = work_dir(&s.config.server.data_dir, 1).join("first-write");
    {
        let run = runner.run(&job);
        tokio::pin!(run);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            tokio::select! {
                done = &mut run => panic!("the job ended before it was cancelled: {done:?}"),
                _ = tokio::time::sleep(std::time::Duration::from_millis(50)) => {
                    if marker.exists() {
                        break;
                    }
                    assert!(std::time::Instant::now() < deadline, "the agent never wrote");
                }
            }
        }
        // Cancelled: the worker drops the job's future.
    }
    assert_eq!(s.tip(), start, "a cancelled job publishes nothing");
    assert!(commits_after(&s, &start).is_empty());
    git_fsck(&s);
}

#[tokio::test]
async fn a_wiki_moved_before_the_publish_gets_the_jobs_one_commit_on_top() {
    // After its writes the agent waits for the test's go (a file in its work
    // directory, which every attempt gets afresh).
    let script = agent(
        "open(os.path.join(work, 'staged'), 'w').close()\nwhile not os.path.exists(os.path.join(work, 'go')):\n    time.sleep(0.05)",
    );
    let (s, _dir) = setup(&script);
    let start = s.tip();
    let runner = s.runner();
    let job = s.full_range(1);
    let dir = work_dir(&s.config.server.data_dir, 1);
    let done = {
        let run = runner.run(&job);
        tokio::pin!(run);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let mut moved = false;
        loop {
            tokio::select! {
                done = &mut run => break done,
                _ = tokio::time::sleep(std::time::Duration::from_millis(50)) => {
                    // Each attempt's agent waits for its go; the first
                    // attempt's staged writes are overtaken by a person's.
                    if dir.join("staged").exists() && !dir.join("go").exists() {
                        if !moved {
                            s.human_edit("Notes.md", "# Notes\n\nBy a person, mid-job.\n");
                            moved = true;
                        }
                        std::fs::write(dir.join("go"), "").unwrap();
                    }
                    assert!(std::time::Instant::now() < deadline, "the job did not end");
                }
            }
        }
    };
    let done = done.unwrap();
    let Completion::Succeeded { receipt } = done else {
        panic!("{done:?}")
    };
    let commits = commits_after(&s, &start);
    assert_eq!(
        commits.len(),
        2,
        "the person's, then the job's: {commits:?}"
    );
    assert!(!commits[0].1.contains("Teammem-Job"), "{commits:?}");
    assert!(commits[1].1.contains("Teammem-Job: 1"), "{commits:?}");
    assert_eq!(receipt["wiki_sha"], commits[1].0.as_str(), "{receipt}");
    assert_eq!(s.page("Notes.md"), "# Notes\n\nBy a person, mid-job.");
    assert_eq!(s.page("Staged-one.md"), "# One\n\nfirst, patched");
    git_fsck(&s);
}

fn git_fsck(s: &Setup) {
    s.wiki_git(&["fsck", "--strict", "--no-progress"]);
}
