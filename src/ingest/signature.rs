//! `X-Hub-Signature-256: sha256=<hex>`: HMAC-SHA256 of the raw body with the
//! source's dispatch secret, the scheme GitHub webhooks use.
//!
//! Invariant: the comparison is constant time over the MAC bytes and happens on
//! the raw bytes, before anything parses the body.

use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::IngestError;
use crate::secrets::Secret;

type HmacSha256 = Hmac<Sha256>;

/// The header value for `body` signed with `secret` (`sha256=<hex>`).
pub fn sign(secret: &[u8], body: &[u8]) -> String {
    let mut mac = HmacSha256::new_from_slice(secret).expect("HMAC takes keys of any length");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// Checks the header against the raw body.
pub fn verify(secret: &Secret, body: &[u8], header: Option<&str>) -> Result<(), IngestError> {
    let header = header.ok_or_else(IngestError::missing_signature)?;
    let hex_mac = header.trim().strip_prefix("sha256=").ok_or_else(|| {
        IngestError::bad_signature("X-Hub-Signature-256 must look like sha256=<64 hex digits>")
    })?;
    let mut given = [0u8; 32];
    if hex_mac.len() != 64 || hex::decode_to_slice(hex_mac, &mut given).is_err() {
        return Err(IngestError::bad_signature(
            "X-Hub-Signature-256 must look like sha256=<64 hex digits>",
        ));
    }
    let mut mac =
        HmacSha256::new_from_slice(secret.expose()).expect("HMAC takes keys of any length");
    mac.update(body);
    // verify_slice compares in constant time.
    mac.verify_slice(&given).map_err(|_| {
        IngestError::bad_signature(
            "the signature does not match the body; sign the exact raw body with the source's dispatch secret",
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn github_test_vector() {
        // https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries
        let secret = b"It's a Secret to Everybody";
        let body = b"Hello, World!";
        let expected = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
        assert_eq!(sign(secret, body), expected);
        let s = Secret::new(secret.to_vec());
        assert!(verify(&s, body, Some(expected)).is_ok());
        assert_eq!(
            verify(&s, b"Hello, World?", Some(expected))
                .unwrap_err()
                .code,
            "bad_signature"
        );
        assert_eq!(
            verify(&s, body, None).unwrap_err().code,
            "missing_signature"
        );
        for bad in ["sha1=abc", "sha256=zz", "757107ea", "sha256="] {
            assert_eq!(
                verify(&s, body, Some(bad)).unwrap_err().code,
                "bad_signature"
            );
        }
        let upper = expected.to_uppercase().replace("SHA256=", "sha256=");
        assert!(verify(&s, body, Some(&upper)).is_ok());
    }
}
