//! Block profiles: IP samples and branch records attributed to blocks of a [`BlockIndex`].
//!
//! * A sample counts for the block containing its IP ([`BlockIndex::lookup`]).
//! * A branch `from -> to` becomes an edge between the source block and the target block,
//!   classified by the one block attributor ([`crate::attribute`], Propeller's rules: call,
//!   return, branch, inter-function). Branches are summed per distinct address pair first, so
//!   each distinct pair is looked up once.
//! * A fall-through range `[start, end]` (from a branch target to the next branch source) adds a
//!   fall-through edge between every pair of consecutive blocks it covers when the attributor
//!   finds it valid (same function range, every block but the last `CanFallThrough`); otherwise
//!   it is counted as invalid.
//! * [`ProfileSink`] reads any input of `pcmap-profile`'s branch-event pipeline (pre-aggregated
//!   text, perf.data) into a profile: addresses outside the binary are counted as unmapped.
//!
//! Records that do not map are counted, never dropped silently. Work is split over rayon threads
//! in chunks; feed records in slices of a few million to keep memory bounded.

use pcmap_profile::events::{Event, Sink, TraceKind};
use rayon::prelude::*;
use rustc_hash::FxHashMap;

pub use crate::attribute::EdgeKind;
use crate::attribute::{self, BlockFacts, BlockLookup, BranchClass, FallThroughClass};
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
            add_count(a.block_samples.entry(k).or_default(), v);
        }
        for (k, v) in b.branch_edges {
            let e = a.branch_edges.entry(k).or_default();
            e.0 = e.0.saturating_add(v.0);
            e.1 = e.1.saturating_add(v.1);
        }
        for (k, v) in b.fallthrough_edges {
            add_count(a.fallthrough_edges.entry(k).or_default(), v);
        }
        a.unmapped_samples = a.unmapped_samples.saturating_add(b.unmapped_samples);
        a.unmapped_branches = a.unmapped_branches.saturating_add(b.unmapped_branches);
        a.unmapped_fallthroughs = a
            .unmapped_fallthroughs
            .saturating_add(b.unmapped_fallthroughs);
        a.invalid_fallthroughs = a
            .invalid_fallthroughs
            .saturating_add(b.invalid_fallthroughs);
        a.total_samples = a.total_samples.saturating_add(b.total_samples);
        a.total_branches = a.total_branches.saturating_add(b.total_branches);
        a.total_fallthroughs = a.total_fallthroughs.saturating_add(b.total_fallthroughs);
        a
    }

    /// Attribute `samples` (in parallel) and add them to this profile.
    pub fn add_samples(&mut self, index: &BlockIndex, samples: &[Sample]) {
        let part = samples
            .par_chunks(part_len(samples.len()))
            .fold(BlockProfile::default, |mut p, chunk| {
                for s in chunk {
                    p.total_samples = p.total_samples.saturating_add(s.count);
                    match index.lookup(s.ip) {
                        Some(pos) => {
                            add_count(p.block_samples.entry(pos as u32).or_default(), s.count)
                        }
                        None => p.unmapped_samples = p.unmapped_samples.saturating_add(s.count),
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
                    e.0 = e.0.saturating_add(b.count);
                    e.1 = e.1.saturating_add(b.mispredicts);
                }
                let mut p = BlockProfile::default();
                for ((from, to), (count, mispredicts)) in pairs {
                    p.total_branches = p.total_branches.saturating_add(count);
                    match classify_branch(index, from, to) {
                        Some((f, t, kind)) => {
                            let e = p.branch_edges.entry(edge_key(f, t, kind)).or_default();
                            e.0 = e.0.saturating_add(count);
                            e.1 = e.1.saturating_add(mispredicts);
                        }
                        None => p.unmapped_branches = p.unmapped_branches.saturating_add(count),
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
        self.total_fallthroughs = self.total_fallthroughs.saturating_add(f.count);
        match attribute::classify_fall_through(index, f.start, f.end) {
            FallThroughClass::Valid { first, last, .. } => {
                for p in first..last {
                    add_count(
                        self.fallthrough_edges
                            .entry((p as u32, p as u32 + 1))
                            .or_default(),
                        f.count,
                    );
                }
            }
            FallThroughClass::Unmapped => {
                self.unmapped_fallthroughs = self.unmapped_fallthroughs.saturating_add(f.count)
            }
            FallThroughClass::Invalid => {
                self.invalid_fallthroughs = self.invalid_fallthroughs.saturating_add(f.count)
            }
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
    match attribute::classify_branch(index, from, to) {
        BranchClass::Edge { from, to, kind } => Some((from as u32, to as u32, kind)),
        _ => None,
    }
}

impl BlockLookup for BlockIndex {
    #[inline]
    fn source_block(&self, addr: u64) -> Option<usize> {
        self.lookup_branch_source(addr)
    }
    #[inline]
    fn target_block(&self, addr: u64) -> Option<usize> {
        self.lookup_branch_target(addr)
    }
    #[inline]
    fn facts(&self, b: usize) -> BlockFacts {
        let blk = self.block(b);
        BlockFacts {
            start: self.span(b).0,
            function: self.function_of(b),
            range: blk.handle.range,
            entry: self.is_entry(b),
            has_return: self.has_return(b),
            can_fall_through: blk.metadata.can_fall_through(),
        }
    }
}

/// Records are attributed in batches of this many (bounded memory, parallel attribution).
const BATCH: usize = 1 << 22;

/// A [`Sink`] of `pcmap-profile`'s branch-event pipeline that attributes samples, branches and
/// fall-throughs to the blocks of `index` in batches. Call [`ProfileSink::finish`] at the end.
#[derive(Debug)]
pub struct ProfileSink<'i> {
    index: &'i BlockIndex,
    profile: BlockProfile,
    samples: Vec<Sample>,
    branches: Vec<Branch>,
    falls: Vec<FallThrough>,
}

impl<'i> ProfileSink<'i> {
    /// A sink adding to an empty profile.
    pub fn new(index: &'i BlockIndex) -> Self {
        ProfileSink {
            index,
            profile: BlockProfile::default(),
            samples: Vec::new(),
            branches: Vec::new(),
            falls: Vec::new(),
        }
    }

    fn flush(&mut self) {
        let (index, p) = (self.index, &mut self.profile);
        p.add_samples(index, &self.samples);
        p.add_branches(index, &self.branches);
        p.add_fallthroughs(index, &self.falls);
        self.samples.clear();
        self.branches.clear();
        self.falls.clear();
    }

    /// Attribute what is left and return the profile.
    pub fn finish(mut self) -> BlockProfile {
        self.flush();
        self.profile
    }
}

impl Sink for ProfileSink<'_> {
    fn event(&mut self, e: &Event<'_>) {
        let p = &mut self.profile;
        match *e {
            Event::Name(_) => {}
            Event::Sample(s) => match s.at.binary_addr() {
                Some(ip) => self.samples.push(Sample { ip, count: s.count }),
                None => {
                    p.unmapped_samples = p.unmapped_samples.saturating_add(s.count);
                    p.total_samples = p.total_samples.saturating_add(s.count);
                }
            },
            Event::Trace(t) => {
                // `R 0 …`: a return from outside the binary, no branch to count.
                let external_return = t.kind == TraceKind::Return && t.branch.addr == 0;
                if t.kind.has_branch() && !external_return {
                    match (t.branch.binary_addr(), t.from.binary_addr()) {
                        (Some(from), Some(to)) => self.branches.push(Branch {
                            from,
                            to,
                            count: t.count,
                            mispredicts: t.mispreds,
                        }),
                        _ => {
                            p.unmapped_branches = p.unmapped_branches.saturating_add(t.count);
                            p.total_branches = p.total_branches.saturating_add(t.count);
                        }
                    }
                }
                if t.kind.has_fall_through() {
                    match (t.from.binary_addr(), t.to.binary_addr()) {
                        (Some(start), Some(end)) => self.falls.push(FallThrough {
                            start,
                            end,
                            count: t.count,
                        }),
                        _ => {
                            p.unmapped_fallthroughs =
                                p.unmapped_fallthroughs.saturating_add(t.count);
                            p.total_fallthroughs = p.total_fallthroughs.saturating_add(t.count);
                        }
                    }
                }
            }
        }
        if self.samples.len() >= BATCH || self.branches.len() >= BATCH || self.falls.len() >= BATCH
        {
            self.flush();
        }
    }
}

/// Describe a parsed binary (opened from `path`) to `pcmap-profile`'s perf.data reader: build-id,
/// file name, `PT_LOAD` segments, and whether it is a fixed-address executable.
#[cfg(feature = "elf")]
pub fn binary_desc<'a, 'data: 'a>(
    bin: &pcmap_binary::Binary<'data>,
    path: &'a [u8],
) -> pcmap_profile::events::BinaryDesc<'a> {
    /// `PF_X`.
    const PF_X: u32 = 1;
    pcmap_profile::events::BinaryDesc {
        build_id: bin.build_id(),
        file_name: path,
        segments: bin
            .segments()
            .iter()
            .filter(|s| s.p_type == pcmap_binary::PT_LOAD)
            .map(|s| pcmap_profile::events::Segment {
                vaddr: s.vaddr,
                offset: s.offset,
                file_size: s.file_size,
                mem_size: s.mem_size,
                align: s.align,
                executable: s.flags & PF_X != 0,
            })
            .collect(),
        fixed_address: bin.kind() == pcmap_binary::FileKind::Executable,
    }
}

/// Add `by` to a count, saturating: counts come from profiles (pre-aggregated counts may be as
/// large as `u64::MAX`, as perf2bolt reads negative ones) and must never overflow.
fn add_count(slot: &mut u64, by: u64) {
    *slot = slot.saturating_add(by);
}
