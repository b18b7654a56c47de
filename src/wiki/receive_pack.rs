//! Our smart-HTTP client for what gix does not do: reading a ref advertisement
//! (one GET) and pushing one compare-and-swap ref update with a prebuilt pack
//! (one stateless git-receive-pack POST, protocol V1, report-status +
//! side-band-64k). It reports what the server said and never retries;
//! classifying the outcome is the caller's job.

use std::io::{Read, Write};
use std::time::Instant;

use gix::ObjectId;
use gix::protocol::handshake::Ref;
use gix::protocol::transport::client::blocking_io::Transport;
use gix::protocol::transport::client::blocking_io::http::{Http, PostBodyDataKind};
use gix::protocol::transport::packetline::PacketLineRef;
use gix::protocol::transport::packetline::blocking_io::{StreamingPeekableIter, encode};
use gix::protocol::transport::{Protocol, Service};

use super::error::{ErrorKind, WikiError};
use super::remote::{HttpRemote, HttpTransport};

/// What an advertisement says about the default branch.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AdvertisedRefs {
    pub refs: Vec<Ref>,
}

impl AdvertisedRefs {
    /// The tip of `refs/heads/<branch>`, if advertised.
    pub fn branch_tip(&self, branch: &str) -> Option<ObjectId> {
        let full = format!("refs/heads/{branch}");
        self.refs.iter().find_map(|r| match r {
            Ref::Direct {
                full_ref_name,
                object,
            } if *full_ref_name == full => Some(*object),
            Ref::Symbolic {
                full_ref_name,
                object,
                ..
            } if *full_ref_name == full => Some(*object),
            _ => None,
        })
    }

    /// The remote `HEAD`: (branch, tip). Falls back to the only branch, then to
    /// `master`/`main`, when the server does not advertise the symref.
    pub fn head(&self) -> (Option<String>, Option<ObjectId>) {
        for r in &self.refs {
            match r {
                Ref::Symbolic {
                    full_ref_name,
                    target,
                    object,
                    ..
                } if full_ref_name == "HEAD" => {
                    let branch = target.to_string();
                    let branch = branch
                        .strip_prefix("refs/heads/")
                        .unwrap_or(&branch)
                        .to_owned();
                    return (Some(branch), Some(*object));
                }
                Ref::Unborn {
                    full_ref_name,
                    target,
                } if full_ref_name == "HEAD" => {
                    let branch = target.to_string();
                    let branch = branch
                        .strip_prefix("refs/heads/")
                        .unwrap_or(&branch)
                        .to_owned();
                    return (Some(branch), None);
                }
                _ => {}
            }
        }
        let branches: Vec<(String, ObjectId)> = self
            .refs
            .iter()
            .filter_map(|r| match r {
                Ref::Direct {
                    full_ref_name,
                    object,
                } => full_ref_name
                    .to_string()
                    .strip_prefix("refs/heads/")
                    .map(|b| (b.to_owned(), *object)),
                _ => None,
            })
            .collect();
        if let [(branch, tip)] = branches.as_slice() {
            return (Some(branch.clone()), Some(*tip));
        }
        for preferred in ["master", "main"] {
            if let Some((branch, tip)) = branches.iter().find(|(b, _)| b == preferred) {
                return (Some(branch.clone()), Some(*tip));
            }
        }
        (None, None)
    }
}

/// Maps a transport failure to an error kind by what the server answered.
pub fn classify_transport_error(doing: &str, err: &dyn std::fmt::Debug) -> WikiError {
    let text = format!("{err:#?}");
    let (kind, message) = if text.contains("HTTP status 401")
        || text.contains("AuthenticationRequired")
        || text.contains("uthentication")
    {
        (
            ErrorKind::AuthenticationError,
            format!(
                "the wiki remote refused the credentials while {doing}; check the token configured for this wiki"
            ),
        )
    } else if text.contains("HTTP status 403") {
        (
            ErrorKind::PermissionDenied,
            format!(
                "the wiki remote denied access while {doing}; the credential lacks permission for this wiki"
            ),
        )
    } else if text.contains("HTTP status 404") {
        (
            ErrorKind::NotFound,
            format!(
                "the wiki repository was not found while {doing}; check that the wiki exists and has at least one page"
            ),
        )
    } else if text.contains("HTTP status 429") {
        (
            ErrorKind::RateLimited,
            format!("the wiki remote is rate limiting requests ({doing}); try again later"),
        )
    } else if text.contains("HTTP status 5") {
        (
            ErrorKind::UpstreamError,
            format!("the wiki remote failed with a server error while {doing}; try again later"),
        )
    } else if text.contains("HTTP status") {
        (
            ErrorKind::UpstreamError,
            format!("the wiki remote answered with an unexpected HTTP status while {doing}"),
        )
    } else if text.contains("imed out") || text.contains("TimedOut") {
        (
            ErrorKind::Timeout,
            format!("the wiki remote did not answer in time while {doing}"),
        )
    } else if text.contains("outside the smart-HTTP URLs")
        || text.contains("redirect")
        || text.contains("'smart' protocol")
    {
        (
            ErrorKind::ConfigurationError,
            format!(
                "the wiki remote tried to redirect or use an unexpected URL while {doing}; teammem does not follow redirects"
            ),
        )
    } else {
        (
            ErrorKind::TransportError,
            format!("the wiki remote could not be reached while {doing}"),
        )
    };
    tracing::warn!(target: "teammem::wiki", doing, detail = %text, "wiki transport error");
    WikiError::not_applied(kind, message)
}

/// Reads the advertisement of `service` (one GET).
pub fn read_advertisement(
    transport: &mut HttpTransport,
    service: Service,
    doing: &str,
) -> Result<AdvertisedRefs, WikiError> {
    let response = transport
        .handshake(service, &[])
        .map_err(|err| classify_transport_error(doing, &err))?;
    let capabilities = response.capabilities;
    let refs = match response.refs {
        Some(mut lines) => {
            gix::protocol::handshake::refs::from_v1_refs_received_as_part_of_handshake_and_capabilities(
                &mut *lines,
                capabilities.iter(),
            )
            .map_err(|err| classify_transport_error(doing, &err))?
            .0
        }
        None => Vec::new(),
    };
    Ok(AdvertisedRefs { refs })
}

/// A fresh advertisement of `service` (one GET): the remote's current refs.
pub fn current_refs(
    http: &HttpRemote,
    service: Service,
    deadline: Instant,
    doing: &str,
) -> Result<AdvertisedRefs, WikiError> {
    let mut transport = http.connect(Protocol::V1, deadline)?;
    read_advertisement(&mut transport, service, doing)
}

/// How far a push got when it failed.
#[derive(Debug)]
pub enum PushFailure {
    /// The request could not be started: nothing was sent.
    NotSent(WikiError),
    /// The pack (or part of it) left, and no complete answer came back.
    AnswerLost,
}

/// The server's report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushReport {
    /// `unpack ok` was reported.
    pub unpack_ok: bool,
    /// `ok <ref>` was reported for our ref.
    pub ref_ok: bool,
    /// The reason of an `ng <ref> <reason>` or `unpack <error>`, for logs only.
    pub rejection: Option<String>,
}

const RECEIVE_PACK_RESULT: &str = "application/x-git-receive-pack-result";

/// Sends `<old> <new> refs/heads/<branch>` and the pack in one receive-pack
/// POST and reads the report. Smart HTTP is stateless, so the POST needs no
/// advertisement before it: the server's own compare-and-swap on `old` is what
/// refuses a moved branch. Only capabilities every smart-HTTP server offers
/// are asked for (`report-status`, `side-band-64k`).
pub fn push(
    http: &HttpRemote,
    deadline: Instant,
    old: ObjectId,
    new: ObjectId,
    branch: &str,
    pack: &[u8],
) -> Result<PushReport, PushFailure> {
    let mut client = http.git_http(deadline).map_err(PushFailure::NotSent)?;
    let url = format!("{}/git-receive-pack", http.base);
    let response = client
        .post(
            &url,
            &http.base,
            [
                "Content-Type: application/x-git-receive-pack-request".to_owned(),
                format!("Accept: {RECEIVE_PACK_RESULT}"),
            ],
            PostBodyDataKind::BoundedAndFitsIntoMemory,
        )
        .map_err(|err| {
            PushFailure::NotSent(classify_transport_error("starting the wiki update", &err))
        })?;
    let command =
        format!("{old} {new} refs/heads/{branch}\0report-status side-band-64k agent=teammem\n");
    let mut body = response.post_body;
    // From here on bytes may leave: any failure is an unknown outcome.
    if encode::data_to_write(command.as_bytes(), &mut body).is_err()
        || encode::flush_to_write(&mut body).is_err()
        || body.write_all(pack).is_err()
        || body.flush().is_err()
    {
        return Err(PushFailure::AnswerLost);
    }
    drop(body);
    let mut headers = String::new();
    if let Err(err) = { response.headers }.read_to_string(&mut headers) {
        if refused_before_processing(&err) {
            return Err(PushFailure::NotSent(classify_transport_error(
                "sending the wiki update",
                &err,
            )));
        }
        return Err(PushFailure::AnswerLost);
    }
    let is_result = headers.lines().any(|line| {
        line.split_once(':').is_some_and(|(name, value)| {
            name.eq_ignore_ascii_case("content-type") && value.trim() == RECEIVE_PACK_RESULT
        })
    });
    if !is_result {
        return Err(PushFailure::AnswerLost);
    }
    let mut reader = StreamingPeekableIter::new(response.body, &[PacketLineRef::Flush], false);
    let mut band_one = Vec::new();
    let mut remote_errors = Vec::new();
    loop {
        match reader.read_line() {
            None => break,
            Some(Ok(Ok(line))) => {
                let Some(data) = line.as_slice() else {
                    continue;
                };
                match data.split_first() {
                    Some((1, payload)) => band_one.extend_from_slice(payload),
                    Some((2, _progress)) => {}
                    Some((3, message)) => {
                        remote_errors.push(String::from_utf8_lossy(message).trim().to_owned())
                    }
                    _ => {
                        // A server ignoring side-band answers with plain report lines.
                        band_one.extend_from_slice(&encode_pkt_line(data));
                    }
                }
            }
            Some(Ok(Err(_))) | Some(Err(_)) => return Err(PushFailure::AnswerLost),
        }
    }
    let mut report = parse_report(&band_one, branch).ok_or(PushFailure::AnswerLost)?;
    if !remote_errors.is_empty() && report.rejection.is_none() {
        report.rejection = Some(remote_errors.join("; "));
        report.ref_ok = false;
    }
    Ok(report)
}

/// A 4xx answer to the receive-pack POST means the server refused the request
/// itself (authentication, permission, size, rate): git never ran, nothing was
/// applied. A 5xx or a broken connection stays ambiguous.
fn refused_before_processing(err: &std::io::Error) -> bool {
    let text = format!("{err:#?}");
    ["401", "403", "404", "413", "429"]
        .iter()
        .any(|status| text.contains(&format!("HTTP status {status}")))
        || text.contains("AuthenticationRequired")
}

fn encode_pkt_line(data: &[u8]) -> Vec<u8> {
    let mut out = format!("{:04x}", data.len() + 4).into_bytes();
    out.extend_from_slice(data);
    out
}

/// Parses the report-status pkt-lines carried in band 1. `None` when the report
/// is incomplete (no `unpack` line, or no line for our ref).
pub fn parse_report(stream: &[u8], branch: &str) -> Option<PushReport> {
    let full_ref = format!("refs/heads/{branch}");
    let mut unpack: Option<Result<(), String>> = None;
    let mut ref_status: Option<Result<(), String>> = None;
    let mut rest = stream;
    while rest.len() >= 4 {
        let length = usize::from_str_radix(std::str::from_utf8(&rest[..4]).ok()?, 16).ok()?;
        if length == 0 {
            rest = &rest[4..];
            continue;
        }
        if length < 4 || length > rest.len() {
            return None;
        }
        let line = String::from_utf8_lossy(&rest[4..length]);
        let line = line.trim_end_matches('\n');
        if let Some(status) = line.strip_prefix("unpack ") {
            unpack = Some(if status == "ok" {
                Ok(())
            } else {
                Err(status.to_owned())
            });
        } else if let Some(name) = line.strip_prefix("ok ") {
            if name == full_ref {
                ref_status = Some(Ok(()));
            }
        } else if let Some(rest_of_line) = line.strip_prefix("ng ") {
            let (name, reason) = rest_of_line.split_once(' ').unwrap_or((rest_of_line, ""));
            if name == full_ref {
                ref_status = Some(Err(reason.to_owned()));
            }
        }
        rest = &rest[length..];
    }
    let unpack = unpack?;
    let ref_status = match (&unpack, ref_status) {
        (_, Some(status)) => status,
        // A failed unpack may come without ref lines.
        (Err(reason), None) => Err(format!("unpack {reason}")),
        (Ok(()), None) => return None,
    };
    Some(PushReport {
        unpack_ok: unpack.is_ok(),
        ref_ok: ref_status.is_ok() && unpack.is_ok(),
        rejection: match (unpack, ref_status) {
            (Err(reason), _) => Some(format!("unpack {reason}")),
            (Ok(()), Err(reason)) => Some(reason),
            (Ok(()), Ok(())) => None,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkt(line: &str) -> Vec<u8> {
        encode_pkt_line(line.as_bytes())
    }

    #[test]
    fn report_ok() {
        let mut stream = pkt("unpack ok\n");
        stream.extend(pkt("ok refs/heads/master\n"));
        stream.extend(b"0000");
        let report = parse_report(&stream, "master").unwrap();
        assert!(report.unpack_ok && report.ref_ok && report.rejection.is_none());
    }

    #[test]
    fn report_ng_and_unpack_failure() {
        let mut stream = pkt("unpack ok\n");
        stream.extend(pkt("ng refs/heads/master failed to update ref\n"));
        let report = parse_report(&stream, "master").unwrap();
        assert!(!report.ref_ok);
        assert_eq!(report.rejection.as_deref(), Some("failed to update ref"));

        let mut stream = pkt("unpack index-pack abnormal exit\n");
        stream.extend(pkt("ng refs/heads/master unpacker error\n"));
        let report = parse_report(&stream, "master").unwrap();
        assert!(!report.unpack_ok && !report.ref_ok);
    }

    #[test]
    fn transport_errors_are_classified_by_what_the_server_said() {
        for (text, kind) in [
            ("Received HTTP status 401", ErrorKind::AuthenticationError),
            ("Received HTTP status 403", ErrorKind::PermissionDenied),
            ("Received HTTP status 404", ErrorKind::NotFound),
            ("Received HTTP status 429", ErrorKind::RateLimited),
            ("Received HTTP status 503", ErrorKind::UpstreamError),
            ("operation timed out", ErrorKind::Timeout),
            (
                "Didn't find header to indicate 'smart' protocol",
                ErrorKind::ConfigurationError,
            ),
            ("connection refused", ErrorKind::TransportError),
        ] {
            let err = classify_transport_error("reading", &text);
            assert_eq!(err.kind, kind, "{text}");
            assert!(
                !err.message.contains(text),
                "raw text must not leak: {}",
                err.message
            );
        }
    }

    #[test]
    fn incomplete_report_is_none() {
        assert_eq!(parse_report(b"", "master"), None);
        assert_eq!(parse_report(&pkt("unpack ok\n"), "master"), None);
        assert_eq!(parse_report(b"00", "master"), None);
        let mut other_ref = pkt("unpack ok\n");
        other_ref.extend(pkt("ok refs/heads/other\n"));
        assert_eq!(parse_report(&other_ref, "master"), None);
    }
}
