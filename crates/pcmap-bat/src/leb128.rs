//! LEB128 readers and writers.
//!
//! Hand-written rather than taken from `gimli::leb128`: this crate depends on nothing but
//! `thiserror` (so it can be fuzzed and published alone), and the BAT stream is almost entirely
//! one-byte LEBs, so the readers take a one-byte fast path before the general loop.

/// Why a LEB128 number could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LebError {
    /// The input ended inside the number.
    UnexpectedEnd,
    /// The number does not fit in 64 bits.
    Overflow,
}

/// Read an unsigned LEB128 number at `*pos`, advancing `*pos` past it.
#[inline]
pub(crate) fn read_uleb128(data: &[u8], pos: &mut usize) -> Result<u64, LebError> {
    let first = *data.get(*pos).ok_or(LebError::UnexpectedEnd)?;
    if first < 0x80 {
        *pos += 1;
        return Ok(u64::from(first));
    }
    read_uleb128_slow(data, pos)
}

#[cold]
fn read_uleb128_slow(data: &[u8], pos: &mut usize) -> Result<u64, LebError> {
    let mut value = 0u64;
    let mut shift = 0u32;
    let mut at = *pos;
    loop {
        let byte = *data.get(at).ok_or(LebError::UnexpectedEnd)?;
        at += 1;
        let low = u64::from(byte & 0x7f);
        if shift == 63 && low > 1 {
            return Err(LebError::Overflow);
        }
        if shift > 63 {
            if low != 0 {
                return Err(LebError::Overflow);
            }
        } else {
            value |= low << shift;
        }
        if byte < 0x80 {
            *pos = at;
            return Ok(value);
        }
        shift += 7;
    }
}

/// Read a signed LEB128 number at `*pos`, advancing `*pos` past it.
#[inline]
pub(crate) fn read_sleb128(data: &[u8], pos: &mut usize) -> Result<i64, LebError> {
    let first = *data.get(*pos).ok_or(LebError::UnexpectedEnd)?;
    if first < 0x80 {
        *pos += 1;
        // Sign-extend the 7-bit value.
        return Ok(i64::from(((first << 1) as i8) >> 1));
    }
    read_sleb128_slow(data, pos)
}

#[cold]
fn read_sleb128_slow(data: &[u8], pos: &mut usize) -> Result<i64, LebError> {
    let mut value = 0i64;
    let mut shift = 0u32;
    let mut at = *pos;
    loop {
        let byte = *data.get(at).ok_or(LebError::UnexpectedEnd)?;
        at += 1;
        let low = i64::from(byte & 0x7f);
        if shift == 63 {
            // Only the sign bit is left: the payload must be all zeros or all ones.
            if low != 0 && low != 0x7f {
                return Err(LebError::Overflow);
            }
            value |= low << 63;
        } else if shift > 63 {
            let sign_fill = if value < 0 { 0x7f } else { 0 };
            if low != sign_fill {
                return Err(LebError::Overflow);
            }
        } else {
            value |= low << shift;
        }
        shift += 7;
        if byte < 0x80 {
            if shift < 64 && byte & 0x40 != 0 {
                value |= -1i64 << shift;
            }
            *pos = at;
            return Ok(value);
        }
    }
}

/// Append `value` as a minimal unsigned LEB128 number.
#[inline]
pub(crate) fn write_uleb128(out: &mut Vec<u8>, mut value: u64) {
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

/// Append `value` as a minimal signed LEB128 number.
#[inline]
pub(crate) fn write_sleb128(out: &mut Vec<u8>, mut value: i64) {
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
        let mut pos = 0;
        assert_eq!(read_sleb128(&[0x7f], &mut pos), Ok(-1));
        pos = 0;
        assert_eq!(
            read_uleb128(
                &[0xf7, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
                &mut pos
            ),
            Ok(u64::MAX - 8)
        );
        pos = 0;
        assert_eq!(
            read_uleb128(
                &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02],
                &mut pos
            ),
            Err(LebError::Overflow)
        );
        pos = 0;
        assert_eq!(
            read_uleb128(&[0x80], &mut pos),
            Err(LebError::UnexpectedEnd)
        );
    }

    proptest! {
        #[test]
        fn uleb_round_trip(x: u64) {
            let mut v = Vec::new();
            write_uleb128(&mut v, x);
            let mut pos = 0;
            prop_assert_eq!(read_uleb128(&v, &mut pos), Ok(x));
            prop_assert_eq!(pos, v.len());
        }

        #[test]
        fn sleb_round_trip(x: i64) {
            let mut v = Vec::new();
            write_sleb128(&mut v, x);
            let mut pos = 0;
            prop_assert_eq!(read_sleb128(&v, &mut pos), Ok(x));
            prop_assert_eq!(pos, v.len());
        }
    }
}
