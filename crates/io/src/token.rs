//! Random tokens: session ids and the latency reflector's session token
//! from a fast generator (they only keep a stray or old client from
//! matching a session by accident), and the secrets — authentication
//! nonces, data-connection cookies — from the kernel's CSPRNG.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher as _, Hasher as _};

/// A random 64-bit value: SipHash, keyed with the process's random keys
/// (std's `RandomState`), of the time, the process id and a counter.
pub fn random_u64() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = RandomState::new().build_hasher();
    h.write_u64(crate::stamps::realtime_ns());
    h.write_u32(std::process::id());
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.finish()
}

/// `N` bytes from the kernel's CSPRNG (`/dev/urandom`, which never
/// blocks once the pool is initialised).
fn urandom<const N: usize>() -> std::io::Result<[u8; N]> {
    use std::io::Read as _;
    let mut b = [0u8; N];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
    Ok(b)
}

/// An authentication nonce: 32 bytes from the kernel's CSPRNG.
pub fn nonce() -> std::io::Result<[u8; 32]> {
    urandom()
}

/// A secret 64-bit cookie from the kernel's CSPRNG.
pub fn secret_u64() -> std::io::Result<u64> {
    urandom().map(u64::from_ne_bytes)
}

/// A 32-bit session token (a latency session's, or a control session id),
/// never 0.
pub fn session_token() -> u32 {
    let r = random_u64();
    ((r ^ (r >> 32)) as u32).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_differ_and_are_never_zero() {
        let a: Vec<u64> = (0..64).map(|_| random_u64()).collect();
        let mut b = a.clone();
        b.sort_unstable();
        b.dedup();
        assert_eq!(a.len(), b.len());
        assert!((0..1000).all(|_| session_token() != 0));
        assert_ne!(nonce().unwrap(), nonce().unwrap());
        assert_ne!(secret_u64().unwrap(), secret_u64().unwrap());
    }
}
