//! perf2bolt 22's aggregation of traces and samples into per-function branch records.
//!
//! For every distinct trace `branch -> from ... to`: the taken branch is recorded unless its
//! source is a return (an `R` record's source anywhere in the profile, or an instruction that
//! disassembles to `ret`) or the trace has no branch (`F`, `f`); then, if the trace has a
//! fall-through part, the fall-through is validated against the function's CFG and each
//! block-to-block step is recorded. Invalid fall-throughs are counted and dropped, their branch
//! is kept. Traces are processed in parallel; results are merged per function.

use std::sync::OnceLock;

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use crate::cfg::{self, Cfg, Flow};
use crate::image::{FunctionKind, Image};
use crate::preagg::{BR_ONLY, FT_EXTERNAL_ORIGIN, FT_ONLY, PreAggregated, Trace, TraceCounts};

/// One end of a recorded branch: a function and an offset, or an unknown location.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Loc {
    /// Outside every function (printed `0 [unknown] 0`).
    Unknown,
    /// Function index (into [`Image::functions`]) and offset.
    Func(u32, u64),
}

/// Identity of one fdata record of a function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RecordKey {
    /// The function the record belongs to (source function; target function for entries).
    pub func: u32,
    /// An entry from unknown code (written after the function's other records).
    pub external_entry: bool,
    /// Source offset (0 for external entries).
    pub from: u64,
    /// Destination.
    pub to: Loc,
}

/// perf2bolt's statistics for branch aggregation.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TraceStats {
    /// Sum of counts of traces with a fall-through part.
    pub traces: u64,
    /// Traces whose fall-through does not match the disassembly.
    pub mismatching: u64,
    /// Traces with an end outside every function.
    pub out_of_range: u64,
}

/// Result of branch aggregation.
#[derive(Debug, Default)]
pub struct BranchProfile {
    /// Records in perf2bolt's fdata order (functions by name, then source offset and
    /// destination, external entries last).
    pub records: Vec<(RecordKey, TraceCounts)>,
    /// Statistics.
    pub stats: TraceStats,
}

#[derive(Default)]
struct Partial {
    records: FxHashMap<RecordKey, TraceCounts>,
    stats: TraceStats,
}

impl Partial {
    fn bump(&mut self, key: RecordKey, count: u64, mispreds: u64) {
        add(self.records.entry(key).or_default(), count, mispreds);
    }
}

/// Result of basic-sample aggregation.
#[derive(Debug, Default)]
pub struct SampleProfile {
    /// (function index, offset) -> count.
    pub samples: FxHashMap<(u32, u64), u64>,
    /// Samples outside every function.
    pub out_of_range: u64,
}

/// The binary with lazily built CFGs.
pub struct Aggregator<'a, 'data> {
    image: &'a Image<'data>,
    cfgs: Vec<OnceLock<Cfg>>,
    /// Rank of each function in byte-wise name order (fdata order).
    name_rank: Vec<u32>,
}

fn add(c: &mut TraceCounts, count: u64, mispreds: u64) {
    c.count = c.count.wrapping_add(count);
    c.mispreds = c.mispreds.wrapping_add(mispreds);
}

impl<'a, 'data> Aggregator<'a, 'data> {
    /// Prepare aggregation against `image`.
    pub fn new(image: &'a Image<'data>) -> Self {
        let funcs = image.functions();
        let mut order: Vec<u32> = (0..funcs.len() as u32).collect();
        order.sort_by(|a, b| {
            funcs[*a as usize]
                .name()
                .as_bytes()
                .cmp(funcs[*b as usize].name().as_bytes())
        });
        let mut name_rank = vec![0u32; funcs.len()];
        for (rank, f) in order.into_iter().enumerate() {
            name_rank[f as usize] = rank as u32;
        }
        Self {
            image,
            cfgs: (0..funcs.len()).map(|_| OnceLock::new()).collect(),
            name_rank,
        }
    }

    /// The image.
    pub fn image(&self) -> &'a Image<'data> {
        self.image
    }

    /// The CFG of function `index`, built on first use.
    pub fn cfg(&self, index: usize) -> &Cfg {
        self.cfgs[index].get_or_init(|| {
            let f = &self.image.functions()[index];
            match f.kind {
                FunctionKind::Regular => cfg::build(self.image, f),
                FunctionKind::Plt => Cfg::default(),
            }
        })
    }

    fn is_return(&self, addr: u64) -> bool {
        let Some(fi) = self.image.function_containing(addr) else {
            return false;
        };
        let f = &self.image.functions()[fi];
        if f.kind == FunctionKind::Regular {
            let c = self.cfg(fi);
            if c.simple {
                return c
                    .insn_at(addr - f.address)
                    .is_some_and(|i| i.flow == Flow::Return);
            }
        }
        cfg::decode_one(self.image, addr) == Some(Flow::Return)
    }

    /// Aggregate all traces of `profile` (branch mode).
    pub fn aggregate_traces(
        &self,
        profile: &PreAggregated,
        progress: &(dyn Fn(u64) + Sync),
    ) -> BranchProfile {
        // The traces come in address order: each function's CFG and records stay hot in cache
        // while its traces are processed, and the parallel chunks touch mostly disjoint functions.
        let traces = &profile.traces;
        let chunk = (traces.len() / (rayon::current_num_threads() * 8)).clamp(1024, 1 << 16);
        // Each chunk merges its own duplicates; chunks cover disjoint address ranges, so their
        // records barely overlap: concatenate, sort into fdata order, merge neighbours.
        let parts: Vec<(Vec<(RecordKey, TraceCounts)>, TraceStats)> = traces
            .par_chunks(chunk)
            .map(|chunk| {
                let mut out = Partial::default();
                out.records.reserve(chunk.len() * 2);
                for (t, c) in chunk {
                    self.process_trace(t, c, profile, &mut out);
                }
                progress(chunk.len() as u64);
                (out.records.into_iter().collect(), out.stats)
            })
            .collect();
        let mut stats = TraceStats::default();
        for (_, s) in &parts {
            stats.traces = stats.traces.wrapping_add(s.traces);
            stats.mismatching = stats.mismatching.wrapping_add(s.mismatching);
            stats.out_of_range = stats.out_of_range.wrapping_add(s.out_of_range);
        }
        let mut all: Vec<(RecordKey, TraceCounts)> =
            Vec::with_capacity(parts.iter().map(|p| p.0.len()).sum());
        for (p, _) in parts {
            all.extend(p);
        }
        let rank = |f: u32| self.name_rank[f as usize];
        let to_key = |l: Loc| match l {
            Loc::Unknown => (0u8, 0u32, 0u64),
            Loc::Func(f, o) => (1, rank(f), o),
        };
        all.par_sort_unstable_by_key(|(k, _)| {
            (rank(k.func), k.external_entry, k.from, to_key(k.to))
        });
        let mut records: Vec<(RecordKey, TraceCounts)> = Vec::with_capacity(all.len());
        for (k, c) in all {
            match records.last_mut() {
                Some((lk, lc)) if *lk == k => add(lc, c.count, c.mispreds),
                _ => records.push((k, c)),
            }
        }
        BranchProfile { records, stats }
    }

    fn process_trace(&self, t: &Trace, c: &TraceCounts, p: &PreAggregated, out: &mut Partial) {
        let is_return = p.returns.contains(&t.branch)
            || (t.branch < crate::preagg::FT_EXTERNAL_RETURN && self.is_return(t.branch));
        let is_return = is_return || t.branch == crate::preagg::FT_EXTERNAL_RETURN;
        if !is_return && t.branch != FT_ONLY && t.branch != FT_EXTERNAL_ORIGIN {
            self.do_branch(t.branch, t.from, c.count, c.mispreds, out);
        }
        if t.to != BR_ONLY {
            self.do_trace(t, c.count, is_return, out);
        }
    }

    fn locate(&self, addr: u64) -> Option<(u32, u64)> {
        let fi = self.image.function_containing(addr)?;
        Some((fi as u32, addr - self.image.functions()[fi].address))
    }

    fn do_branch(&self, from: u64, to: u64, count: u64, mispreds: u64, out: &mut Partial) {
        let src = self.locate(from);
        let dst = self.locate(to);
        match (src, dst) {
            (None, None) => {}
            (Some((func, from)), dst) => {
                let to = dst.map_or(Loc::Unknown, |(t, to)| Loc::Func(t, to));
                let key = RecordKey {
                    func,
                    external_entry: false,
                    from,
                    to,
                };
                out.bump(key, count, mispreds);
            }
            (None, Some((func, to))) => {
                let key = RecordKey {
                    func,
                    external_entry: true,
                    from: 0,
                    to: Loc::Func(func, to),
                };
                out.bump(key, count, mispreds);
            }
        }
    }

    fn do_trace(&self, t: &Trace, count: u64, is_return: bool, out: &mut Partial) {
        out.stats.traces = out.stats.traces.wrapping_add(count);
        let (Some(ff), Some(tf)) = (
            self.image.function_containing(t.from),
            self.image.function_containing(t.to),
        ) else {
            out.stats.out_of_range = out.stats.out_of_range.wrapping_add(count);
            return;
        };
        if ff != tf {
            out.stats.mismatching = out.stats.mismatching.wrapping_add(count);
            return;
        }
        match self.fallthroughs(ff, t, is_return) {
            None => out.stats.mismatching = out.stats.mismatching.wrapping_add(count),
            Some(fts) => {
                if fts.is_empty() {
                    return;
                }
                let func = ff as u32;
                for (from, to) in fts {
                    let key = RecordKey {
                        func,
                        external_entry: false,
                        from,
                        to: Loc::Func(func, to),
                    };
                    out.bump(key, count, 0);
                }
            }
        }
    }

    /// perf2bolt's `getFallthroughsInTrace`: the (last instruction, next block) offset pairs a
    /// fall-through from `t.from` to `t.to` walks through, or `None` when it is invalid.
    pub fn fallthroughs(&self, fi: usize, t: &Trace, is_return: bool) -> Option<Vec<(u64, u64)>> {
        let f = &self.image.functions()[fi];
        let from = t.from - f.address;
        let to = t.to - f.address;
        if from > to {
            return None;
        }
        if f.kind == FunctionKind::Plt {
            return Some(Vec::new());
        }
        let cfg = self.cfg(fi);
        if !cfg.simple {
            return None;
        }
        let mut from_bb = cfg.block_containing(from)?;
        let to_bb = cfg.block_containing(to)?;
        let branch_outside = t.branch < f.address || t.branch - f.address >= f.size;
        if t.branch != FT_ONLY
            && branch_outside
            && from == u64::from(cfg.blocks[from_bb].offset)
            && (if is_return {
                from != 0
            } else {
                !cfg.blocks[from_bb].is_entry
            })
            && from_bb > 0
        {
            let prev = from_bb - 1;
            if cfg.blocks[prev].succs.contains(&(from_bb as u32))
                && cfg.last_insn(prev).is_some_and(|i| i.is_call())
            {
                from_bb = prev;
            }
        }
        let mut out = Vec::new();
        let mut bb = from_bb;
        while bb != to_bb {
            let next = bb + 1;
            if next >= cfg.blocks.len() || !cfg.blocks[bb].succs.contains(&(next as u32)) {
                return None;
            }
            let off = cfg
                .last_insn(bb)
                .map_or(u64::from(cfg.blocks[bb].offset), |i| u64::from(i.offset));
            out.push((off, u64::from(cfg.blocks[next].offset)));
            bb = next;
        }
        Some(out)
    }

    /// Aggregate basic samples (`--ba`).
    pub fn aggregate_samples(&self, profile: &PreAggregated) -> SampleProfile {
        let mut out = SampleProfile::default();
        for (&addr, &count) in &profile.samples {
            match self.locate(addr) {
                Some(k) => {
                    let e = out.samples.entry(k).or_default();
                    *e = e.wrapping_add(count);
                }
                None => out.out_of_range = out.out_of_range.wrapping_add(count),
            }
        }
        out
    }
}
