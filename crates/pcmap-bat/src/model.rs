//! The typed model of a BAT section: what `llvm-bolt --enable-bat` records for each function.

use crate::error::ModelError;

/// A whole BAT table: the hot functions table followed by the cold fragments table.
///
/// `hot` is sorted by strictly increasing [`HotFunction::address`], `cold` by strictly increasing
/// [`ColdFragment::address`] (this is how the section stores them). [`Bat::decode`] and
/// [`Bat::decode_note`] produce it; [`Bat::encode`] and [`Bat::encode_note`] write it back
/// byte-for-byte as llvm-bolt 22 does.
///
/// [`Bat::decode`]: crate::Bat::decode
/// [`Bat::decode_note`]: crate::Bat::decode_note
/// [`Bat::encode`]: crate::Bat::encode
/// [`Bat::encode_note`]: crate::Bat::encode_note
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Bat {
    /// Hot (main) fragments, one per rewritten input function.
    pub hot: Vec<HotFunction>,
    /// Split-off fragments (`foo.cold.0`, ...), each linked to its hot function.
    pub cold: Vec<ColdFragment>,
}

/// The main fragment of a function rewritten by BOLT, and what BOLT knew about the input function.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HotFunction {
    /// Output (BOLTed binary) address of the function. The BOLTed binary's function symbol at
    /// this address names the input function.
    pub address: u64,
    /// `FuncHash`: hash of the input function (the YAML profile's function `hash`).
    pub hash: u64,
    /// `NumBlocks`: number of basic blocks of the input function's CFG.
    pub num_blocks: u64,
    /// Translation entries, sorted by output offset (duplicates allowed, kept in order).
    pub entries: Vec<Entry>,
    /// Input offsets of the secondary entry points, in the order BOLT enumerates them (the
    /// position + 1 is the entry point's discriminator).
    pub secondary_entry_points: Vec<u32>,
}

/// A split-off (cold) fragment of a function.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ColdFragment {
    /// Output address of the fragment.
    pub address: u64,
    /// Index into [`Bat::hot`] of the function this fragment belongs to.
    pub hot_index: usize,
    /// `ColdInputSkew`: llvm-bolt writes the input offset of the fragment's first entry. Used only
    /// to compress the leading run of entries whose `output_offset + input_skew == input_offset`.
    pub input_skew: u32,
    /// Translation entries, sorted by output offset; input offsets are offsets in the *input
    /// function* (the hot function's input), not in the fragment.
    pub entries: Vec<Entry>,
}

/// One translation entry: an output offset in a fragment and the input-function offset it maps to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Entry {
    /// Offset from the fragment's output address.
    pub output_offset: u32,
    /// Offset in the input function (must be below 2^31).
    pub input_offset: u32,
    /// A basic-block start or a branch/call instruction.
    pub kind: EntryKind,
}

/// What an [`Entry`] marks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EntryKind {
    /// The start of an input basic block (`BRANCHENTRY` bit clear). Entries of deleted input
    /// blocks are keyed at the function's output size.
    Block(Block),
    /// A control-flow source: a branch or call instruction (`BRANCHENTRY` bit set).
    Branch,
}

/// Identity of an input basic block as BOLT recorded it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Block {
    /// `BBIdx`: the block's index in the input function's CFG.
    pub index: u32,
    /// `BBHash`: the block's hash (the YAML profile's block `hash`).
    pub hash: u64,
}

impl Entry {
    /// The `(input_offset << 1) | BRANCHENTRY` value the section stores.
    #[inline]
    pub fn packed_input(&self) -> u32 {
        (self.input_offset << 1) | u32::from(self.is_branch())
    }

    /// True for a branch/call entry.
    #[inline]
    pub fn is_branch(&self) -> bool {
        matches!(self.kind, EntryKind::Branch)
    }

    /// The block identity of a block entry.
    #[inline]
    pub fn block(&self) -> Option<Block> {
        match self.kind {
            EntryKind::Block(b) => Some(b),
            EntryKind::Branch => None,
        }
    }
}

impl Bat {
    /// Check every rule the encoder relies on: fragments in increasing address order, no cold
    /// fragment at a hot address, valid hot indices, entries sorted, input offsets below 2^31.
    pub fn validate(&self) -> Result<(), ModelError> {
        check_sorted(self.hot.iter().map(|h| h.address))?;
        check_sorted(self.cold.iter().map(|c| c.address))?;
        for h in &self.hot {
            check_entries(h.address, &h.entries)?;
        }
        for c in &self.cold {
            check_entries(c.address, &c.entries)?;
            if c.hot_index >= self.hot.len() {
                return Err(ModelError::BadHotIndex {
                    address: c.address,
                    hot_index: c.hot_index,
                    num_hot: self.hot.len(),
                });
            }
            if self
                .hot
                .binary_search_by_key(&c.address, |h| h.address)
                .is_ok()
            {
                return Err(ModelError::DuplicateAddress(c.address));
            }
        }
        Ok(())
    }

    /// The hot function a cold fragment belongs to.
    pub fn parent_of(&self, cold: &ColdFragment) -> Option<&HotFunction> {
        self.hot.get(cold.hot_index)
    }
}

fn check_sorted(addrs: impl Iterator<Item = u64>) -> Result<(), ModelError> {
    let mut previous: Option<u64> = None;
    for address in addrs {
        if let Some(p) = previous
            && address <= p
        {
            return Err(ModelError::FragmentsNotSorted {
                previous: p,
                address,
            });
        }
        previous = Some(address);
    }
    Ok(())
}

fn check_entries(fragment: u64, entries: &[Entry]) -> Result<(), ModelError> {
    if u32::try_from(entries.len()).is_err() {
        return Err(ModelError::TooManyEntries(fragment));
    }
    let mut previous = 0u32;
    for (i, e) in entries.iter().enumerate() {
        if e.output_offset < previous {
            return Err(ModelError::EntriesNotSorted {
                fragment,
                entry: i,
                offset: e.output_offset,
            });
        }
        previous = e.output_offset;
        if e.input_offset >= 1 << 31 {
            return Err(ModelError::InputOffsetTooLarge {
                fragment,
                entry: i,
                offset: e.input_offset,
            });
        }
    }
    Ok(())
}
