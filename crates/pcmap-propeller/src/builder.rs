//! Per-function CFGs from a basic-block address map and branch records.
//!
//! The input is the map as a list of [`MapFunction`]s (block addresses, sizes, IDs and the
//! `CanFallThrough` / `HasReturn` bits) and two kinds of profile records, both with execution
//! counts:
//! * a **taken branch** `from -> to` (`from` is the address of the branch instruction), and
//! * a **fall-through range** `start .. end`: execution entered at `start` (the target of a taken
//!   branch) and ran straight through to the branch instruction at `end`.
//!
//! A pre-aggregated `T branch target ft_end count` record is one of each. Records are folded into
//! an [`Accumulator`] (one per parallel chunk, merged afterwards); memory grows with the distinct
//! profiled blocks and edges only.
//!
//! # Classification (after Propeller's `BinaryAddressMapper`; the rules live in `pcmap-bbmap`'s
//! block attributor, `pcmap_bbmap::attribute`, shared with `pcmap bbmap profile`)
//! Addresses are mapped through one address-sorted table of all blocks. A branch *source* maps to
//! the non-empty block containing it; a branch *target* maps to the first block starting exactly
//! there (a zero-sized block wins over the non-empty block at the same address), else to the
//! block containing it. Then a taken branch is
//! * a **call** when the target is the exact start of a function's entry block (including tail
//!   calls and recursion);
//! * a **return** when the target is not a block start, or the source block ends in a return;
//! * an **intra-function branch edge** when both ends are in the same function;
//! * otherwise an inter-function jump (counted, not used).
//!
//! A fall-through range is valid only when both ends are in the same address range of the same
//! function and every block it runs through, except the last, `CanFallThrough`; it then adds
//! fall-through edges between consecutive blocks and one execution to every block it *enters*
//! (a range that starts in the middle of a block — after a return — does not count that block
//! again). Invalid ranges are counted and dropped, as perf2bolt does ("mismatching traces").
//! The address index here is the builder's own (hand-written, ~60 lines) rather than
//! `pcmap-bbmap`'s `BlockIndex`: the fall-through walk needs the blocks of one range numbered
//! consecutively, and keeping the builder on plain [`MapFunction`]s lets tests, benchmarks and the
//! fuzz target drive it without an ELF file. It applies the same tie rules.
//!
//! After folding, block counts are raised to their incoming and outgoing edge sums so that
//! branch-only profiles (`B` records) also give consistent counts.

use pcmap_bbmap::attribute::{
    self, BlockFacts, BlockLookup, BranchClass, EdgeKind as AttrKind, FallThroughClass,
};
use rustc_hash::FxHashMap;

use crate::cfg::{BlockCall, CallEdge, CfgBlock, CfgEdge, EdgeKind, FunctionCfg, ProgramCfg};

/// One block of the address map.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapBlock {
    /// Block ID.
    pub bb_id: u32,
    /// Absolute start address.
    pub address: u64,
    /// Size in bytes (may be 0).
    pub size: u64,
    /// `CanFallThrough`: control may run into the next block of the range.
    pub can_fall_through: bool,
    /// `HasReturn`: the block ends in a return (or a tail call).
    pub has_return: bool,
    /// The block hash of maps written with `-mllvm -emit-bb-hash` (`BBHash` feature).
    pub hash: Option<u64>,
}

/// One function of the address map.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct MapFunction {
    /// Symbol name.
    pub name: String,
    /// Other symbols at the same address.
    pub aliases: Vec<String>,
    /// Address ranges, each a list of blocks in address order; `ranges[0][0]` is the entry.
    pub ranges: Vec<Vec<MapBlock>>,
}

/// Counters describing how the records were used. Counts are of records (lines), not of executions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BuildStats {
    /// Taken-branch records seen.
    pub branches: u64,
    /// … that became intra-function branch edges.
    pub intra_branches: u64,
    /// … that were calls (or tail calls) into a mapped function entry.
    pub calls: u64,
    /// … that were returns.
    pub returns: u64,
    /// … between two functions other than calls and returns.
    pub inter_function_jumps: u64,
    /// … whose source and target are both outside every block (stale profile, other binary, libraries).
    pub branches_unmapped: u64,
    /// … whose source is outside every block but the target inside one (entries from outside).
    pub branches_from_outside: u64,
    /// … whose source is inside a block and the target outside (calls into libraries, returns to them).
    pub branches_to_outside: u64,
    /// Fall-through records seen.
    pub fall_throughs: u64,
    /// … used.
    pub fall_throughs_valid: u64,
    /// … with an end outside every block.
    pub fall_throughs_unmapped: u64,
    /// … that cannot happen on this binary (backwards, across functions or ranges, or through a
    /// block that cannot fall through).
    pub fall_throughs_invalid: u64,
}

impl BuildStats {
    fn merge(&mut self, o: &BuildStats) {
        self.branches += o.branches;
        self.intra_branches += o.intra_branches;
        self.calls += o.calls;
        self.returns += o.returns;
        self.inter_function_jumps += o.inter_function_jumps;
        self.branches_unmapped += o.branches_unmapped;
        self.branches_from_outside += o.branches_from_outside;
        self.branches_to_outside += o.branches_to_outside;
        self.fall_throughs += o.fall_throughs;
        self.fall_throughs_valid += o.fall_throughs_valid;
        self.fall_throughs_unmapped += o.fall_throughs_unmapped;
        self.fall_throughs_invalid += o.fall_throughs_invalid;
    }

    /// Records of either kind that touched at least one mapped block.
    pub fn mapped_records(&self) -> u64 {
        (self.branches - self.branches_unmapped)
            + (self.fall_throughs - self.fall_throughs_unmapped)
    }

    /// All records seen.
    pub fn records(&self) -> u64 {
        self.branches + self.fall_throughs
    }
}

/// Per-chunk aggregation state. Keys are global block numbers (see [`CfgBuilder`]).
#[derive(Clone, Debug, Default)]
pub struct Accumulator {
    edges: FxHashMap<(u32, u32, bool), u64>,
    entries: FxHashMap<u32, u64>,
    calls: FxHashMap<(u32, u32), u64>,
    /// Calls between blocks of different functions: (calling block, callee entry block) -> count.
    block_calls: FxHashMap<(u32, u32), u64>,
    /// How the records were used so far.
    pub stats: BuildStats,
}

impl Accumulator {
    /// Merge another accumulator into this one.
    pub fn merge(self, other: Accumulator) -> Accumulator {
        let (mut big, small) = if self.edges.len() >= other.edges.len() {
            (self, other)
        } else {
            (other, self)
        };
        for (k, v) in small.edges {
            add_count(big.edges.entry(k).or_default(), v);
        }
        for (k, v) in small.entries {
            add_count(big.entries.entry(k).or_default(), v);
        }
        for (k, v) in small.calls {
            add_count(big.calls.entry(k).or_default(), v);
        }
        for (k, v) in small.block_calls {
            add_count(big.block_calls.entry(k).or_default(), v);
        }
        big.stats.merge(&small.stats);
        big
    }
}

#[derive(Clone, Copy, Debug)]
struct BlockInfo {
    func: u32,
    range: u32,
    local: u32,
    start: u64,
    end: u64,
    can_fall_through: bool,
    has_return: bool,
}

/// An index over the address map that folds branch records into CFGs.
#[derive(Debug)]
pub struct CfgBuilder<'m> {
    functions: &'m [MapFunction],
    /// Global block number -> block, numbered function by function, range by range.
    blocks: Vec<BlockInfo>,
    /// First global block number of each function.
    first_block: Vec<u32>,
    /// Block starts sorted by address (zero-sized blocks before the non-empty one at the same start)…
    starts: Vec<u64>,
    /// … and the global block number at each position.
    order: Vec<u32>,
    /// Page index over `starts`, so most lookups search a handful of entries instead of
    /// bisecting the whole table (cache misses dominate the fold otherwise).
    dir: pcmap_bytes::StartIndex,
}

/// The map is too large to number its blocks with 32 bits.
#[derive(Debug, thiserror::Error)]
#[error("the address map has more than 2^32 blocks")]
pub struct TooManyBlocks;

impl<'m> CfgBuilder<'m> {
    /// Index the map.
    pub fn new(functions: &'m [MapFunction]) -> Result<Self, TooManyBlocks> {
        let mut blocks = Vec::new();
        let mut first_block = Vec::with_capacity(functions.len());
        for (fi, f) in functions.iter().enumerate() {
            first_block.push(u32::try_from(blocks.len()).map_err(|_| TooManyBlocks)?);
            let mut local = 0u32;
            for (ri, r) in f.ranges.iter().enumerate() {
                for b in r {
                    blocks.push(BlockInfo {
                        func: u32::try_from(fi).map_err(|_| TooManyBlocks)?,
                        range: u32::try_from(ri).map_err(|_| TooManyBlocks)?,
                        local,
                        start: b.address,
                        end: b.address.saturating_add(b.size),
                        can_fall_through: b.can_fall_through,
                        has_return: b.has_return,
                    });
                    local = local.saturating_add(1);
                }
            }
        }
        if u32::try_from(blocks.len()).is_err() {
            return Err(TooManyBlocks);
        }
        let mut by_address: Vec<(u64, u32)> = blocks
            .iter()
            .enumerate()
            .map(|(g, b)| (b.start, g as u32))
            .collect();
        by_address.sort_unstable_by_key(|&(s, g)| (s, blocks[g as usize].end > s, g));
        let starts: Vec<u64> = by_address.iter().map(|&(s, _)| s).collect();
        let order: Vec<u32> = by_address.iter().map(|&(_, g)| g).collect();
        let dir = pcmap_bytes::StartIndex::new(&starts, |&s| s);
        Ok(CfgBuilder {
            functions,
            blocks,
            first_block,
            starts,
            order,
            dir,
        })
    }

    /// Number of positions whose start is `<= addr`.
    #[inline]
    fn upper_bound(&self, addr: u64) -> usize {
        self.dir.upper_bound(&self.starts, addr, |&s| s)
    }

    /// Number of blocks in the map.
    pub fn block_count(&self) -> usize {
        self.blocks.len()
    }

    /// The non-empty block containing `addr` (a branch source or the end of a fall-through).
    fn lookup_source(&self, addr: u64) -> Option<u32> {
        let i = self.upper_bound(addr);
        let g = *self.order.get(i.checked_sub(1)?)?;
        let b = &self.blocks[g as usize];
        (addr < b.end).then_some(g)
    }

    /// The first block starting at `addr`, else the block containing it (a branch target).
    fn lookup_target(&self, addr: u64) -> Option<u32> {
        // First position with start >= addr = upper_bound(addr - 1).
        let i = if addr == 0 {
            0
        } else {
            self.upper_bound(addr - 1)
        };
        if self.starts.get(i) == Some(&addr) {
            return Some(self.order[i]);
        }
        self.lookup_source(addr)
    }

    fn is_entry(&self, g: u32) -> bool {
        let b = &self.blocks[g as usize];
        self.first_block[b.func as usize] == g
    }
}

/// The builder's index answers the block attributor's lookups (global block numbers are
/// consecutive within a range).
impl BlockLookup for CfgBuilder<'_> {
    #[inline]
    fn source_block(&self, addr: u64) -> Option<usize> {
        self.lookup_source(addr).map(|g| g as usize)
    }
    #[inline]
    fn target_block(&self, addr: u64) -> Option<usize> {
        self.lookup_target(addr).map(|g| g as usize)
    }
    #[inline]
    fn facts(&self, b: usize) -> BlockFacts {
        let i = &self.blocks[b];
        BlockFacts {
            start: i.start,
            function: i.func,
            range: i.range,
            entry: self.is_entry(b as u32),
            has_return: i.has_return,
            can_fall_through: i.can_fall_through,
        }
    }
}

impl CfgBuilder<'_> {
    /// Fold one taken branch executed `count` times (classified by `pcmap-bbmap`'s block
    /// attributor).
    pub fn add_branch(&self, acc: &mut Accumulator, from: u64, to: u64, count: u64) {
        acc.stats.branches += 1;
        let (fb, tb, kind) = match attribute::classify_branch(self, from, to) {
            BranchClass::Unmapped => return acc.stats.branches_unmapped += 1,
            BranchClass::FromOutside => return acc.stats.branches_from_outside += 1,
            BranchClass::ToOutside => return acc.stats.branches_to_outside += 1,
            BranchClass::Edge { from, to, kind } => (from as u32, to as u32, kind),
        };
        let (src, dst) = (&self.blocks[fb as usize], &self.blocks[tb as usize]);
        match kind {
            AttrKind::Call => {
                acc.stats.calls += 1;
                add_count(acc.calls.entry((src.func, dst.func)).or_default(), count);
                if src.func != dst.func {
                    add_count(acc.block_calls.entry((fb, tb)).or_default(), count);
                }
            }
            AttrKind::Return => acc.stats.returns += 1,
            AttrKind::Branch => {
                acc.stats.intra_branches += 1;
                add_count(acc.edges.entry((fb, tb, false)).or_default(), count);
            }
            AttrKind::InterFunction => acc.stats.inter_function_jumps += 1,
        }
    }

    /// Fold one fall-through range executed `count` times (validated by `pcmap-bbmap`'s block
    /// attributor).
    pub fn add_fall_through(&self, acc: &mut Accumulator, start: u64, end: u64, count: u64) {
        acc.stats.fall_throughs += 1;
        let (sb, eb, enters_first) = match attribute::classify_fall_through(self, start, end) {
            FallThroughClass::Unmapped => return acc.stats.fall_throughs_unmapped += 1,
            FallThroughClass::Invalid => return acc.stats.fall_throughs_invalid += 1,
            FallThroughClass::Valid {
                first,
                last,
                enters_first,
            } => (first as u32, last as u32, enters_first),
        };
        acc.stats.fall_throughs_valid += 1;
        if enters_first {
            add_count(acc.entries.entry(sb).or_default(), count);
        }
        for g in sb + 1..=eb {
            add_count(acc.entries.entry(g).or_default(), count);
            add_count(acc.edges.entry((g - 1, g, true)).or_default(), count);
        }
    }

    /// Turn the folded records into CFGs. Only functions with at least one executed block or
    /// edge are included; the call graph refers to them by their index in the result.
    pub fn finish(&self, acc: Accumulator) -> ProgramCfg {
        self.finish_with_calls(acc).0
    }

    /// [`CfgBuilder::finish`], plus the calls between blocks of different profiled functions
    /// (for inter-function reordering), sorted. Returns are left out: BOLT's profiles do not
    /// record them, and a layout must not depend on which of the formats the profile came in.
    pub fn finish_with_calls(&self, mut acc: Accumulator) -> (ProgramCfg, Vec<BlockCall>) {
        let block_calls = std::mem::take(&mut acc.block_calls);
        // Which functions are profiled.
        let mut profiled: Vec<u32> = acc
            .entries
            .iter()
            .filter(|&(_, &c)| c > 0)
            .map(|(&g, _)| self.blocks[g as usize].func)
            .chain(
                acc.edges
                    .iter()
                    .filter(|&(_, &c)| c > 0)
                    .map(|(&(s, _, _), _)| self.blocks[s as usize].func),
            )
            .chain(
                acc.calls
                    .iter()
                    .filter(|&(_, &c)| c > 0)
                    .map(|(&(_, callee), _)| callee),
            )
            .collect();
        profiled.sort_unstable();
        profiled.dedup();
        let mut slot: FxHashMap<u32, usize> = FxHashMap::default();
        let mut functions: Vec<FunctionCfg> = Vec::with_capacity(profiled.len());
        for &fi in &profiled {
            let f = &self.functions[fi as usize];
            slot.insert(fi, functions.len());
            functions.push(FunctionCfg {
                name: f.name.clone(),
                aliases: f.aliases.clone(),
                blocks: f
                    .ranges
                    .iter()
                    .flatten()
                    .map(|b| CfgBlock {
                        bb_id: b.bb_id,
                        address: b.address,
                        size: b.size,
                        count: 0,
                        hash: b.hash,
                    })
                    .collect(),
                edges: Vec::new(),
            });
        }
        for (&g, &c) in &acc.entries {
            let b = &self.blocks[g as usize];
            if let Some(&k) = slot.get(&b.func) {
                functions[k].blocks[b.local as usize].count += c;
            }
        }
        let mut edges: Vec<((u32, u32, bool), u64)> =
            acc.edges.into_iter().filter(|&(_, c)| c > 0).collect();
        edges.sort_unstable();
        for ((s, d, ft), c) in edges {
            let (bs, bd) = (&self.blocks[s as usize], &self.blocks[d as usize]);
            if let Some(&k) = slot.get(&bs.func) {
                functions[k].edges.push(CfgEdge {
                    src: bs.local as usize,
                    dst: bd.local as usize,
                    count: c,
                    kind: if ft {
                        EdgeKind::FallThrough
                    } else {
                        EdgeKind::Branch
                    },
                });
            }
        }
        // A called function's entry executed at least as often as it was called.
        let mut calls: Vec<CallEdge> = Vec::new();
        let mut call_list: Vec<((u32, u32), u64)> =
            acc.calls.into_iter().filter(|&(_, c)| c > 0).collect();
        call_list.sort_unstable();
        let mut called: FxHashMap<usize, u64> = FxHashMap::default();
        for ((caller, callee), c) in call_list {
            if let (Some(&a), Some(&b)) = (slot.get(&caller), slot.get(&callee)) {
                add_count(called.entry(b).or_default(), c);
                calls.push(CallEdge {
                    caller: a,
                    callee: b,
                    count: c,
                });
            }
        }
        for (k, c) in called {
            let e = &mut functions[k].blocks[0];
            e.count = e.count.max(c);
        }
        for f in &mut functions {
            f.make_counts_consistent();
        }
        let mut inter: Vec<BlockCall> = block_calls
            .into_iter()
            .filter(|&(_, c)| c > 0)
            .filter_map(|((s, d), count)| {
                let (bs, bd) = (&self.blocks[s as usize], &self.blocks[d as usize]);
                Some(BlockCall {
                    src_function: *slot.get(&bs.func)?,
                    src_block: bs.local as usize,
                    dst_function: *slot.get(&bd.func)?,
                    dst_block: bd.local as usize,
                    count,
                })
            })
            .collect();
        inter.sort_unstable_by_key(|c| (c.src_function, c.src_block, c.dst_function, c.dst_block));
        (ProgramCfg { functions, calls }, inter)
    }
}

/// Add `by` to a count, saturating: counts come from profiles (pre-aggregated counts may be as
/// large as `u64::MAX`, as perf2bolt reads negative ones) and must never overflow.
fn add_count(slot: &mut u64, by: u64) {
    *slot = slot.saturating_add(by);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The bucket directory gives the same answers as bisecting the whole table.
        #[test]
        fn directory_lookup_equals_bisection(
            mut blocks in prop::collection::vec((0u64..100_000, 0u64..64), 1..200),
            probes in prop::collection::vec(0u64..110_000, 1..200),
            far in any::<bool>(),
        ) {
            if far {
                // A second cluster of blocks far away (a PIE or a split section).
                let n = blocks.len() / 2;
                for b in &mut blocks[n..] { b.0 += 1 << 40; }
            }
            let f = MapFunction {
                name: "f".into(),
                aliases: vec![],
                ranges: vec![blocks.iter().map(|&(a, s)| MapBlock {
                    bb_id: 0, address: a, size: s, can_fall_through: true, has_return: false,
                hash: None,
                }).collect()],
            };
            let funcs = [f];
            let b = CfgBuilder::new(&funcs).unwrap();
            for p in probes.into_iter().chain(blocks.iter().map(|x| x.0)) {
                for q in [p, p + (1 << 40), p.saturating_sub(1)] {
                    prop_assert_eq!(b.upper_bound(q), b.starts.partition_point(|&s| s <= q));
                }
            }
        }
    }
}
