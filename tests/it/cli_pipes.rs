//! Commands whose stdout reader goes away end quietly, as Unix tools do:
//! `teammem demo --once | head -1` exits 141 (or 0 had it already printed
//! everything), never with a panic.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_teammem");

#[test]
fn a_closed_stdout_ends_the_demo_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("demo");
    let mut child = Command::new(BIN)
        .args(["demo", "--once", "--port", "0", "--data-dir"])
        .arg(&data)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(!first.is_empty(), "the demo printed nothing");
    // The reader is gone: the next line the demo prints finds a closed pipe.
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        matches!(out.status.code(), Some(141) | Some(0)),
        "{:?} {stderr}",
        out.status
    );
}
