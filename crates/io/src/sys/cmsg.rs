//! Control messages (cmsg(3)): the one encoder and decoder of the ancillary
//! data that `sendmsg`/`recvmsg` carry, as quinn-udp's `cmsg` module is.
//!
//! The layout is the kernel's (include/linux/socket.h): each message is a
//! `cmsghdr { cmsg_len: size_t, cmsg_level: int, cmsg_type: int }` followed
//! by its data; `cmsg_len` counts header and data (`CMSG_LEN`), and the next
//! header starts `CMSG_ALIGN(cmsg_len)` bytes later, `CMSG_ALIGN` rounding up
//! to `sizeof(long)`. Both directions work on byte slices, so encoding and
//! decoding need no `unsafe`; the only `unsafe` steps are viewing a received
//! `msghdr`'s control area as a slice ([`control`]) and reading plain C
//! structs out of a message's data ([`read`]).

use std::io;
use std::mem::{align_of, size_of};

/// `CMSG_ALIGN`: control messages are aligned to `sizeof(long)`.
const fn align(len: usize) -> usize {
    let a = size_of::<libc::c_long>();
    (len + a - 1) & !(a - 1)
}

/// Bytes of a `cmsghdr`, aligned: where a message's data starts.
const HEADER: usize = align(size_of::<libc::cmsghdr>());

/// `CMSG_LEN(data_len)`: the `cmsg_len` of a message with that much data.
pub(crate) const fn len(data_len: usize) -> usize {
    HEADER + data_len
}

/// `CMSG_SPACE(data_len)`: the room one message with that much data takes.
pub(crate) const fn space(data_len: usize) -> usize {
    HEADER + align(data_len)
}

/// A control-message buffer of `N` bytes, aligned for `cmsghdr` so that the
/// offsets computed here are the ones `CMSG_FIRSTHDR`/`CMSG_NXTHDR` use.
#[repr(C, align(8))]
pub(crate) struct Buf<const N: usize>(pub(crate) [u8; N]);

// The alignment above must satisfy cmsghdr's (size_t) on every target.
const _: () = assert!(align_of::<Buf<0>>() >= align_of::<libc::cmsghdr>());

impl<const N: usize> Buf<N> {
    /// A zeroed buffer.
    pub(crate) const fn new() -> Self {
        Self([0; N])
    }

    /// The pointer and length to put in `msg_control`/`msg_controllen`
    /// for a receive.
    pub(crate) fn as_mut_ptr(&mut self) -> *mut libc::c_void {
        self.0.as_mut_ptr().cast()
    }
}

/// Appends control messages to a buffer; [`Encoder::len`] is the
/// `msg_controllen` to pass with it.
pub(crate) struct Encoder<'a> {
    buf: &'a mut [u8],
    len: usize,
}

impl<'a> Encoder<'a> {
    /// An encoder writing from the start of `buf` (which should be a
    /// [`Buf`], so its start is aligned for `cmsghdr`).
    pub(crate) fn new(buf: &'a mut [u8]) -> Self {
        Self { buf, len: 0 }
    }

    /// Appends one message; `InvalidInput` if it does not fit (nothing is
    /// written then). Padding after the data is zeroed.
    pub(crate) fn push(
        &mut self,
        level: libc::c_int,
        ty: libc::c_int,
        data: &[u8],
    ) -> io::Result<()> {
        let room = space(data.len());
        let end = self
            .len
            .checked_add(room)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
        let out = &mut self.buf[self.len..end];
        out.fill(0);
        let hdr_len: libc::size_t = len(data.len());
        let l = size_of::<libc::size_t>();
        let i = size_of::<libc::c_int>();
        out[..l].copy_from_slice(&hdr_len.to_ne_bytes());
        out[l..l + i].copy_from_slice(&level.to_ne_bytes());
        out[l + i..l + 2 * i].copy_from_slice(&ty.to_ne_bytes());
        out[HEADER..HEADER + data.len()].copy_from_slice(data);
        self.len = end;
        Ok(())
    }

    /// Bytes written so far: the `msg_controllen` of the messages.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

/// One received control message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cmsg<'a> {
    pub(crate) level: libc::c_int,
    pub(crate) ty: libc::c_int,
    /// The data: `cmsg_len` minus the header.
    pub(crate) data: &'a [u8],
}

impl Cmsg<'_> {
    /// Whether this message has this level and type.
    pub(crate) fn is(&self, level: libc::c_int, ty: libc::c_int) -> bool {
        self.level == level && self.ty == ty
    }
}

/// The control messages in a control area, in order. A message whose
/// header does not fit, whose `cmsg_len` is shorter than its header, or
/// whose data runs past the area (a truncated, MSG_CTRUNC, area) ends the
/// walk: only whole messages are yielded.
#[derive(Debug, Clone)]
pub(crate) struct Iter<'a> {
    rest: &'a [u8],
}

/// Iterates the control messages in `control` (the first `msg_controllen`
/// bytes of a control area that starts aligned for `cmsghdr`).
pub(crate) fn iter(control: &[u8]) -> Iter<'_> {
    Iter { rest: control }
}

impl<'a> Iterator for Iter<'a> {
    type Item = Cmsg<'a>;

    fn next(&mut self) -> Option<Cmsg<'a>> {
        let l = size_of::<libc::size_t>();
        let i = size_of::<libc::c_int>();
        if self.rest.len() < size_of::<libc::cmsghdr>() {
            self.rest = &[];
            return None;
        }
        let cmsg_len = libc::size_t::from_ne_bytes(self.rest[..l].try_into().ok()?);
        let level = libc::c_int::from_ne_bytes(self.rest[l..l + i].try_into().ok()?);
        let ty = libc::c_int::from_ne_bytes(self.rest[l + i..l + 2 * i].try_into().ok()?);
        if cmsg_len < HEADER || cmsg_len > self.rest.len() {
            self.rest = &[];
            return None;
        }
        let data = &self.rest[HEADER..cmsg_len];
        let next = align(cmsg_len).min(self.rest.len());
        self.rest = &self.rest[next..];
        Some(Cmsg { level, ty, data })
    }
}

/// The control area the kernel filled in `msg` (after recvmsg/recvmmsg),
/// as a byte slice: `msg_controllen` bytes at `msg_control`.
///
/// # Safety
/// `msg.msg_control` must be null or point at `msg.msg_controllen` bytes
/// that are initialised and not written to while the returned slice, which
/// borrows `msg`, lives (a control buffer that outlives `msg` and that the
/// kernel filled, as after a successful `recvmsg`).
pub(crate) unsafe fn control(msg: &libc::msghdr) -> &[u8] {
    if msg.msg_control.is_null() || msg.msg_controllen == 0 {
        return &[];
    }
    // SAFETY: the caller guarantees msg_control points at msg_controllen
    // initialised bytes that live and stay unchanged as long as `msg`'s borrow.
    unsafe { std::slice::from_raw_parts(msg.msg_control.cast::<u8>(), msg.msg_controllen) }
}

/// C types every bit pattern of which is a valid value, so they may be read
/// out of control-message data.
///
/// # Safety
/// Implement only for `repr(C)` types made of integers (no padding
/// requirements on validity, no pointers, references, bools or enums).
pub(crate) unsafe trait Plain: Copy {}

// SAFETY: integers.
unsafe impl Plain for libc::c_int {}
// SAFETY: an integer.
unsafe impl Plain for u32 {}
// SAFETY: two integers (time_t, c_long).
unsafe impl Plain for libc::timespec {}
// SAFETY: a repr(C) struct of u32/u8 fields only.
unsafe impl Plain for libc::sock_extended_err {}

/// The `T` at the start of `data`, or `None` if `data` is shorter than a `T`.
pub(crate) fn read<T: Plain>(data: &[u8]) -> Option<T> {
    if data.len() < size_of::<T>() {
        return None;
    }
    // SAFETY: `data` holds at least size_of::<T>() bytes (checked); T is
    // Plain, so any bytes are a valid T; read_unaligned copes with cmsg data
    // alignment (only `long`-aligned).
    Some(unsafe { std::ptr::read_unaligned(data.as_ptr().cast::<T>()) })
}

/// The `index`-th `T` of an array of `T` at the start of `data`.
pub(crate) fn read_nth<T: Plain>(data: &[u8], index: usize) -> Option<T> {
    read(data.get(index.checked_mul(size_of::<T>())?..)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_match_the_libc_macros() {
        for n in [0usize, 1, 2, 4, 8, 12, 16, 48, 100] {
            // SAFETY: the macros only compute sizes.
            let (l, s) = unsafe { (libc::CMSG_LEN(n as u32), libc::CMSG_SPACE(n as u32)) };
            assert_eq!(len(n), l as usize, "CMSG_LEN({n})");
            assert_eq!(space(n), s as usize, "CMSG_SPACE({n})");
        }
    }

    #[test]
    fn encode_then_decode_round_trips() {
        let mut buf = Buf::<128>::new();
        let mut enc = Encoder::new(&mut buf.0);
        enc.push(libc::SOL_UDP, libc::UDP_SEGMENT, &1472u16.to_ne_bytes())
            .unwrap();
        enc.push(libc::SOL_SOCKET, 37, &0x0102_0304u32.to_ne_bytes())
            .unwrap();
        enc.push(libc::SOL_IP, libc::IP_TOS, &[]).unwrap();
        let n = enc.len();
        assert_eq!(n, space(2) + space(4) + space(0));
        let got: Vec<Cmsg<'_>> = iter(&buf.0[..n]).collect();
        assert_eq!(got.len(), 3);
        assert!(got[0].is(libc::SOL_UDP, libc::UDP_SEGMENT));
        assert_eq!(got[0].data, 1472u16.to_ne_bytes());
        assert!(got[1].is(libc::SOL_SOCKET, 37));
        assert_eq!(read::<u32>(got[1].data), Some(0x0102_0304));
        assert!(got[2].is(libc::SOL_IP, libc::IP_TOS));
        assert!(got[2].data.is_empty());
    }

    /// The layout written here is the one libc's CMSG_FIRSTHDR/NXTHDR walk,
    /// each header starting `long`-aligned from the buffer's start.
    #[test]
    fn layout_matches_libc_walk_and_alignment() {
        let mut buf = Buf::<256>::new();
        let mut enc = Encoder::new(&mut buf.0);
        let datas: [&[u8]; 3] = [&[1, 2, 3], &[4; 17], &[5; 8]];
        for (k, d) in datas.iter().enumerate() {
            enc.push(1, k as libc::c_int + 10, d).unwrap();
        }
        let n = enc.len();
        // SAFETY: all-zero is a valid msghdr; the walk below stays within
        // `buf`, which outlives it, as the macros' contract asks.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_control = buf.as_mut_ptr();
        msg.msg_controllen = n as _;
        let start = buf.0.as_ptr() as usize;
        let mut k = 0;
        // SAFETY: msg describes `buf` (live, initialised, n bytes).
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                assert_eq!((c as usize - start) % size_of::<libc::c_long>(), 0);
                assert_eq!((*c).cmsg_type, k as libc::c_int + 10);
                assert_eq!((*c).cmsg_len as usize, len(datas[k].len()));
                let d = std::slice::from_raw_parts(libc::CMSG_DATA(c), datas[k].len());
                assert_eq!(d, datas[k]);
                k += 1;
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        assert_eq!(k, 3);
        // SAFETY: as above.
        let ours: Vec<_> = iter(unsafe { control(&msg) }).map(|c| c.data).collect();
        assert_eq!(ours, datas);
    }

    #[test]
    fn truncated_areas_yield_only_whole_messages() {
        let mut buf = Buf::<128>::new();
        let mut enc = Encoder::new(&mut buf.0);
        enc.push(1, 1, &[9; 16]).unwrap();
        enc.push(1, 2, &[8; 16]).unwrap();
        let n = enc.len();
        for cut in 0..n {
            let got: Vec<_> = iter(&buf.0[..cut]).collect();
            let whole = if cut >= space(16) + len(16) {
                2
            } else if cut >= len(16) {
                1
            } else {
                0
            };
            assert_eq!(got.len(), whole, "cut at {cut}");
        }
        // A cmsg_len shorter than the header ends the walk.
        let mut bad = Buf::<32>::new();
        bad.0[..size_of::<libc::size_t>()].copy_from_slice(&3usize.to_ne_bytes());
        assert_eq!(iter(&bad.0).count(), 0);
        // A cmsg_len past the end of the area ends it too.
        bad.0[..size_of::<libc::size_t>()].copy_from_slice(&33usize.to_ne_bytes());
        assert_eq!(iter(&bad.0).count(), 0);
    }

    #[test]
    fn push_refuses_what_does_not_fit() {
        let mut buf = Buf::<24>::new();
        let mut enc = Encoder::new(&mut buf.0);
        assert!(enc.push(1, 1, &[0; 9]).is_err());
        assert_eq!(enc.len(), 0);
        enc.push(1, 1, &[0; 8]).unwrap();
        assert!(enc.push(1, 1, &[]).is_err());
        assert_eq!(enc.len(), 24);
    }

    #[test]
    fn read_needs_enough_bytes() {
        assert_eq!(read::<u32>(&[1, 0, 0]), None);
        assert_eq!(read::<u32>(&1u32.to_ne_bytes()), Some(1));
        let ts = [7u8; 48];
        assert!(read_nth::<libc::timespec>(&ts, 2).is_some());
        assert!(read_nth::<libc::timespec>(&ts, 3).is_none());
        assert!(read_nth::<libc::timespec>(&ts, usize::MAX).is_none());
    }
}
