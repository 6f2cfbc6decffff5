//! The decoder: one pass over the payload, handing every function header and entry to a sink.
//!
//! The sink lets [`Bat`](crate::Bat) (the owned model) and [`BatTable`](crate::BatTable) (the
//! lookup index) be built straight from the bytes without an intermediate copy.

use crate::error::{DecodeError, DecodeErrorKind, Field};
use crate::model::{Block, Entry, EntryKind};

/// `n_type` of the BAT note (`NT_BOLT_BAT`).
pub const NT_BOLT_BAT: u32 = 1;
/// Owner name of the BAT note (written as `"BOLT\0"`, `n_namesz = 5`).
pub const NOTE_NAME: &[u8] = b"BOLT";
/// Name of the ELF section that holds the note.
pub const SECTION_NAME: &str = ".note.bolt_bat";

/// Header of a hot function, as decoded.
pub(crate) struct HotHeader {
    pub address: u64,
    pub hash: u64,
    pub num_blocks: u64,
    pub num_entries: u32,
    pub num_secondary_entry_points: u32,
}

/// Header of a cold fragment, as decoded.
pub(crate) struct ColdHeader {
    pub address: u64,
    pub hot_index: usize,
    pub input_skew: u32,
    pub num_entries: u32,
}

/// Receives the decoded table in stream order.
pub(crate) trait Sink {
    /// Number of hot functions and (later) cold fragments announced by `NumFuncs`.
    fn table_len(&mut self, _cold: bool, _len: usize) {}
    fn hot(&mut self, header: &HotHeader);
    fn cold(&mut self, header: &ColdHeader);
    fn entry(&mut self, entry: Entry);
    fn secondary_entry_point(&mut self, offset: u32);
}

/// The shared byte cursor, with this format's field names and error kinds.
struct Cursor<'data> {
    inner: pcmap_bytes::Cursor<'data>,
}

impl<'data> Cursor<'data> {
    #[inline]
    fn pos(&self) -> usize {
        self.inner.pos()
    }

    #[inline]
    fn err(&self, at: usize, field: Field, kind: DecodeErrorKind) -> DecodeError {
        DecodeError {
            offset: self.inner.base() + at,
            field,
            kind,
        }
    }

    #[cold]
    fn bytes_err(field: Field, e: pcmap_bytes::Error) -> DecodeError {
        let kind = match e.kind {
            pcmap_bytes::ErrorKind::LebOverflow { .. } => DecodeErrorKind::LebOverflow,
            pcmap_bytes::ErrorKind::UnexpectedEnd { .. } | pcmap_bytes::ErrorKind::LebPastEnd => {
                DecodeErrorKind::UnexpectedEnd
            }
        };
        DecodeError {
            offset: e.offset,
            field,
            kind,
        }
    }

    #[inline]
    fn remaining(&self) -> usize {
        self.inner.remaining()
    }

    #[inline]
    fn uleb(&mut self, field: Field) -> Result<u64, DecodeError> {
        self.inner
            .read_uleb128()
            .map_err(|e| Self::bytes_err(field, e))
    }

    #[inline]
    fn sleb(&mut self, field: Field) -> Result<i64, DecodeError> {
        self.inner
            .read_sleb128()
            .map_err(|e| Self::bytes_err(field, e))
    }

    /// A ULEB128 value that must not exceed `max`.
    #[inline]
    fn uleb_max(&mut self, field: Field, max: u64) -> Result<u64, DecodeError> {
        let at = self.pos();
        let value = self.uleb(field)?;
        if value > max {
            return Err(self.err(at, field, DecodeErrorKind::OutOfRange { value, max }));
        }
        Ok(value)
    }

    /// A count of items that take at least `min_item_size` bytes each.
    #[inline]
    fn count(&mut self, field: Field, min_item_size: usize) -> Result<u32, DecodeError> {
        let at = self.pos();
        let count = self.uleb_max(field, u64::from(u32::MAX))?;
        let remaining = self.remaining();
        if count.saturating_mul(min_item_size as u64) > remaining as u64 {
            return Err(self.err(
                at,
                field,
                DecodeErrorKind::CountTooLarge { count, remaining },
            ));
        }
        Ok(count as u32)
    }

    #[inline]
    fn bytes(&mut self, field: Field, len: usize) -> Result<&'data [u8], DecodeError> {
        self.inner.bytes(len).map_err(|e| Self::bytes_err(field, e))
    }

    #[inline]
    fn u64_le(&mut self, field: Field) -> Result<u64, DecodeError> {
        self.inner.read_u64().map_err(|e| Self::bytes_err(field, e))
    }
}

/// Locate the payload (`desc`) of the BAT note in a `.note.bolt_bat` section.
///
/// Returns the payload's offset in `section` and the payload. The section must hold exactly one
/// note of type [`NT_BOLT_BAT`] whose owner name starts with `"BOLT"`, plus at most the padding
/// that aligns the payload to 4 bytes.
pub fn note_payload(section: &[u8]) -> Result<(usize, &[u8]), DecodeError> {
    let err = |offset, field, kind| DecodeError {
        offset,
        field,
        kind,
    };
    let header =
        section
            .get(..12)
            .ok_or(err(0, Field::NoteHeader, DecodeErrorKind::UnexpectedEnd))?;
    let word =
        |i: usize| u32::from_le_bytes([header[i], header[i + 1], header[i + 2], header[i + 3]]);
    let (namesz, descsz, ntype) = (word(0) as usize, word(4) as usize, word(8));
    if ntype != NT_BOLT_BAT {
        return Err(err(
            8,
            Field::NoteHeader,
            DecodeErrorKind::BadNote("note type is not NT_BOLT_BAT (1)"),
        ));
    }
    let name = section.get(12..12usize.saturating_add(namesz)).ok_or(err(
        12,
        Field::NoteName,
        DecodeErrorKind::UnexpectedEnd,
    ))?;
    if !name.starts_with(NOTE_NAME) {
        return Err(err(
            12,
            Field::NoteName,
            DecodeErrorKind::BadNote("owner name is not \"BOLT\""),
        ));
    }
    let desc_start = 12 + align4(namesz);
    let desc = desc_start
        .checked_add(descsz)
        .and_then(|end| section.get(desc_start..end))
        .ok_or(err(4, Field::NoteDesc, DecodeErrorKind::UnexpectedEnd))?;
    let desc_end = desc_start + descsz;
    let padding = align4(descsz) - descsz;
    if section.len() - desc_end > padding {
        return Err(err(
            desc_end,
            Field::NoteDesc,
            DecodeErrorKind::TrailingBytes(section.len() - desc_end),
        ));
    }
    Ok((desc_start, desc))
}

#[inline]
pub(crate) fn align4(n: usize) -> usize {
    n.saturating_add(3) & !3
}

/// Minimum encoded sizes, used to bound counts by the remaining input.
const MIN_HOT_FUNCTION_SIZE: usize = 1 + 8 + 1 + 1 + 1 + 1;
const MIN_COLD_FRAGMENT_SIZE: usize = 1 + 1 + 1 + 1 + 1;

/// Decode a BAT payload, feeding `sink`. `base` is the payload's offset in the caller's buffer
/// (added to error offsets).
pub(crate) fn decode_payload(
    payload: &[u8],
    base: usize,
    sink: &mut impl Sink,
) -> Result<(), DecodeError> {
    let mut c = Cursor {
        inner: pcmap_bytes::Cursor::new(payload, base),
    };
    // Output addresses are delta-encoded continuously over functions, entries and both tables.
    let mut prev_address = 0u64;
    let mut hot_addresses: Vec<u64> = Vec::new();

    // Hot functions table.
    let num_hot = c.count(Field::NumFuncs, MIN_HOT_FUNCTION_SIZE)?;
    sink.table_len(false, num_hot as usize);
    hot_addresses.reserve(num_hot as usize);
    for _ in 0..num_hot {
        let at = c.pos();
        let address = prev_address.wrapping_add(c.uleb(Field::Address)?);
        if let Some(&previous) = hot_addresses.last()
            && address <= previous
        {
            return Err(c.err(
                at,
                Field::Address,
                DecodeErrorKind::NotSorted {
                    previous,
                    value: address,
                },
            ));
        }
        prev_address = address;
        hot_addresses.push(address);
        let hash = c.u64_le(Field::FuncHash)?;
        let num_blocks = c.uleb(Field::NumBlocks)?;
        let num_secondary_entry_points = c.count(Field::NumSecEntryPoints, 1)?;
        let num_entries = c.count(Field::NumEntries, 1)?;
        sink.hot(&HotHeader {
            address,
            hash,
            num_blocks,
            num_entries,
            num_secondary_entry_points,
        });
        decode_entries(&mut c, address, 0, num_entries, &mut prev_address, sink)?;
        let mut offset = 0u32;
        for _ in 0..num_secondary_entry_points {
            let delta = c.uleb_max(Field::SecEntryPoint, u64::from(u32::MAX))?;
            offset = offset.wrapping_add(delta as u32);
            sink.secondary_entry_point(offset);
        }
    }

    // Cold fragments table.
    let num_cold = c.count(Field::NumFuncs, MIN_COLD_FRAGMENT_SIZE)?;
    sink.table_len(true, num_cold as usize);
    let mut hot_index = 0u64;
    let mut previous_cold: Option<u64> = None;
    let mut hot_cursor = 0usize;
    for _ in 0..num_cold {
        let at = c.pos();
        let address = prev_address.wrapping_add(c.uleb(Field::Address)?);
        if let Some(previous) = previous_cold
            && address <= previous
        {
            return Err(c.err(
                at,
                Field::Address,
                DecodeErrorKind::NotSorted {
                    previous,
                    value: address,
                },
            ));
        }
        // Cold addresses increase, so one forward walk over the hot addresses finds collisions.
        while hot_addresses.get(hot_cursor).is_some_and(|&h| h < address) {
            hot_cursor += 1;
        }
        if hot_addresses.get(hot_cursor) == Some(&address) {
            return Err(c.err(
                at,
                Field::Address,
                DecodeErrorKind::DuplicateAddress(address),
            ));
        }
        previous_cold = Some(address);
        prev_address = address;
        let at = c.pos();
        // llvm-bolt writes `HotIndex - PrevIndex` as a size_t: decreasing indices wrap.
        hot_index = hot_index.wrapping_add(c.uleb(Field::HotIndex)?);
        if hot_index >= u64::from(num_hot) {
            return Err(c.err(
                at,
                Field::HotIndex,
                DecodeErrorKind::OutOfRange {
                    value: hot_index,
                    max: u64::from(num_hot).wrapping_sub(1),
                },
            ));
        }
        let input_skew = c.uleb_max(Field::ColdInputSkew, u64::from(u32::MAX))? as u32;
        let num_entries = c.count(Field::NumEntries, 1)?;
        sink.cold(&ColdHeader {
            address,
            hot_index: hot_index as usize,
            input_skew,
            num_entries,
        });
        decode_entries(
            &mut c,
            address,
            input_skew,
            num_entries,
            &mut prev_address,
            sink,
        )?;
    }

    if c.remaining() != 0 {
        return Err(c.err(
            c.pos(),
            Field::TrailingBytes,
            DecodeErrorKind::TrailingBytes(c.remaining()),
        ));
    }
    Ok(())
}

/// Decode `EqualElems`, the `BranchEntries` bitmask and `num_entries` entries of one fragment.
#[inline]
fn decode_entries(
    c: &mut Cursor<'_>,
    address: u64,
    skew: u32,
    num_entries: u32,
    prev_address: &mut u64,
    sink: &mut impl Sink,
) -> Result<(), DecodeError> {
    let equal_elems = c.uleb_max(Field::EqualElems, u64::from(num_entries))? as usize;
    let mask = c.bytes(Field::BranchEntries, equal_elems.div_ceil(8))?;
    let mut prev_input = 0u64; // `(InputOffset << 1) | BRANCHENTRY` of the previous entry
    let mut prev_index = 0u64;
    let mut prev_offset = 0u64;
    for j in 0..num_entries as usize {
        let at = c.pos();
        let out_address = prev_address.wrapping_add(c.uleb(Field::OutputOffset)?);
        *prev_address = out_address;
        let output_offset = out_address.wrapping_sub(address);
        if output_offset > u64::from(u32::MAX) {
            return Err(c.err(
                at,
                Field::OutputOffset,
                DecodeErrorKind::OutOfRange {
                    value: output_offset,
                    max: u64::from(u32::MAX),
                },
            ));
        }
        if output_offset < prev_offset {
            return Err(c.err(
                at,
                Field::OutputOffset,
                DecodeErrorKind::NotSorted {
                    previous: prev_offset,
                    value: output_offset,
                },
            ));
        }
        prev_offset = output_offset;
        let at = c.pos();
        let packed = if j < equal_elems {
            // Implied: input = output + skew; the branch bit comes from the bitmask.
            let bit = (mask[j / 8] >> (j % 8)) & 1;
            ((output_offset + u64::from(skew)) << 1) | u64::from(bit)
        } else {
            prev_input.wrapping_add(c.sleb(Field::InputOffset)? as u64)
        };
        if packed > u64::from(u32::MAX) {
            let field = if j < equal_elems {
                Field::EqualElems
            } else {
                Field::InputOffset
            };
            return Err(c.err(
                at,
                field,
                DecodeErrorKind::OutOfRange {
                    value: packed >> 1,
                    max: u64::from(u32::MAX >> 1),
                },
            ));
        }
        prev_input = packed;
        let kind = if packed & 1 == 0 {
            let hash = c.u64_le(Field::BBHash)?;
            let at = c.pos();
            // `BBIndex - PrevBBIndex` is written as a size_t: decreasing indices wrap mod 2^64.
            let index = prev_index.wrapping_add(c.uleb(Field::BBIdx)?);
            if index > u64::from(u32::MAX) {
                return Err(c.err(
                    at,
                    Field::BBIdx,
                    DecodeErrorKind::OutOfRange {
                        value: index,
                        max: u64::from(u32::MAX),
                    },
                ));
            }
            prev_index = index;
            EntryKind::Block(Block {
                index: index as u32,
                hash,
            })
        } else {
            EntryKind::Branch
        };
        sink.entry(Entry {
            output_offset: output_offset as u32,
            input_offset: (packed >> 1) as u32,
            kind,
        });
    }
    Ok(())
}
