//! BOLT profiles read back onto the binary they were written for, so that consumers of the
//! branch-event pipeline (Propeller's CFG builder, for one) can start from the fdata or YAML a
//! team already collects for BOLT.
//!
//! * [`from_fdata`] and [`from_yaml`] turn a profile into the records of an aggregation
//!   ([`BranchProfile`], what perf2bolt writes as fdata): fdata names are looked up among BOLT's
//!   function names; YAML blocks (`bid`) are the blocks of [`crate::cfg`]'s CFGs, a successor
//!   edge becomes a record from the block's last instruction to the successor's first, a call
//!   site a record from its instruction to the callee's entry, and the part of a function's
//!   `exec` no profiled call site accounts for an entry from unknown code.
//! * [`replay`] pushes the branch events that give those records into a [`Sink`]: a record
//!   from an instruction to the next one (not a jump) is a fall-through, the straight-line run
//!   from that instruction through the block it enters (`F` to that block's last instruction;
//!   after a call, perf2bolt's call continuation, the run starts where the return landed, after
//!   a return from outside the binary, `r`);
//!   any other record is a taken branch (`B`) and, when it lands at the start of a block, the
//!   run through that block (`F` from its first to its last instruction). A trace of the program
//!   (`T branch target ft_end`) gives the same branches and the same runs through blocks, split
//!   where it was recorded, so a block-level consumer sees the same edges from the fdata, the
//!   YAML and the pre-aggregated profile they were made from.

use rustc_hash::FxHashMap;

use crate::aggregate::{Aggregator, BranchProfile, Loc, RecordKey};
use crate::cfg::Flow;
use crate::preagg::TraceCounts;
use pcmap_profile::events::{self, Event, Sink, TraceKind};

/// What could not be used while reading a profile back.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RereadStats {
    /// Records (fdata lines, YAML edges and call sites) read.
    pub records: u64,
    /// … naming a function the binary does not have (left out).
    pub unknown_functions: u64,
    /// YAML functions whose block count or (with a hashing aggregator and `hash-func: xxh3`)
    /// function hash differs from the binary's (left out: stale, as llvm-bolt leaves them out).
    pub stale_functions: u64,
}

/// Why a profile cannot be read back.
#[derive(Debug, thiserror::Error)]
pub enum RereadError {
    /// A profile collected on a BOLT-optimized binary (addresses of another binary).
    #[error(
        "the profile was collected on a BOLT-optimized binary (boltedcollection): give the profile of this binary"
    )]
    Bolted,
    /// A basic-sample profile (no branches).
    #[error("the profile holds basic samples (no_lbr), not branches")]
    NoLbr,
}

fn bump(records: &mut FxHashMap<RecordKey, TraceCounts>, key: RecordKey, count: u64, mis: u64) {
    let e = records.entry(key).or_default();
    e.count = e.count.saturating_add(count);
    e.mispreds = e.mispreds.saturating_add(mis);
}

/// The records in perf2bolt's order within each function (source offset, then destination by
/// name), as aggregation makes them.
fn finish(agg: &Aggregator<'_, '_>, records: FxHashMap<RecordKey, TraceCounts>) -> BranchProfile {
    let mut records: Vec<(RecordKey, TraceCounts)> = records.into_iter().collect();
    records.sort_unstable_by_key(|(k, _)| {
        (
            k.func,
            k.external_entry,
            k.from,
            agg.destination_order(k.to),
        )
    });
    BranchProfile {
        records,
        ..BranchProfile::default()
    }
}

/// Every BOLT name of every function (`name`, `name/N`, `name/file/N`) -> function index; in BAT
/// mode also the input binary's names perf2bolt writes (`boltedcollection`).
fn names<'a>(agg: &Aggregator<'a, '_>) -> FxHashMap<&'a str, u32> {
    let mut m = FxHashMap::default();
    for (i, f) in agg.image().functions().iter().enumerate() {
        if agg.is_bat() {
            m.entry(f.profile_name(true)).or_insert(i as u32);
        }
        for n in &f.names {
            m.entry(&**n).or_insert(i as u32);
        }
    }
    m
}

/// The records of an fdata profile (LBR mode) of the aggregator's binary. A
/// `boltedcollection` profile (names of the input binary of a BOLT-optimized one) needs an
/// aggregator in BAT mode ([`Aggregator::with_bat`]) over that BOLT-optimized binary.
pub fn from_fdata(
    agg: &Aggregator<'_, '_>,
    profile: &pcmap_profile::fdata::Profile<'_>,
) -> Result<(BranchProfile, RereadStats), RereadError> {
    if profile.is_no_lbr() {
        return Err(RereadError::NoLbr);
    }
    if profile.bolted_collection && !agg.is_bat() {
        return Err(RereadError::Bolted);
    }
    let by_name = names(agg);
    let mut stats = RereadStats::default();
    let mut records: FxHashMap<RecordKey, TraceCounts> = FxHashMap::default();
    for r in profile.branches() {
        stats.records += 1;
        let loc = |l: &pcmap_profile::fdata::Location<'_>| -> Option<Loc> {
            if !l.kind.is_symbol() {
                return Some(Loc::Unknown);
            }
            by_name
                .get(l.unescaped_name().as_ref())
                .map(|&f| Loc::Func(f, l.offset))
        };
        let (Some(from), Some(to)) = (loc(&r.from), loc(&r.to)) else {
            stats.unknown_functions += 1;
            continue;
        };
        let key = match (from, to) {
            (Loc::Func(f, off), to) => RecordKey {
                func: f,
                external_entry: false,
                from: off,
                to,
            },
            (Loc::Unknown, Loc::Func(t, _)) => RecordKey {
                func: t,
                external_entry: true,
                from: 0,
                to,
            },
            (Loc::Unknown, Loc::Unknown) => continue,
        };
        bump(&mut records, key, r.count, r.mispreds);
    }
    Ok((finish(agg, records), stats))
}

/// An fdata profile of the aggregator's binary as pre-aggregated records (perf2bolt's `--pa`
/// input) that perf2bolt turns back into the same fdata: each branch record becomes a `B`
/// record between the addresses of its two locations (the function's address plus the offset; a
/// location outside the binary's functions keeps the value the fdata gives it), since perf2bolt
/// records a `B` branch at exactly the offsets it falls on; each basic-sample record (`no_lbr`)
/// becomes an `S` record with the profile's event names. Records naming functions the binary
/// does not have are counted in the statistics and left out. A `boltedcollection` profile has
/// offsets of another binary (the input of BOLT) and is refused.
pub fn to_preaggregated(
    agg: &Aggregator<'_, '_>,
    profile: &pcmap_profile::fdata::Profile<'_>,
) -> Result<(crate::preagg::PreAggregated, RereadStats), RereadError> {
    use crate::preagg::{BR_ONLY, PreAggregated, Trace};
    if profile.bolted_collection {
        return Err(RereadError::Bolted);
    }
    let by_name = names(agg);
    let funcs = agg.image().functions();
    let address = |l: &pcmap_profile::fdata::Location<'_>| -> Option<u64> {
        if !l.kind.is_symbol() {
            return Some(l.offset);
        }
        let &f = by_name.get(l.unescaped_name().as_ref())?;
        Some(funcs[f as usize].address.wrapping_add(l.offset))
    };
    let mut stats = RereadStats::default();
    let mut out = PreAggregated::default();
    let mut traces: FxHashMap<Trace, TraceCounts> = FxHashMap::default();
    for r in profile.branches() {
        stats.records += 1;
        let (Some(from), Some(to)) = (address(&r.from), address(&r.to)) else {
            stats.unknown_functions += 1;
            continue;
        };
        let t = Trace {
            branch: from,
            from: to,
            to: BR_ONLY,
        };
        traces.entry(t).or_default().add(r.count, r.mispreds);
    }
    for r in profile.samples() {
        stats.records += 1;
        let Some(at) = address(&r.at) else {
            stats.unknown_functions += 1;
            continue;
        };
        let e = out.samples.entry(at).or_default();
        *e = e.wrapping_add(r.count);
    }
    if let Some(events) = &profile.no_lbr {
        out.events = events.iter().map(|e| e.to_string()).collect();
    }
    out.traces = traces.into_iter().collect();
    // In the order of every pre-aggregated profile (distinct already: nothing is merged).
    crate::preagg::sort_and_merge(&mut out.traces);
    Ok((out, stats))
}

/// The records of a YAML profile (non-BAT) of the aggregator's binary. Functions whose block
/// count, or function hash (with an aggregator made [`Aggregator::with_hashing`]), differs from
/// the binary's are stale and left out.
pub fn from_yaml(
    agg: &Aggregator<'_, '_>,
    profile: &pcmap_profile::yaml::Profile,
) -> (BranchProfile, RereadStats) {
    let by_name = names(agg);
    let ids = crate::yaml::function_ids(agg);
    let mut by_id: FxHashMap<u32, u32> = FxHashMap::default();
    for (i, &id) in ids.iter().enumerate() {
        by_id.insert(id, i as u32);
    }
    let mut stats = RereadStats::default();
    let mut records: FxHashMap<RecordKey, TraceCounts> = FxHashMap::default();
    // Function hashes are checked as llvm-bolt checks them, when the aggregator hashes its
    // CFGs.
    let hashes = (agg.is_hashing()
        && profile.header.hash_func == pcmap_profile::yaml::HashFunction::Xxh3)
        .then(|| crate::block_hash::Context::new(agg.image()));
    // Function index -> (exec, calls into it from profiled call sites).
    let mut entries: FxHashMap<u32, (u64, u64)> = FxHashMap::default();
    for yf in &profile.functions {
        let Some(&f) = by_name.get(yf.name.as_str()) else {
            stats.unknown_functions += 1;
            continue;
        };
        let cfg = agg.cfg(f as usize);
        let hash_differs = || {
            hashes.as_ref().is_some_and(|ctx| {
                cfg.simple
                    && crate::block_hash::function_hash(
                        ctx,
                        &agg.image().functions()[f as usize],
                        cfg,
                    )
                    .0 != yf.hash
            })
        };
        if cfg.blocks.len() != yf.num_basic_blocks as usize || hash_differs() {
            stats.stale_functions += 1;
            continue;
        }
        let e = entries.entry(f).or_default();
        e.0 = e.0.saturating_add(yf.exec_count);
        for yb in &yf.blocks {
            let Some(b) = cfg.blocks.get(yb.index as usize) else {
                stats.stale_functions += 1;
                continue;
            };
            let last = cfg
                .last_insn(yb.index as usize)
                .map_or(u64::from(b.offset), |i| u64::from(i.offset));
            for s in &yb.successors {
                stats.records += 1;
                let Some(t) = cfg.blocks.get(s.index as usize) else {
                    continue;
                };
                if s.count == 0 && s.mispreds == 0 {
                    continue;
                }
                let key = RecordKey {
                    func: f,
                    external_entry: false,
                    from: last,
                    to: Loc::Func(f, u64::from(t.offset)),
                };
                bump(&mut records, key, s.count, s.mispreds);
            }
            for c in &yb.calls {
                stats.records += 1;
                if c.entry_discriminator != 0 || c.count == 0 {
                    continue;
                }
                // `fid: 0` (no function of the binary has it): a call into code outside the
                // binary's functions, perf2bolt's record to `[unknown]`.
                let callee = by_id.get(&c.dest_id).copied();
                let key = RecordKey {
                    func: f,
                    external_entry: false,
                    from: u64::from(b.offset) + u64::from(c.offset),
                    to: callee.map_or(Loc::Unknown, |t| Loc::Func(t, 0)),
                };
                bump(&mut records, key, c.count, c.mispreds);
                if let Some(callee) = callee {
                    let e = entries.entry(callee).or_default();
                    e.1 = e.1.saturating_add(c.count);
                }
            }
        }
    }
    // A function the profile lists without any count (a PLT entry whose only record went to
    // the PLT header, say) stays listed: an entry record with no count.
    let mut touched: rustc_hash::FxHashSet<u32> = rustc_hash::FxHashSet::default();
    for k in records.keys() {
        touched.insert(k.func);
        if let Loc::Func(t, _) = k.to {
            touched.insert(t);
        }
    }
    for (f, (exec, called)) in entries {
        if exec > called || !touched.contains(&f) {
            let key = RecordKey {
                func: f,
                external_entry: true,
                from: 0,
                to: Loc::Func(f, 0),
            };
            bump(&mut records, key, exec.saturating_sub(called), 0);
        }
    }
    (finish(agg, records), stats)
}

/// Push the branch events that give `profile`'s records into `sink` (see the module
/// documentation); addresses are the binary's.
pub fn replay(agg: &Aggregator<'_, '_>, profile: &BranchProfile, sink: &mut impl Sink) {
    let funcs = agg.image().functions();
    let outside = events::Loc {
        addr: 0,
        outside: true,
    };
    for (k, c) in &profile.records {
        let from = if k.external_entry {
            outside
        } else {
            events::Loc::inside(funcs[k.func as usize].address.wrapping_add(k.from))
        };
        // A record from an instruction to the next one that is not a jump is a fall-through:
        // one straight-line run from that instruction through the block it falls into.
        // The run starts inside that instruction (its last byte: a run that starts at a block's
        // first byte enters the block, and this one was entered before). After a call, the
        // record is perf2bolt's call continuation: the return landed on the next instruction,
        // and the run starts there, after a return from outside the binary (`r`), which is
        // what makes the aggregator count the edge from the call's block.
        let fall_through: Option<(u64, bool)> = match k.to {
            Loc::Func(t, off) if t == k.func && !k.external_entry => agg
                .cfg(t as usize)
                .insn_at(k.from)
                .filter(|i| {
                    u64::from(i.offset) + u64::from(i.len()) == off
                        && !matches!(i.flow(), Flow::Jump | Flow::IndirectJump | Flow::Return)
                })
                .map(|i| {
                    if i.flow() == Flow::Call {
                        (off, true)
                    } else {
                        (k.from + u64::from(i.len().max(1)) - 1, false)
                    }
                }),
            _ => None,
        };
        let (to, run_end) = match k.to {
            Loc::Unknown => (outside, None),
            Loc::Func(t, off) => {
                let start = funcs[t as usize].address.wrapping_add(off);
                let cfg = agg.cfg(t as usize);
                let end = cfg
                    .block_at(off)
                    .and_then(|b| cfg.last_insn(b))
                    .map(|i| funcs[t as usize].address.wrapping_add(u64::from(i.offset)));
                (events::Loc::inside(start), end)
            }
        };
        if let Some((start, after_call)) = fall_through {
            let base = funcs[k.func as usize].address;
            sink.event(&Event::Trace(events::Trace {
                pid: None,
                kind: if after_call {
                    TraceKind::ExternalReturn
                } else {
                    TraceKind::FallThrough
                },
                branch: outside,
                from: events::Loc::inside(base.wrapping_add(start)),
                to: run_end.map_or(to, events::Loc::inside),
                count: c.count,
                mispreds: 0,
            }));
            continue;
        }
        sink.event(&Event::Trace(events::Trace {
            pid: None,
            kind: TraceKind::BranchOnly,
            branch: from,
            from: to,
            to,
            count: c.count,
            mispreds: c.mispreds,
        }));
        if let Some(end) = run_end {
            sink.event(&Event::Trace(events::Trace {
                pid: None,
                kind: TraceKind::FallThrough,
                branch: outside,
                from: to,
                to: events::Loc::inside(end),
                count: c.count,
                mispreds: 0,
            }));
        }
    }
}
