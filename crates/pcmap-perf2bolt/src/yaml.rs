//! BOLT YAML profile from aggregated records, written with `pcmap-profile`'s YAMLIO-exact
//! writer. Profiles of BOLT-optimized binaries follow perf2bolt's BAT rules ([`branch_profile`]).
//!
//! Per profiled function (any function a record starts or ends in), in address order: `fid`
//! (BOLT's function number: symbol functions in address order, then PLT entries, then the PLT
//! header), `hash` (xxh3 of LLVM opcode names, see [`crate::block_hash::function_hash`]), `exec` (entries at offset 0),
//! `nblocks`, and the blocks that are entry points or carry counts, with every CFG successor (zero
//! counts included), call sites and block hashes ([`crate::block_hash`]).

use pcmap_bat::BatTable;
use pcmap_profile::yaml;
use rayon::prelude::*;

use crate::aggregate::{Aggregator, BranchProfile, Loc};
use crate::cfg::Flow;
use pcmap_binary::bolt::{BoltFunction, FunctionKind};

/// BOLT's function numbers (`fid`), indexed like [`pcmap_binary::bolt::BoltFunctions::functions`]: functions
/// with symbols in address order, then PLT entries, then the PLT header, then functions known
/// only from FDEs (the order in which BOLT creates them).
pub fn function_ids(agg: &Aggregator<'_, '_>) -> Vec<u32> {
    let funcs = agg.image().functions();
    let group = |f: &BoltFunction| -> u8 {
        if f.kind == FunctionKind::Plt {
            if f.is_plt_header() { 2 } else { 1 }
        } else if f.is_fde_only() {
            3
        } else {
            0
        }
    };
    let mut order: Vec<usize> = (0..funcs.len()).collect();
    // Stable: address order within each group.
    order.sort_by_key(|&i| group(&funcs[i]));
    let mut ids = vec![0u32; funcs.len()];
    for (n, i) in order.into_iter().enumerate() {
        ids[i] = n as u32 + 1;
    }
    ids
}

/// One record of a branch aggregation.
type Record = (crate::aggregate::RecordKey, crate::preagg::TraceCounts);

/// What the YAML writers need from a branch aggregation, indexed once: the records of each
/// source function and the entry counts of each target (perf2bolt's `Data` and `EntryData`).
struct Index<'p> {
    profile: &'p BranchProfile,
    ids: Vec<u32>,
    /// The records of each source function (entries from unknown code excluded), in fdata
    /// order (hence by source offset): `by_func[ranges[f].0..ranges[f].1]`, record indices.
    by_func: Vec<u32>,
    ranges: Vec<(u32, u32)>,
    /// Entry counts by (function, offset), sorted: branches from another function, from
    /// unknown code, or to offset 0 (perf2bolt treats a recursive call as an inter-function
    /// branch).
    entries: Vec<((u32, u64), u64)>,
    /// Whether a function has any record (perf2bolt's `hasProfile`).
    profiled: Vec<bool>,
}

impl<'p> Index<'p> {
    fn new(agg: &Aggregator<'_, '_>, profile: &'p BranchProfile) -> Self {
        let num_functions = agg.image().functions().len();
        let mut entries: Vec<((u32, u64), u64)> = Vec::new();
        let profiled = profile.profiled_functions(num_functions);
        let records = &profile.records;
        for (k, c) in records {
            if let Loc::Func(t, off) = k.to
                && (k.external_entry || t != k.func || off == 0)
            {
                entries.push(((t, off), c.count));
            }
        }
        entries.sort_unstable_by_key(|e| e.0);
        entries.dedup_by(|(k, c), (lk, lc)| {
            if k != lk {
                return false;
            }
            *lc = lc.wrapping_add(*c);
            true
        });
        // fdata order groups each function's records: then they are taken in place; a stable
        // sort by function otherwise.
        let mut by_func: Vec<u32> = (0..records.len() as u32)
            .filter(|&i| !records[i as usize].0.external_entry)
            .collect();
        let func = |i: u32| records[i as usize].0.func;
        let mut seen = vec![false; num_functions];
        let grouped = by_func.chunk_by(|&a, &b| func(a) == func(b)).all(|run| {
            let f = func(run[0]) as usize;
            !std::mem::replace(&mut seen[f], true)
        });
        if !grouped {
            by_func.sort_by_key(|&i| func(i));
        }
        let mut ranges = vec![(0u32, 0u32); num_functions];
        let mut start = 0;
        for run in by_func.chunk_by(|&a, &b| func(a) == func(b)) {
            let end = start + run.len() as u32;
            ranges[func(run[0]) as usize] = (start, end);
            start = end;
        }
        Self {
            profile,
            ids: function_ids(agg),
            by_func,
            ranges,
            entries,
            profiled,
        }
    }

    /// The records of `func` (indices into the profile's records).
    fn records_of(&self, func: usize) -> &[u32] {
        let (lo, hi) = self.ranges.get(func).copied().unwrap_or_default();
        &self.by_func[lo as usize..hi as usize]
    }

    /// The record `ri`.
    fn record(&self, ri: u32) -> &Record {
        &self.profile.records[ri as usize]
    }

    /// The entry counts of `func`, by offset.
    fn entries_of(&self, func: usize) -> &[((u32, u64), u64)] {
        let f = func as u32;
        let lo = self.entries.partition_point(|e| e.0.0 < f);
        let hi = lo + self.entries[lo..].partition_point(|e| e.0.0 == f);
        &self.entries[lo..hi]
    }

    /// The entry count of `func` at `offset`.
    fn entry_count(&self, func: usize, offset: u64) -> u64 {
        self.entries
            .binary_search_by_key(&(func as u32, offset), |e| e.0)
            .map_or(0, |i| self.entries[i].1)
    }
}

/// Options of the YAML writer beyond the profile itself.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct YamlOptions {
    /// perf2bolt's `--profile-use-dfs`: blocks in BOLT's depth-first order
    /// ([`crate::cfg::Cfg::dfs_order`]), numbered in that order (unreachable blocks left out),
    /// the function hash over that order, and `dfs-order: true` in the header. Outside BAT mode
    /// only.
    pub dfs_order: bool,
}

fn header(
    agg: &Aggregator<'_, '_>,
    binary_name: &str,
    events: &[String],
    flags: u16,
    opts: YamlOptions,
) -> yaml::Header {
    yaml::Header {
        version: 1,
        binary_name: binary_name.to_string(),
        build_id: agg
            .image()
            .binary()
            .build_id_hex()
            .unwrap_or_else(|| "<unknown>".to_string()),
        flags,
        origin: "perf data aggregator".into(),
        events: crate::stringmap::string_set_order(events).join(","),
        dfs_order: opts.dfs_order,
        hash_func: yaml::HashFunction::Xxh3,
    }
}

/// Build the YAML profile of a branch aggregation.
///
/// For an ordinary binary: every profiled function in address order, converted from its CFG.
/// For a BOLT-optimized binary (BAT mode), as perf2bolt's `writeBATYAML`: first the profiled
/// functions BOLT did not rewrite (no BAT entry), converted from their CFG, in address order;
/// then the BAT functions in name order, whose hashes, block count and blocks come from the BAT
/// table (see `bat_function`). [`write_branch_profile`] writes the same document without
/// building it.
pub fn branch_profile(
    agg: &Aggregator<'_, '_>,
    profile: &BranchProfile,
    binary_name: &str,
    events: &[String],
) -> yaml::Profile {
    branch_profile_with(agg, profile, binary_name, events, YamlOptions::default())
}

/// The functions of a branch profile in output order: those converted from their CFG (address
/// order), then the BAT functions (name order).
struct Plan<'p> {
    index: Index<'p>,
    cfg_functions: Vec<usize>,
    bat_functions: Vec<usize>,
}

impl<'p> Plan<'p> {
    fn new(agg: &Aggregator<'_, '_>, profile: &'p BranchProfile) -> Self {
        let funcs = agg.image().functions();
        let index = Index::new(agg, profile);
        let is_bat_function = |fi: usize| {
            agg.bat()
                .is_some_and(|b| b.is_bat_function(funcs[fi].address))
        };
        let (cfg_functions, mut bat_functions): (Vec<usize>, Vec<usize>) = (0..funcs.len())
            .filter(|&fi| index.profiled[fi])
            .partition(|&fi| !is_bat_function(fi));
        bat_functions.sort_by_key(|&fi| agg.name_rank(fi));
        // Entry points before the parallel CFG builds (a no-op after aggregation).
        agg.prepare(Some(&index.profiled));
        Plan {
            index,
            cfg_functions,
            bat_functions,
        }
    }

    /// The header's profile flags. Outside BAT mode, BOLT's YAML writer takes them from the
    /// first profiled function with blocks: none when no written function has a CFG.
    fn flags(&self, agg: &Aggregator<'_, '_>) -> u16 {
        let any_blocks = || {
            self.cfg_functions
                .par_iter()
                .any(|&fi| !agg.cfg(fi).blocks.is_empty())
        };
        if agg.is_bat() || any_blocks() {
            yaml::PF_LBR
        } else {
            0
        }
    }
}

/// [`branch_profile`] with writer options.
pub fn branch_profile_with(
    agg: &Aggregator<'_, '_>,
    profile: &BranchProfile,
    binary_name: &str,
    events: &[String],
    opts: YamlOptions,
) -> yaml::Profile {
    let plan = Plan::new(agg, profile);
    let mut out = yaml::Profile {
        header: header(agg, binary_name, events, plan.flags(agg), opts),
        ..Default::default()
    };
    // Functions are independent (CFG, block hashes, counts): convert them in parallel; an
    // indexed parallel iterator keeps address order.
    out.functions = plan
        .cfg_functions
        .par_iter()
        .map_init(Scratch::default, |scratch, &fi| {
            let mut f = Build::default();
            cfg_function(agg, &plan.index, fi, opts.dfs_order, scratch, &mut f);
            f.0
        })
        .collect();
    if let Some(bat) = agg.bat() {
        for &fi in &plan.bat_functions {
            out.functions.push(bat_function(agg, bat, &plan.index, fi));
        }
    }
    out
}

/// Write the YAML profile of a branch aggregation ([`branch_profile_with`]'s document, byte
/// for byte) to `w` without building it: functions are converted and formatted in parallel
/// slices, each block written from the converter's buffers. Returns the number of functions.
pub fn write_branch_profile<W: std::io::Write + ?Sized>(
    w: &mut W,
    agg: &Aggregator<'_, '_>,
    profile: &BranchProfile,
    binary_name: &str,
    events: &[String],
    opts: YamlOptions,
) -> std::io::Result<u64> {
    let plan = Plan::new(agg, profile);
    let header = header(agg, binary_name, events, plan.flags(agg), opts);
    let n = plan.cfg_functions.len() + plan.bat_functions.len();
    let functions = |w: &mut W| {
        pcmap_profile::write_in_parallel(w, &plan.cfg_functions, 64, |buf, fis| {
            let mut scratch = Scratch::default();
            for &fi in fis {
                cfg_function(agg, &plan.index, fi, opts.dfs_order, &mut scratch, buf);
            }
        })?;
        if let Some(bat) = agg.bat() {
            for &fi in &plan.bat_functions {
                yaml::write_function(w, &bat_function(agg, bat, &plan.index, fi))?;
            }
        }
        Ok(())
    };
    let write_opts = yaml::WriteOptions::default();
    yaml::write_document(
        w,
        &header,
        n > 0,
        functions,
        &Default::default(),
        &write_opts,
    )?;
    Ok(n as u64)
}

/// Where [`cfg_function`] puts a converted function: its keys, then its blocks.
trait Emit {
    fn head(&mut self, head: yaml::FunctionHead<'_>, has_blocks: bool);
    fn block(&mut self, block: yaml::BlockRef<'_>);
}

/// A function built as a [`yaml::Function`].
#[derive(Default)]
struct Build(yaml::Function);

impl Emit for Build {
    fn head(&mut self, h: yaml::FunctionHead<'_>, _: bool) {
        self.0 = yaml::Function {
            name: h.name.to_string(),
            id: h.id,
            hash: h.hash,
            exec_count: h.exec_count,
            extern_entry_count: h.extern_entry_count,
            num_basic_blocks: h.num_basic_blocks,
            ..Default::default()
        };
    }

    fn block(&mut self, b: yaml::BlockRef<'_>) {
        self.0.blocks.push(yaml::Block {
            index: b.index,
            num_instructions: b.num_instructions,
            hash: b.hash,
            exec_count: b.exec_count,
            event_count: b.event_count,
            calls: b.calls.to_vec(),
            successors: b.successors.to_vec(),
            ..Default::default()
        });
    }
}

/// A function written as YAML text.
impl Emit for Vec<u8> {
    fn head(&mut self, head: yaml::FunctionHead<'_>, has_blocks: bool) {
        // Writing into a Vec cannot fail.
        let _ = yaml::write_function_head(self, &head, has_blocks);
    }

    fn block(&mut self, block: yaml::BlockRef<'_>) {
        let _ = yaml::write_block(self, &block, &yaml::WriteOptions::default());
    }
}

/// The entry discriminator of a call to `offset` in function `fi` (perf2bolt's
/// `setCSIDestination`): 0 for the main entry, N for the N-th secondary entry point. For a BAT
/// function the secondary entry points are BAT's (input offsets); otherwise the entry blocks of
/// the function's CFG containing `offset`.
fn entry_discriminator(agg: &Aggregator<'_, '_>, fi: usize, offset: u64) -> u32 {
    let f = &agg.image().functions()[fi];
    if let Some(bat) = agg.bat().filter(|b| b.is_bat_function(f.address)) {
        if offset == 0 {
            return 0;
        }
        return bat
            .function(f.address)
            .and_then(|bf| {
                bf.secondary_entry_points
                    .iter()
                    .position(|&o| u64::from(o) == offset)
            })
            .map_or(0, |p| p as u32 + 1);
    }
    let cfg = agg.cfg(fi);
    let Some(b) = cfg.block_containing(offset) else {
        return 0;
    };
    if b == 0 || !cfg.blocks[b].is_entry {
        return 0;
    }
    cfg.blocks[1..=b].iter().filter(|x| x.is_entry).count() as u32
}

/// The entry discriminator of a direct call to `target` in function `fi` when `fi` is a fragment
/// BOLT rewrote (perf2bolt's `BoltAddressTranslation::translateSymbol`): the target translated to
/// an input offset of the input function, then numbered among that function's BAT secondary
/// entry points (0 for its start or any other offset). 0 for other callees.
fn bat_call_discriminator(agg: &Aggregator<'_, '_>, fi: usize, target: u64) -> u32 {
    let Some(bat) = agg.bat() else {
        return 0;
    };
    let start = agg.image().functions()[fi].address;
    if !bat.is_bat_function(start) {
        return 0;
    }
    bat.translate_in(start, target, false).map_or(0, |t| {
        entry_discriminator(agg, agg.owner(fi), t.input_offset)
    })
}

/// The buffers [`cfg_function`] reuses from function to function.
#[derive(Default)]
struct Scratch {
    incoming: Vec<u64>,
    /// Block `bi`'s successors are `succs[succ_start[bi]..succ_start[bi + 1]]`; its call
    /// sites likewise.
    succs: Vec<yaml::Successor>,
    succ_start: Vec<usize>,
    calls: Vec<yaml::CallSite>,
    call_start: Vec<usize>,
    /// The blocks written, in output order.
    written: Vec<u32>,
    /// Each block's number in the output order.
    position: Vec<u32>,
    /// One block's successors renumbered.
    renumbered: Vec<yaml::Successor>,
}

/// One function converted from its CFG (perf2bolt's `YAMLProfileWriter::convert`) into `out`.
fn cfg_function(
    agg: &Aggregator<'_, '_>,
    index: &Index<'_>,
    fi: usize,
    dfs: bool,
    scratch: &mut Scratch,
    out: &mut impl Emit,
) {
    let image = agg.image();
    let f = &image.functions()[fi];
    let ids = &index.ids;
    let cfg = agg.cfg(fi);
    let exec = index.entry_count(fi, 0);
    let dfs_order = (dfs && cfg.simple).then(|| cfg.dfs_order());
    // The function hash and the block hashes, computed when the CFG was built.
    let hashes = cfg.simple.then(|| agg.hashes(fi, dfs));
    let function_hash = hashes
        .as_ref()
        .and_then(|h| h.function_in(dfs))
        .unwrap_or(0);
    let block_hashes: &[u64] = hashes.as_ref().map_or(&[], |h| &h.blocks);
    let head = yaml::FunctionHead {
        name: f.profile_name(agg.is_bat()),
        id: ids[fi],
        hash: function_hash,
        exec_count: exec,
        num_basic_blocks: cfg.blocks.len() as u32,
        ..Default::default()
    };
    if !cfg.simple {
        out.head(head, false);
        return;
    }
    // Edge counts and call sites of every block first (flat, no allocation per block): only
    // the blocks with counts, and entry blocks, become YAML blocks.
    let n = cfg.blocks.len();
    let Scratch {
        incoming,
        succs,
        succ_start,
        calls,
        call_start,
        written,
        position,
        renumbered,
    } = scratch;
    incoming.clear();
    incoming.resize(n, 0);
    succs.clear();
    succ_start.clear();
    calls.clear();
    call_start.clear();
    let call_site = |offset, dest_id, entry_discriminator, count, mispreds| yaml::CallSite {
        offset,
        dest_id,
        entry_discriminator,
        count,
        mispreds,
        ..Default::default()
    };
    // The function's records by source offset; blocks come in offset order, so each block's
    // run follows the previous one's.
    let mut rest = index.records_of(fi);
    for (bi, b) in cfg.blocks.iter().enumerate() {
        succ_start.push(succs.len());
        call_start.push(calls.len());
        // Every record that counts for the block has its source in the block.
        let from = |ri: &u32| index.record(*ri).0.from;
        let skip = rest
            .iter()
            .take_while(|ri| from(ri) < u64::from(b.offset))
            .count();
        rest = &rest[skip..];
        let len = rest
            .iter()
            .take_while(|ri| from(ri) < u64::from(b.end))
            .count();
        let recs = &rest[..len];
        // Edge counts come from the block's branch instructions (the last one, or the
        // conditional branch of a `jcc; jmp` pair) and fall-through records.
        let last = cfg.last_insn(bi).map(|i| u64::from(i.offset));
        let is_source = |from: u64| {
            Some(from) == last
                || (from >= u64::from(b.offset)
                    && from < u64::from(b.end)
                    && cfg
                        .insn_at(from)
                        .is_some_and(|i| i.flow() == Flow::CondJump))
        };
        for &s in &b.succs {
            let so = u64::from(cfg.blocks[s as usize].offset);
            let (mut cnt, mut mis) = (0u64, 0u64);
            for &ri in recs {
                let (k, c) = index.record(ri);
                // A branch to its own address is ignored (`recordBranch`: `From == To`).
                if so != 0 && k.to == Loc::Func(fi as u32, so) && k.from != so && is_source(k.from)
                {
                    cnt = cnt.wrapping_add(c.count);
                    mis = mis.wrapping_add(c.mispreds);
                }
            }
            incoming[s as usize] = incoming[s as usize].wrapping_add(cnt);
            succs.push(yaml::Successor {
                index: s,
                count: cnt,
                mispreds: mis,
            });
        }
        // Call sites: calls, tail calls and indirect jumps of this block with records
        // leaving the function. A direct call gets one entry for its callee with the
        // total count; an indirect one an entry per recorded destination.
        let mut direct: Option<(u64, usize)> = None;
        for &ri in recs {
            let (k, c) = index.record(ri);
            let inter = match k.to {
                Loc::Unknown => true,
                Loc::Func(t, off) => t as usize != fi || off == 0,
            };
            if !inter {
                continue;
            }
            let Some(insn) = cfg.insn_at(k.from) else {
                continue;
            };
            if !(insn.is_call() || insn.flow() == Flow::IndirectJump) {
                continue;
            }
            let offset = (k.from - u64::from(b.offset)) as u32;
            if insn.target != 0 {
                match direct {
                    Some((from, idx)) if from == k.from => {
                        let call = &mut calls[idx];
                        call.count = call.count.wrapping_add(c.count);
                        if insn.flow() == Flow::CondJump {
                            call.mispreds = call.mispreds.wrapping_add(c.mispreds);
                        }
                    }
                    _ => {
                        let (dest_id, disc) =
                            image.function_containing(insn.target).map_or((0, 0), |t| {
                                let disc = bat_call_discriminator(agg, t, insn.target);
                                (ids[agg.owner(t)], disc)
                            });
                        direct = Some((k.from, calls.len()));
                        // Conditional tail calls keep their mispredictions.
                        let mispreds = if insn.flow() == Flow::CondJump {
                            c.mispreds
                        } else {
                            0
                        };
                        calls.push(call_site(offset, dest_id, disc, c.count, mispreds));
                    }
                }
                continue;
            }
            let dest_id = match k.to {
                Loc::Func(t, _) => ids[agg.owner(t as usize)],
                Loc::Unknown => 0,
            };
            calls.push(call_site(offset, dest_id, 0, c.count, c.mispreds));
        }
    }
    succ_start.push(succs.len());
    call_start.push(calls.len());
    // Blocks in input order, or with `--profile-use-dfs` in depth-first order and numbered in
    // that order (successors too); unreachable blocks are then not written.
    position.clear();
    match &dfs_order {
        Some(order) => {
            position.resize(n, u32::MAX);
            for (pos, &b) in order.iter().enumerate() {
                position[b as usize] = pos as u32;
            }
        }
        None => position.extend(0..n as u32),
    }
    let number = |b: u32| match position[b as usize] {
        u32::MAX => b,
        p => p,
    };
    written.clear();
    let mut consider = |bi: usize| {
        let out_edges = succs[succ_start[bi]..succ_start[bi + 1]]
            .iter()
            .any(|s| s.count > 0);
        let has_calls = calls[call_start[bi]..call_start[bi + 1]]
            .iter()
            .any(|c| c.count > 0);
        if cfg.blocks[bi].is_entry || out_edges || has_calls || incoming[bi] > 0 {
            written.push(bi as u32);
        }
    };
    match &dfs_order {
        Some(order) => order.iter().for_each(|&b| consider(b as usize)),
        None => (0..n).for_each(consider),
    }
    out.head(head, !written.is_empty());
    for &b in written.iter() {
        let bi = b as usize;
        let block = &cfg.blocks[bi];
        let block_succs = &succs[succ_start[bi]..succ_start[bi + 1]];
        let successors = if dfs_order.is_some() {
            renumbered.clear();
            renumbered.extend(block_succs.iter().map(|s| yaml::Successor {
                index: number(s.index),
                ..*s
            }));
            &renumbered[..]
        } else {
            block_succs
        };
        out.block(yaml::BlockRef {
            index: number(b),
            num_instructions: block.end_insn - block.first_insn,
            hash: block_hashes
                .get(bi)
                .copied()
                .unwrap_or(u64::from(block.offset) & 0xffff),
            exec_count: if block.is_entry {
                index.entry_count(fi, u64::from(block.offset))
            } else {
                0
            },
            successors,
            calls: &calls[call_start[bi]..call_start[bi + 1]],
            ..Default::default()
        });
    }
}

/// One function BOLT rewrote, from the BAT table and its records (perf2bolt's `writeBATYAML`):
///
/// * `hash` and `nblocks` are BAT's; the blocks are BAT's input blocks in input-offset order
///   (`bid` and `hash` from the table, `insns: 0`);
/// * every record of the function, in fdata order, lands in the block containing its source
///   offset (the last BAT block starting at or before it): a branch to another offset of the
///   same function becomes a successor edge (to the block containing the destination), anything
///   else a call site at the offset from the block start, with the callee's number and entry
///   discriminator;
/// * entries from other functions or unknown code that land exactly on a block start count as
///   that block's `exec`; entries at offset 0 are the function's `exec`;
/// * blocks without any count are left out.
fn bat_function(
    agg: &Aggregator<'_, '_>,
    bat: &BatTable,
    index: &Index<'_>,
    fi: usize,
) -> yaml::Function {
    let f = &agg.image().functions()[fi];
    let table_fn = bat.function(f.address);
    let block_map = bat.blocks(f.address);
    let num_blocks = table_fn.map_or(0, |t| t.num_blocks);
    // perf2bolt sizes its block list to NumBlocks, takes bid and hash positionally from the
    // block map, and puts counts at position `bid`. NumBlocks comes from the (untrusted) BAT
    // section, so only positions that hold data are materialised: map positions first, then
    // positions records reach; output keeps position order.
    let mut blocks: std::collections::BTreeMap<u64, yaml::Block> = block_map
        .iter()
        .take(usize::try_from(num_blocks).unwrap_or(usize::MAX))
        .enumerate()
        .map(|(pos, (_, b))| {
            let yb = yaml::Block {
                index: b.index,
                hash: b.hash,
                ..Default::default()
            };
            (pos as u64, yb)
        })
        .collect();
    // perf2bolt's `getBlock`: the block whose input offset is the greatest at or before `offset`.
    let block_of = |offset: u64| -> Option<(u64, usize)> {
        let i = block_map.partition_point(|(o, _)| u64::from(*o) <= offset);
        let (o, b) = block_map.get(i.checked_sub(1)?)?;
        Some((u64::from(*o), b.index as usize))
    };
    for &ri in index.records_of(fi) {
        let (k, c) = index.record(ri);
        // perf2bolt stops with "invalid BAT section" when a source precedes every block; a
        // block index past `nblocks` would be out of bounds there. Neither happens with a
        // table llvm-bolt wrote; such records are skipped here.
        let Some((block_offset, bi)) = block_of(k.from) else {
            continue;
        };
        let (dest_id, entry_discriminator) = match k.to {
            // A branch to another offset of the same function: a successor edge.
            Loc::Func(t, to) if t as usize == fi && to != 0 => {
                let Some((_, succ)) = block_of(to) else {
                    continue;
                };
                if let Some(yb) = block_at(&mut blocks, num_blocks, bi) {
                    yb.successors.push(yaml::Successor {
                        index: succ as u32,
                        count: c.count,
                        mispreds: c.mispreds,
                    });
                }
                continue;
            }
            Loc::Func(t, off) => {
                let t = agg.owner(t as usize);
                (index.ids[t], entry_discriminator(agg, t, off))
            }
            Loc::Unknown => (0, 0),
        };
        if let Some(yb) = block_at(&mut blocks, num_blocks, bi) {
            yb.calls.push(yaml::CallSite {
                offset: (k.from - block_offset) as u32,
                dest_id,
                entry_discriminator,
                count: c.count,
                mispreds: c.mispreds,
                ..Default::default()
            });
        }
    }
    // Entry counts land on exact block starts only.
    for &((_, off), count) in index.entries_of(fi) {
        let Ok(i) = block_map.binary_search_by_key(&off, |(o, _)| u64::from(*o)) else {
            continue;
        };
        if let Some(yb) = block_at(&mut blocks, num_blocks, block_map[i].1.index as usize) {
            yb.exec_count = yb.exec_count.wrapping_add(count);
        }
    }
    let blocks: Vec<yaml::Block> = blocks
        .into_values()
        .filter(|b| {
            b.exec_count != 0
                || b.successors.iter().any(|s| s.count != 0)
                || b.calls.iter().any(|c| c.count != 0)
        })
        .collect();
    yaml::Function {
        name: f.profile_name(true).to_string(),
        id: index.ids[fi],
        hash: table_fn.map_or(0, |t| t.hash),
        exec_count: index.entry_count(fi, 0),
        num_basic_blocks: num_blocks as u32,
        blocks,
        ..Default::default()
    }
}

/// The block at position `bid` of a BAT function's block list (created on first use), when
/// `bid` is within the function's NumBlocks.
fn block_at(
    blocks: &mut std::collections::BTreeMap<u64, yaml::Block>,
    num_blocks: u64,
    bid: usize,
) -> Option<&mut yaml::Block> {
    let pos = bid as u64;
    (pos < num_blocks).then(|| blocks.entry(pos).or_default())
}

/// Outside BAT mode, BOLT's YAML writer takes the header's profile flags from the first profiled
/// function with blocks: none when no written function has a CFG.
fn no_flags_without_blocks(profile: &mut yaml::Profile) {
    if !profile.functions.iter().any(|f| f.num_basic_blocks > 0) {
        profile.header.flags = 0;
    }
}

/// Build the YAML profile of a basic-sample aggregation: perf2bolt attaches no samples to blocks
/// in this mode, so every sampled function appears with `exec: 0` and no blocks (and for a
/// BOLT-optimized binary, `functions: []`).
pub fn sample_profile(
    agg: &Aggregator<'_, '_>,
    samples: &crate::aggregate::SampleProfile,
    binary_name: &str,
    events: &[String],
) -> yaml::Profile {
    sample_profile_with(agg, samples, binary_name, events, YamlOptions::default())
}

/// [`sample_profile`] with writer options (with `dfs_order`, function hashes over BOLT's
/// depth-first block order).
pub fn sample_profile_with(
    agg: &Aggregator<'_, '_>,
    samples: &crate::aggregate::SampleProfile,
    binary_name: &str,
    events: &[String],
    opts: YamlOptions,
) -> yaml::Profile {
    let image = agg.image();
    let ids = function_ids(agg);
    let sampled = samples.profiled_functions(image.functions().len());
    let mut out = yaml::Profile {
        header: header(agg, binary_name, events, yaml::PF_SAMPLE, opts),
        ..Default::default()
    };
    // perf2bolt writes no function at all for basic samples of a BOLT-optimized binary.
    if agg.is_bat() {
        return out;
    }
    for (fi, f) in image.functions().iter().enumerate() {
        if !sampled[fi] {
            continue;
        }
        let cfg = agg.cfg(fi);
        out.functions.push(yaml::Function {
            name: f.name().to_string(),
            id: ids[fi],
            hash: if cfg.simple {
                let hashes = agg.hashes(fi, opts.dfs_order);
                hashes.function_in(opts.dfs_order).unwrap_or(0)
            } else {
                0
            },
            num_basic_blocks: cfg.blocks.len() as u32,
            ..Default::default()
        });
    }
    no_flags_without_blocks(&mut out);
    out
}
