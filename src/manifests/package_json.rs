//! `package.json`: its `dependencies`, `devDependencies`,
//! `peerDependencies` and `optionalDependencies` objects.
//!
//! Invariant: walked token by token so each name keeps its line; a cut or
//! broken file yields what precedes the break, never a guess past it.

use super::dependency::{Dependency, Kind, line_no};

/// A JSON string token at the start of `text`: decoded, and its byte length.
fn json_string(text: &str) -> Option<(String, usize)> {
    let bytes = text.as_bytes();
    if bytes.first() != Some(&b'"') {
        return None;
    }
    let mut i = 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => {
                let raw = &text[..=i];
                let decoded = serde_json::from_str::<String>(raw).ok()?;
                return Some((decoded, i + 1));
            }
            _ => i += 1,
        }
    }
    None
}

/// package.json's dependency objects, walked token by token so each name
/// keeps its line (a cut or broken file yields what precedes the break).
pub(super) fn package_json(text: &str) -> Vec<Dependency> {
    let kind_of = |key: &str| match key {
        "dependencies" => Some(Kind::Normal),
        "devDependencies" => Some(Kind::Dev),
        "peerDependencies" => Some(Kind::Peer),
        "optionalDependencies" => Some(Kind::Optional),
        _ => None,
    };
    let mut out = Vec::new();
    // Per open container: is it an object, and the key whose value comes next.
    let mut stack: Vec<(bool, Option<String>)> = Vec::new();
    // The kind of the dependency object we are in, at depth 2.
    let mut section: Option<Kind> = None;
    let mut expect_key = false;
    let mut line = 0usize;
    let mut key_line = 0usize;
    let mut i = 0;
    let bytes = text.as_bytes();
    while i < bytes.len() {
        match bytes[i] {
            b'\n' => line += 1,
            b'{' | b'[' => {
                let object = bytes[i] == b'{';
                if stack.len() == 1 && object {
                    section = stack[0].1.as_deref().and_then(kind_of);
                }
                stack.push((object, None));
                expect_key = object;
            }
            b'}' | b']' => {
                stack.pop();
                if stack.len() < 2 {
                    section = None;
                }
                if let Some(top) = stack.last_mut() {
                    top.1 = None;
                }
                expect_key = false;
            }
            b',' => {
                expect_key = stack.last().is_some_and(|t| t.0);
                if let Some(top) = stack.last_mut() {
                    top.1 = None;
                }
            }
            b':' => expect_key = false,
            b'"' => {
                let Some((value, len)) = json_string(&text[i..]) else {
                    break;
                };
                if expect_key {
                    key_line = line;
                    if let Some(top) = stack.last_mut() {
                        top.1 = Some(value);
                    }
                } else if stack.len() == 2
                    && let Some(kind) = section
                    && let Some(name) = stack[1].1.take()
                {
                    out.push(Dependency {
                        optional: kind == Kind::Optional,
                        ..Dependency::plain(name, value, kind, line_no(key_line))
                    });
                }
                line += text[i..i + len].matches('\n').count();
                i += len;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::manifests::Kind;
    use crate::manifests::expect::{d, deps};

    #[test]
    fn package_json_every_section_with_lines() {
        let text = r#"{
      "name": "web",
      "version": "1.0.0",
      "scripts": { "dependencies": "not this" },
      "dependencies": {
    "react": "^18.2.0",
    "@scope/pkg": "~1.0"
      },
      "devDependencies": { "vitest": "1.6.0" },
      "peerDependencies": {
    "react-dom": ">=18"
      },
      "optionalDependencies": {
    "fsevents": "*"
      },
      "nested": { "dependencies": { "no": "1" } }
    }"#;
        assert_eq!(
            deps("package.json", text),
            vec![
                d("react", "^18.2.0", Kind::Normal, 6),
                d("@scope/pkg", "~1.0", Kind::Normal, 7),
                d("vitest", "1.6.0", Kind::Dev, 9),
                d("react-dom", ">=18", Kind::Peer, 11),
                d("fsevents", "*", Kind::Optional, 14),
            ]
        );
        // A broken file yields what precedes the break; never a panic.
        let broken = &text[..text.find("vitest").unwrap() + 3];
        assert_eq!(deps("package.json", broken).len(), 2);
        assert!(deps("package.json", "[1, {\"a\": }").is_empty());
    }
}
