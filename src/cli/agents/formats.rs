//! What `teammem agents setup` generates: each coding agent host's MCP entry
//! for the `teammem` server (Claude Code's `.mcp.json`, VS Code's
//! `.vscode/mcp.json`, Cursor's `.cursor/mcp.json`, Codex's
//! `.codex/config.toml`) and the `AGENTS.md` block telling agents to ask
//! `get_context` first. Pure text; no file is read or written here.
//!
//! Invariant: nothing generated holds a secret. An HTTP entry names the
//! environment variable the host reads the token from (each host's own
//! expansion syntax), never a value; a stdio entry names the configuration
//! file, which itself holds only variable names.

use super::json::Json;

/// The server's name in every host's configuration.
pub(super) const SERVER: &str = "teammem";

/// The line that opens teammem's block in `AGENTS.md`.
pub(super) const AGENTS_START: &str = "<!-- teammem:agents -->";
/// The line that closes it.
pub(super) const AGENTS_END: &str = "<!-- teammem:agents-end -->";
/// Where the block goes, relative to the checkout.
pub(super) const AGENTS_FILE: &str = "AGENTS.md";

/// A coding agent host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Client {
    ClaudeCode,
    Vscode,
    Cursor,
    Codex,
}

impl Client {
    pub(super) const ALL: [Client; 4] = [
        Client::ClaudeCode,
        Client::Vscode,
        Client::Cursor,
        Client::Codex,
    ];

    pub(super) fn title(self) -> &'static str {
        match self {
            Client::ClaudeCode => "Claude Code",
            Client::Vscode => "VS Code",
            Client::Cursor => "Cursor",
            Client::Codex => "Codex",
        }
    }

    /// The `--client` value that names it.
    pub(super) fn flag(self) -> &'static str {
        match self {
            Client::ClaudeCode => "claude-code",
            Client::Vscode => "vscode",
            Client::Cursor => "cursor",
            Client::Codex => "codex",
        }
    }

    /// The project file the host reads its MCP servers from, relative to
    /// the checkout.
    pub(super) fn path(self) -> &'static str {
        match self {
            Client::ClaudeCode => ".mcp.json",
            Client::Vscode => ".vscode/mcp.json",
            Client::Cursor => ".cursor/mcp.json",
            Client::Codex => ".codex/config.toml",
        }
    }

    /// The object of a JSON file that maps server names to entries; `None`
    /// for Codex's TOML.
    pub(super) fn json_container(self) -> Option<&'static str> {
        match self {
            Client::ClaudeCode | Client::Cursor => Some("mcpServers"),
            Client::Vscode => Some("servers"),
            Client::Codex => None,
        }
    }

    /// A word on how the host uses the file, for the printed header.
    pub(super) fn note(self) -> &'static str {
        match self {
            Client::ClaudeCode => {
                "project scope; Claude Code asks once before it uses a project's servers"
            }
            Client::Vscode => "the workspace's MCP servers (Copilot agent mode)",
            Client::Cursor => "the project's MCP servers",
            Client::Codex => "read in trusted projects; ~/.codex/config.toml takes the same table",
        }
    }
}

/// How the host reaches teammem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Transport {
    /// The daemon's `/mcp`, with the bearer token from `token_env`.
    Http { url: String, token_env: String },
    /// `teammem mcp` as the host's child process.
    Stdio { program: String, args: Vec<String> },
}

impl Transport {
    /// The stdio server's command line: read tools only, for one
    /// configuration file.
    pub(super) fn stdio(config: &str) -> Transport {
        Transport::Stdio {
            program: "teammem".into(),
            args: vec![
                "mcp".into(),
                "--config".into(),
                config.into(),
                "--read-only".into(),
            ],
        }
    }
}

/// The `teammem` entry of a JSON host.
pub(super) fn json_entry(client: Client, transport: &Transport) -> Json {
    match transport {
        Transport::Http { url, token_env } => {
            let bearer = match client {
                // Claude Code expands `${VAR}`; VS Code and Cursor `${env:VAR}`.
                Client::ClaudeCode => format!("Bearer ${{{token_env}}}"),
                _ => format!("Bearer ${{env:{token_env}}}"),
            };
            let headers = Json::object([("Authorization", Json::string(bearer))]);
            match client {
                // Cursor tells HTTP from SSE itself and takes no `type`.
                Client::Cursor => Json::object([("url", Json::string(url)), ("headers", headers)]),
                _ => Json::object([
                    ("type", Json::string("http")),
                    ("url", Json::string(url)),
                    ("headers", headers),
                ]),
            }
        }
        Transport::Stdio { program, args } => {
            let args = Json::Array(args.iter().map(Json::string).collect());
            match client {
                Client::Cursor => {
                    Json::object([("command", Json::string(program)), ("args", args)])
                }
                _ => Json::object([
                    ("type", Json::string("stdio")),
                    ("command", Json::string(program)),
                    ("args", args),
                ]),
            }
        }
    }
}

/// A whole JSON file holding only the `teammem` entry.
pub(super) fn json_document(client: Client, transport: &Transport) -> Json {
    let container = client.json_container().unwrap_or("mcpServers");
    Json::Object(vec![(
        container.to_owned(),
        Json::Object(vec![(SERVER.to_owned(), json_entry(client, transport))]),
    )])
}

/// Codex's `[mcp_servers.teammem]` table, ending with a newline.
pub(super) fn codex_table(transport: &Transport) -> String {
    let mut text = format!("[mcp_servers.{SERVER}]\n");
    match transport {
        Transport::Http { url, token_env } => {
            text += &format!("url = {}\n", toml_string(url));
            text += &format!("bearer_token_env_var = {}\n", toml_string(token_env));
        }
        Transport::Stdio { program, args } => {
            text += &format!("command = {}\n", toml_string(program));
            let args: Vec<String> = args.iter().map(|a| toml_string(a)).collect();
            text += &format!("args = [{}]\n", args.join(", "));
        }
    }
    text
}

/// A TOML basic string.
fn toml_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The `AGENTS.md` block, markers included, each line ending with `\n`.
pub(super) fn agents_block(repository: &str) -> String {
    format!(
        "{AGENTS_START}
## Team memory (teammem)

This repository's team memory is its wiki, which teammem keeps in step with
every merge; the `teammem` MCP server serves it (source repository
`{repository}`).

- Before you change files, call `get_context` with `repository: \"{repository}\"`
  and the `paths` you are about to change (repository-relative files or
  folders, at most 50), plus a `query` when you have a question (\"how do I
  run the tests?\"). It answers each path's purpose, the wiki facts that cite
  it, the pull requests that touched it, who knows its area and how to build
  and test, within `max_tokens`; `read_more` names the pages to read next
  (`get_wiki_page`), and `search_wiki` answers other questions.
- Trust a fact by its `as_of` and its `status`. `as_of` is the commit the
  memory is reconciled to: later commits are not in it yet. A `current` or
  `re-anchored` fact cites lines unchanged since it was written; a `stale`
  fact's lines changed in the commit it names, so check the code before you
  rely on it.
- When the code and the wiki disagree, the code is right: follow it and say
  so in your change's description.
{AGENTS_END}
"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http() -> Transport {
        Transport::Http {
            url: "https://teammem.example.org/mcp".into(),
            token_env: "TEAMMEM_TOKEN".into(),
        }
    }

    #[test]
    fn each_host_names_the_variable_in_its_own_syntax() {
        let claude = json_document(Client::ClaudeCode, &http()).to_pretty();
        assert!(claude.contains("\"Bearer ${TEAMMEM_TOKEN}\""), "{claude}");
        for client in [Client::Vscode, Client::Cursor] {
            let text = json_document(client, &http()).to_pretty();
            assert!(text.contains("\"Bearer ${env:TEAMMEM_TOKEN}\""), "{text}");
        }
        let codex = codex_table(&http());
        let table: toml::Table = toml::from_str(&codex).unwrap();
        assert_eq!(
            table["mcp_servers"]["teammem"]["bearer_token_env_var"].as_str(),
            Some("TEAMMEM_TOKEN")
        );
    }

    #[test]
    fn toml_strings_escape_what_toml_requires() {
        let transport = Transport::stdio("/srv/a \"b\"\\c\u{7}/teammem.toml");
        let table: toml::Table = toml::from_str(&codex_table(&transport)).unwrap();
        let args = table["mcp_servers"]["teammem"]["args"].as_array().unwrap();
        assert_eq!(args[2].as_str(), Some("/srv/a \"b\"\\c\u{7}/teammem.toml"));
    }

    #[test]
    fn the_agents_block_opens_and_closes_with_its_markers() {
        let block = agents_block("octo/app");
        let lines: Vec<&str> = block.lines().collect();
        assert_eq!(lines.first(), Some(&AGENTS_START));
        assert_eq!(lines.last(), Some(&AGENTS_END));
        assert!(block.contains("repository: \"octo/app\""), "{block}");
        assert!(block.ends_with('\n'));
    }
}
