//! Fuzz harness of the echo probe of `linerate latency` (`wire::echo`).
//!
//! Properties: no input panics; a checked view's accessors never panic and
//! agree with its bytes; request→reply→parse keeps the session and
//! sequence number and carries the stamps that fit; mutated valid probes
//! are refused or parse consistently. See docs/FUZZING.md.

mod fuzz_support;

use fuzz_support::{apply, bytes, config, mutations};
use linerate_core::latency::{dissect, ClientStamps, ResponderStamps, Stage, StageStats};
use linerate_core::wire::echo::{
    Kind, Packet, ReflectorStamps, TxStamps, FULL_LEN, HEADER_LEN, STAMPS_LEN,
};
use proptest::prelude::*;

/// What the client does with the stamps a reply carries: split the
/// exchange into stages (on a shared clock or not) and record them.
fn use_stamps(s: &ReflectorStamps, client: &ClientStamps) {
    let r = ResponderStamps::from_reply(s, s.prev.as_ref());
    let mut stats = StageStats::default();
    for same_clock in [false, true] {
        stats.record(&dissect(client, Some(&r), same_clock));
    }
    stats.record(&dissect(client, None, true));
    let _ = stats.summaries();
}

/// Client stamps from bytes: whatever a hostile reflector's numbers meet.
fn client_stamps(b: &[u8]) -> ClientStamps {
    let mut w = [0u64; 6];
    for (i, c) in b.chunks(8).take(6).enumerate() {
        let mut a = [0u8; 8];
        a[..c.len()].copy_from_slice(c);
        w[i] = u64::from_be_bytes(a);
    }
    let nz = |v: u64| (v != 0).then_some(v);
    ClientStamps {
        app_send_ns: w[0],
        tx_sched_ns: nz(w[1]),
        tx_soft_ns: nz(w[2]),
        tx_ack_ns: nz(w[3]),
        rx_kernel_ns: nz(w[4]),
        app_recv_ns: w[5],
    }
}

/// Parses `b` and checks what a checked view promises, then turns it into a
/// reply as the reflector does.
fn check(b: &[u8]) {
    let Ok(p) = Packet::new_checked(b) else {
        return;
    };
    if let Some(s) = p.stamps() {
        use_stamps(&s, &client_stamps(b));
        use_stamps(&s, &ClientStamps::default());
    }
    let kind = p.kind().expect("a checked probe has a kind");
    assert_eq!(p.len(), b.len());
    assert!(!p.is_empty());
    let (session, seq) = (p.session(), p.seq());
    let _ = (p.stamp_requested(), p.next_stamp_requested(), p.to_string());
    assert_eq!(p.stamps().is_some(), b.len() >= STAMPS_LEN);
    if kind == Kind::Reply {
        assert!(!p.stamp_requested() && !p.next_stamp_requested());
    }
    let mut reply = b.to_vec();
    let s = ReflectorStamps {
        rx_kernel_ns: 1,
        rx_app_ns: 2,
        tx_app_ns: 3,
        prev: Some(TxStamps {
            seq: 4,
            tx_sched_ns: 5,
            tx_soft_ns: 6,
        }),
    };
    let written = Packet::new_unchecked(&mut reply[..]).make_reply(&s);
    let q = Packet::new_checked(&reply[..]).expect("a reply of a probe parses");
    assert_eq!(q.kind(), Ok(Kind::Reply));
    assert_eq!((q.session(), q.seq(), q.len()), (session, seq, b.len()));
    match written {
        6 => assert_eq!(q.stamps(), Some(s)),
        3 => assert_eq!(q.stamps(), Some(ReflectorStamps { prev: None, ..s })),
        0 => assert_eq!(q.stamps(), None),
        n => panic!("{n} stamp fields written"),
    }
}

proptest! {
    #![proptest_config(config())]

    /// (a) Arbitrary bytes, and arbitrary bytes behind a right magic and
    /// version (so that the kind and stamps are reached).
    #[test]
    fn any_bytes(mut b in bytes(80), magic: bool) {
        check(&b);
        if magic && b.len() >= 3 {
            b[..3].copy_from_slice(b"LE\x01");
            check(&b);
        }
    }

    /// (b) Valid requests, flagged or not, mutated.
    #[test]
    fn mutated_valid_probes(session: u32, seq: u64, len in HEADER_LEN..=FULL_LEN + 8, stamp: bool, next: bool, muts in mutations(3)) {
        let mut b = vec![0u8; len];
        let mut p = Packet::new_unchecked(&mut b[..]);
        prop_assert!(p.emit_request(session, seq));
        p.set_stamp_flags(stamp, next);
        let q = Packet::new_checked(&b[..]).unwrap();
        prop_assert_eq!((q.kind(), q.session(), q.seq()), (Ok(Kind::Request), session, seq));
        prop_assert_eq!((q.stamp_requested(), q.next_stamp_requested()), (stamp, next));
        check(&b);
        apply(&mut b, &muts);
        check(&b);
    }

    /// Writers on buffers of any length: too short is refused and untouched.
    #[test]
    fn writers_on_any_length(b in bytes(80), session: u32, seq: u64, stamp: bool, next: bool, s in any::<[u64; 6]>()) {
        let mut w = b.clone();
        let ok = Packet::new_unchecked(&mut w[..]).emit_request(session, seq);
        prop_assert_eq!(ok, b.len() >= HEADER_LEN);
        Packet::new_unchecked(&mut w[..]).set_stamp_flags(stamp, next);
        let stamps = ReflectorStamps {
            rx_kernel_ns: s[0],
            rx_app_ns: s[1],
            tx_app_ns: s[2],
            prev: (s[4] != 0 || s[5] != 0).then_some(TxStamps { seq: s[3], tx_sched_ns: s[4], tx_soft_ns: s[5] }),
        };
        let n = Packet::new_unchecked(&mut w[..]).make_reply(&stamps);
        if ok {
            let q = Packet::new_checked(&w[..]).unwrap();
            prop_assert_eq!((q.kind(), q.session(), q.seq()), (Ok(Kind::Reply), session, seq));
            if n == 6 {
                prop_assert_eq!(q.stamps(), Some(stamps));
            }
        } else {
            prop_assert_eq!(w, b);
        }
    }
}

/// Found by `any_bytes`: a reply's stamps (or a client's) far apart, as a
/// hostile or broken reflector can send, overflowed the stage arithmetic of
/// `latency::dissect` (a panic in debug builds, a wrapped duration in
/// release).
#[test]
fn regression_stamps_far_apart_do_not_overflow_the_stages() {
    let s = ReflectorStamps {
        rx_kernel_ns: u64::MAX,
        rx_app_ns: i64::MAX as u64,
        tx_app_ns: u64::MAX,
        prev: Some(TxStamps {
            seq: 0,
            tx_sched_ns: 1,
            tx_soft_ns: i64::MAX as u64,
        }),
    };
    let c = ClientStamps {
        app_send_ns: u64::MAX,
        tx_soft_ns: Some(i64::MAX as u64),
        rx_kernel_ns: Some(u64::MAX),
        app_recv_ns: i64::MAX as u64,
        ..ClientStamps::default()
    };
    use_stamps(&s, &c);
    let r = ResponderStamps::from_reply(&s, s.prev.as_ref());
    let st = dissect(&c, Some(&r), true);
    // Differences that fit are exact; those that do not are absent.
    // i64::MAX - u64::MAX = i64::MIN fits; u64::MAX - i64::MAX = 2^63 does not.
    assert_eq!(st.get(Stage::Rtt), Some(i64::MIN));
    assert_eq!(st.get(Stage::ClientTx), Some(i64::MIN));
    assert_eq!(st.get(Stage::ResponderApp), None);
}
