//! The block index: one address-sorted table of every block of every function and range, with
//! O(log n) lookups (plus a bucket directory that makes most lookups a short search) and
//! Propeller's rules for ties:
//!
//! * several blocks may start at the same address when all but the last are zero-sized: a sample
//!   or a branch *source* there belongs to the non-empty block ([`BlockIndex::lookup`],
//!   [`BlockIndex::lookup_branch_source`]);
//! * a branch *target* there lands on the first zero-sized block of that function at that
//!   address, and a target exactly at the end of a block (a return to the padding after a
//!   call that ends its block) belongs to that block ([`BlockIndex::lookup_branch_target`]);
//! * gaps between blocks (alignment padding) belong to no block.
//!
//! Blocks are identified by [`BlockHandle`] = (function, range, index): block IDs are not unique
//! within a function (cloned blocks repeat their ID). This API is read-only and stable for the
//! Propeller capability, which builds its CFGs on it.

use crate::decode::{BlockRecord, MapVisitor};
use crate::model::{BlockMetadata, Features, FunctionMap, Layout};

/// Identity of a block: the function's position in the input, the range within the function,
/// and the block's position within the range (its record order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BlockHandle {
    /// Index of the function in the slice the index was built from.
    pub function: u32,
    /// Range within the function (0 holds the entry block).
    pub range: u32,
    /// Block record position within the range.
    pub index: u32,
}

/// One block of the index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexedBlock {
    /// First address of the block.
    pub start: u64,
    /// One past its last byte (`start` for zero-sized blocks).
    pub end: u64,
    /// (function, range, index).
    pub handle: BlockHandle,
    /// The block's ID (`MachineBasicBlock` number).
    pub id: u32,
    /// Its metadata bits.
    pub metadata: BlockMetadata,
    callsites_start: u32,
    callsites_len: u32,
}

impl IndexedBlock {
    /// Size in bytes.
    pub fn size(&self) -> u64 {
        self.end - self.start
    }
    /// Whether this is the function's entry block (range 0, index 0).
    pub fn is_function_entry(&self) -> bool {
        self.handle.range == 0 && self.handle.index == 0
    }
}

/// Where a PC lies relative to the calls of its block (from the callsite end offsets).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallsitePosition {
    /// Number of calls of the block that end at or before the PC: 0 means before the first
    /// call; `n` means after the n-th call (a return address equals a callsite end).
    pub calls_before: u32,
    /// Number of calls in the block.
    pub calls_in_block: u32,
    /// Whether the PC is exactly a callsite end (a return address).
    pub at_callsite_end: bool,
}

/// Builds a [`BlockIndex`] straight from the decoder ([`crate::decode::visit_section`]) without
/// materialising [`FunctionMap`]s; feed several sections to one builder to number their
/// functions consecutively.
#[derive(Debug, Clone, Default)]
pub struct BlockIndexBuilder {
    blocks: Vec<IndexedBlock>,
    callsites: Vec<u32>,
    range_first: Vec<Vec<(u32, u32)>>,
    flat: u32,
    base: u64,
}

impl MapVisitor for BlockIndexBuilder {
    fn function(&mut self, _layout: Layout, _features: Features) {
        self.range_first.push(Vec::new());
    }
    fn range(&mut self, base_address: u64, _num_blocks: u32) {
        self.base = base_address;
        if let Some(f) = self.range_first.last_mut() {
            f.push((self.flat, 0));
        }
    }
    fn block(&mut self, e: &BlockRecord<'_>) {
        let function = self.range_first.len().saturating_sub(1) as u32;
        let Some(ranges) = self.range_first.last_mut() else {
            return;
        };
        let range = ranges.len().saturating_sub(1) as u32;
        let Some(r) = ranges.last_mut() else {
            return;
        };
        let index = r.1;
        r.1 += 1;
        let start = self.base.wrapping_add(u64::from(e.offset));
        let callsites_start = self.callsites.len() as u32;
        self.callsites.extend_from_slice(e.callsite_end_offsets);
        self.blocks.push(IndexedBlock {
            start,
            end: start.saturating_add(u64::from(e.size)),
            handle: BlockHandle {
                function,
                range,
                index,
            },
            id: e.id,
            metadata: e.metadata,
            callsites_start,
            callsites_len: e.callsite_end_offsets.len() as u32,
        });
        self.flat += 1;
    }
}

impl BlockIndexBuilder {
    /// Sort and index what was visited.
    pub fn finish(self) -> BlockIndex {
        let BlockIndexBuilder {
            mut blocks,
            callsites,
            range_first,
            ..
        } = self;
        // Zero-sized blocks sort before the non-empty block at the same address; otherwise the
        // map's order is kept (stable sort).
        if !blocks.is_sorted_by_key(|b| (b.start, b.end > b.start)) {
            blocks.sort_by_key(|b| (b.start, b.end > b.start));
        }
        let mut handle_pos = vec![0u32; blocks.len()];
        for (pos, b) in blocks.iter().enumerate() {
            let h = b.handle;
            let flat = range_first[h.function as usize][h.range as usize].0 + h.index;
            handle_pos[flat as usize] = pos as u32;
        }
        let spans: Vec<[u64; 2]> = blocks.iter().map(|b| [b.start, b.end]).collect();
        let tags = blocks
            .iter()
            .map(|b| {
                (b.handle.function & FUNCTION_MASK)
                    | if b.is_function_entry() { ENTRY_BIT } else { 0 }
                    | if b.metadata.has_return() {
                        RETURN_BIT
                    } else {
                        0
                    }
            })
            .collect();
        let dir = pcmap_bytes::StartIndex::new(&spans, |s| s[0]);
        BlockIndex {
            spans,
            tags,
            blocks,
            callsites,
            range_first,
            handle_pos,
            dir,
        }
    }
}

const ENTRY_BIT: u32 = 1 << 31;
const RETURN_BIT: u32 = 1 << 30;
const FUNCTION_MASK: u32 = RETURN_BIT - 1;

/// All blocks sorted by address. See the module documentation for the lookup rules.
#[derive(Debug, Clone, Default)]
pub struct BlockIndex {
    /// `[start, end)` of every block, in sorted order (kept apart from `blocks` so lookups touch
    /// 16 bytes per probe).
    spans: Vec<[u64; 2]>,
    /// Per sorted position: function index | ENTRY_BIT | RETURN_BIT (compact for classification).
    tags: Vec<u32>,
    blocks: Vec<IndexedBlock>,
    callsites: Vec<u32>,
    /// `range_first[f][r]`: (flat index of block 0 of range r of function f in `handle_pos`,
    /// number of blocks of the range).
    range_first: Vec<Vec<(u32, u32)>>,
    handle_pos: Vec<u32>,
    /// Page index over the block starts.
    dir: pcmap_bytes::StartIndex,
}

impl BlockIndex {
    /// Build the index over `functions`; a function's position in the iteration is its
    /// [`BlockHandle::function`]. Block addresses are `range.base_address + entry.offset`.
    pub fn new<'a>(functions: impl IntoIterator<Item = &'a FunctionMap>) -> BlockIndex {
        let mut b = BlockIndexBuilder::default();
        for f in functions {
            b.function(f.layout, f.features);
            for r in &f.ranges {
                b.range(r.base_address, r.num_blocks);
                for e in &r.entries {
                    b.block(&BlockRecord {
                        id: e.id,
                        offset: e.offset,
                        size: e.size,
                        metadata: e.metadata,
                        callsite_end_offsets: &e.callsite_end_offsets,
                        hash: e.hash,
                    });
                }
            }
        }
        b.finish()
    }

    /// Number of blocks.
    pub fn len(&self) -> usize {
        self.blocks.len()
    }
    /// Whether there are no blocks.
    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }
    /// All blocks in address order.
    pub fn blocks(&self) -> &[IndexedBlock] {
        &self.blocks
    }
    /// The block at sorted position `pos`.
    pub fn block(&self, pos: usize) -> &IndexedBlock {
        &self.blocks[pos]
    }
    /// `[start, end)` of the block at sorted position `pos`.
    #[inline]
    pub fn span(&self, pos: usize) -> (u64, u64) {
        let [s, e] = self.spans[pos];
        (s, e)
    }
    /// Function index of the block at `pos` (fast path of `block(pos).handle.function`; exact
    /// below 2^30 functions).
    #[inline]
    pub fn function_of(&self, pos: usize) -> u32 {
        self.tags[pos] & FUNCTION_MASK
    }
    /// Whether the block at `pos` is its function's entry block.
    #[inline]
    pub fn is_entry(&self, pos: usize) -> bool {
        self.tags[pos] & ENTRY_BIT != 0
    }
    /// Whether the block at `pos` has `HasReturn`.
    #[inline]
    pub fn has_return(&self, pos: usize) -> bool {
        self.tags[pos] & RETURN_BIT != 0
    }

    /// Sorted position of the block `handle`, if it exists.
    pub fn position(&self, handle: BlockHandle) -> Option<usize> {
        let &(first, len) = self
            .range_first
            .get(handle.function as usize)?
            .get(handle.range as usize)?;
        if handle.index >= len {
            return None;
        }
        let flat = first + handle.index;
        self.handle_pos.get(flat as usize).map(|&p| p as usize)
    }
    /// Callsite end offsets of the block at `pos` (relative to its start).
    pub fn callsite_end_offsets(&self, pos: usize) -> &[u32] {
        let b = &self.blocks[pos];
        let s = b.callsites_start as usize;
        &self.callsites[s..s + b.callsites_len as usize]
    }

    /// Number of block starts `<= pc` (the upper bound).
    #[inline]
    fn upper_bound(&self, pc: u64) -> usize {
        self.dir.upper_bound(&self.spans, pc, |s| s[0])
    }

    /// The block containing `pc` (for samples): the non-empty block with `start <= pc < end`.
    #[inline]
    pub fn lookup(&self, pc: u64) -> Option<usize> {
        let u = self.upper_bound(pc);
        let pos = u.checked_sub(1)?;
        (pc < self.spans[pos][1]).then_some(pos)
    }

    /// The block a branch at `pc` leaves from (same rule as [`BlockIndex::lookup`]).
    #[inline]
    pub fn lookup_branch_source(&self, pc: u64) -> Option<usize> {
        self.lookup(pc)
    }

    /// The block a branch to `pc` lands in: the first zero-sized block of the same function
    /// at `pc` if there is one, and a block whose end is exactly `pc` when no block starts there.
    #[inline]
    pub fn lookup_branch_target(&self, pc: u64) -> Option<usize> {
        let u = self.upper_bound(pc);
        let mut pos = u.checked_sub(1)?;
        let [start, end] = self.spans[pos];
        if pc > end {
            return None;
        }
        if start == pc {
            let f = self.tags[pos] & FUNCTION_MASK;
            while pos > 0 {
                let [ps, pe] = self.spans[pos - 1];
                if ps == pc && pe == pc && self.tags[pos - 1] & FUNCTION_MASK == f {
                    pos -= 1;
                } else {
                    break;
                }
            }
        }
        Some(pos)
    }

    /// Position of `pc` relative to the calls of the block at `pos`.
    pub fn callsite_position(&self, pos: usize, pc: u64) -> CallsitePosition {
        let b = &self.blocks[pos];
        let off = pc.wrapping_sub(b.start);
        let cs = self.callsite_end_offsets(pos);
        let before = cs.partition_point(|&c| u64::from(c) <= off);
        CallsitePosition {
            calls_before: before as u32,
            calls_in_block: cs.len() as u32,
            at_callsite_end: before > 0 && u64::from(cs[before - 1]) == off,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{BbEntry, BbRange, Features, Layout};

    fn func(base: u64, blocks: &[(u32, u32, u32)]) -> FunctionMap {
        FunctionMap {
            layout: Layout::Versioned(2),
            features: Features(0),
            ranges: vec![BbRange {
                base_address: base,
                num_blocks: blocks.len() as u32,
                entries: blocks
                    .iter()
                    .map(|&(id, offset, size)| BbEntry {
                        id,
                        offset,
                        size,
                        ..Default::default()
                    })
                    .collect(),
            }],
            pgo: None,
        }
    }

    #[test]
    fn zero_sized_blocks_and_gaps() {
        // f: BB0 [0x10,0x14) BB5 zero-sized at 0x14, BB6 [0x14,0x18); gap; g at 0x20.
        let fs = [
            func(0x10, &[(0, 0, 4), (5, 4, 0), (6, 4, 4)]),
            func(0x20, &[(0, 0, 2)]),
        ];
        let ix = BlockIndex::new(&fs);
        let id = |p: Option<usize>| p.map(|p| ix.block(p).id);
        assert_eq!(id(ix.lookup(0x14)), Some(6));
        assert_eq!(id(ix.lookup_branch_target(0x14)), Some(5));
        assert_eq!(id(ix.lookup(0x18)), None);
        // A return landing at the end of BB6 (padding follows).
        assert_eq!(id(ix.lookup_branch_target(0x18)), Some(6));
        assert_eq!(ix.lookup(0x1c), None);
        assert_eq!(ix.lookup(0x0f), None);
        assert_eq!(id(ix.lookup(0x21)), Some(0));
        assert_eq!(ix.lookup(0x22), None);
        let h = BlockHandle {
            function: 0,
            range: 0,
            index: 1,
        };
        assert_eq!(ix.block(ix.position(h).unwrap()).id, 5);
        assert_eq!(
            ix.position(BlockHandle {
                function: 0,
                range: 0,
                index: 3
            }),
            None
        );
    }
}
