//! The error type of every reader and writer in this crate.

/// A failure while reading or writing BTF, an inline-site blob or an ELF file.
///
/// Every variant that comes from input bytes carries the byte offset in the blob (or file) and
/// the field that was being read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The input ends before a field could be read.
    #[error(
        "truncated input: {field} at byte offset {offset:#x} needs {needed} bytes, {available} available"
    )]
    Truncated {
        /// The field being read.
        field: &'static str,
        /// Byte offset of the field.
        offset: usize,
        /// Bytes the field needs.
        needed: usize,
        /// Bytes left in the input.
        available: usize,
    },
    /// A field holds a value the format does not allow.
    #[error("invalid {field} at byte offset {offset:#x}: {message}")]
    Invalid {
        /// The field being read.
        field: &'static str,
        /// Byte offset of the field.
        offset: usize,
        /// What is wrong with it.
        message: String,
    },
    /// A value cannot be represented by the output format (writers only).
    #[error("cannot encode {field}: {message}")]
    Unrepresentable {
        /// The field being written.
        field: &'static str,
        /// Why it does not fit.
        message: String,
    },
}

impl Error {
    pub(crate) fn invalid(field: &'static str, offset: usize, message: impl Into<String>) -> Self {
        Error::Invalid {
            field,
            offset,
            message: message.into(),
        }
    }
}

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A bounds-checked little/big-endian cursor over untrusted bytes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Cursor<'data> {
    pub data: &'data [u8],
    pub pos: usize,
    /// Offset of `data[0]` in the whole input, for error messages.
    pub base: usize,
    pub big_endian: bool,
}

impl<'data> Cursor<'data> {
    pub fn new(data: &'data [u8], base: usize, big_endian: bool) -> Self {
        Cursor {
            data,
            pos: 0,
            base,
            big_endian,
        }
    }

    pub fn offset(&self) -> usize {
        self.base.saturating_add(self.pos)
    }

    pub fn remaining(&self) -> usize {
        self.data.len().saturating_sub(self.pos)
    }

    pub fn bytes(&mut self, n: usize, field: &'static str) -> Result<&'data [u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.data.len())
            .ok_or(Error::Truncated {
                field,
                offset: self.offset(),
                needed: n,
                available: self.remaining(),
            })?;
        let out = &self.data[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    pub fn u8(&mut self, field: &'static str) -> Result<u8> {
        Ok(self.bytes(1, field)?[0])
    }

    pub fn u16(&mut self, field: &'static str) -> Result<u16> {
        let b: [u8; 2] = self.bytes(2, field)?.try_into().expect("2 bytes");
        Ok(if self.big_endian {
            u16::from_be_bytes(b)
        } else {
            u16::from_le_bytes(b)
        })
    }

    pub fn u32(&mut self, field: &'static str) -> Result<u32> {
        let b: [u8; 4] = self.bytes(4, field)?.try_into().expect("4 bytes");
        Ok(if self.big_endian {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        })
    }

    pub fn u64(&mut self, field: &'static str) -> Result<u64> {
        let b: [u8; 8] = self.bytes(8, field)?.try_into().expect("8 bytes");
        Ok(if self.big_endian {
            u64::from_be_bytes(b)
        } else {
            u64::from_le_bytes(b)
        })
    }

    pub fn uleb(&mut self, field: &'static str) -> Result<u64> {
        let start = self.offset();
        let mut value: u64 = 0;
        let mut shift = 0u32;
        loop {
            let byte = self.u8(field)?;
            if shift >= 64 || (shift == 63 && byte & 0x7e != 0) {
                return Err(Error::invalid(
                    field,
                    start,
                    "ULEB128 value does not fit in 64 bits",
                ));
            }
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
            shift += 7;
        }
    }

    pub fn sleb(&mut self, field: &'static str) -> Result<i64> {
        let start = self.offset();
        let mut value: i64 = 0;
        let mut shift = 0u32;
        loop {
            let byte = self.u8(field)?;
            if shift >= 64 {
                return Err(Error::invalid(
                    field,
                    start,
                    "SLEB128 value does not fit in 64 bits",
                ));
            }
            value |= i64::from(byte & 0x7f) << shift;
            shift += 7;
            if byte & 0x80 == 0 {
                if shift < 64 && byte & 0x40 != 0 {
                    value |= -1i64 << shift;
                }
                return Ok(value);
            }
        }
    }

    /// A ULEB128 count of items that each take at least `min_item_bytes`, bounded by the input left.
    pub fn count(&mut self, min_item_bytes: usize, field: &'static str) -> Result<usize> {
        let at = self.offset();
        let n = self.uleb(field)?;
        let max = (self.remaining() / min_item_bytes.max(1)) as u64;
        if n > max {
            return Err(Error::invalid(
                field,
                at,
                format!(
                    "count {n} exceeds what the {} remaining bytes can hold",
                    self.remaining()
                ),
            ));
        }
        Ok(n as usize)
    }
}

/// ULEB128 / SLEB128 writers (hand-written: three lines each, no dependency needed for writing).
pub(crate) fn put_uleb(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

pub(crate) fn put_sleb(out: &mut Vec<u8>, mut v: i64) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        let done = (v == 0 && byte & 0x40 == 0) || (v == -1 && byte & 0x40 != 0);
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

    proptest! {
        #[test]
        fn leb128_round_trips(u in any::<u64>(), s in any::<i64>()) {
            let mut buf = Vec::new();
            put_uleb(&mut buf, u);
            put_sleb(&mut buf, s);
            let mut c = Cursor::new(&buf, 0, false);
            prop_assert_eq!(c.uleb("u").unwrap(), u);
            prop_assert_eq!(c.sleb("s").unwrap(), s);
            prop_assert_eq!(c.remaining(), 0);
        }

        #[test]
        fn cursor_never_panics(data in proptest::collection::vec(any::<u8>(), 0..24)) {
            let mut c = Cursor::new(&data, 0, false);
            let _ = c.uleb("u");
            let _ = c.sleb("s");
            let _ = c.count(1, "n");
            let _ = c.u64("x");
        }
    }
}
