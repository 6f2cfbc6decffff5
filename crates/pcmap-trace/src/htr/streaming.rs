//! The streaming, chunk-parallel super-block pass over a PCMTRACE file.
//!
//! Memory is proportional to the distinct units, never to the trace length:
//! 1. *Pass 1* decodes groups of consecutive SYNC chunks in parallel. Each group interns its
//!    units per thread and records predecessor/successor states; the groups are then merged in
//!    order (states are associative) and stitched at their edges.
//! 2. The super-block structure follows from the states alone
//!    ([`super::superblock::BlockStructure`]).
//! 3. *Pass 2* decodes the groups again in parallel, batch by batch, and emits layer 1 (one
//!    unit per block start); each batch's output is fed in order to the streaming loop detector
//!    and to the statistics, then dropped.

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use super::loops::{Emitted, LoopDetector};
use super::superblock::{BOUNDARY, BlockStructure, EdgeStates, NONE, add_neighbour};
use crate::format::binary::{PcmTrace, RawRecord};
use crate::{GapReason, TraceError};

/// A unit key: (address, instructions); gaps are (reason code, 0).
type Key = (u64, u32);

fn gap_key(r: GapReason) -> Key {
    (r.code(), 0)
}

#[derive(Default)]
struct LocalThread {
    map: FxHashMap<Key, u32>,
    keys: Vec<Key>,
    /// Per id: the id that followed it last time. Control flow is mostly deterministic, so
    /// checking this first avoids most hash lookups.
    next_seen: Vec<u32>,
    pred: Vec<u32>,
    succ: Vec<u32>,
    first: Option<u32>,
    last: Option<u32>,
    insns: u64,
    units: u64,
}

impl LocalThread {
    #[inline]
    /// The id of `k`, and whether it is the cached successor of the previous unit (in which
    /// case that edge has been recorded already).
    fn intern(&mut self, k: Key) -> (u32, bool) {
        if let Some(a) = self.last {
            let guess = self.next_seen[a as usize];
            if guess != NONE && self.keys[guess as usize] == k {
                return (guess, true);
            }
        }
        let next = self.keys.len() as u32;
        let id = *self.map.entry(k).or_insert(next);
        if id == next {
            self.keys.push(k);
            self.pred.push(NONE);
            self.succ.push(NONE);
            self.next_seen.push(NONE);
        }
        if let Some(a) = self.last {
            self.next_seen[a as usize] = id;
        }
        (id, false)
    }

    #[inline]
    fn push(&mut self, k: Key) {
        let (id, seen_edge) = self.intern(k);
        self.units += 1;
        self.insns += k.1 as u64;
        if seen_edge {
            self.last = Some(id);
            return;
        }
        let gap_b = k.1 == 0;
        if let Some(a) = self.last {
            let gap_a = self.keys[a as usize].1 == 0;
            if !gap_b {
                add_neighbour(
                    &mut self.pred[id as usize],
                    if gap_a { BOUNDARY } else { a },
                );
            }
            if !gap_a {
                add_neighbour(
                    &mut self.succ[a as usize],
                    if gap_b { BOUNDARY } else { id },
                );
            }
        } else {
            self.first = Some(id);
        }
        self.last = Some(id);
    }
}

/// Thread slot in a group: `None` = the thread current when the group started (inherited).
type ThreadSlot = Option<u64>;

struct GroupPass1 {
    threads: Vec<(ThreadSlot, LocalThread)>,
    end_tid: ThreadSlot,
}

fn decode_group<F>(
    trace: &PcmTrace<'_>,
    chunks: &[std::ops::Range<usize>],
    mut on: F,
) -> Result<ThreadSlot, TraceError>
where
    F: FnMut(ThreadSlot, Key),
{
    let mut cur: ThreadSlot = None;
    for c in chunks {
        let mut dec = trace.decoder(c.clone());
        loop {
            if let Some(a) = dec.next_short_insn() {
                on(cur, (a, 1));
                continue;
            }
            let Some((_, rec)) = dec.next_record()? else {
                break;
            };
            match rec {
                RawRecord::Insn(a) => on(cur, (a, 1)),
                RawRecord::Block(a, n) => on(cur, (a, n)),
                RawRecord::Gap(r) => on(cur, gap_key(r)),
                RawRecord::Thread(t) => cur = Some(t),
                RawRecord::Timestamp(_) | RawRecord::Sync | RawRecord::End(_) => {}
            }
        }
    }
    Ok(cur)
}

fn pass1_group(
    trace: &PcmTrace<'_>,
    chunks: &[std::ops::Range<usize>],
) -> Result<GroupPass1, TraceError> {
    let mut threads: Vec<(ThreadSlot, LocalThread)> = vec![(None, LocalThread::default())];
    let mut cur_idx = 0usize;
    let mut cur_tid: ThreadSlot = None;
    let end_tid = decode_group(trace, chunks, |tid, k| {
        if tid != cur_tid {
            cur_tid = tid;
            cur_idx = match threads.iter().position(|t| t.0 == tid) {
                Some(i) => i,
                None => {
                    threads.push((tid, LocalThread::default()));
                    threads.len() - 1
                }
            };
        }
        threads[cur_idx].1.push(k);
    })?;
    Ok(GroupPass1 { threads, end_tid })
}

/// One thread's merged state after pass 1.
struct GlobalThread {
    tid: Option<u64>,
    map: FxHashMap<Key, u32>,
    keys: Vec<Key>,
    states: EdgeStates,
    first: Option<u32>,
    last: Option<u32>,
    insns: u64,
    units: u64,
}

/// Statistics of one super block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SuperBlockStat {
    /// Address of its first instruction.
    pub first_addr: u64,
    /// Instructions per occurrence.
    pub insns: u64,
    /// Units (layer-0) per occurrence.
    pub len: u64,
    /// Occurrences.
    pub occurrences: u64,
}

/// Statistics of one loop body (over all its iteration counts).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoopStat {
    /// First addresses of the body's super blocks.
    pub body: Vec<u64>,
    /// Instructions per iteration.
    pub insns_per_iteration: u64,
    /// How many times the loop ran.
    pub occurrences: u64,
    /// Iterations over all occurrences.
    pub iterations: u64,
    /// The largest iteration count.
    pub max_iterations: u64,
}

/// The streaming summary of one thread.
#[derive(Debug, Clone)]
pub struct ThreadSummary {
    /// Thread id.
    pub tid: Option<u64>,
    /// Instructions.
    pub insns: u64,
    /// Layer-0 units.
    pub units: u64,
    /// Distinct layer-0 units.
    pub distinct_units: u64,
    /// Gap units.
    pub gaps: u64,
    /// Layer-1 (super block) units.
    pub layer1_units: u64,
    /// Layer-2 (loop pass over layer 1) units.
    pub layer2_units: u64,
    /// Super blocks, by first occurrence.
    pub super_blocks: Vec<SuperBlockStat>,
    /// Loops, by first occurrence.
    pub loops: Vec<LoopStat>,
}

struct LoopAcc {
    index: FxHashMap<Vec<u32>, usize>,
    stats: Vec<LoopStat>,
    layer2: u64,
}

/// Run the streaming super-block pass (and the loop pass on its output) over a PCMTRACE file.
/// `loop_max_period` bounds loop bodies (in super blocks).
pub fn summarize(
    trace: &PcmTrace<'_>,
    loop_max_period: usize,
) -> Result<Vec<ThreadSummary>, TraceError> {
    summarize_with(trace, loop_max_period, &|_| {})
}

/// [`summarize`], calling `done(byte_range)` once a batch of groups has been decoded in a pass,
/// so a caller reading from a memory map can drop those pages (keeping the resident set small).
pub fn summarize_with(
    trace: &PcmTrace<'_>,
    loop_max_period: usize,
    done: &(dyn Fn(std::ops::Range<usize>) + Sync),
) -> Result<Vec<ThreadSummary>, TraceError> {
    let chunks = trace.chunks();
    let workers = rayon::current_num_threads().max(1);
    // At most 16 SYNC chunks (about 16 MiB) per group, so few bytes are in flight at once.
    let ngroups = (workers * 4)
        .max(chunks.len().div_ceil(16))
        .min(chunks.len())
        .max(1);
    let per = chunks.len().div_ceil(ngroups).max(1);
    let groups: Vec<&[std::ops::Range<usize>]> = chunks.chunks(per).collect();

    // Pass 1, merged in group order, a batch of groups at a time to bound memory.
    let mut globals: Vec<GlobalThread> = Vec::new();
    let mut start_tids: Vec<ThreadSlot> = Vec::with_capacity(groups.len());
    let mut cur_tid: ThreadSlot = None;
    for batch in groups.chunks(workers) {
        let results: Vec<Result<GroupPass1, TraceError>> =
            batch.par_iter().map(|g| pass1_group(trace, g)).collect();
        release(batch, done);
        for r in results {
            let g = r?;
            start_tids.push(cur_tid);
            for (slot, local) in g.threads {
                let tid = if slot.is_none() { cur_tid } else { slot };
                if local.units == 0 {
                    continue;
                }
                let gi = match globals.iter().position(|t| t.tid == tid) {
                    Some(i) => i,
                    None => {
                        globals.push(GlobalThread {
                            tid,
                            map: FxHashMap::default(),
                            keys: Vec::new(),
                            states: EdgeStates::new(0),
                            first: None,
                            last: None,
                            insns: 0,
                            units: 0,
                        });
                        globals.len() - 1
                    }
                };
                merge_local(&mut globals[gi], &local)?;
            }
            if g.end_tid.is_some() {
                cur_tid = g.end_tid;
            }
        }
    }

    let mut out = Vec::new();
    let mut structures = Vec::new();
    for gt in &mut globals {
        let gap: Vec<bool> = gt.keys.iter().map(|k| k.1 == 0).collect();
        if let (Some(f), Some(l)) = (gt.first, gt.last) {
            gt.states.close(f, l, &gap);
        }
        let s = BlockStructure::new(&gt.states, &gap);
        // Layer-1 definitions numbered by the global id of their first unit.
        let mut sb_of = vec![NONE; gt.keys.len()];
        let mut stats = Vec::new();
        for x in 0..gt.keys.len() {
            if s.starts[x] {
                let content = s.content(x as u32);
                sb_of[x] = stats.len() as u32;
                stats.push(SuperBlockStat {
                    first_addr: if gap[x] { 0 } else { gt.keys[x].0 },
                    insns: content.iter().map(|&c| gt.keys[c as usize].1 as u64).sum(),
                    len: content.len() as u64,
                    occurrences: 0,
                });
            }
        }
        let sb_gap: Vec<bool> = (0..gt.keys.len())
            .filter(|&x| s.starts[x])
            .map(|x| gap[x])
            .collect();
        structures.push((sb_of, stats, sb_gap));
    }

    // Pass 2.
    let mut accs: Vec<LoopAcc> = globals
        .iter()
        .map(|_| LoopAcc {
            index: FxHashMap::default(),
            stats: Vec::new(),
            layer2: 0,
        })
        .collect();
    let mut detectors: Vec<LoopDetector<'_>> = structures
        .iter()
        .map(|s| LoopDetector::new(loop_max_period, &s.2))
        .collect();
    let mut layer1 = vec![0u64; globals.len()];
    let mut occ: Vec<Vec<u64>> = structures.iter().map(|s| vec![0u64; s.1.len()]).collect();
    // Decoding batch i overlaps with feeding batch i-1 to the (sequential) loop detectors.
    type Batch = Vec<Result<Vec<(usize, Vec<u32>)>, TraceError>>;
    let decode_batch = |bi: usize, batch: &[&[std::ops::Range<usize>]]| -> Batch {
        let results: Batch = batch
            .par_iter()
            .enumerate()
            .map(|(j, g)| {
                let start = start_tids[bi * workers + j];
                let mut outs: Vec<(usize, Vec<u32>)> = Vec::new();
                let mut cur: Option<(ThreadSlot, usize)> = None;
                // Per thread: the last id and, per id, the id that followed it last time.
                let mut last: Vec<u32> = vec![NONE; globals.len()];
                let mut next_seen: Vec<Vec<u32>> = globals.iter().map(|_| Vec::new()).collect();
                decode_group(trace, g, |slot, k| {
                    let tid = if slot.is_none() { start } else { slot };
                    let ti = match cur {
                        Some((t, i)) if t == tid => i,
                        _ => {
                            let i = globals.iter().position(|t| t.tid == tid).unwrap_or(0);
                            cur = Some((tid, i));
                            i
                        }
                    };
                    let Some(gt) = globals.get(ti) else { return };
                    let prev = last[ti];
                    let ns = &mut next_seen[ti];
                    let guess = if prev != NONE {
                        ns.get(prev as usize).copied().unwrap_or(NONE)
                    } else {
                        NONE
                    };
                    let id = if guess != NONE && gt.keys[guess as usize] == k {
                        guess
                    } else {
                        let Some(&id) = gt.map.get(&k) else { return };
                        if prev != NONE {
                            if ns.is_empty() {
                                ns.resize(gt.keys.len(), NONE);
                            }
                            ns[prev as usize] = id;
                        }
                        id
                    };
                    last[ti] = id;
                    let sb = structures[ti].0[id as usize];
                    if sb != NONE {
                        match outs.last_mut() {
                            Some((t, v)) if *t == ti => v.push(sb),
                            _ => outs.push((ti, vec![sb])),
                        }
                    }
                })?;
                Ok(outs)
            })
            .collect();
        release(batch, done);
        results
    };
    let mut feed = |results: Batch| -> Result<(), TraceError> {
        for r in results {
            for (ti, units) in r? {
                layer1[ti] += units.len() as u64;
                let det = &mut detectors[ti];
                let acc = &mut accs[ti];
                let o = &mut occ[ti];
                let stats = &structures[ti].1;
                for u in units {
                    o[u as usize] += 1;
                    det.push(u, &mut |e| record_loop(acc, stats, e));
                }
            }
        }
        Ok(())
    };
    let batches: Vec<&[&[std::ops::Range<usize>]]> = groups.chunks(workers).collect();
    let mut pending: Option<Batch> = None;
    for (bi, batch) in batches.iter().enumerate() {
        let (results, fed) = rayon::join(
            || decode_batch(bi, batch),
            || pending.take().map(&mut feed).unwrap_or(Ok(())),
        );
        fed?;
        pending = Some(results);
    }
    if let Some(p) = pending.take() {
        feed(p)?;
    }
    for (ti, det) in detectors.into_iter().enumerate() {
        let acc = &mut accs[ti];
        let stats = &structures[ti].1;
        det.finish(&mut |e| record_loop(acc, stats, e));
    }

    for (ti, gt) in globals.iter().enumerate() {
        let (_, mut stats, _) = std::mem::take(&mut structures[ti]);
        for (s, &n) in stats.iter_mut().zip(&occ[ti]) {
            s.occurrences = n;
        }
        let gaps = gt.keys.iter().filter(|k| k.1 == 0).count() as u64;
        out.push(ThreadSummary {
            tid: gt.tid,
            insns: gt.insns,
            units: gt.units,
            distinct_units: gt.keys.len() as u64 - gaps,
            gaps,
            layer1_units: layer1[ti],
            layer2_units: accs[ti].layer2,
            super_blocks: stats,
            loops: std::mem::take(&mut accs[ti].stats),
        });
    }
    Ok(out)
}

fn release(batch: &[&[std::ops::Range<usize>]], done: &(dyn Fn(std::ops::Range<usize>) + Sync)) {
    let start = batch.first().and_then(|g| g.first()).map(|r| r.start);
    let end = batch.last().and_then(|g| g.last()).map(|r| r.end);
    if let (Some(s), Some(e)) = (start, end) {
        done(s..e);
    }
}

fn record_loop(acc: &mut LoopAcc, stats: &[SuperBlockStat], e: Emitted) {
    acc.layer2 += 1;
    if let Emitted::Loop { body, count } = e {
        let n = acc.stats.len();
        let i = *acc.index.entry(body.clone()).or_insert(n);
        if i == n {
            acc.stats.push(LoopStat {
                body: body.iter().map(|&b| stats[b as usize].first_addr).collect(),
                insns_per_iteration: body.iter().map(|&b| stats[b as usize].insns).sum(),
                occurrences: 0,
                iterations: 0,
                max_iterations: 0,
            });
        }
        let s = &mut acc.stats[i];
        s.occurrences += 1;
        s.iterations += count as u64;
        s.max_iterations = s.max_iterations.max(count as u64);
    }
}

fn merge_local(g: &mut GlobalThread, l: &LocalThread) -> Result<(), TraceError> {
    let mut remap = Vec::with_capacity(l.keys.len());
    for &k in &l.keys {
        let next = g.keys.len() as u32;
        let id = *g.map.entry(k).or_insert(next);
        if id == next {
            g.keys.push(k);
            g.states.pred.push(NONE);
            g.states.succ.push(NONE);
        }
        remap.push(id);
    }
    let map_v = |v: u32| if v < BOUNDARY { remap[v as usize] } else { v };
    for (li, &gi) in remap.iter().enumerate() {
        add_neighbour(&mut g.states.pred[gi as usize], map_v(l.pred[li]));
        add_neighbour(&mut g.states.succ[gi as usize], map_v(l.succ[li]));
    }
    if let (Some(a), Some(f)) = (g.last, l.first) {
        let b = remap[f as usize];
        let ga = g.keys[a as usize].1 == 0;
        let gb = g.keys[b as usize].1 == 0;
        if !gb {
            add_neighbour(
                &mut g.states.pred[b as usize],
                if ga { BOUNDARY } else { a },
            );
        }
        if !ga {
            add_neighbour(
                &mut g.states.succ[a as usize],
                if gb { BOUNDARY } else { b },
            );
        }
    }
    if g.first.is_none() {
        g.first = l.first.map(|f| remap[f as usize]);
    }
    if let Some(last) = l.last {
        g.last = Some(remap[last as usize]);
    }
    g.insns += l.insns;
    g.units += l.units;
    Ok(())
}
