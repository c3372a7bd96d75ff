//! Authentication of the control protocol (version 2): a pre-shared key and
//! an HMAC-SHA256 challenge and response in both directions, before the
//! server gives a session, a thread beyond the handshake's, or any port.
//!
//! ```text
//! client                                          server
//!  Hello {nonce_c} ───────────────────────────────▶
//!        ◀──── Challenge {nonce_s, proof_s = HMAC(K, "server" ‖ nonce_c ‖ nonce_s)}
//!  checks proof_s (the server knows K)
//!  Auth {proof_c = HMAC(K, "client" ‖ nonce_s ‖ nonce_c)} ─▶
//!        ◀──────────────────────── Welcome, or Refused
//! ```
//!
//! Each end's nonce is 32 random bytes of its own, so neither proof can be
//! replayed into another connection; the two labels keep a server's proof
//! from being reflected back as a client's. Proofs are compared in constant
//! time ([`hmac::Mac::verify_slice`]). The key is never sent. Messages are
//! not encrypted or integrity-protected after the handshake: an on-path
//! attacker is outside this protocol's threat model (docs/SECURITY.md).

use hmac::{Hmac, Mac as _};
use sha2::Sha256;

/// Bytes of each end's nonce.
pub const NONCE_BYTES: usize = 32;
/// Bytes of a proof (an HMAC-SHA256 tag).
pub const PROOF_BYTES: usize = 32;
/// The shortest key accepted, bytes.
pub const MIN_KEY_BYTES: usize = 16;
/// The longest key accepted, bytes.
pub const MAX_KEY_BYTES: usize = 4096;

const SERVER_LABEL: &[u8] = b"linerate-control-v2 server";
const CLIENT_LABEL: &[u8] = b"linerate-control-v2 client";

/// Why a key cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// Fewer than [`MIN_KEY_BYTES`] bytes once trimmed.
    #[error("the key is {0} bytes long; at least {MIN_KEY_BYTES} are needed (e.g. `head -c 32 /dev/urandom | base64`)")]
    TooShort(usize),
    /// More than [`MAX_KEY_BYTES`].
    #[error("the key is {0} bytes long; at most {MAX_KEY_BYTES} are accepted")]
    TooLong(usize),
}

/// A pre-shared key. Its `Debug` shows no byte of it.
#[derive(Clone, PartialEq, Eq)]
pub struct Key(Vec<u8>);

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Key({} bytes)", self.0.len())
    }
}

impl Key {
    /// The key in a key file's text (or an environment variable): the text
    /// with leading and trailing white space removed, as bytes.
    pub fn from_text(text: &str) -> Result<Self, KeyError> {
        let k = text.trim().as_bytes();
        if k.len() < MIN_KEY_BYTES {
            return Err(KeyError::TooShort(k.len()));
        }
        if k.len() > MAX_KEY_BYTES {
            return Err(KeyError::TooLong(k.len()));
        }
        Ok(Self(k.to_vec()))
    }

    fn mac(&self, label: &[u8], first: &[u8], second: &[u8]) -> Hmac<Sha256> {
        // HMAC takes keys of any length: new_from_slice cannot fail.
        let mut m = <Hmac<Sha256>>::new_from_slice(&self.0)
            .unwrap_or_else(|_| unreachable!("HMAC accepts every key length"));
        m.update(label);
        m.update(first);
        m.update(second);
        m
    }

    /// The server's proof for a connection: `HMAC(K, server label ‖
    /// client nonce ‖ server nonce)`, hex.
    pub fn server_proof(&self, client_nonce: &[u8], server_nonce: &[u8]) -> String {
        hex(&self
            .mac(SERVER_LABEL, client_nonce, server_nonce)
            .finalize()
            .into_bytes())
    }

    /// The client's proof: `HMAC(K, client label ‖ server nonce ‖ client
    /// nonce)`, hex.
    pub fn client_proof(&self, server_nonce: &[u8], client_nonce: &[u8]) -> String {
        hex(&self
            .mac(CLIENT_LABEL, server_nonce, client_nonce)
            .finalize()
            .into_bytes())
    }

    /// Whether `proof` (hex, as received) is the server's proof for these
    /// nonces; compared in constant time.
    pub fn check_server_proof(
        &self,
        client_nonce: &[u8],
        server_nonce: &[u8],
        proof: &str,
    ) -> bool {
        unhex(proof).is_some_and(|p| {
            self.mac(SERVER_LABEL, client_nonce, server_nonce)
                .verify_slice(&p)
                .is_ok()
        })
    }

    /// Whether `proof` (hex, as received) is the client's proof for these
    /// nonces; compared in constant time.
    pub fn check_client_proof(
        &self,
        server_nonce: &[u8],
        client_nonce: &[u8],
        proof: &str,
    ) -> bool {
        unhex(proof).is_some_and(|p| {
            self.mac(CLIENT_LABEL, server_nonce, client_nonce)
                .verify_slice(&p)
                .is_ok()
        })
    }
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    s
}

/// The bytes of a hex string of at most 2 × [`NONCE_BYTES`] digits
/// (`None`: not hex, odd length, or too long).
pub fn unhex(s: &str) -> Option<Vec<u8>> {
    let s = s.as_bytes();
    if !s.len().is_multiple_of(2) || s.len() > 2 * NONCE_BYTES.max(PROOF_BYTES) {
        return None;
    }
    let digit = |c: u8| {
        char::from(c)
            .to_digit(16)
            .and_then(|d| u8::try_from(d).ok())
    };
    s.chunks(2)
        .map(|p| Some(digit(p[0])? << 4 | digit(p[1])?))
        .collect()
}

/// A nonce as received: exactly [`NONCE_BYTES`] bytes of hex.
pub fn parse_nonce(s: &str) -> Option<Vec<u8>> {
    unhex(s).filter(|n| n.len() == NONCE_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(s: &str) -> Key {
        Key::from_text(s).unwrap()
    }

    #[test]
    fn hmac_sha256_matches_rfc_4231_case_2() {
        // RFC 4231 test case 2: key "Jefe", data "what do ya want for nothing?".
        // Key::from_text refuses 4-byte keys, so the MAC is built directly.
        let mut m = <Hmac<Sha256>>::new_from_slice(b"Jefe").unwrap();
        m.update(b"what do ya want for nothing?");
        assert_eq!(
            hex(&m.finalize().into_bytes()),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn proofs_check_only_with_the_same_key_nonces_and_direction() {
        let k = key("correct horse battery staple");
        let (c, s) = ([1u8; NONCE_BYTES], [2u8; NONCE_BYTES]);
        let ps = k.server_proof(&c, &s);
        let pc = k.client_proof(&s, &c);
        assert_eq!(ps.len(), 2 * PROOF_BYTES);
        assert!(k.check_server_proof(&c, &s, &ps));
        assert!(k.check_client_proof(&s, &c, &pc));
        // A server's proof is not a client's (reflection), nor are nonces
        // interchangeable (replay into another connection).
        assert!(!k.check_client_proof(&c, &s, &ps));
        assert!(!k.check_client_proof(&s, &c, &ps));
        assert!(!k.check_server_proof(&c, &[3u8; NONCE_BYTES], &ps));
        assert!(!key("another key of enough length").check_server_proof(&c, &s, &ps));
        for bad in ["", "zz", &ps[1..], &ps.to_uppercase()[..62], "00"] {
            assert!(!k.check_server_proof(&c, &s, bad), "{bad:?}");
        }
        // Upper-case hex is the same bytes.
        assert!(k.check_server_proof(&c, &s, &ps.to_uppercase()));
    }

    #[test]
    fn keys_are_trimmed_bounded_and_never_shown() {
        assert_eq!(key(" sixteen-bytes-ok\n"), key("sixteen-bytes-ok"));
        assert_eq!(Key::from_text("short\n"), Err(KeyError::TooShort(5)));
        assert!(Key::from_text(&"k".repeat(MAX_KEY_BYTES + 1)).is_err());
        assert_eq!(format!("{:?}", key("sixteen-bytes-ok")), "Key(16 bytes)");
    }

    #[test]
    fn hex_round_trips_and_refuses_garbage() {
        let b: Vec<u8> = (0..=31).collect();
        assert_eq!(unhex(&hex(&b)).unwrap(), b);
        assert_eq!(parse_nonce(&hex(&b)).unwrap(), b);
        assert!(parse_nonce(&hex(&b[..31])).is_none());
        for bad in ["0", "0g", "é0", &"00".repeat(65)] {
            assert!(unhex(bad).is_none(), "{bad:?}");
        }
    }
}
