//! BOLT YAML profile (non-BAT, branch mode) from aggregated records, written with
//! `pcmap-profile`'s YAMLIO-exact writer.
//!
//! Per profiled function (any function a record starts or ends in), in address order: `fid`
//! (BOLT's function number: symbol functions in address order, then PLT entries, then the PLT
//! header), `hash` (xxh3 of LLVM opcode names, see [`crate::hash`]), `exec` (entries at offset 0),
//! `nblocks`, and the blocks that are entry points or carry counts, with every CFG successor (zero
//! counts included) and call sites. Block hashes are not computed: only their offset field (bits
//! 0-15) is filled in; llvm-bolt matches blocks by index when the function hash matches.

use pcmap_profile::yaml;
use rustc_hash::FxHashMap;

use crate::aggregate::{Aggregator, BranchProfile, Loc};
use crate::cfg::Flow;
use crate::hash;
use crate::image::FunctionKind;

/// BOLT's function numbers (`fid`), indexed like [`crate::image::Image::functions`].
pub fn function_ids(agg: &Aggregator<'_, '_>) -> Vec<u32> {
    let funcs = agg.image().functions();
    let mut ids = vec![0u32; funcs.len()];
    let mut next = 1u32;
    for (i, f) in funcs.iter().enumerate() {
        if f.kind == FunctionKind::Regular {
            ids[i] = next;
            next += 1;
        }
    }
    for (i, f) in funcs.iter().enumerate() {
        if f.kind == FunctionKind::Plt && !f.name().starts_with("__BOLT_PSEUDO_") {
            ids[i] = next;
            next += 1;
        }
    }
    for (i, f) in funcs.iter().enumerate() {
        if f.name().starts_with("__BOLT_PSEUDO_") {
            ids[i] = next;
            next += 1;
        }
    }
    ids
}

/// Build the YAML profile of a branch aggregation.
pub fn branch_profile(
    agg: &Aggregator<'_, '_>,
    profile: &BranchProfile,
    binary_name: &str,
    events: &[String],
) -> yaml::Profile {
    let image = agg.image();
    let funcs = image.functions();
    let ids = function_ids(agg);
    // Records per source function, and entry counts per (function, offset).
    let mut by_func: FxHashMap<u32, Vec<usize>> = FxHashMap::default();
    let mut entries: FxHashMap<(u32, u64), u64> = FxHashMap::default();
    let mut profiled = vec![false; funcs.len()];
    for (i, (k, c)) in profile.records.iter().enumerate() {
        profiled[k.func as usize] = true;
        if let Loc::Func(t, off) = k.to {
            profiled[t as usize] = true;
            let inter = k.external_entry || t != k.func || off == 0;
            if inter {
                *entries.entry((t, off)).or_default() += c.count;
            }
        }
        if !k.external_entry {
            by_func.entry(k.func).or_default().push(i);
        }
    }
    let mut out = yaml::Profile {
        header: yaml::Header {
            version: 1,
            binary_name: binary_name.to_string(),
            build_id: image.build_id().unwrap_or("<unknown>").to_string(),
            flags: yaml::PF_LBR,
            origin: "perf data aggregator".into(),
            events: crate::stringmap::string_set_order(events).join(","),
            dfs_order: false,
            hash_func: yaml::HashFunction::Xxh3,
        },
        ..Default::default()
    };
    for (fi, f) in funcs.iter().enumerate() {
        if !profiled[fi] {
            continue;
        }
        let cfg = agg.cfg(fi);
        let exec = entries.get(&(fi as u32, 0)).copied().unwrap_or(0);
        let mut yf = yaml::Function {
            name: f.name().to_string(),
            id: ids[fi],
            hash: if cfg.simple {
                hash::function_hash(cfg).0
            } else {
                0
            },
            exec_count: exec,
            num_basic_blocks: cfg.blocks.len() as u32,
            ..Default::default()
        };
        if cfg.simple {
            let recs: &[usize] = by_func.get(&(fi as u32)).map_or(&[], Vec::as_slice);
            let mut blocks: Vec<yaml::Block> = Vec::new();
            let mut incoming = vec![0u64; cfg.blocks.len()];
            let mut per_block: Vec<yaml::Block> = cfg
                .blocks
                .iter()
                .enumerate()
                .map(|(bi, b)| yaml::Block {
                    index: bi as u32,
                    num_instructions: b.end_insn - b.first_insn,
                    hash: u64::from(b.offset) & 0xffff,
                    exec_count: if b.is_entry {
                        entries
                            .get(&(fi as u32, u64::from(b.offset)))
                            .copied()
                            .unwrap_or(0)
                    } else {
                        0
                    },
                    ..Default::default()
                })
                .collect();
            for (bi, b) in cfg.blocks.iter().enumerate() {
                // Edge counts come from the block's branch instructions (the last one, or the
                // conditional branch of a `jcc; jmp` pair) and fall-through records.
                let last = cfg.last_insn(bi).map(|i| u64::from(i.offset));
                let is_source = |from: u64| {
                    Some(from) == last
                        || (from >= u64::from(b.offset)
                            && from < u64::from(b.end)
                            && cfg.insn_at(from).is_some_and(|i| i.flow == Flow::CondJump))
                };
                for &s in &b.succs {
                    let so = u64::from(cfg.blocks[s as usize].offset);
                    let (mut cnt, mut mis) = (0, 0);
                    for &ri in recs {
                        let (k, c) = &profile.records[ri];
                        if so != 0 && k.to == Loc::Func(fi as u32, so) && is_source(k.from) {
                            cnt += c.count;
                            mis += c.mispreds;
                        }
                    }
                    incoming[s as usize] += cnt;
                    per_block[bi].successors.push(yaml::Successor {
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
                    let (k, c) = &profile.records[ri];
                    if k.from < u64::from(b.offset) || k.from >= u64::from(b.end) {
                        continue;
                    }
                    let inter = match k.to {
                        Loc::Unknown => true,
                        Loc::Func(t, off) => t as usize != fi || off == 0,
                    };
                    let Some(insn) = cfg.insn_at(k.from) else {
                        continue;
                    };
                    if !inter || !(insn.is_call() || insn.flow == Flow::IndirectJump) {
                        continue;
                    }
                    let offset = (k.from - u64::from(b.offset)) as u32;
                    let calls = &mut per_block[bi].calls;
                    if insn.target != 0 {
                        match direct {
                            Some((from, idx)) if from == k.from => {
                                calls[idx].count += c.count;
                                if insn.flow == Flow::CondJump {
                                    calls[idx].mispreds += c.mispreds;
                                }
                            }
                            _ => {
                                let dest_id =
                                    image.function_containing(insn.target).map_or(0, |t| ids[t]);
                                direct = Some((k.from, calls.len()));
                                // Conditional tail calls keep their mispredictions.
                                let mispreds = if insn.flow == Flow::CondJump {
                                    c.mispreds
                                } else {
                                    0
                                };
                                calls.push(yaml::CallSite {
                                    offset,
                                    dest_id,
                                    count: c.count,
                                    mispreds,
                                    ..Default::default()
                                });
                            }
                        }
                        continue;
                    }
                    let dest_id = match k.to {
                        Loc::Func(t, _) => ids[t as usize],
                        Loc::Unknown => 0,
                    };
                    calls.push(yaml::CallSite {
                        offset,
                        dest_id,
                        count: c.count,
                        mispreds: c.mispreds,
                        ..Default::default()
                    });
                }
            }
            for (bi, mut yb) in per_block.into_iter().enumerate() {
                let out_edges = yb.successors.iter().any(|s| s.count > 0);
                let calls = yb.calls.iter().any(|c| c.count > 0);
                if cfg.blocks[bi].is_entry || out_edges || calls || incoming[bi] > 0 {
                    if !cfg.blocks[bi].is_entry {
                        yb.exec_count = 0;
                    }
                    blocks.push(yb);
                }
            }
            yf.blocks = blocks;
        }
        out.functions.push(yf);
    }
    out
}

/// Build the YAML profile of a basic-sample aggregation: perf2bolt attaches no samples to blocks
/// in this mode, so every sampled function appears with `exec: 0` and no blocks.
pub fn sample_profile(
    agg: &Aggregator<'_, '_>,
    samples: &crate::aggregate::SampleProfile,
    binary_name: &str,
    events: &[String],
) -> yaml::Profile {
    let image = agg.image();
    let ids = function_ids(agg);
    let mut sampled = vec![false; image.functions().len()];
    for &(f, _) in samples.samples.keys() {
        sampled[f as usize] = true;
    }
    let mut out = yaml::Profile {
        header: yaml::Header {
            version: 1,
            binary_name: binary_name.to_string(),
            build_id: image.build_id().unwrap_or("<unknown>").to_string(),
            flags: yaml::PF_SAMPLE,
            origin: "perf data aggregator".into(),
            events: crate::stringmap::string_set_order(events).join(","),
            dfs_order: false,
            hash_func: yaml::HashFunction::Xxh3,
        },
        ..Default::default()
    };
    for (fi, f) in image.functions().iter().enumerate() {
        if !sampled[fi] {
            continue;
        }
        let cfg = agg.cfg(fi);
        out.functions.push(yaml::Function {
            name: f.name().to_string(),
            id: ids[fi],
            hash: if cfg.simple {
                hash::function_hash(cfg).0
            } else {
                0
            },
            num_basic_blocks: cfg.blocks.len() as u32,
            ..Default::default()
        });
    }
    out
}
