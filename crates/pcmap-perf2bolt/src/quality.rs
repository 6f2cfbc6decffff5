//! What llvm-bolt 22 makes of a branch profile, and the profile-quality figures it prints.
//!
//! [`read_branch_profile`] puts the records of an aggregated profile ([`BranchProfile`], the
//! records of perf2bolt's fdata) on the CFGs of [`crate::cfg`] the way llvm-bolt's fdata reader
//! and profile post-processing do: the function's execution count (branches to its offset 0),
//! entry-block counts from branches entering the function, every intra-function record on its
//! CFG edge (targets past a block's last instruction belong to the next block; a branch to a
//! block its source does not reach is credited through the fall-through block of a conditional
//! branch when that block has exactly that one successor; anything else invalidates the
//! function's profile), conditional tail calls moved into blocks of their own, block counts as
//! the sum of incoming edges raised to the largest outgoing edge and call count (BOLT's
//! `-fix-block-counts`, on by default; fall-through inference is off by default and not done).
//! Functions with an invalid profile keep their execution count and lose block and edge counts.
//!
//! [`quality`] computes from that view the figures llvm-bolt 22 prints when it reads a profile
//! (`BOLT-INFO: profile quality metrics for the hottest N functions (reporting top 5% values):
//! function CFG discontinuity X%; call graph flow conservation gap Y%; CFG flow conservation gap
//! Z% (weighted) W% (worst); exception handling usage U% (of total BBEC) V% (of total
//! InvokeEC)`), with the definitions of BOLT's `ProfileQualityStats` pass:
//!
//! * over the hottest functions (by execution count, at most 1000) with a valid profile, each
//!   figure is the value at rank `len * 95 / 100` of the ascending per-function values (with more
//!   than 1000 such functions, BOLT's unstable sort picks among equal execution counts at the
//!   cut; ours keeps function order there);
//! * CFG discontinuity of a function: the share of its block count sum in blocks that no path of
//!   positive-count edges reaches from a positive-count entry block;
//! * call-graph gap: `1 - min/max` of the entry blocks' net outflow (outgoing minus incoming edge
//!   counts) and the calls into the function: entries from unknown code plus the calls recorded
//!   at the call sites of profiled functions (direct calls count their block's count, profiled
//!   indirect calls their per-target counts);
//! * CFG flow-conservation gap per block: `1 - min/max` of its incoming edge sum, outgoing edge
//!   sum and the call counts of its call sites; the weighted figure averages the gaps of inner
//!   blocks (not entries, not exits, not landing pads, no hot landing pad, not ending in a
//!   recursive call) with weights `ln(count * instructions)`, the worst takes the largest gap of
//!   blocks counted more than 500 times;
//! * exception handling: landing-pad counts over all block counts and over invoke-block counts,
//!   for functions whose landing pads sum to more than 50.

use rustc_hash::FxHashMap;

use crate::aggregate::{Aggregator, BranchProfile, Loc, RecordKey};
use crate::cfg::{Cfg, Flow, Insn};
use pcmap_binary::bolt::{BoltFunctions, FunctionKind};

/// How many of the hottest functions BOLT's figures cover (`-top-functions-for-profile-quality-check`).
pub const TOP_FUNCTIONS: usize = 1000;
/// The percentile BOLT reports (`-percentile-for-profile-quality-check`).
pub const PERCENTILE: usize = 95;
/// Landing pads must sum to more than this for a function's exception-handling figure.
const MIN_LANDING_PAD_COUNT: u64 = 50;
/// Blocks must be counted more than this for the worst flow-conservation gap.
const MIN_BLOCK_COUNT: u64 = 500;

/// One block as llvm-bolt sees it after reading the profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfiledBlock {
    /// The block of [`Cfg::blocks`], or `None` for a block BOLT adds for a conditional tail call
    /// (it holds the tail call; its offset is that of the block with the conditional branch).
    pub cfg_block: Option<u32>,
    /// Input offset of the block.
    pub offset: u32,
    /// Execution count.
    pub count: u64,
    /// Successors (indices into [`FunctionProfile::blocks`]) with the edge counts, in BOLT's
    /// order.
    pub succs: Vec<(u32, u64)>,
}

/// A call site of a profiled function, for the call graph.
#[derive(Debug, Clone, PartialEq, Eq)]
struct CallSite {
    /// Block of [`FunctionProfile::blocks`] holding the call.
    block: u32,
    /// The called functions (indexed like [`pcmap_binary::bolt::BoltFunctions::functions`],
    /// `None` when unknown) and the count of each.
    targets: Vec<(Option<u32>, u64)>,
}

/// The profile of one function as llvm-bolt reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionProfile {
    /// The function (indexed like [`pcmap_binary::bolt::BoltFunctions::functions`]).
    pub function: u32,
    /// BOLT's execution count: the branches to the function's offset 0.
    pub exec_count: u64,
    /// Whether every record of the function matched its CFG (`hasValidProfile`); block and edge
    /// counts are zero otherwise.
    pub valid: bool,
    /// Blocks: those of the CFG in order, then the conditional-tail-call blocks.
    pub blocks: Vec<ProfiledBlock>,
    calls: Vec<CallSite>,
}

/// llvm-bolt's view of a branch profile: the functions with a CFG the profile names.
#[derive(Debug, Default)]
pub struct ProfileView {
    /// Profiled functions with a CFG, in function-index order.
    pub functions: Vec<FunctionProfile>,
    /// Calls into each function: from the call sites of profiled functions, and entries from
    /// unknown code.
    call_inflow: FxHashMap<u32, u64>,
}

impl ProfileView {
    /// The profile of function `index`, if it has one and a CFG.
    pub fn function(&self, index: u32) -> Option<&FunctionProfile> {
        self.functions
            .binary_search_by_key(&index, |f| f.function)
            .ok()
            .map(|i| &self.functions[i])
    }
}

/// BOLT's NOPs ([`pcmap_binary::bolt::is_nop`]).
fn is_nop(i: &Insn) -> bool {
    pcmap_binary::bolt::is_nop(i.code)
}

/// BOLT's `isCall`: calls and tail calls.
fn is_call(i: &Insn) -> bool {
    i.flow() == Flow::Call || i.tail_call()
}

fn is_ctc(i: &Insn) -> bool {
    i.flow() == Flow::CondJump && i.tail_call()
}

/// The instructions BOLT keeps in block `b` (nops are dropped).
fn block_insns<'c>(cfg: &'c Cfg, b: usize) -> impl DoubleEndedIterator<Item = &'c Insn> + 'c {
    let blk = &cfg.blocks[b];
    cfg.insns[blk.first_insn as usize..blk.end_insn as usize]
        .iter()
        .filter(|i| !is_nop(i))
}

/// The function a call or jump target belongs to: the function starting there, or the one
/// with a secondary entry point there.
fn target_function(agg: &Aggregator<'_, '_>, target: u64) -> Option<u32> {
    let image = agg.image();
    if let Some(f) = image.function_at(target) {
        return Some(f as u32);
    }
    let f = image.function_containing(target)?;
    let func = &image.functions()[f];
    let cfg = agg.cfg(f);
    let b = cfg.block_at(target - func.address)?;
    cfg.blocks[b].is_entry.then_some(f as u32)
}

/// DataReader's `recordBranch` on the CFG before conditional tail calls get blocks: whether the
/// record `from -> to` fits the CFG, adding `count` to its edge(s) when `edges` is given.
/// `bolted`: the profile was collected on a BOLT-optimized binary (a source may be the start of
/// its input block instead of an instruction, a block may branch to itself).
fn record_branch(
    cfg: &Cfg,
    edges: &mut Option<&mut Vec<Vec<(u32, u64)>>>,
    from: u64,
    to: u64,
    count: u64,
    bolted: bool,
) -> bool {
    let (Some(fb), Some(mut tb)) = (cfg.block_containing(from), cfg.block_containing(to)) else {
        return false;
    };
    if from == to || cfg.blocks[fb].succs.is_empty() {
        return true;
    }
    let mut matches = to == u64::from(cfg.blocks[tb].offset);
    if !matches {
        // Nops at the block start (old profiles).
        let blk = &cfg.blocks[tb];
        let mut off = u64::from(blk.offset);
        for i in &cfg.insns[blk.first_insn as usize..blk.end_insn as usize] {
            if !is_nop(i) {
                break;
            }
            off += u64::from(i.len());
        }
        matches = to == off;
    }
    if !matches {
        if let Some(last) = block_insns(cfg, tb).next_back() {
            if to == u64::from(last.offset) && last.flow() == Flow::Jump && !last.tail_call() {
                return true;
            }
            if to <= u64::from(last.offset) {
                return false;
            }
        }
        // Past the last instruction (padding): the next block.
        if tb + 1 >= cfg.blocks.len() {
            return false;
        }
        tb += 1;
    }
    let from_insn = cfg.insn_at(from);
    if from_insn.is_none() && !(bolted && u64::from(cfg.blocks[fb].offset) == from) {
        return false;
    }
    let fb_succs = &cfg.blocks[fb].succs;
    if !fb_succs.contains(&(tb as u32)) {
        if cfg.blocks[tb].is_entry
            && from_insn.is_some_and(|i| is_call(i) || i.flow() == Flow::IndirectJump)
        {
            // A recursive call or a return from one: counted already.
            return true;
        }
        if bolted && fb == tb {
            return true;
        }
        let ft = (fb_succs.len() == 2).then(|| fb_succs[1] as usize);
        match ft {
            Some(ft) if cfg.blocks[ft].succs.as_slice() == [tb as u32] => {
                if let Some(e) = edges.as_deref_mut() {
                    bump(&mut e[ft], tb as u32, count);
                }
                tb = ft;
            }
            _ => return false,
        }
    }
    if let Some(e) = edges.as_deref_mut() {
        bump(&mut e[fb], tb as u32, count);
    }
    true
}

fn bump(succs: &mut [(u32, u64)], to: u32, count: u64) {
    if let Some(s) = succs.iter_mut().find(|s| s.0 == to) {
        s.1 = s.1.wrapping_add(count);
    }
}

/// The records of one function, split as BOLT's fdata reader splits them.
#[derive(Default)]
struct FunctionRecords {
    /// Records whose source is in the function: (source offset, destination, count).
    data: Vec<(u64, Loc, u64)>,
    /// Entries: records from elsewhere (or to offset 0): (destination offset, count).
    entries: Vec<(u64, u64)>,
    /// Branches to offset 0.
    exec_count: u64,
    /// Branches from unknown code to offset 0.
    extern_entries: u64,
}

/// Put `profile` (not a BAT profile) on the CFGs of `agg`'s functions as llvm-bolt does when it
/// reads the fdata perf2bolt writes for it.
pub fn read_branch_profile(agg: &Aggregator<'_, '_>, profile: &BranchProfile) -> ProfileView {
    read(agg, profile, false)
}

/// Put the profile of a BOLT-optimized binary (`profile`, aggregated in BAT mode against
/// `bolted`: input offsets, functions named as perf2bolt names them in that mode) on the CFGs
/// of the input binary's functions (`input`, not in BAT mode), as llvm-bolt does when it reads
/// the `boltedcollection` fdata with the input binary. Functions are matched by name; records
/// of functions the input binary lacks are dropped. Function indices of the result are
/// `input`'s.
pub fn read_bat_profile(
    input: &Aggregator<'_, '_>,
    bolted: &BoltFunctions<'_, '_>,
    profile: &BranchProfile,
) -> ProfileView {
    let mut by_name: FxHashMap<&str, u32> = FxHashMap::default();
    for (i, f) in input.image().functions().iter().enumerate() {
        for n in &f.names {
            by_name.entry(&**n).or_insert(i as u32);
        }
    }
    let name_of = |f: u32| bolted.functions()[f as usize].profile_name(true);
    let records = profile
        .records
        .iter()
        .filter_map(|(k, c)| {
            let func = *by_name.get(name_of(k.func))?;
            let to = match k.to {
                Loc::Func(t, off) => by_name
                    .get(name_of(t))
                    .map_or(Loc::Unknown, |&t| Loc::Func(t, off)),
                Loc::Unknown => Loc::Unknown,
            };
            Some((RecordKey { func, to, ..*k }, *c))
        })
        .collect();
    let rekeyed = BranchProfile {
        records,
        stats: profile.stats,
        ..Default::default()
    };
    read(input, &rekeyed, true)
}

fn read(agg: &Aggregator<'_, '_>, profile: &BranchProfile, bolted: bool) -> ProfileView {
    let image = agg.image();
    let funcs = image.functions();
    let mut by_func: FxHashMap<u32, FunctionRecords> = FxHashMap::default();
    for (k, c) in &profile.records {
        if !k.external_entry {
            by_func
                .entry(k.func)
                .or_default()
                .data
                .push((k.from, k.to, c.count));
        }
        if let Loc::Func(t, off) = k.to {
            let r = by_func.entry(t).or_default();
            if k.external_entry || t != k.func || off == 0 {
                r.entries.push((off, c.count));
            }
            if off == 0 {
                r.exec_count = r.exec_count.wrapping_add(c.count);
                if k.external_entry {
                    r.extern_entries = r.extern_entries.wrapping_add(c.count);
                }
            }
        }
    }
    let mut touched: Vec<u32> = by_func.keys().copied().collect();
    touched.sort_unstable();
    let mut mark = vec![false; funcs.len()];
    for &f in &touched {
        mark[f as usize] = true;
    }
    agg.prepare(Some(&mark));

    let mut view = ProfileView::default();
    for f in touched {
        let recs = &by_func[&f];
        let func = &funcs[f as usize];
        if func.kind != FunctionKind::Regular {
            continue;
        }
        let cfg = agg.cfg(f as usize);
        if !cfg.simple || cfg.blocks.is_empty() {
            continue;
        }
        let fp = read_function(agg, f, cfg, recs, bolted);
        let e = view.call_inflow.entry(f).or_default();
        *e = e.wrapping_add(recs.extern_entries);
        for c in &fp.calls {
            for &(t, n) in &c.targets {
                if let Some(t) = t {
                    let e = view.call_inflow.entry(t).or_default();
                    *e = e.wrapping_add(n);
                }
            }
        }
        view.functions.push(fp);
    }
    view
}

fn read_function(
    agg: &Aggregator<'_, '_>,
    f: u32,
    cfg: &Cfg,
    recs: &FunctionRecords,
    bolted: bool,
) -> FunctionProfile {
    let n = cfg.blocks.len();
    let intra = |to: Loc| match to {
        Loc::Func(t, off) if t == f => Some(off),
        _ => None,
    };
    // evaluateProfileData: every record must fit.
    let valid = recs.data.iter().all(|&(from, to, _)| match intra(to) {
        Some(off) => record_branch(cfg, &mut None, from, off, 0, bolted),
        // Sources of branches leaving the function: not checked for a BOLTed collection (they
        // may be the start of an input block).
        None => {
            bolted
                || cfg
                    .insn_at(from)
                    .is_some_and(|i| !matches!(i.flow(), Flow::Next | Flow::Trap))
        }
    });
    let mut counts = vec![0u64; n];
    let mut edges: Vec<Vec<(u32, u64)>> = cfg
        .blocks
        .iter()
        .map(|b| b.succs.iter().map(|&s| (s, 0)).collect())
        .collect();
    for &(off, c) in &recs.entries {
        if let Some(b) = cfg.block_at(off)
            && (cfg.blocks[b].is_entry || cfg.blocks[b].is_landing_pad)
        {
            counts[b] = counts[b].wrapping_add(c);
        }
    }
    for &(from, to, c) in &recs.data {
        if let Some(off) = intra(to) {
            record_branch(cfg, &mut Some(&mut edges), from, off, c, bolted);
        }
    }
    // convertBranchData: per-instruction call counts (direct calls and tail calls), call
    // profiles (indirect calls and jumps), conditional tail calls.
    let mut call_count: FxHashMap<u32, u64> = FxHashMap::default();
    let mut call_profile: FxHashMap<u32, Vec<(Option<u32>, u64)>> = FxHashMap::default();
    let mut ctc_taken: FxHashMap<u32, u64> = FxHashMap::default();
    for &(from, to, c) in &recs.data {
        if intra(to).is_some_and(|o| o != 0) {
            continue;
        }
        let Some(i) = cfg.insn_at(from) else { continue };
        if !is_call(i) && i.flow() != Flow::IndirectJump {
            continue;
        }
        if i.target == 0 {
            let callee = match to {
                Loc::Func(t, _) => Some(t),
                Loc::Unknown => None,
            };
            call_profile.entry(i.offset).or_default().push((callee, c));
        } else if is_ctc(i) {
            *ctc_taken.entry(i.offset).or_default() += c;
        } else {
            *call_count.entry(i.offset).or_default() += c;
        }
    }
    if !valid {
        counts.iter_mut().for_each(|c| *c = 0);
        edges
            .iter_mut()
            .for_each(|e| e.iter_mut().for_each(|s| s.1 = 0));
    }
    let mut blocks: Vec<ProfiledBlock> = cfg
        .blocks
        .iter()
        .enumerate()
        .map(|(b, blk)| ProfiledBlock {
            cfg_block: Some(b as u32),
            offset: blk.offset,
            count: counts[b],
            succs: std::mem::take(&mut edges[b]),
        })
        .collect();
    // removeConditionalTailCalls: the tail call moves to a new block at the end, the taken edge
    // (first successor) goes there.
    let mut tail_call_targets: Vec<(u32, u64)> = Vec::new(); // (new block, call target)
    for b in 0..n {
        let Some(last) = block_insns(cfg, b).next_back() else {
            continue;
        };
        if !is_ctc(last) {
            continue;
        }
        let taken = if valid {
            ctc_taken.get(&last.offset).copied().unwrap_or(0)
        } else {
            0
        };
        let nb = blocks.len() as u32;
        blocks.push(ProfiledBlock {
            cfg_block: None,
            offset: cfg.blocks[b].offset,
            count: taken,
            succs: Vec::new(),
        });
        blocks[b].succs.insert(0, (nb, taken));
        tail_call_targets.push((nb, last.target));
    }
    if valid {
        post_process(cfg, &mut blocks, &call_count, &call_profile);
    }
    // Call sites (computeFlowMappings): direct calls count their block, profiled indirect calls
    // their targets, unprofiled indirect calls their block toward an unknown callee.
    let mut calls = Vec::new();
    for (b, blk) in blocks.iter().enumerate().take(n) {
        for i in block_insns(cfg, b) {
            if !is_call(i) || is_ctc(i) {
                continue;
            }
            let count = blk.count;
            let targets = if i.target != 0 {
                vec![(target_function(agg, i.target), count)]
            } else if let Some(p) = call_profile.get(&i.offset) {
                p.iter().filter(|t| t.0.is_some()).copied().collect()
            } else {
                vec![(None, count)]
            };
            calls.push(CallSite {
                block: b as u32,
                targets,
            });
        }
    }
    for (nb, target) in tail_call_targets {
        calls.push(CallSite {
            block: nb,
            targets: vec![(target_function(agg, target), blocks[nb as usize].count)],
        });
    }
    FunctionProfile {
        function: f,
        exec_count: recs.exec_count,
        valid,
        blocks,
        calls,
    }
}

/// BOLT's `postProcessProfile` for a valid branch profile.
fn post_process(
    cfg: &Cfg,
    blocks: &mut [ProfiledBlock],
    call_count: &FxHashMap<u32, u64>,
    call_profile: &FxHashMap<u32, Vec<(Option<u32>, u64)>>,
) {
    let n = blocks.len();
    for (b, blk) in blocks.iter_mut().enumerate() {
        let keep = b < cfg.blocks.len() && (cfg.blocks[b].is_entry || cfg.blocks[b].is_landing_pad);
        if !keep {
            blk.count = 0;
        }
    }
    for b in 0..n {
        for k in 0..blocks[b].succs.len() {
            let (s, c) = blocks[b].succs[k];
            if s != 0 {
                let sc = &mut blocks[s as usize].count;
                *sc = sc.wrapping_add(c);
            }
        }
    }
    // -fix-block-counts.
    for b in 0..n {
        for k in 0..blocks[b].succs.len() {
            let (s, c) = blocks[b].succs[k];
            if c > 0 {
                let sc = &mut blocks[s as usize].count;
                *sc = (*sc).max(c);
                blocks[b].count = blocks[b].count.max(c);
            }
        }
        let Some(cb) = blocks[b].cfg_block else {
            continue;
        };
        let mut max = blocks[b].count;
        for i in block_insns(cfg, cb as usize) {
            let c = if i.target == 0 && (is_call(i) || i.flow() == Flow::IndirectJump) {
                call_profile
                    .get(&i.offset)
                    .map_or(0, |p| p.iter().map(|t| t.1).sum())
            } else if is_call(i) && !is_ctc(i) {
                call_count.get(&i.offset).copied().unwrap_or(0)
            } else {
                0
            };
            max = max.max(c);
        }
        blocks[b].count = max;
    }
}

/// The figures of BOLT's profile-quality line (fractions, `0.25` = 25%).
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize)]
pub struct Quality {
    /// How many functions the figures cover.
    pub functions: usize,
    /// Function CFG discontinuity.
    pub cfg_discontinuity: f64,
    /// Call-graph flow-conservation gap.
    pub call_graph_gap: f64,
    /// CFG flow-conservation gap, weighted.
    pub cfg_gap_weighted: f64,
    /// CFG flow-conservation gap, worst block.
    pub cfg_gap_worst: f64,
    /// Exception handling: landing-pad counts over all block counts.
    pub eh_of_blocks: f64,
    /// Exception handling: landing-pad counts over invoke-block counts.
    pub eh_of_invokes: f64,
}

impl Quality {
    /// The line llvm-bolt 22 prints.
    pub fn bolt_line(&self) -> String {
        let p = |x: f64| format!("{:.2}%", x * 100.0);
        format!(
            "BOLT-INFO: profile quality metrics for the hottest {} functions (reporting top {}% \
             values): function CFG discontinuity {}; call graph flow conservation gap {}; CFG \
             flow conservation gap {} (weighted) {} (worst); exception handling usage {} (of \
             total BBEC) {} (of total InvokeEC)",
            self.functions,
            100 - PERCENTILE,
            p(self.cfg_discontinuity),
            p(self.call_graph_gap),
            p(self.cfg_gap_weighted),
            p(self.cfg_gap_worst),
            p(self.eh_of_blocks),
            p(self.eh_of_invokes),
        )
    }
}

fn percentile(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() * PERCENTILE / 100).copied().unwrap_or(0.0)
}

/// Per-block in/out flows of a function.
fn flows(fp: &FunctionProfile) -> (Vec<u64>, Vec<u64>) {
    let mut inflow = vec![0u64; fp.blocks.len()];
    let mut outflow = vec![0u64; fp.blocks.len()];
    if !fp.valid {
        return (inflow, outflow);
    }
    for (b, blk) in fp.blocks.iter().enumerate() {
        for &(s, c) in &blk.succs {
            if c == 0 {
                continue;
            }
            outflow[b] = outflow[b].wrapping_add(c);
            inflow[s as usize] = inflow[s as usize].wrapping_add(c);
        }
    }
    (inflow, outflow)
}

/// BOLT's profile-quality figures for `view` (see the module documentation); `None` when no
/// function has a valid profile (BOLT prints nothing then).
pub fn quality(agg: &Aggregator<'_, '_>, view: &ProfileView) -> Option<Quality> {
    let mut valid: Vec<&FunctionProfile> = view.functions.iter().filter(|f| f.valid).collect();
    if valid.is_empty() {
        return None;
    }
    // BOLT's passes only take simple functions; llvm-bolt runs outside strict mode.
    valid.retain(|f| agg.cfg(f.function as usize).simple_outside_strict_mode());
    if valid.is_empty() {
        return None;
    }
    valid.sort_by_key(|f| std::cmp::Reverse(f.exec_count));
    valid.truncate(TOP_FUNCTIONS);
    let mut discontinuity = Vec::new();
    let mut cg_gaps = Vec::new();
    let mut weighted = Vec::new();
    let mut worst = Vec::new();
    let mut eh_blocks = Vec::new();
    let mut eh_invokes = Vec::new();
    let image = agg.image();
    for fp in &valid {
        let cfg = agg.cfg(fp.function as usize);
        let func_addr = image.functions()[fp.function as usize].address;
        let entries: Vec<usize> = (0..cfg.blocks.len())
            .filter(|&b| cfg.blocks[b].is_entry)
            .collect();
        let trivial = fp.blocks.len() <= 1;
        // CFG discontinuity.
        discontinuity.push(if trivial {
            0.0
        } else {
            let total: u64 = fp.blocks.iter().map(|b| b.count).sum();
            let mut seen = vec![false; fp.blocks.len()];
            let mut queue = std::collections::VecDeque::new();
            let mut reached = 0u64;
            for &e in &entries {
                if fp.blocks[e].count > 0 && !seen[e] {
                    seen[e] = true;
                    reached += fp.blocks[e].count;
                    queue.push_back(e);
                }
            }
            while let Some(b) = queue.pop_front() {
                for &(s, c) in &fp.blocks[b].succs {
                    if c == 0 || seen[s as usize] {
                        continue;
                    }
                    seen[s as usize] = true;
                    reached += fp.blocks[s as usize].count;
                    queue.push_back(s as usize);
                }
            }
            if total > 0 {
                (total - reached.min(total)) as f64 / total as f64
            } else {
                0.0
            }
        });
        let (inflow, outflow) = flows(fp);
        // Call-graph gap.
        cg_gaps.push(if trivial {
            0.0
        } else {
            let (mut ein, mut eout, mut considered) = (0u64, 0u64, 0);
            for &e in &entries {
                if fp.blocks[e].succs.is_empty() {
                    continue;
                }
                considered += 1;
                ein += inflow[e];
                eout += outflow[e];
            }
            let net = eout.saturating_sub(ein);
            let cg = view.call_inflow.get(&fp.function).copied().unwrap_or(0);
            let (lo, hi) = (net.min(cg), net.max(cg));
            if considered > 0 && hi > 0 {
                1.0 - lo as f64 / hi as f64
            } else {
                0.0
            }
        });
        // CFG flow conservation.
        if trivial {
            weighted.push(0.0);
            worst.push(0.0);
        } else {
            let mut max: Vec<u64> = (0..fp.blocks.len())
                .map(|b| inflow[b].max(outflow[b]))
                .collect();
            let mut min: Vec<u64> = (0..fp.blocks.len())
                .map(|b| inflow[b].min(outflow[b]))
                .collect();
            for c in &fp.calls {
                let total: u64 = c.targets.iter().map(|t| t.1).sum();
                if c.targets.is_empty() {
                    continue;
                }
                let b = c.block as usize;
                max[b] = max[b].max(total);
                min[b] = min[b].min(total);
            }
            let (mut wsum, mut wgap, mut worst_gap) = (0.0f64, 0.0f64, 0.0f64);
            for (b, blk) in fp.blocks.iter().enumerate() {
                let Some(cb) = blk.cfg_block else {
                    // A tail-call block has no successors: an exit.
                    continue;
                };
                let cblk = &cfg.blocks[cb as usize];
                if cblk.is_entry || blk.succs.is_empty() {
                    continue;
                }
                let insns = block_insns(cfg, cb as usize).count() as u64;
                if blk.count == 0 || insns == 0 || cblk.is_landing_pad {
                    continue;
                }
                if cfg
                    .landing_pads_of(cblk)
                    .iter()
                    .any(|&lp| fp.blocks[lp as usize].count > 0)
                {
                    continue;
                }
                let last = block_insns(cfg, cb as usize).next_back();
                if let Some(last) = last
                    && is_call(last)
                    && !is_ctc(last)
                    && last.target != 0
                    && (last.target == func_addr
                        || target_function(agg, last.target) == Some(fp.function))
                {
                    continue;
                }
                let gap = if max[b] > 0 {
                    1.0 - min[b] as f64 / max[b] as f64
                } else {
                    0.0
                };
                let weight = ((blk.count * insns) as f64).ln();
                wgap += gap * weight;
                wsum += weight;
                if blk.count > MIN_BLOCK_COUNT && gap > worst_gap {
                    worst_gap = gap;
                }
            }
            weighted.push(if wsum > 0.0 { wgap / wsum } else { wgap });
            worst.push(worst_gap);
        }
        // Exception handling.
        let (mut lp, mut all, mut inv) = (0u64, 0u64, 0u64);
        for blk in &fp.blocks {
            all += blk.count;
            if let Some(cb) = blk.cfg_block {
                let cblk = &cfg.blocks[cb as usize];
                if cblk.is_landing_pad {
                    lp += blk.count;
                }
                inv += blk.count * u64::from(cblk.invokes);
            }
        }
        if lp <= MIN_LANDING_PAD_COUNT {
            eh_blocks.push(0.0);
            eh_invokes.push(0.0);
        } else {
            eh_blocks.push(if all > 0 { lp as f64 / all as f64 } else { 0.0 });
            eh_invokes.push(if inv > 0 { lp as f64 / inv as f64 } else { 0.0 });
        }
    }
    Some(Quality {
        functions: valid.len(),
        cfg_discontinuity: percentile(discontinuity),
        call_graph_gap: percentile(cg_gaps),
        cfg_gap_weighted: percentile(weighted),
        cfg_gap_worst: percentile(worst),
        eh_of_blocks: percentile(eh_blocks),
        eh_of_invokes: percentile(eh_invokes),
    })
}
