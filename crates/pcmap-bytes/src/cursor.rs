//! The one bounds-checked field cursor over untrusted bytes.

use crate::{Error, ErrorKind, Result, leb128};

/// Byte order of multi-byte fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Endian {
    /// Least significant byte first (`ELFDATA2LSB`).
    #[default]
    Little,
    /// Most significant byte first (`ELFDATA2MSB`).
    Big,
}

/// A cursor over `&'data [u8]` that reads fixed-size and LEB128 fields and reports failures at
/// absolute offsets (`base` + position).
#[derive(Debug, Clone, Copy)]
pub struct Cursor<'data> {
    data: &'data [u8],
    pos: usize,
    base: usize,
    endian: Endian,
}

impl<'data> Cursor<'data> {
    /// A little-endian cursor at the start of `data`, which starts at offset `base` of the input.
    #[inline]
    pub fn new(data: &'data [u8], base: usize) -> Self {
        Cursor {
            data,
            pos: 0,
            base,
            endian: Endian::Little,
        }
    }

    /// The same cursor reading multi-byte fields in `endian` order.
    #[inline]
    pub fn with_endian(mut self, endian: Endian) -> Self {
        self.endian = endian;
        self
    }

    /// Byte order of multi-byte fields.
    #[inline]
    pub fn endian(&self) -> Endian {
        self.endian
    }

    /// The whole slice the cursor reads.
    #[inline]
    pub fn data(&self) -> &'data [u8] {
        self.data
    }

    /// Position in [`data`](Self::data).
    #[inline]
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Move to position `pos` of [`data`](Self::data) (clamped to its end).
    #[inline]
    pub fn set_pos(&mut self, pos: usize) {
        self.pos = pos.min(self.data.len());
    }

    /// Offset of `data[0]` in the whole input.
    #[inline]
    pub fn base(&self) -> usize {
        self.base
    }

    /// Absolute offset of the next byte (`base` + position).
    #[inline]
    pub fn offset(&self) -> usize {
        self.base.saturating_add(self.pos)
    }

    /// Bytes left.
    #[inline]
    pub fn remaining(&self) -> usize {
        self.data.len().saturating_sub(self.pos)
    }

    /// Whether no bytes are left.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// The bytes left, without consuming them.
    #[inline]
    pub fn rest(&self) -> &'data [u8] {
        self.data.get(self.pos..).unwrap_or(&[])
    }

    #[cold]
    fn error(&self, at: usize, kind: ErrorKind) -> Error {
        Error {
            offset: self.base.saturating_add(at),
            kind,
        }
    }

    /// The next `n` bytes.
    #[inline]
    pub fn bytes(&mut self, n: usize) -> Result<&'data [u8]> {
        let data = self.data;
        match self
            .pos
            .checked_add(n)
            .and_then(|end| data.get(self.pos..end))
        {
            Some(slice) => {
                self.pos += n;
                Ok(slice)
            }
            None => Err(self.error(
                self.pos,
                ErrorKind::UnexpectedEnd {
                    needed: n,
                    available: self.remaining(),
                },
            )),
        }
    }

    /// Skip `n` bytes.
    #[inline]
    pub fn skip(&mut self, n: usize) -> Result<()> {
        self.bytes(n).map(|_| ())
    }

    /// The next `N` bytes as an array.
    #[inline]
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let b = self.bytes(N)?;
        let mut out = [0u8; N];
        out.copy_from_slice(b);
        Ok(out)
    }

    /// A `u8`.
    #[inline]
    pub fn read_u8(&mut self) -> Result<u8> {
        Ok(self.array::<1>()?[0])
    }

    /// A `u16` in the cursor's byte order.
    #[inline]
    pub fn read_u16(&mut self) -> Result<u16> {
        let b = self.array()?;
        Ok(match self.endian {
            Endian::Little => u16::from_le_bytes(b),
            Endian::Big => u16::from_be_bytes(b),
        })
    }

    /// A `u32` in the cursor's byte order.
    #[inline]
    pub fn read_u32(&mut self) -> Result<u32> {
        let b = self.array()?;
        Ok(match self.endian {
            Endian::Little => u32::from_le_bytes(b),
            Endian::Big => u32::from_be_bytes(b),
        })
    }

    /// A `u64` in the cursor's byte order.
    #[inline]
    pub fn read_u64(&mut self) -> Result<u64> {
        let b = self.array()?;
        Ok(match self.endian {
            Endian::Little => u64::from_le_bytes(b),
            Endian::Big => u64::from_be_bytes(b),
        })
    }

    /// An unsigned LEB128 number ([`leb128::read_uleb128`]); the error's offset is the number's
    /// first byte.
    #[inline]
    pub fn read_uleb128(&mut self) -> Result<u64> {
        let at = self.pos;
        leb128::read_uleb128(self.data, &mut self.pos).map_err(|k| self.error(at, k))
    }

    /// A signed LEB128 number ([`leb128::read_sleb128`]).
    #[inline]
    pub fn read_sleb128(&mut self) -> Result<i64> {
        let at = self.pos;
        leb128::read_sleb128(self.data, &mut self.pos).map_err(|k| self.error(at, k))
    }

    /// An unsigned LEB128 number of up to 128 bits ([`leb128::read_uleb128_u128`]).
    #[inline]
    pub fn read_uleb128_u128(&mut self) -> Result<u128> {
        let at = self.pos;
        leb128::read_uleb128_u128(self.data, &mut self.pos).map_err(|k| self.error(at, k))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn fields_and_offsets() {
        let data = [1, 0x34, 0x12, 0x12, 0x34, 0x80];
        let mut c = Cursor::new(&data, 0x100);
        assert_eq!(c.read_u8(), Ok(1));
        assert_eq!(c.read_u16(), Ok(0x1234));
        let mut c2 = c.with_endian(Endian::Big);
        assert_eq!(c2.read_u16(), Ok(0x1234));
        assert_eq!(c2.offset(), 0x105);
        assert_eq!(
            c2.read_uleb128(),
            Err(Error {
                offset: 0x105,
                kind: ErrorKind::LebPastEnd
            })
        );
        assert_eq!(
            c2.read_u32(),
            Err(Error {
                offset: 0x105,
                kind: ErrorKind::UnexpectedEnd {
                    needed: 4,
                    available: 1
                }
            })
        );
        assert_eq!(c2.pos(), 5, "failed reads do not move the cursor");
    }

    proptest! {
        #[test]
        fn leb_round_trip_through_cursor(u: u64, s: i64) {
            let mut buf = Vec::new();
            leb128::write_uleb128(&mut buf, u);
            leb128::write_sleb128(&mut buf, s);
            let mut c = Cursor::new(&buf, 0);
            prop_assert_eq!(c.read_uleb128(), Ok(u));
            prop_assert_eq!(c.read_sleb128(), Ok(s));
            prop_assert!(c.is_empty());
        }

        #[test]
        fn cursor_never_panics(data in proptest::collection::vec(any::<u8>(), 0..24), n in 0usize..32) {
            let mut c = Cursor::new(&data, usize::MAX - 4);
            let _ = c.read_uleb128();
            let _ = c.read_sleb128();
            let _ = c.bytes(n);
            let _ = c.read_u64();
            let _ = c.read_u32();
            let _ = c.rest();
        }
    }
}
