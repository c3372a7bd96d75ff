//! iperf3's authentication, the cryptographic half (the plaintext and the
//! users-file rules are in `linerate_core::wire::iperf3::auth`): the
//! client encrypts its credentials with the server's RSA public key (OAEP
//! with SHA-1 since 3.17, PKCS#1 v1.5 before it or with
//! `--use-pkcs1-padding`) and sends them base64-encoded; the server
//! decrypts with its private key (either padding), checks the clock skew and
//! looks the user up by SHA-256 of `{user}password`.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use linerate_core::wire::iperf3::auth::{self, Credentials};
use rsa::pkcs1::{DecodeRsaPrivateKey as _, DecodeRsaPublicKey as _};
use rsa::pkcs8::{DecodePrivateKey as _, DecodePublicKey as _};
use rsa::sha2::{Digest as _, Sha256};
use rsa::{PrivateKey, PublicKey};

/// Why authentication could not be set up or failed.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// A key or users file could not be read.
    #[error("cannot read {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A key file is not an RSA key in PEM.
    #[error("{path} is not an RSA {kind} key in PEM (PKCS#8 or PKCS#1)")]
    Key {
        /// The file.
        path: PathBuf,
        /// "public" or "private".
        kind: &'static str,
    },
    /// Encryption failed (e.g. credentials too long for the key).
    #[error("cannot encrypt the credentials: {0}")]
    Encrypt(String),
    /// A token the server refuses; the reason is for its log only.
    #[error("{0}")]
    Refused(String),
}

fn read(path: &Path) -> Result<String, AuthError> {
    std::fs::read_to_string(path).map_err(|source| AuthError::Read {
        path: path.to_path_buf(),
        source,
    })
}

fn now_s() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// The server's authentication setting.
#[derive(Debug)]
pub struct ServerAuth {
    key: PrivateKey,
    users: PathBuf,
    /// Largest accepted difference between the client's clock and ours, s.
    pub skew_s: i64,
}

impl ServerAuth {
    /// Loads the private key (PEM, PKCS#8 or PKCS#1) and checks that the
    /// users file is readable (it is read again at every check, as iperf3
    /// does, so edits apply without a restart).
    pub fn load(private_key: &Path, users: &Path, skew_s: i64) -> Result<Self, AuthError> {
        let pem = read(private_key)?;
        let key = PrivateKey::from_pkcs8_pem(&pem)
            .ok()
            .or_else(|| PrivateKey::from_pkcs1_pem(&pem).ok())
            .ok_or_else(|| AuthError::Key {
                path: private_key.to_path_buf(),
                kind: "private",
            })?;
        read(users)?;
        Ok(Self {
            key,
            users: users.to_path_buf(),
            skew_s,
        })
    }

    /// Checks a client's `authtoken`; Ok(user) when it may run a test.
    pub fn check(&self, token: Option<&str>) -> Result<String, AuthError> {
        let token = token.ok_or_else(|| AuthError::Refused("no authtoken".into()))?;
        let cipher = base64::engine::general_purpose::STANDARD
            .decode(token.trim())
            .map_err(|e| AuthError::Refused(format!("authtoken is not base64: {e}")))?;
        let plain = self
            .key
            .oaep_decrypt::<sha1::Sha1>(&cipher)
            .or_else(|_| self.key.pkcs1v15_decrypt(&cipher))
            .map_err(|_| AuthError::Refused("authtoken does not decrypt with this key".into()))?;
        let Credentials {
            user,
            password,
            unix_s,
        } = auth::parse_plaintext(&plain)
            .ok_or_else(|| AuthError::Refused("authtoken plaintext is malformed".into()))?;
        if !auth::within_skew(unix_s, now_s(), self.skew_s) {
            return Err(AuthError::Refused(format!(
                "user {user}: client clock {} s off (more than {} s)",
                unix_s.saturating_sub(now_s()),
                self.skew_s
            )));
        }
        let users = read(&self.users)?;
        if auth::users_file_lists(&users, &user, &password_hash(&user, &password)) {
            Ok(user)
        } else {
            Err(AuthError::Refused(format!(
                "user {user}: unknown user or wrong password"
            )))
        }
    }
}

/// The users-file hash of a password: hex SHA-256 of `{user}password`.
pub fn password_hash(user: &str, password: &str) -> String {
    let d = Sha256::digest(auth::salted(user, password).as_bytes());
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// The client's authentication setting.
#[derive(Debug)]
pub struct ClientAuth {
    key: PublicKey,
    /// User name.
    pub user: String,
    password: String,
    /// PKCS#1 v1.5 instead of OAEP (servers before 3.17).
    pub pkcs1: bool,
}

impl ClientAuth {
    /// Loads the server's public key (PEM: SubjectPublicKeyInfo or PKCS#1).
    pub fn load(
        public_key: &Path,
        user: &str,
        password: &str,
        pkcs1: bool,
    ) -> Result<Self, AuthError> {
        let pem = read(public_key)?;
        let key = PublicKey::from_public_key_pem(&pem)
            .ok()
            .or_else(|| PublicKey::from_pkcs1_pem(&pem).ok())
            .ok_or_else(|| AuthError::Key {
                path: public_key.to_path_buf(),
                kind: "public",
            })?;
        Ok(Self {
            key,
            user: user.to_string(),
            password: password.to_string(),
            pkcs1,
        })
    }

    /// The `authtoken` for a test starting now, with the clock `unix_s`.
    pub fn token(&self, unix_s: Option<i64>) -> Result<String, AuthError> {
        let text = auth::plaintext(&self.user, &self.password, unix_s.unwrap_or_else(now_s));
        let cipher = if self.pkcs1 {
            self.key.pkcs1v15_encrypt(text.as_bytes())
        } else {
            self.key.oaep_encrypt::<sha1::Sha1>(text.as_bytes())
        }
        .map_err(|e| AuthError::Encrypt(e.to_string()))?;
        Ok(base64::engine::general_purpose::STANDARD.encode(cipher))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_of_iperf3_s_documented_example() {
        // iperf3's manual: user "mario", password "rossi".
        assert_eq!(
            password_hash("mario", "rossi"),
            "bf7a49a846d44b454a5d11e7acfaf13d138bbe0b7483aa3e050879700572709b"
        );
    }
}
