//! Unsigned LEB128 with exactly the acceptance rules of LLVM's `decodeULEB128`.
//!
//! Hand-written rather than taken from `gimli::leb128` because llvm-readobj's strictness is the
//! contract here: LLVM accepts any number of zero-payload continuation bytes past bit 63 (an
//! over-long but value-preserving encoding) and rejects only payload bits that do not fit in 64
//! bits, and the decoder must agree with it byte for byte.

/// Why a ULEB128 could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LebError {
    /// The input ended before a byte without the continuation bit.
    ExtendsPastEnd,
    /// Payload bits beyond bit 63.
    TooBigForU64,
}

/// Read one ULEB128 from `data` at `*pos`; on success advances `*pos` past it.
#[inline]
pub fn read_uleb128(data: &[u8], pos: &mut usize) -> Result<u64, LebError> {
    // Fast path: the overwhelmingly common one-byte value.
    if let Some(&b) = data.get(*pos)
        && b < 0x80
    {
        *pos += 1;
        return Ok(u64::from(b));
    }
    let mut value: u64 = 0;
    let mut shift: u32 = 0;
    let mut p = *pos;
    loop {
        let Some(&byte) = data.get(p) else {
            return Err(LebError::ExtendsPastEnd);
        };
        let slice = u64::from(byte & 0x7f);
        if shift >= 63 && ((shift == 63 && slice > 1) || (shift > 63 && slice != 0)) {
            return Err(LebError::TooBigForU64);
        }
        if shift < 64 {
            value |= slice << shift;
        }
        shift = shift.saturating_add(7);
        p += 1;
        if byte < 0x80 {
            break;
        }
    }
    *pos = p;
    Ok(value)
}

/// Append the shortest ULEB128 encoding of `value` to `out`.
#[inline]
pub fn write_uleb128(out: &mut Vec<u8>, mut value: u64) {
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

/// Number of bytes of the shortest ULEB128 encoding of `value`.
pub fn uleb128_len(value: u64) -> usize {
    let bits = 64 - (value | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn llvm_edge_cases() {
        let mut p = 0;
        // 2^63 fits: ten bytes, the last holding bit 63.
        let max = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        assert_eq!(read_uleb128(&max, &mut p), Ok(u64::MAX));
        assert_eq!(p, 10);
        let too_big = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02];
        assert_eq!(read_uleb128(&too_big, &mut 0), Err(LebError::TooBigForU64));
        // Zero padding past 64 bits is accepted, as LLVM does.
        let padded = [
            0x81, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00,
        ];
        let mut p = 0;
        assert_eq!(read_uleb128(&padded, &mut p), Ok(1));
        assert_eq!(p, padded.len());
        assert_eq!(read_uleb128(&[0x80], &mut 0), Err(LebError::ExtendsPastEnd));
        assert_eq!(read_uleb128(&[], &mut 0), Err(LebError::ExtendsPastEnd));
    }

    proptest! {
        #[test]
        fn round_trip(v in any::<u64>()) {
            let mut buf = Vec::new();
            write_uleb128(&mut buf, v);
            prop_assert_eq!(buf.len(), uleb128_len(v));
            let mut p = 0;
            prop_assert_eq!(read_uleb128(&buf, &mut p), Ok(v));
            prop_assert_eq!(p, buf.len());
        }
    }
}
