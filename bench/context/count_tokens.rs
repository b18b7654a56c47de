//! The context benchmark's tokenizer check (built by `bench/context.sh` in
//! release, behind the `bench` feature; never part of `teammem`): reads one
//! JSON string a line on stdin and answers each with its token counts in the
//! two common BPE encodings, `O200K CL100K` (tiktoken's `o200k_base` and
//! `cl100k_base`, ordinary text, no special tokens), one line each, flushed,
//! so the Python benchmark can keep it running beside `teammem mcp`.
//!
//! get_context budgets with a documented estimate (bytes / 4); this lets the
//! economy print its ratios counted both ways, so an estimate that errs
//! differently on answers and on source cannot flatter them.

use std::io::{BufRead, Write};

fn main() {
    let o200k = tiktoken_rs::o200k_base().expect("tiktoken-rs ships o200k_base");
    let cl100k = tiktoken_rs::cl100k_base().expect("tiktoken-rs ships cl100k_base");
    let stdin = std::io::stdin().lock();
    let mut stdout = std::io::stdout().lock();
    for line in stdin.lines() {
        let line = line.expect("count_tokens: stdin is not readable UTF-8");
        let text: String = serde_json::from_str(&line).unwrap_or_else(|error| {
            panic!("count_tokens: a line is not a JSON string ({error}): {line:.80}")
        });
        let counts = (
            o200k.encode_ordinary(&text).len(),
            cl100k.encode_ordinary(&text).len(),
        );
        writeln!(stdout, "{} {}", counts.0, counts.1).expect("count_tokens: stdout closed");
        stdout.flush().expect("count_tokens: stdout closed");
    }
}
