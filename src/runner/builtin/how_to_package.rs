//! `package.json` read for its scripts: checked as JSON by `serde_json`,
//! then walked as written, depth by depth with strings and their escapes
//! respected, so each script of the top-level `scripts` object is found on
//! its own key, whatever other object holds a key of the same name.
//!
//! Invariants: pure; each script is `npm run <name>` citing its key's line
//! through its value's, so a change to either makes it stale; only the keys
//! of the top-level `scripts` object are scripts; a name written twice, or
//! `scripts` written twice, yields no fact (a parser runs the last, a
//! reviewer reads the first); at most [`FACTS_PER_FILE`] facts; the walk
//! reads each byte once.

use super::how_to_facts::{
    FACTS_PER_FILE, HowToFact, TEXT_BYTES, Topic, cite, clip, command_fact, topic_of,
};

/// A JSON text walked for where its members are written. It is walked only
/// after `serde_json` accepted it, so its shape is valid; a walk that meets
/// what it does not expect gives `None`.
struct JsonWalk<'a> {
    text: &'a str,
    at: usize,
    /// The 0-based line of `at`.
    line: usize,
}

impl<'a> JsonWalk<'a> {
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.at).copied()
    }

    fn space(&mut self) {
        while let Some(b) = self.peek().filter(u8::is_ascii_whitespace) {
            self.line += usize::from(b == b'\n');
            self.at += 1;
        }
    }

    /// The string at the cursor, quotes included (escapes are skipped, so
    /// an escaped quote does not end it).
    fn string(&mut self) -> Option<&'a str> {
        let start = self.at;
        (self.peek()? == b'"').then_some(())?;
        self.at += 1;
        loop {
            match self.peek()? {
                b'\\' => self.at += 2,
                b'"' => {
                    self.at += 1;
                    return self.text.get(start..self.at);
                }
                _ => self.at += 1,
            }
        }
    }

    /// Steps over the value at the cursor: a string, a scalar, or an
    /// object or array with all it nests (strings inside read as strings).
    fn value(&mut self) -> Option<()> {
        let mut depth = 0usize;
        loop {
            match self.peek()? {
                b'"' => {
                    self.string()?;
                }
                b'{' | b'[' => {
                    depth += 1;
                    self.at += 1;
                }
                b'}' | b']' if depth > 0 => {
                    depth -= 1;
                    self.at += 1;
                }
                // The end of a scalar: what holds it goes on.
                b'}' | b']' | b',' if depth == 0 => return Some(()),
                b'\n' => {
                    self.line += 1;
                    self.at += 1;
                }
                _ => self.at += 1,
            }
            if depth == 0 && matches!(self.text.as_bytes()[self.at - 1], b'"' | b'}' | b']') {
                return Some(());
            }
        }
    }

    /// Walks the object at the cursor: `each` gets each key (quoted, as
    /// written), the line it is on, and the cursor at its value, which it
    /// must step over.
    fn object(
        &mut self,
        mut each: impl FnMut(&mut Self, &'a str, usize) -> Option<()>,
    ) -> Option<()> {
        (self.peek()? == b'{').then_some(())?;
        self.at += 1;
        loop {
            self.space();
            if self.peek()? == b'}' {
                self.at += 1;
                return Some(());
            }
            let line = self.line;
            let key = self.string()?;
            self.space();
            (self.peek()? == b':').then_some(())?;
            self.at += 1;
            self.space();
            each(self, key, line)?;
            self.space();
            match self.peek()? {
                b',' => self.at += 1,
                b'}' => {
                    self.at += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }
}

/// `package.json`'s top-level `scripts`, as written: (name, first line,
/// last line, the value as written) of each, in file order; `None` when the
/// top level holds `scripts` twice.
fn package_scripts(text: &str) -> Option<Vec<(String, usize, usize, &str)>> {
    let mut walk = JsonWalk {
        text,
        at: 0,
        line: 0,
    };
    walk.space();
    let mut scripts = Vec::new();
    let mut objects = 0;
    walk.object(|walk, key, _| {
        if serde_json::from_str::<String>(key).ok()? != "scripts" {
            return walk.value();
        }
        objects += 1;
        if walk.peek()? != b'{' {
            return walk.value();
        }
        walk.object(|walk, key, line| {
            let from = walk.at;
            walk.value()?;
            scripts.push((
                serde_json::from_str::<String>(key).ok()?,
                line,
                walk.line,
                &walk.text[from..walk.at],
            ));
            Some(())
        })
    })?;
    // Two `scripts` objects: a parser keeps the last, a reader sees the first.
    (objects == 1).then_some(scripts)
}

/// `package.json`'s scripts, each as `npm run <name>` citing its key's line
/// through its value's. A name written twice gives no fact: a parser keeps
/// the last, a reviewer reads the first.
pub(super) fn package_json(path: &str, text: &str, lines: &[&str]) -> Vec<HowToFact> {
    // The walk below trusts the shape; only valid JSON is walked.
    if serde_json::from_str::<serde::de::IgnoredAny>(text).is_err() {
        return Vec::new();
    }
    let Some(scripts) = package_scripts(text) else {
        return Vec::new();
    };
    let mut written: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for (name, ..) in &scripts {
        *written.entry(name.as_str()).or_default() += 1;
    }
    let mut facts = Vec::new();
    for (name, from, to, value) in &scripts {
        if facts.len() >= FACTS_PER_FILE {
            break;
        }
        if written[name.as_str()] > 1 || *to >= lines.len() {
            continue;
        }
        let Ok(script) = serde_json::from_str::<String>(value) else {
            continue;
        };
        let Some(cited) = cite(*from, *to) else {
            continue;
        };
        let topic = topic_of(name, &script).unwrap_or(Topic::Other);
        facts.push(command_fact(
            path,
            (topic, cited),
            Some(format!("npm run {name}")),
            format!("package.json script {}", clip(name, TEXT_BYTES)),
            vec![script],
        ));
    }
    facts
}
