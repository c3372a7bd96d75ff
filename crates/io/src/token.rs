//! Random tokens: session ids, cookies and the latency reflector's session
//! token, from one generator. Not cryptographic (the control protocol has no
//! authentication yet): they only keep a stray or old client from matching a
//! session by accident.

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
    }
}
