//! The error type of every reader and writer in this crate.

/// A failure while reading or writing BTF, an inline-site blob or an ELF file.
///
/// Every variant that comes from input bytes carries the byte offset in the blob (or file) and
/// the field that was being read.
#[derive(Debug, thiserror::Error)]
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
    /// The ELF file could not be parsed.
    #[cfg(feature = "elf")]
    #[error(transparent)]
    Elf(#[from] pcmap_binary::Error),
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

/// The workspace's byte cursor ([`pcmap_bytes::Cursor`]) with this crate's field names and errors.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Cursor<'data> {
    inner: pcmap_bytes::Cursor<'data>,
}

impl<'data> Cursor<'data> {
    pub fn new(data: &'data [u8], base: usize, big_endian: bool) -> Self {
        let endian = if big_endian {
            pcmap_bytes::Endian::Big
        } else {
            pcmap_bytes::Endian::Little
        };
        Cursor {
            inner: pcmap_bytes::Cursor::new(data, base).with_endian(endian),
        }
    }

    /// Switch the byte order of multi-byte fields (after reading a magic number).
    pub fn set_big_endian(&mut self, big_endian: bool) {
        let endian = if big_endian {
            pcmap_bytes::Endian::Big
        } else {
            pcmap_bytes::Endian::Little
        };
        self.inner = self.inner.with_endian(endian);
    }

    /// Move to position `pos` of the slice.
    pub fn set_pos(&mut self, pos: usize) {
        self.inner.set_pos(pos);
    }

    pub fn offset(&self) -> usize {
        self.inner.offset()
    }

    pub fn remaining(&self) -> usize {
        self.inner.remaining()
    }

    #[cold]
    fn error_leb(&self, field: &'static str, e: pcmap_bytes::Error, signed: bool) -> Error {
        match e.kind {
            pcmap_bytes::ErrorKind::UnexpectedEnd { needed, available } => Error::Truncated {
                field,
                offset: e.offset,
                needed,
                available,
            },
            // The input ended inside the number: the missing byte is the one past the end.
            pcmap_bytes::ErrorKind::LebPastEnd => Error::Truncated {
                field,
                offset: self.inner.base().saturating_add(self.inner.data().len()),
                needed: 1,
                available: 0,
            },
            pcmap_bytes::ErrorKind::LebOverflow { .. } => Error::invalid(
                field,
                e.offset,
                if signed {
                    "SLEB128 value does not fit in 64 bits"
                } else {
                    "ULEB128 value does not fit in 64 bits"
                },
            ),
        }
    }

    #[cold]
    fn error(&self, field: &'static str, e: pcmap_bytes::Error) -> Error {
        self.error_leb(field, e, false)
    }

    pub fn bytes(&mut self, n: usize, field: &'static str) -> Result<&'data [u8]> {
        self.inner.bytes(n).map_err(|e| self.error(field, e))
    }

    pub fn u8(&mut self, field: &'static str) -> Result<u8> {
        self.inner.read_u8().map_err(|e| self.error(field, e))
    }

    pub fn u16(&mut self, field: &'static str) -> Result<u16> {
        self.inner.read_u16().map_err(|e| self.error(field, e))
    }

    pub fn u32(&mut self, field: &'static str) -> Result<u32> {
        self.inner.read_u32().map_err(|e| self.error(field, e))
    }

    pub fn u64(&mut self, field: &'static str) -> Result<u64> {
        self.inner.read_u64().map_err(|e| self.error(field, e))
    }

    pub fn uleb(&mut self, field: &'static str) -> Result<u64> {
        self.inner.read_uleb128().map_err(|e| self.error(field, e))
    }

    pub fn sleb(&mut self, field: &'static str) -> Result<i64> {
        self.inner
            .read_sleb128()
            .map_err(|e| self.error_leb(field, e, true))
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn leb128_round_trips(u in any::<u64>(), s in any::<i64>()) {
            let mut buf = Vec::new();
            pcmap_bytes::leb128::write_uleb128(&mut buf, u);
            pcmap_bytes::leb128::write_sleb128(&mut buf, s);
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
