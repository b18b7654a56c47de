//! The contract between the runner and the job-bound wiki-writer child it
//! spawns (`teammem mcp --wiki-writer`): the environment names and their one
//! encode/decode pair ([`WriterEnv`]), the descriptor numbers the child
//! inherits, the commit trailers every write carries, the broker's wire
//! protocol with the child's client ([`broker`]), and the writer's tools on
//! the wire ([`tools`]).
//!
//! Both sides import this module and nothing of each other: the runner
//! (`runner/`) encodes, the writer (`mcp/`) decodes.
//!
//! Invariants:
//! - no credential is ever part of a [`WriterEnv`] the runner encodes: a job's
//!   wiki token crosses only the broker socket; [`WriterEnv::token`] exists
//!   for an operator who runs a writer by hand;
//! - decoding refuses a descriptor number other than the one the runner
//!   installs, a token next to a broker, and multi-line or oversized job and
//!   range values (they become commit trailers);
//! - decoding never reads a file: loading the configuration the environment
//!   names is the writer's business;
//! - a `command` agent's endpoint answers only connections that first send the
//!   job's capability ([`capability_preamble`]); the writer gets the value
//!   over the inherited gate ([`AGENT_GATE_FD`]), never in its environment
//!   or argv, and the agent from a file in its job's work directory.

pub mod broker; // the broker's wire protocol (one JSON line each way) and the writer's client
pub mod tools; // the writer's tool names, and the arguments and results of the tools the runner calls

use std::ffi::OsString;
use std::os::fd::RawFd;
use std::path::PathBuf;

use crate::ids::Scope;
use crate::wiki::Secret;

/// The writer's configuration file.
pub const ENV_CONFIG: &str = "TEAMMEM_CONFIG";
/// The one source (`owner/name`) the writer serves.
pub const ENV_WRITER_SOURCE: &str = "TEAMMEM_WRITER_SOURCE";
/// The job id (becomes the `Teammem-Job` trailer).
pub const ENV_WRITER_JOB: &str = "TEAMMEM_WRITER_JOB";
/// The job's range, `before..after` or `#N@sha` (the `Teammem-Range` trailer).
pub const ENV_WRITER_RANGE: &str = "TEAMMEM_WRITER_RANGE";
/// A wiki token for a writer run by hand; never set by the runner.
pub const ENV_WRITER_TOKEN: &str = "TEAMMEM_WRITER_TOKEN";
/// The descriptor number of the job's broker socket ([`BROKER_FD`]).
pub const ENV_WRITER_BROKER_FD: &str = "TEAMMEM_WRITER_BROKER_FD";
/// The descriptor number of a listening socket the writer also serves MCP on
/// (a `command` agent's endpoint, reached with `teammem mcp --connect`).
pub const ENV_WRITER_AGENT_FD: &str = "TEAMMEM_WRITER_AGENT_FD";
/// The job's evidence bundle file (served by the evidence toolset).
pub const ENV_WRITER_EVIDENCE: &str = "TEAMMEM_WRITER_EVIDENCE";
/// The log filter the child inherits from the daemon (never a secret).
pub const ENV_LOG: &str = "TEAMMEM_LOG";

/// The descriptor number the broker's socket has in the writer child.
pub const BROKER_FD: RawFd = 3;
/// The descriptor number of the agent's listening socket in the writer child.
pub const AGENT_FD: RawFd = 4;
/// In a writer given [`AGENT_FD`], the descriptor number of its end of the
/// agent gate: a Unix socket on which the runner sends the endpoint's
/// capability (hex, one line, then end of input) and the writer sends back
/// one [`Refusal`] byte per connection it refused.
pub const AGENT_GATE_FD: RawFd = 5;

/// The first bytes a connection to a job's agent endpoint must send: this,
/// the job's capability in hex, a line feed; anything else is refused unanswered.
pub const CAPABILITY_PREFIX: &str = "teammem-capability ";
/// A capability's length in lowercase hex digits (32 random bytes).
pub const CAPABILITY_HEX_LEN: usize = 64;
/// The preamble's whole length: prefix, capability, line feed.
pub const CAPABILITY_PREAMBLE_LEN: usize = CAPABILITY_PREFIX.len() + CAPABILITY_HEX_LEN + 1;

/// A fresh capability for one job's agent endpoint: 32 random bytes in hex.
pub fn new_capability() -> crate::secrets::Secret {
    use rand::RngCore;
    let mut bytes = [0u8; CAPABILITY_HEX_LEN / 2];
    rand::rng().fill_bytes(&mut bytes);
    let capability = crate::secrets::Secret::from(hex::encode(bytes));
    zeroize::Zeroize::zeroize(&mut bytes);
    capability
}

/// The capability in `text` (a capability file's or the gate's bytes: the
/// hex digits, optionally followed by one line feed), checked.
pub fn parse_capability(text: &[u8]) -> Result<crate::secrets::Secret, String> {
    let digits = text.strip_suffix(b"\n").unwrap_or(text);
    if digits.len() != CAPABILITY_HEX_LEN
        || !digits
            .iter()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
    {
        return Err(format!(
            "a capability is {CAPABILITY_HEX_LEN} lowercase hex digits on one line"
        ));
    }
    Ok(crate::secrets::Secret::new(digits.to_vec()))
}

/// The preamble a connection carrying `capability` sends first.
pub fn capability_preamble(capability: &crate::secrets::Secret) -> crate::secrets::Secret {
    let mut line = Vec::with_capacity(CAPABILITY_PREAMBLE_LEN);
    line.extend_from_slice(CAPABILITY_PREFIX.as_bytes());
    line.extend_from_slice(capability.expose());
    line.push(b'\n');
    crate::secrets::Secret::new(line)
}

/// Why an agent endpoint refused a connection: the byte the writer sends the
/// runner over the gate, and the label of the runner's counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The connection ended or stayed silent before a whole preamble.
    Missing,
    /// A whole preamble that does not carry this job's capability.
    Wrong,
    /// A peer of another user.
    OtherUser,
}

impl Refusal {
    pub const ALL: [Refusal; 3] = [Refusal::Missing, Refusal::Wrong, Refusal::OtherUser];

    pub fn byte(self) -> u8 {
        match self {
            Refusal::Missing => b'm',
            Refusal::Wrong => b'w',
            Refusal::OtherUser => b'u',
        }
    }

    pub fn from_byte(byte: u8) -> Option<Refusal> {
        Refusal::ALL.into_iter().find(|r| r.byte() == byte)
    }

    pub fn label(self) -> &'static str {
        match self {
            Refusal::Missing => "missing",
            Refusal::Wrong => "wrong",
            Refusal::OtherUser => "other_user",
        }
    }
}

/// Commit trailer keys.
pub const TRAILER_JOB: &str = "Teammem-Job";
pub const TRAILER_SOURCE: &str = "Teammem-Source";
pub const TRAILER_RANGE: &str = "Teammem-Range";
pub const TRAILER_ORIGIN: &str = "Teammem-Origin";

/// A source file is served to a writer up to this many bytes.
pub const MAX_SOURCE_FILE: usize = 64 * 1024;

/// Longest job or range value (each becomes one trailer line).
const MAX_TRAILER_VALUE: usize = 512;

/// What a writer child's environment says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriterEnv {
    pub config_path: PathBuf,
    /// The one source (`owner/name`) the writer serves.
    pub source: String,
    pub job: Option<String>,
    pub range: Option<Scope>,
    pub evidence: Option<PathBuf>,
    /// Only for a writer run by hand; the runner's writers ask the broker.
    pub token: Option<Secret>,
    /// Descriptor [`BROKER_FD`] is the job's broker.
    pub broker: bool,
    /// Descriptor [`AGENT_FD`] is a listening socket to serve agents on.
    pub agent: bool,
}

impl WriterEnv {
    /// The variables to set in a cleared environment.
    pub fn encode(&self) -> Vec<(&'static str, OsString)> {
        let mut env = vec![
            (ENV_CONFIG, self.config_path.clone().into_os_string()),
            (ENV_WRITER_SOURCE, self.source.clone().into()),
        ];
        if let Some(job) = &self.job {
            env.push((ENV_WRITER_JOB, job.into()));
        }
        if let Some(range) = &self.range {
            env.push((ENV_WRITER_RANGE, range.to_string().into()));
        }
        if let Some(evidence) = &self.evidence {
            env.push((ENV_WRITER_EVIDENCE, evidence.clone().into_os_string()));
        }
        if let Some(token) = &self.token {
            env.push((
                ENV_WRITER_TOKEN,
                <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(token.expose())
                    .to_owned(),
            ));
        }
        if self.broker {
            env.push((ENV_WRITER_BROKER_FD, BROKER_FD.to_string().into()));
        }
        if self.agent {
            env.push((ENV_WRITER_AGENT_FD, AGENT_FD.to_string().into()));
        }
        env
    }

    /// The inverse of [`WriterEnv::encode`]: `get` is `std::env::var` in
    /// production, a map in tests; empty values count as unset.
    pub fn decode(get: impl Fn(&str) -> Option<String>) -> Result<WriterEnv, String> {
        let get = |name: &str| get(name).filter(|value| !value.is_empty());
        let config_path = get(ENV_CONFIG).ok_or_else(|| {
            format!(
                "{ENV_CONFIG} is not set; the wiki writer takes its configuration path only from the environment"
            )
        })?;
        let source = get(ENV_WRITER_SOURCE).ok_or_else(|| {
            format!(
                "{ENV_WRITER_SOURCE} is not set; name the one source (owner/name) this writer serves"
            )
        })?;
        let range = get(ENV_WRITER_RANGE)
            .map(|text| Scope::parse(&text).map_err(|e| format!("{ENV_WRITER_RANGE}: {e}")))
            .transpose()?;
        for name in [ENV_WRITER_JOB] {
            if let Some(value) = get(name)
                && (value.len() > MAX_TRAILER_VALUE || value.chars().any(char::is_control))
            {
                return Err(format!(
                    "{name} must be one line of at most {MAX_TRAILER_VALUE} bytes"
                ));
            }
        }
        let descriptor = |name: &str, expected: RawFd| -> Result<bool, String> {
            match get(name) {
                None => Ok(false),
                Some(value) if value == expected.to_string() => Ok(true),
                Some(_) => Err(format!(
                    "{name} must be {expected}, the descriptor the runner installs; only the runner starts a writer bound to a job"
                )),
            }
        };
        let broker = descriptor(ENV_WRITER_BROKER_FD, BROKER_FD)?;
        let agent = descriptor(ENV_WRITER_AGENT_FD, AGENT_FD)?;
        let token = get(ENV_WRITER_TOKEN).map(Secret::new);
        if token.is_some() && broker {
            return Err(format!(
                "{ENV_WRITER_TOKEN} and {ENV_WRITER_BROKER_FD} are both set; a writer takes its wiki token from one of them"
            ));
        }
        Ok(WriterEnv {
            config_path: PathBuf::from(config_path),
            source,
            job: get(ENV_WRITER_JOB),
            range,
            evidence: get(ENV_WRITER_EVIDENCE).map(PathBuf::from),
            token,
            broker,
            agent,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn decode(env: &[(&'static str, OsString)]) -> Result<WriterEnv, String> {
        let map: HashMap<&str, String> = env
            .iter()
            .map(|(k, v)| (*k, v.clone().into_string().unwrap()))
            .collect();
        WriterEnv::decode(|name| map.get(name).cloned())
    }

    #[test]
    fn what_the_runner_encodes_decodes_to_the_same_binding() {
        let env = WriterEnv {
            config_path: "/etc/teammem.toml".into(),
            source: "octo/app".into(),
            job: Some("7".into()),
            range: Some(Scope::parse(&format!("{}..{}", "a".repeat(40), "b".repeat(40))).unwrap()),
            evidence: Some("/var/lib/teammem/jobs/7/evidence.json".into()),
            token: None,
            broker: true,
            agent: true,
        };
        assert_eq!(decode(&env.encode()).unwrap(), env);
    }

    #[test]
    fn a_capability_is_64_lowercase_hex_digits_and_its_preamble_one_line() {
        let capability = new_capability();
        assert_ne!(capability, new_capability());
        let text = capability.expose_str().unwrap().to_owned();
        assert_eq!(
            parse_capability(format!("{text}\n").as_bytes()).unwrap(),
            capability
        );
        assert_eq!(parse_capability(text.as_bytes()).unwrap(), capability);
        for bad in [
            text.to_uppercase(),
            format!("{text}\n\n"),
            text[1..].to_owned(),
            format!("{text}0"),
            String::new(),
        ] {
            assert!(parse_capability(bad.as_bytes()).is_err(), "{bad:?}");
        }
        let preamble = capability_preamble(&capability);
        assert_eq!(preamble.expose().len(), CAPABILITY_PREAMBLE_LEN);
        assert_eq!(
            preamble.expose_str().unwrap(),
            format!("{CAPABILITY_PREFIX}{text}\n")
        );
        for refusal in Refusal::ALL {
            assert_eq!(Refusal::from_byte(refusal.byte()), Some(refusal));
        }
        assert_eq!(Refusal::from_byte(b'x'), None);
    }

    #[test]
    fn a_trailer_value_with_a_line_break_is_refused() {
        let mut env = WriterEnv {
            config_path: "/c.toml".into(),
            source: "octo/app".into(),
            job: Some("7\nTeammem-Origin: forged".into()),
            range: None,
            evidence: None,
            token: None,
            broker: false,
            agent: false,
        };
        assert!(decode(&env.encode()).unwrap_err().contains(ENV_WRITER_JOB));
        env.job = None;
        env.token = Some(Secret::new("t"));
        env.broker = true;
        assert!(decode(&env.encode()).unwrap_err().contains("both set"));
    }
}
