//! Block profiles: IP samples and branch records attributed to blocks of a [`BlockIndex`].
//!
//! * A sample counts for the block containing its IP ([`BlockIndex::lookup`]).
//! * A branch `from -> to` becomes an edge between the source block
//!   ([`BlockIndex::lookup_branch_source`]) and the target block
//!   ([`BlockIndex::lookup_branch_target`]), classified as Propeller does: a *call* lands exactly
//!   on a function's entry block start; a *return* lands inside a block (not at its start), or at
//!   a block start right after a `HasReturn` block of another function; any other landing is a
//!   *branch* (same function) or an *inter-function* jump. Branches are summed per distinct
//!   address pair first, so each distinct pair is looked up once.
//! * A fall-through range `[start, end]` (from a branch target to the next branch source) adds a
//!   fall-through edge between every pair of consecutive blocks it covers, which must be in the
//!   same function range; otherwise it is counted as invalid.
//!
//! Records that do not map are counted, never dropped silently. Work is split over rayon threads
//! in chunks; feed records in slices of a few million to keep memory bounded.

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use crate::index::BlockIndex;

/// An IP sample with a count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// Instruction address (link-time address: subtract any load bias first).
    pub ip: u64,
    /// Number of samples.
    pub count: u64,
}

/// A taken branch with a count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Branch {
    /// Address of the branch instruction.
    pub from: u64,
    /// Address it jumped to.
    pub to: u64,
    /// Times taken.
    pub count: u64,
    /// Times mispredicted.
    pub mispredicts: u64,
}

/// A straight-line execution from `start` (a branch target) to `end` (the next branch source).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FallThrough {
    /// First address executed.
    pub start: u64,
    /// Address of the last instruction executed (the next branch).
    pub end: u64,
    /// Times executed.
    pub count: u64,
}

/// How a branch edge relates the two blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EdgeKind {
    /// Within a function, landing at a block start.
    Branch,
    /// Landing exactly at a function's entry address.
    Call,
    /// Landing inside a block (after a call), or at a block start right after a block that
    /// returns (`HasReturn`).
    Return,
    /// Between functions, neither call nor return.
    InterFunction,
}

/// Pack a branch edge into one hash key: 31 bits per position, 2 bits of kind.
#[inline]
fn edge_key(from: u32, to: u32, kind: EdgeKind) -> u64 {
    (u64::from(from) << 33) | (u64::from(to) << 2) | kind as u64
}

fn edge_unkey(k: u64) -> (u32, u32, EdgeKind) {
    let kind = match k & 3 {
        0 => EdgeKind::Branch,
        1 => EdgeKind::Call,
        2 => EdgeKind::Return,
        _ => EdgeKind::InterFunction,
    };
    ((k >> 33) as u32, ((k >> 2) & 0x7fff_ffff) as u32, kind)
}

/// Counts per edge and block, keyed by sorted block position in the index (positions fit in
/// 31 bits: an index has fewer than 2^31 blocks).
#[derive(Debug, Clone, Default)]
pub struct BlockProfile {
    /// Samples per block position.
    pub block_samples: FxHashMap<u32, u64>,
    /// Branch edges by packed key -> (count, mispredicts); see [`BlockProfile::branch_edges`].
    branch_edges: FxHashMap<u64, (u64, u64)>,
    /// Fall-through edges between consecutive blocks `(from, to) -> count`.
    pub fallthrough_edges: FxHashMap<(u32, u32), u64>,
    /// Sample counts whose IP is in no block.
    pub unmapped_samples: u64,
    /// Branch counts whose source or target is in no block.
    pub unmapped_branches: u64,
    /// Fall-through counts with an unmapped end.
    pub unmapped_fallthroughs: u64,
    /// Fall-through counts that go backwards or leave a function range.
    pub invalid_fallthroughs: u64,
    /// Total sample count seen.
    pub total_samples: u64,
    /// Total branch count seen.
    pub total_branches: u64,
    /// Total fall-through count seen.
    pub total_fallthroughs: u64,
}

impl BlockProfile {
    /// Branch edges `((from, to, kind), (count, mispredicts))`, in no particular order.
    pub fn branch_edges(&self) -> impl Iterator<Item = ((u32, u32, EdgeKind), (u64, u64))> + '_ {
        self.branch_edges.iter().map(|(&k, &v)| (edge_unkey(k), v))
    }

    /// Number of distinct branch edges.
    pub fn branch_edge_count(&self) -> usize {
        self.branch_edges.len()
    }

    fn merge(mut self, other: BlockProfile) -> BlockProfile {
        let (mut a, b) = if self.branch_edges.len() + self.block_samples.len()
            >= other.branch_edges.len() + other.block_samples.len()
        {
            (std::mem::take(&mut self), other)
        } else {
            (other, self)
        };
        for (k, v) in b.block_samples {
            *a.block_samples.entry(k).or_default() += v;
        }
        for (k, v) in b.branch_edges {
            let e = a.branch_edges.entry(k).or_default();
            e.0 += v.0;
            e.1 += v.1;
        }
        for (k, v) in b.fallthrough_edges {
            *a.fallthrough_edges.entry(k).or_default() += v;
        }
        a.unmapped_samples += b.unmapped_samples;
        a.unmapped_branches += b.unmapped_branches;
        a.unmapped_fallthroughs += b.unmapped_fallthroughs;
        a.invalid_fallthroughs += b.invalid_fallthroughs;
        a.total_samples += b.total_samples;
        a.total_branches += b.total_branches;
        a.total_fallthroughs += b.total_fallthroughs;
        a
    }

    /// Attribute `samples` (in parallel) and add them to this profile.
    pub fn add_samples(&mut self, index: &BlockIndex, samples: &[Sample]) {
        let part = samples
            .par_chunks(part_len(samples.len()))
            .fold(BlockProfile::default, |mut p, chunk| {
                for s in chunk {
                    p.total_samples += s.count;
                    match index.lookup(s.ip) {
                        Some(pos) => *p.block_samples.entry(pos as u32).or_default() += s.count,
                        None => p.unmapped_samples += s.count,
                    }
                }
                p
            })
            .reduce(BlockProfile::default, BlockProfile::merge);
        *self = std::mem::take(self).merge(part);
    }

    /// Attribute `branches` (in parallel) and add them to this profile.
    ///
    /// Each thread first sums its records by `(from, to)` address pair (branch records repeat a
    /// lot), then classifies each distinct pair once.
    pub fn add_branches(&mut self, index: &BlockIndex, branches: &[Branch]) {
        let part = branches
            .par_chunks(part_len(branches.len()))
            .map(|chunk| {
                let mut pairs: FxHashMap<(u64, u64), (u64, u64)> = FxHashMap::default();
                for b in chunk {
                    let e = pairs.entry((b.from, b.to)).or_default();
                    e.0 += b.count;
                    e.1 += b.mispredicts;
                }
                let mut p = BlockProfile::default();
                for ((from, to), (count, mispredicts)) in pairs {
                    p.total_branches += count;
                    match classify_branch(index, from, to) {
                        Some((f, t, kind)) => {
                            let e = p.branch_edges.entry(edge_key(f, t, kind)).or_default();
                            e.0 += count;
                            e.1 += mispredicts;
                        }
                        None => p.unmapped_branches += count,
                    }
                }
                p
            })
            .reduce(BlockProfile::default, BlockProfile::merge);
        *self = std::mem::take(self).merge(part);
    }

    /// Attribute fall-through ranges (in parallel) and add them to this profile.
    pub fn add_fallthroughs(&mut self, index: &BlockIndex, ranges: &[FallThrough]) {
        let part = ranges
            .par_chunks(part_len(ranges.len()))
            .fold(BlockProfile::default, |mut p, chunk| {
                for f in chunk {
                    p.add_one_fallthrough(index, f);
                }
                p
            })
            .reduce(BlockProfile::default, BlockProfile::merge);
        *self = std::mem::take(self).merge(part);
    }

    fn add_one_fallthrough(&mut self, index: &BlockIndex, f: &FallThrough) {
        self.total_fallthroughs += f.count;
        let (Some(s), Some(e)) = (
            index.lookup_branch_target(f.start),
            index.lookup_branch_source(f.end),
        ) else {
            self.unmapped_fallthroughs += f.count;
            return;
        };
        if e < s || f.end < f.start {
            self.invalid_fallthroughs += f.count;
            return;
        }
        let same = |a: usize, b: usize| {
            index.function_of(a) == index.function_of(b)
                && index.block(a).handle.range == index.block(b).handle.range
        };
        if !same(s, e) || (s..e).any(|p| !same(p, p + 1)) {
            self.invalid_fallthroughs += f.count;
            return;
        }
        for p in s..e {
            *self
                .fallthrough_edges
                .entry((p as u32, p as u32 + 1))
                .or_default() += f.count;
        }
    }
}

/// One contiguous part per thread (few accumulators, few merges).
fn part_len(len: usize) -> usize {
    len.div_ceil(rayon::current_num_threads().max(1))
        .max(1 << 12)
}

/// Map a branch to (source position, target position, kind), or `None` if an end is unmapped.
#[inline]
pub fn classify_branch(index: &BlockIndex, from: u64, to: u64) -> Option<(u32, u32, EdgeKind)> {
    let s = index.lookup_branch_source(from)?;
    let t = index.lookup_branch_target(to)?;
    let (t_start, _) = index.span(t);
    let (sf, tf) = (index.function_of(s), index.function_of(t));
    let kind = if t_start == to && index.is_entry(t) {
        EdgeKind::Call
    } else if t_start != to
        || (sf != tf
            && t > 0
            && index.span(t - 1).1 == to
            && index.has_return(t - 1)
            && index.function_of(t - 1) == tf)
    {
        EdgeKind::Return
    } else if sf == tf {
        EdgeKind::Branch
    } else {
        EdgeKind::InterFunction
    };
    Some((s as u32, t as u32, kind))
}
