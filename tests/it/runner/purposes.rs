//! Purposes read through the real writer child: a crate whose `lib.rs` takes
//! its doc from its README (`#![doc = include_str!("../README.md")]`) gets
//! that README's first sentence as its purpose, cited at the attribute's
//! line; an example whose doc only says how to run it gets none; a sentence
//! over two doc lines is whole and cites both. The git CLI is the oracle.

use teammem::queue::Completion;
use teammem::worker::JobHandler;

use super::fixture::write;
use super::handler::Setup;
use crate::harness::git::{git, git_trimmed};

#[tokio::test]
async fn a_crate_doc_kept_in_its_readme_is_the_crates_purpose() {
    let s = Setup::new();
    let dir = &s.source.dir;
    write(
        dir,
        "web-core/src/lib.rs",
        "#![cfg_attr(docsrs, feature(doc_auto_cfg))]\n#![doc = include_str!(\"../README.md\")]\n#![warn(missing_docs)]\n\nmod body;\n",
    );
    write(
        dir,
        "web-core/README.md",
        "# web-core\n\n[![Build status](https://example.com/badge.svg)](https://example.com/ci)\n\nCore types and traits for [`web`]. More below.\n\n[`web`]: https://docs.rs/web\n",
    );
    write(
        dir,
        "web-core/src/body.rs",
        "//! Types and traits for reading request\n//! bodies.\n//!\n//! # Example\n",
    );
    write(
        dir,
        "web-core/examples/hello.rs",
        "//! Run with\n//!\n//! ```not_rust\n//! cargo run --example hello\n//! ```\n\nfn main() {}\n",
    );
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "Add web-core (#14)"]);
    let tip = git_trimmed(dir, &["rev-parse", "HEAD"]);

    let done = s
        .runner()
        .run(&s.range_job(1, &s.source.head, &tip))
        .await
        .unwrap();
    assert!(matches!(done, Completion::Succeeded { .. }), "{done:?}");
    let page = s.page("Area-web-core.md");
    let line = |path: &str| {
        page.lines()
            .find(|l| l.starts_with(&format!("- {path} ")))
            .unwrap_or_else(|| panic!("{path} is listed:\n{page}"))
            .to_owned()
    };
    assert_eq!(
        line("web-core/src/lib.rs"),
        format!(
            "- web-core/src/lib.rs — Core types and traits for `web`. <!-- teammem:evidence web-core/src/lib.rs@{tip}#L2 -->"
        )
    );
    assert_eq!(
        line("web-core/src/body.rs"),
        format!(
            "- web-core/src/body.rs — Types and traits for reading request bodies. <!-- teammem:evidence web-core/src/body.rs@{tip}#L1-L2 -->"
        )
    );
    let hello = line("web-core/examples/hello.rs");
    assert!(
        !hello.contains("Run with") && !hello.contains("evidence"),
        "{hello}"
    );
    // The cited line holds what the page says it holds (git is the oracle).
    let lib = git(dir, &["show", &format!("{tip}:web-core/src/lib.rs")]);
    assert!(
        lib.lines()
            .nth(1)
            .unwrap()
            .contains("include_str!(\"../README.md\")")
    );
}
