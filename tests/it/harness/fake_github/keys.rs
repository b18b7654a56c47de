//! The fake's RSA keys: the test App's key, three OIDC signing keys and a
//! spare key that is neither, generated once per test process (generation is
//! slow in debug builds). No key is ever written to disk by this module.

use aws_lc_rs::encoding::AsDer;
use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{Algorithm, EncodingKey};

/// Test keys are generated once per test process (RSA generation is slow in
/// debug builds): the App key, three OIDC keys, and a spare "wrong" key.
pub(super) fn keys() -> &'static [(String, EncodingKey)] {
    static KEYS: std::sync::OnceLock<Vec<(String, EncodingKey)>> = std::sync::OnceLock::new();
    KEYS.get_or_init(|| (0..5).map(|_| generate_rsa_key()).collect())
}

/// A 2048-bit RSA key that is not the App's nor an OIDC key: (PEM, encoding key).
pub fn rsa_key() -> (String, EncodingKey) {
    keys()[4].clone()
}

pub(super) fn generate_rsa_key() -> (String, EncodingKey) {
    let pair = aws_lc_rs::rsa::KeyPair::generate(aws_lc_rs::rsa::KeySize::Rsa2048).unwrap();
    let der = AsDer::<aws_lc_rs::encoding::Pkcs8V1Der>::as_der(&pair).unwrap();
    let der = der.as_ref();
    let b64 = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, der);
    let mut pem = String::from("-----BEGIN PRIVATE KEY-----\n");
    for chunk in b64.as_bytes().chunks(64) {
        pem.push_str(std::str::from_utf8(chunk).unwrap());
        pem.push('\n');
    }
    pem.push_str("-----END PRIVATE KEY-----\n");
    let key = EncodingKey::from_rsa_pem(pem.as_bytes()).unwrap();
    (pem, key)
}

pub(super) fn public_jwk(key: &EncodingKey, kid: &str) -> Jwk {
    let mut jwk = Jwk::from_encoding_key(key, Algorithm::RS256).unwrap();
    jwk.common.key_id = Some(kid.to_string());
    jwk
}
