//! `Cargo.toml`: which table headers hold dependencies (normal, dev,
//! build; `[dependencies.NAME]`; `[target.X.*]`; `[workspace.*]`).
//!
//! Invariant: a header that is not one of these holds no dependencies.

use super::dependency::Kind;
use super::toml::{TableMeaning, header_parts};

/// What a Cargo table header means: the kind of the dependencies in it, the
/// one dependency a `[dependencies.NAME]` table declares, and the platform
/// of a `[target.X.…]` table.
pub(super) fn cargo_table(header: &str) -> Option<TableMeaning> {
    let parts = header_parts(header);
    let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
    let kind_of = |word: &str| match word {
        "dependencies" => Some(Kind::Normal),
        "dev-dependencies" | "dev_dependencies" => Some(Kind::Dev),
        "build-dependencies" | "build_dependencies" => Some(Kind::Build),
        _ => None,
    };
    let (target, tail) = match parts.as_slice() {
        ["target", platform, rest @ ..] => (Some((*platform).to_owned()), rest),
        ["workspace", rest @ ..] => (None, rest),
        rest => (None, rest),
    };
    let (word, single) = match tail {
        [word] => (word, None),
        [word, name] => (word, Some((*name).to_owned())),
        _ => return None,
    };
    Some(TableMeaning {
        kind: Some(kind_of(word)?),
        single,
        target,
        group: None,
    })
}

#[cfg(test)]
mod tests {
    use crate::manifests::expect::{d, deps, f, full};
    use crate::manifests::{Change, Kind, diff, parse};

    #[test]
    fn cargo_every_shape() {
        let text = r#"[package]
    name = "app"
    version = "0.1.0"

    [dependencies]
    serde = "1.0" # comment
    tokio = { version = "1.38", features = ["rt"] }
    core = { path = "../core" }
    fork = { git = "https://example.com/fork.git", branch = "x" }
    "quoted-name" = '2'
    shared = { workspace = true }

    [dev-dependencies]
    proptest = "1"

    [build-dependencies]
    cc = "1.0.83"

    [target.'cfg(unix)'.dependencies]
    libc = "0.2"

    [dependencies.regex]
    version = "1.10"
    default-features = false

    [workspace.dependencies]
    anyhow = "1"

    [[bin]]
    name = "not-a-dep"
    [features]
    default = ["x"]
    "#;
        assert_eq!(
            deps("Cargo.toml", text),
            vec![
                d("serde", "1.0", Kind::Normal, 6),
                d("tokio", "1.38", Kind::Normal, 7),
                d("core", "path ../core", Kind::Normal, 8),
                d("fork", "git https://example.com/fork.git", Kind::Normal, 9),
                d("quoted-name", "2", Kind::Normal, 10),
                d("shared", "workspace", Kind::Normal, 11),
                d("proptest", "1", Kind::Dev, 14),
                d("cc", "1.0.83", Kind::Build, 17),
                d("libc", "0.2", Kind::Normal, 20),
                d("regex", "1.10", Kind::Normal, 22),
                d("anyhow", "1", Kind::Normal, 27),
            ]
        );
    }

    #[test]
    fn cargo_optional_and_target_tables() {
        // Shaped like reqwest's and tokio's manifests.
        let text = r#"[package]
    name = "reqwest"
    version = "0.12.8"

    [features]
    json = ["dep:serde_json"]
    optional = []

    [dependencies]
    base64 = "0.22"
    serde_json = { version = "1.0", optional = true }
    futures-util = { version = "0.3.28", default-features = false, optional=true }
    cookie_crate = { version = "0.18.0", package = "cookie", optional = true }
    not-optional = { version = "1", features = ["optional"] }
    also-not = { version = "1", optional = false }
    optional-looking = { version = "2", non_optional = true }

    [dependencies.hickory-resolver]
    version = "0.24"
    optional = true # feature hickory-dns
    features = ["tokio-runtime"]

    [target.'cfg(not(target_arch = "wasm32"))'.dependencies]
    tokio = { version = "1.0", default-features = false, features = ["net", "time"] }
    rustls = { version = "0.23.4", optional = true, default-features = false }

    [target.'cfg(windows)'.dependencies]
    windows-registry = "0.2"

    [target.x86_64-pc-windows-msvc.dev-dependencies]
    winapi = "0.3"

    [target."cfg(unix)".build-dependencies]
    pkg-config = { version = "0.3", optional = true }

    [target.'cfg(target_arch = "wasm32")'.dependencies.js-sys]
    version = "0.3.45"
    optional = true

    [dev-dependencies]
    hyper = { version = "1.1", features = ["server"] }
    "#;
        let unix = Some("cfg(unix)");
        let native = Some(r#"cfg(not(target_arch = "wasm32"))"#);
        let wasm = Some(r#"cfg(target_arch = "wasm32")"#);
        assert_eq!(
            full("Cargo.toml", text),
            vec![
                f("base64", "0.22", Kind::Normal, 10, false, None, None),
                f("serde_json", "1.0", Kind::Optional, 11, true, None, None),
                f(
                    "futures-util",
                    "0.3.28",
                    Kind::Optional,
                    12,
                    true,
                    None,
                    None
                ),
                f(
                    "cookie_crate",
                    "0.18.0",
                    Kind::Optional,
                    13,
                    true,
                    None,
                    None
                ),
                f("not-optional", "1", Kind::Normal, 14, false, None, None),
                f("also-not", "1", Kind::Normal, 15, false, None, None),
                f("optional-looking", "2", Kind::Normal, 16, false, None, None),
                f(
                    "hickory-resolver",
                    "0.24",
                    Kind::Optional,
                    18,
                    true,
                    None,
                    None
                ),
                f("tokio", "1.0", Kind::Normal, 24, false, native, None),
                f("rustls", "0.23.4", Kind::Optional, 25, true, native, None),
                f(
                    "windows-registry",
                    "0.2",
                    Kind::Normal,
                    28,
                    false,
                    Some("cfg(windows)"),
                    None
                ),
                f(
                    "winapi",
                    "0.3",
                    Kind::Dev,
                    31,
                    false,
                    Some("x86_64-pc-windows-msvc"),
                    None
                ),
                // An optional build dependency stays a build dependency.
                f("pkg-config", "0.3", Kind::Build, 34, true, unix, None),
                f("js-sys", "0.3.45", Kind::Optional, 36, true, wasm, None),
                f("hyper", "1.1", Kind::Dev, 41, false, None, None),
            ]
        );
        // Making a dependency optional shows in the diff as a change of kind.
        let before = parse("Cargo.toml", "[dependencies]\nserde_json = \"1.0\"\n").unwrap();
        let after = parse(
            "Cargo.toml",
            "[dependencies]\nserde_json = { version = \"1.0\", optional = true }\n",
        )
        .unwrap();
        assert_eq!(
            diff(Some(&before), Some(&after)),
            vec![
                Change::Removed {
                    name: "serde_json".into(),
                    kind: Kind::Normal,
                    requirement: "1.0".into()
                },
                Change::Added {
                    name: "serde_json".into(),
                    kind: Kind::Optional,
                    requirement: "1.0".into()
                },
            ]
        );
    }
}
