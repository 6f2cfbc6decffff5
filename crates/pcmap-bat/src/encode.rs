//! The encoder: writes a [`Bat`] exactly as llvm-bolt 22 does.

use crate::decode::{NT_BOLT_BAT, align4};
use crate::error::ModelError;
use crate::model::{Bat, Entry};
use pcmap_bytes::leb128::{write_sleb128, write_uleb128};

impl Bat {
    /// Encode the payload (`desc`) of the BAT note.
    ///
    /// Choices the format leaves to the writer are made as llvm-bolt 22 makes them: minimal
    /// LEB128s, `EqualElems` = the longest leading run of entries with
    /// `output_offset + skew == input_offset` (skew 0 for hot functions), zero padding bits in the
    /// `BranchEntries` bitmask, and `size_t` wrap-around for decreasing `BBIdx`/`HotIndex` deltas.
    /// So the payload of every section llvm-bolt writes re-encodes to identical bytes.
    pub fn encode(&self) -> Result<Vec<u8>, ModelError> {
        self.validate()?;
        let entries: usize = self.hot.iter().map(|h| h.entries.len()).sum::<usize>()
            + self.cold.iter().map(|c| c.entries.len()).sum::<usize>();
        let mut out = Vec::with_capacity(16 * self.hot.len() + 8 * self.cold.len() + 12 * entries);
        let mut prev_address = 0u64;

        write_uleb128(&mut out, self.hot.len() as u64);
        for h in &self.hot {
            write_uleb128(&mut out, h.address.wrapping_sub(prev_address));
            prev_address = h.address;
            out.extend_from_slice(&h.hash.to_le_bytes());
            write_uleb128(&mut out, h.num_blocks);
            write_uleb128(&mut out, h.secondary_entry_points.len() as u64);
            encode_entries(&mut out, h.address, 0, &h.entries, &mut prev_address);
            let mut prev = 0u32;
            for &offset in &h.secondary_entry_points {
                write_uleb128(&mut out, u64::from(offset.wrapping_sub(prev)));
                prev = offset;
            }
        }

        write_uleb128(&mut out, self.cold.len() as u64);
        let mut prev_index = 0u64;
        for c in &self.cold {
            write_uleb128(&mut out, c.address.wrapping_sub(prev_address));
            prev_address = c.address;
            write_uleb128(&mut out, (c.hot_index as u64).wrapping_sub(prev_index));
            prev_index = c.hot_index as u64;
            write_uleb128(&mut out, u64::from(c.input_skew));
            encode_entries(
                &mut out,
                c.address,
                c.input_skew,
                &c.entries,
                &mut prev_address,
            );
        }
        Ok(out)
    }

    /// Encode the whole `.note.bolt_bat` section: note header (`n_namesz` 5, `n_type`
    /// [`NT_BOLT_BAT`]), owner `"BOLT\0"` padded to 8 bytes, payload, zero padding to 4 bytes.
    pub fn encode_note(&self) -> Result<Vec<u8>, ModelError> {
        let payload = self.encode()?;
        let descsz =
            u32::try_from(payload.len()).map_err(|_| ModelError::TooLarge(payload.len()))?;
        let mut out = Vec::with_capacity(20 + align4(payload.len()));
        out.extend_from_slice(&5u32.to_le_bytes());
        out.extend_from_slice(&descsz.to_le_bytes());
        out.extend_from_slice(&NT_BOLT_BAT.to_le_bytes());
        out.extend_from_slice(b"BOLT\0\0\0\0");
        out.extend_from_slice(&payload);
        out.resize(20 + align4(payload.len()), 0);
        Ok(out)
    }
}

fn encode_entries(
    out: &mut Vec<u8>,
    address: u64,
    skew: u32,
    entries: &[Entry],
    prev_address: &mut u64,
) {
    write_uleb128(out, entries.len() as u64);
    let equal_elems = entries
        .iter()
        .take_while(|e| u64::from(e.output_offset) + u64::from(skew) == u64::from(e.input_offset))
        .count();
    write_uleb128(out, equal_elems as u64);
    let mask_start = out.len();
    out.resize(mask_start + equal_elems.div_ceil(8), 0);
    for (j, e) in entries[..equal_elems].iter().enumerate() {
        if e.is_branch() {
            out[mask_start + j / 8] |= 1 << (j % 8);
        }
    }
    let mut prev_input = 0u64;
    let mut prev_index = 0u64;
    for (j, e) in entries.iter().enumerate() {
        let out_address = address.wrapping_add(u64::from(e.output_offset));
        write_uleb128(out, out_address.wrapping_sub(*prev_address));
        *prev_address = out_address;
        let packed = u64::from(e.packed_input());
        if j >= equal_elems {
            write_sleb128(out, packed.wrapping_sub(prev_input) as i64);
        }
        prev_input = packed;
        if let Some(block) = e.block() {
            out.extend_from_slice(&block.hash.to_le_bytes());
            write_uleb128(out, u64::from(block.index).wrapping_sub(prev_index));
            prev_index = u64::from(block.index);
        }
    }
}
