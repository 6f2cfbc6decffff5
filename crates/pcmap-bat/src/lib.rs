//! BOLT Address Translation (BAT): the `.note.bolt_bat` section `llvm-bolt --enable-bat` writes.
//!
//! BAT lets a profile collected on a BOLT-optimized binary be mapped back to the input binary:
//! for every function BOLT rewrote it records, per fragment (hot part and split-off cold parts),
//! which output offsets correspond to which input-function offsets, plus the input function's
//! hash, block count, block hashes/indices and secondary entry points.
//!
//! This crate reads and writes the section exactly as llvm-bolt 22 does (decoding a section and
//! encoding the result gives identical bytes) and translates addresses with perf2bolt's rules.
//! It depends on nothing but `thiserror`; finding the section in an ELF file is the caller's job
//! (section name [`SECTION_NAME`]; pass the section contents, note header included).
//!
//! # Translating addresses (the addr2line-like part)
//!
//! ```
//! # fn demo(section_bytes: &[u8]) -> Result<(), pcmap_bat::DecodeError> {
//! use pcmap_bat::BatTable;
//! let table = BatTable::parse(section_bytes)?;      // contents of `.note.bolt_bat`
//! // An LBR record `from -> to` seen on the BOLTed binary:
//! let (from, to) = (0x80009f, 0x800066);
//! if let Some(t) = table.translate(from, /* is_branch_src */ true) {
//!     // t.function_address: the hot fragment's address; the BOLTed binary's function symbol
//!     // there names the input function. t.input_offset: offset in the input function.
//!     println!("{from:#x} -> {:#x} + {:#x}", t.function_address, t.input_offset);
//! }
//! let _ = table.translate(to, false);
//! # Ok(()) }
//! ```
//!
//! Reproducing perf2bolt exactly (`DataAggregator` + `BoltAddressTranslation::translate`):
//! 1. Find the function symbol of the BOLTed binary that contains the address (perf2bolt's
//!    `getBinaryFunctionContainingAddress`; a cold fragment `foo.cold.0` is its own symbol).
//! 2. If [`BatTable::is_bat_function`]`(symbol_address)`, call
//!    [`BatTable::translate_in`]`(symbol_address, address, is_branch_src)`: the record belongs to
//!    the function at [`Translation::function_address`] (the parent, for a cold fragment) at
//!    [`Translation::input_offset`]. Otherwise BOLT did not rewrite the function and the plain
//!    offset `address - symbol_address` is already an input offset.
//! 3. `is_branch_src` is true for the source of a taken branch. A branch source maps to the input
//!    offset of the last BAT entry at or before it (the branch instruction itself when BAT has an
//!    entry for it, else the start of its basic block); any other address maps to
//!    `address - entry_output + entry_input`. Among entries with equal output offsets the last
//!    one counts (`std::multimap::upper_bound - 1`).
//!
//! 4. For a trace (a taken branch followed by straight-line execution from its target `to` up to
//!    the next branch source `end`) whose target lies in a BAT fragment,
//!    [`BatTable::fallthroughs_in_trace`]`(fragment, to, end)` lists the fall-through edges as
//!    input-offset pairs, replacing perf2bolt's CFG walk for BOLTed functions; perf2bolt records
//!    them as they are on the function at [`Translation::function_address`] of `to`. (Checking
//!    that `to` and `end` lie in the same function stays with the caller, as in perf2bolt.)
//!
//! Steps 1-4 are checked against perf2bolt 22 (`--pa`, `boltedcollection` fdata) on binaries with
//! split, reordered, multi-entry and thousands of functions (`crates/pcmap/tests/bat.rs`).
//! perf2bolt also drops taken branches whose source decodes as a return; that is aggregation
//! policy, not translation, and is left to the caller.
//!
//! [`BatTable::translate`] does step 1 with BAT alone (the fragment with the greatest start
//! `<=` address). BAT does not record fragment ends, so prefer `translate_in` when an address may
//! lie in code BOLT left alone.
//!
//! Other per-function data: [`BatTable::function`] (hash, number of blocks, secondary entry
//! points — secondary entry `i` has discriminator `i + 1` — and cold fragments),
//! [`BatTable::fragments_of`], [`BatTable::parent_of`], [`BatTable::block_at`] (block index and
//! hash of an input block by its input offset) and [`Translation::block`].
//!
//! # The typed model, decoder and encoder
//!
//! [`Bat`] is the whole table as plain data ([`HotFunction`], [`ColdFragment`], [`Entry`]).
//! [`Bat::decode_note`] / [`Bat::decode`] read a section / payload; [`Bat::encode_note`] /
//! [`Bat::encode`] write any model that passes [`Bat::validate`], so other rewriters can emit BAT.
//! Decoding never panics: malformed input gives a [`DecodeError`] with the byte offset and the
//! [`Field`] being read. Where the format leaves a choice to the writer (over-long LEB128s, a
//! shorter `EqualElems` run, padding bits in the bitmask) the decoder accepts any choice; it
//! rejects what llvm-bolt's reader would silently misread (bytes after the cold table, entries
//! out of output-offset order, fragments out of address order, offsets or indices that do not fit
//! the writer's 32-bit fields, a `HotIndex` past the hot table). `encode(decode(x))` is
//! byte-identical for every section llvm-bolt writes, and `decode(encode(decode(x))) ==
//! decode(x)` for every decodable `x`.
//!
//! # Format (llvm-bolt 22, as measured; differs from upstream `BAT.md` where noted)
//!
//! Note: `n_namesz`=5 `"BOLT\0"` padded to 8, `n_type`=1, payload, zero padding to 4 bytes.
//! Payload: hot table then cold table, each `NumFuncs` (ULEB128) then functions. Per hot
//! function: `Address` (ULEB delta), `FuncHash` (u64 LE), `NumBlocks`, `NumSecEntryPoints`,
//! `NumEntries`, `EqualElems`, bitmask, entries, secondary entry points (ULEB deltas from 0).
//! Per cold fragment: `Address`, `HotIndex` (ULEB delta, wraps mod 2^64), `ColdInputSkew`,
//! `NumEntries`, `EqualElems`, bitmask, entries (`EqualElems` exists for cold fragments too).
//! Entry: `OutputOffset` (ULEB delta), `InputOffset` (SLEB delta of `(in << 1) | BRANCHENTRY`,
//! omitted for the first `EqualElems` entries where it is `((out + skew) << 1) | bit`), and for
//! block entries only `BBHash` (u64 LE) and `BBIdx` (ULEB delta, wraps mod 2^64). Output
//! addresses are delta-encoded continuously across entries, functions and both tables.

#![deny(missing_docs)]

mod decode;
mod encode;
mod error;
mod model;
mod table;

pub use decode::{NOTE_NAME, NT_BOLT_BAT, SECTION_NAME, note_payload};
pub use error::{DecodeError, DecodeErrorKind, Field, ModelError};
pub use model::{Bat, Block, ColdFragment, Entry, EntryKind, HotFunction};
pub use table::{BatTable, Fragment, Function, Translation};

use decode::{ColdHeader, HotHeader, Sink, decode_payload};

impl Bat {
    /// Decode the contents of a `.note.bolt_bat` section (ELF note header included). Error
    /// offsets are relative to the section start.
    pub fn decode_note(section: &[u8]) -> Result<Bat, DecodeError> {
        let (base, payload) = note_payload(section)?;
        Self::decode_at(payload, base)
    }

    /// Decode a bare BAT payload (the note's `desc`).
    pub fn decode(payload: &[u8]) -> Result<Bat, DecodeError> {
        Self::decode_at(payload, 0)
    }

    fn decode_at(payload: &[u8], base: usize) -> Result<Bat, DecodeError> {
        let mut builder = ModelBuilder::default();
        decode_payload(payload, base, &mut builder)?;
        Ok(builder.bat)
    }
}

/// Builds the owned model from the decoder's stream.
#[derive(Default)]
struct ModelBuilder {
    bat: Bat,
    in_cold: bool,
}

impl ModelBuilder {
    fn current_entries(&mut self) -> Option<&mut Vec<Entry>> {
        if self.in_cold {
            self.bat.cold.last_mut().map(|c| &mut c.entries)
        } else {
            self.bat.hot.last_mut().map(|h| &mut h.entries)
        }
    }
}

impl Sink for ModelBuilder {
    fn table_len(&mut self, cold: bool, len: usize) {
        // `len` is bounded by the input size, so reserving is safe.
        if cold {
            self.bat.cold.reserve_exact(len);
        } else {
            self.bat.hot.reserve_exact(len);
        }
    }

    fn hot(&mut self, h: &HotHeader) {
        self.bat.hot.push(HotFunction {
            address: h.address,
            hash: h.hash,
            num_blocks: h.num_blocks,
            entries: Vec::with_capacity(h.num_entries as usize),
            secondary_entry_points: Vec::with_capacity(h.num_secondary_entry_points as usize),
        });
    }

    fn cold(&mut self, c: &ColdHeader) {
        self.in_cold = true;
        self.bat.cold.push(ColdFragment {
            address: c.address,
            hot_index: c.hot_index,
            input_skew: c.input_skew,
            entries: Vec::with_capacity(c.num_entries as usize),
        });
    }

    #[inline]
    fn entry(&mut self, entry: Entry) {
        if let Some(entries) = self.current_entries() {
            entries.push(entry);
        }
    }

    fn secondary_entry_point(&mut self, offset: u32) {
        if let Some(h) = self.bat.hot.last_mut() {
            h.secondary_entry_points.push(offset);
        }
    }
}
