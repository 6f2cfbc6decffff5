//! The one LEB128 reader/writer pair of the workspace (modelled on gimli's mirrored
//! `leb128::read` / `leb128::write` modules).
//!
//! Hand-written rather than taken from the `leb128` crate or `gimli::leb128`, for two reasons:
//! * the acceptance rules are a contract here: `SHT_LLVM_BB_ADDR_MAP` and BAT decoders must agree
//!   with LLVM's `decodeULEB128`/`decodeSLEB128` byte for byte, and LLVM accepts any number of
//!   value-preserving padding bytes past bit 63 (`0x80 … 0x00`), which both `gimli` and the
//!   `leb128` crate reject as overflow;
//! * both crates report errors without the offset (gimli through its `Reader` trait and its own
//!   error enum, `leb128` through `std::io`), and the hot decoders here want a one-byte fast path
//!   over a plain slice. The whole pair is ~80 lines; a dependency would not make it shorter.
//!
//! Readers take the input slice and a position, advance the position past the number on success
//! and leave it untouched on failure. Writers append the shortest encoding.

use crate::ErrorKind;
use std::io;

/// Read an unsigned LEB128 number at `*pos` (LLVM's `decodeULEB128` rules: padding past bit 63
/// is accepted when its payload is zero).
#[inline]
pub fn read_uleb128(data: &[u8], pos: &mut usize) -> Result<u64, ErrorKind> {
    // One to three bytes inline (values below 2^21: most counts, sizes, address deltas and
    // symbol indices); none can overflow.
    if let Some(&first) = data.get(*pos) {
        if first < 0x80 {
            *pos += 1;
            return Ok(u64::from(first));
        }
        if let Some(&second) = data.get(*pos + 1) {
            let low = u64::from(first & 0x7f);
            if second < 0x80 {
                *pos += 2;
                return Ok(low | u64::from(second) << 7);
            }
            if let Some(&third) = data.get(*pos + 2)
                && third < 0x80
            {
                *pos += 3;
                return Ok(low | u64::from(second & 0x7f) << 7 | u64::from(third) << 14);
            }
        }
    }
    read_uleb128_slow(data, pos)
}

#[cold]
fn read_uleb128_slow(data: &[u8], pos: &mut usize) -> Result<u64, ErrorKind> {
    let mut value = 0u64;
    let mut shift = 0u32;
    let mut at = *pos;
    loop {
        let byte = *data.get(at).ok_or(ErrorKind::LebPastEnd)?;
        at += 1;
        let low = u64::from(byte & 0x7f);
        if (shift == 63 && low > 1) || (shift > 63 && low != 0) {
            return Err(ErrorKind::LebOverflow { bits: 64 });
        }
        if shift < 64 {
            value |= low << shift;
        }
        if byte < 0x80 {
            *pos = at;
            return Ok(value);
        }
        shift = shift.saturating_add(7);
    }
}

/// Read a signed LEB128 number at `*pos` (LLVM's `decodeSLEB128` rules: padding past bit 63 is
/// accepted when it repeats the sign).
#[inline]
pub fn read_sleb128(data: &[u8], pos: &mut usize) -> Result<i64, ErrorKind> {
    if let Some(&first) = data.get(*pos)
        && first < 0x80
    {
        *pos += 1;
        // Sign-extend the 7-bit value.
        return Ok(i64::from(((first << 1) as i8) >> 1));
    }
    read_sleb128_slow(data, pos)
}

#[cold]
fn read_sleb128_slow(data: &[u8], pos: &mut usize) -> Result<i64, ErrorKind> {
    let mut value = 0i64;
    let mut shift = 0u32;
    let mut at = *pos;
    loop {
        let byte = *data.get(at).ok_or(ErrorKind::LebPastEnd)?;
        at += 1;
        let low = i64::from(byte & 0x7f);
        if shift == 63 {
            // Only the sign bit is left: the payload must be all zeros or all ones.
            if low != 0 && low != 0x7f {
                return Err(ErrorKind::LebOverflow { bits: 64 });
            }
            value |= low << 63;
        } else if shift > 63 {
            let sign_fill = if value < 0 { 0x7f } else { 0 };
            if low != sign_fill {
                return Err(ErrorKind::LebOverflow { bits: 64 });
            }
        } else {
            value |= low << shift;
        }
        shift = shift.saturating_add(7);
        if byte < 0x80 {
            if shift < 64 && byte & 0x40 != 0 {
                value |= -1i64 << shift;
            }
            *pos = at;
            return Ok(value);
        }
    }
}

/// Read an unsigned LEB128 number of up to 128 bits (for record keys that pack a tag beside a
/// 64-bit value); padding past bit 127 is accepted when its payload is zero.
pub fn read_uleb128_u128(data: &[u8], pos: &mut usize) -> Result<u128, ErrorKind> {
    let mut value = 0u128;
    let mut shift = 0u32;
    let mut at = *pos;
    loop {
        let byte = *data.get(at).ok_or(ErrorKind::LebPastEnd)?;
        at += 1;
        let low = u128::from(byte & 0x7f);
        if (shift == 126 && low > 3) || (shift > 126 && low != 0) {
            return Err(ErrorKind::LebOverflow { bits: 128 });
        }
        if shift < 128 {
            value |= low << shift;
        }
        if byte < 0x80 {
            *pos = at;
            return Ok(value);
        }
        shift = shift.saturating_add(7);
    }
}

/// Append the shortest unsigned LEB128 encoding of `value`.
#[inline]
pub fn write_uleb128(out: &mut Vec<u8>, value: u64) {
    write_uleb128_u128(out, u128::from(value));
}

/// Append the shortest unsigned LEB128 encoding of a value of up to 128 bits.
#[inline]
pub fn write_uleb128_u128(out: &mut Vec<u8>, mut value: u128) {
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// Append the shortest signed LEB128 encoding of `value`.
#[inline]
pub fn write_sleb128(out: &mut Vec<u8>, mut value: i64) {
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        let done = (value == 0 && byte & 0x40 == 0) || (value == -1 && byte & 0x40 != 0);
        if done {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// Write the shortest unsigned LEB128 encoding of `value` to `w`; returns the bytes written.
pub fn write_uleb128_to(w: &mut impl io::Write, value: u64) -> io::Result<usize> {
    let mut buf = Vec::with_capacity(10);
    write_uleb128(&mut buf, value);
    w.write_all(&buf)?;
    Ok(buf.len())
}

/// Write the shortest signed LEB128 encoding of `value` to `w`; returns the bytes written.
pub fn write_sleb128_to(w: &mut impl io::Write, value: i64) -> io::Result<usize> {
    let mut buf = Vec::with_capacity(10);
    write_sleb128(&mut buf, value);
    w.write_all(&buf)?;
    Ok(buf.len())
}

/// Number of bytes of the shortest unsigned LEB128 encoding of `value`.
pub fn uleb128_len(value: u64) -> usize {
    let bits = 64 - (value | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_encodings() {
        // Values from the DWARF specification's examples.
        let mut v = Vec::new();
        write_uleb128(&mut v, 624485);
        assert_eq!(v, [0xe5, 0x8e, 0x26]);
        v.clear();
        write_sleb128(&mut v, -123456);
        assert_eq!(v, [0xc0, 0xbb, 0x78]);
        assert_eq!(read_sleb128(&[0x7f], &mut 0), Ok(-1));
        assert_eq!(read_sleb128(&[0x80, 0x7f], &mut 0), Ok(-128));
        let max = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        let mut p = 0;
        assert_eq!(read_uleb128(&max, &mut p), Ok(u64::MAX));
        assert_eq!(p, 10);
    }

    #[test]
    fn llvm_edge_cases() {
        let too_big = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02];
        assert_eq!(
            read_uleb128(&too_big, &mut 0),
            Err(ErrorKind::LebOverflow { bits: 64 })
        );
        // Zero padding past 64 bits is accepted, as LLVM does.
        let padded = [
            0x81, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00,
        ];
        let mut p = 0;
        assert_eq!(read_uleb128(&padded, &mut p), Ok(1));
        assert_eq!(p, padded.len());
        let mut p = 0;
        assert_eq!(read_uleb128(&[0x80], &mut p), Err(ErrorKind::LebPastEnd));
        assert_eq!(p, 0, "position untouched on failure");
        assert_eq!(read_uleb128(&[], &mut 0), Err(ErrorKind::LebPastEnd));
        assert_eq!(read_sleb128(&[0xff], &mut 0), Err(ErrorKind::LebPastEnd));
    }

    #[test]
    fn wide_keys() {
        let v = (u128::from(u64::MAX) << 2) | 3;
        let mut buf = Vec::new();
        write_uleb128_u128(&mut buf, v);
        let mut p = 0;
        assert_eq!(read_uleb128_u128(&buf, &mut p), Ok(v));
        assert_eq!(p, buf.len());
        assert_eq!(uleb128_len(0), 1);
        assert_eq!(uleb128_len(128), 2);
    }

    proptest! {
        /// Any value, and often a small one (one to three bytes: the inline paths of the reader,
        /// which a uniform `u64` would almost never reach).
        #[test]
        fn uleb_round_trip(x in prop_oneof![0u64..1 << 16, any::<u64>()]) {
            let mut v = Vec::new();
            write_uleb128(&mut v, x);
            prop_assert_eq!(v.len(), uleb128_len(x));
            let mut pos = 0;
            prop_assert_eq!(read_uleb128(&v, &mut pos), Ok(x));
            prop_assert_eq!(pos, v.len());
            let mut w = Vec::new();
            prop_assert_eq!(write_uleb128_to(&mut w, x).unwrap(), v.len());
            prop_assert_eq!(w, v);
        }

        #[test]
        fn sleb_round_trip(x: i64) {
            let mut v = Vec::new();
            write_sleb128(&mut v, x);
            let mut pos = 0;
            prop_assert_eq!(read_sleb128(&v, &mut pos), Ok(x));
            prop_assert_eq!(pos, v.len());
            let mut w = Vec::new();
            write_sleb128_to(&mut w, x).unwrap();
            prop_assert_eq!(w, v);
        }

        #[test]
        fn u128_round_trip(x: u128) {
            let mut v = Vec::new();
            write_uleb128_u128(&mut v, x);
            let mut pos = 0;
            prop_assert_eq!(read_uleb128_u128(&v, &mut pos), Ok(x));
            prop_assert_eq!(pos, v.len());
        }

        /// The inline one- to three-byte paths answer as the general loop does, padded forms
        /// (`0x85 0x00`) and truncated ones included, from any position.
        #[test]
        fn uleb_fast_paths_agree_with_the_loop(
            data in proptest::collection::vec(any::<u8>(), 0..12),
            start in 0usize..13,
        ) {
            let (mut fast, mut slow) = (start, start);
            let got = read_uleb128(&data, &mut fast);
            let want = read_uleb128_slow(&data, &mut slow);
            prop_assert_eq!(got, want);
            prop_assert_eq!(fast, slow);
        }

        #[test]
        fn readers_never_panic(data in proptest::collection::vec(any::<u8>(), 0..24)) {
            let _ = read_uleb128(&data, &mut 0);
            let _ = read_sleb128(&data, &mut 0);
            let _ = read_uleb128_u128(&data, &mut 0);
        }
    }
}
