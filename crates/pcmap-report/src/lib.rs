//! The data of `pcmap report` and its rendering.
//!
//! A [`Report`] is built from what `pcmap-perf2bolt` already computed — the aggregation of a
//! profile against a binary (perf2bolt's records, in BAT mode translated to the functions and
//! offsets before BOLT), llvm-bolt's reading of those records onto BOLT's CFGs
//! ([`pcmap_perf2bolt::quality::read_branch_profile`]) and BOLT's profile-quality figures — plus
//! optional sections: samples attributed to inlined callees ([`inline_hotness`], from the DWARF
//! frames of `pcmap-inline`) and the share of the profile that is stale for a new build
//! ([`staleness`], from BOLT's function hashes, with llvm-bolt's block matching of the changed
//! functions' profiles, [`pcmap_perf2bolt::stale`]). [`html::write`] renders it as one self-contained
//! page (inline CSS and SVG, no external resource); the report serializes to JSON (serde) as the
//! page's twin for scripts.
//!
//! Counts: in a branch profile a function's count is the sum of the counts of its fdata records
//! (records whose source is in the function, and entries into it from unknown code — the lines
//! perf2bolt writes under the function's name); in a basic-sample profile, its samples.

pub mod html;

use rustc_hash::FxHashMap;
use serde::Serialize;

use pcmap_binary::bolt::FunctionKind;
use pcmap_perf2bolt::aggregate::{Aggregator, BranchProfile, Loc, SampleProfile};
use pcmap_perf2bolt::quality::{self, ProfileView};

/// Errors of this crate.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The DWARF could not be read for an address.
    #[error("inline frames: {0}")]
    Inline(#[from] pcmap_inline::Error),
}

/// Result of this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// What the profile holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ProfileKind {
    /// Branch records (LBR-style, or pre-aggregated traces).
    Branches,
    /// Basic samples (`--ba`).
    Samples,
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The binary, as given.
    pub binary: String,
    /// The profile, as given.
    pub profile: String,
    /// Branch records or basic samples.
    pub kind: ProfileKind,
    /// The binary was optimized by BOLT and carries address translation: names and offsets are
    /// those before BOLT.
    pub bolted: bool,
    /// Sum of the counts of every function.
    pub total: u64,
    /// Every function with a count, hottest first (ties by name).
    pub functions: Vec<FunctionHeat>,
    /// BOLT's profile-quality figures (branch profiles of binaries not optimized by BOLT).
    pub quality: Option<QualityFigures>,
    /// Why there are no quality figures, when there are none.
    pub quality_note: Option<String>,
    /// Samples attributed to inlined callees, hottest first (binaries with DWARF).
    pub inline: Option<Vec<InlineHeat>>,
    /// How much of the profile is stale for a new build (`--new-binary`).
    pub stale: Option<Staleness>,
}

/// One function's heat.
#[derive(Debug, Clone, Serialize)]
pub struct FunctionHeat {
    /// The function's name in the profile (before BOLT for a BOLTed binary).
    pub name: String,
    /// Its address in the binary (the hot fragment's, for a BOLTed binary).
    pub address: u64,
    /// Its count (see the crate documentation).
    pub count: u64,
    /// `count / total`.
    pub share: f64,
    /// BOLT's execution count (branches to the function's start; branch profiles).
    pub exec_count: u64,
    /// Block heat on the CFG (the hottest functions with a CFG, binaries not optimized by BOLT).
    pub cfg: Option<CfgHeat>,
}

/// Block and edge counts of one function, as llvm-bolt reads the profile.
#[derive(Debug, Clone, Serialize)]
pub struct CfgHeat {
    /// Whether llvm-bolt accepts the function's profile (else block and edge counts are zero
    /// for branch profiles).
    pub valid: bool,
    /// Blocks in address order, then the blocks BOLT makes for conditional tail calls.
    pub blocks: Vec<BlockHeat>,
    /// Edges with their counts.
    pub edges: Vec<EdgeHeat>,
}

/// One block.
#[derive(Debug, Clone, Serialize)]
pub struct BlockHeat {
    /// Offset of the block in the function.
    pub offset: u32,
    /// End offset.
    pub end: u32,
    /// Execution count (branch profiles) or samples in the block.
    pub count: u64,
    /// A block BOLT adds to hold a conditional tail call.
    pub tail_call: bool,
}

/// One CFG edge.
#[derive(Debug, Clone, Serialize)]
pub struct EdgeHeat {
    /// Source block (index into [`CfgHeat::blocks`]).
    pub from: u32,
    /// Destination block.
    pub to: u32,
    /// Count (0 for basic-sample profiles, which have no edge counts).
    pub count: u64,
}

/// BOLT's profile-quality figures (fractions: 0.25 is 25%) and the line llvm-bolt prints.
#[derive(Debug, Clone, Serialize)]
pub struct QualityFigures {
    /// The figures (over the hottest functions with a valid profile, at most 1000).
    #[serde(flatten)]
    pub figures: quality::Quality,
    /// The line llvm-bolt 22 prints for the same profile.
    pub bolt_line: String,
}

/// Samples attributed to one inlined callee.
#[derive(Debug, Clone, Serialize)]
pub struct InlineHeat {
    /// The inlined function (its linkage name when DWARF has one).
    pub callee: String,
    /// The count of addresses whose inline frames include the callee (each address counts a
    /// callee once, however deep).
    pub count: u64,
    /// `count / total` of all attributed counts.
    pub share: f64,
    /// The functions it was inlined into, by count (at most 5).
    pub callers: Vec<(String, u64)>,
}

/// Stale share of the profile for a new build.
#[derive(Debug, Clone, Serialize)]
pub struct Staleness {
    /// The new binary, as given.
    pub new_binary: String,
    /// Sum of the counts of all profiled functions.
    pub total: u64,
    /// Count in functions whose hash changed.
    pub changed: u64,
    /// Count in functions the new binary does not have (by name).
    pub missing: u64,
    /// `(changed + missing) / total`.
    pub stale_share: f64,
    /// The stale functions, hottest first.
    pub functions: Vec<StaleFunction>,
    /// How the changed functions' profiled blocks match the new build's blocks, as llvm-bolt
    /// `--infer-stale-profile` matches them (its "inference found an exact match for ..." lines;
    /// `samples` are the blocks' YAML `exec` counts). Absent without a branch profile.
    pub blocks: Option<pcmap_perf2bolt::stale::MatchStats>,
}

/// One stale function.
#[derive(Debug, Clone, Serialize)]
pub struct StaleFunction {
    /// Name.
    pub name: String,
    /// Its count.
    pub count: u64,
    /// `changed` or `missing`.
    pub status: &'static str,
    /// For a changed function, how its profiled blocks match the new build's.
    pub blocks: Option<pcmap_perf2bolt::stale::MatchStats>,
}

fn share(n: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        n as f64 / total as f64
    }
}

/// How many functions get their CFG in the report by default.
pub const DEFAULT_CFG_FUNCTIONS: usize = 10;
/// CFGs with more blocks than this are listed, not drawn.
pub const MAX_DRAWN_BLOCKS: usize = 200;

fn functions_by_count(
    agg: &Aggregator<'_, '_>,
    counts: FxHashMap<u32, u64>,
    exec: &FxHashMap<u32, u64>,
) -> (Vec<(u32, FunctionHeat)>, u64) {
    let funcs = agg.image().functions();
    let bolted = agg.is_bat();
    let total: u64 = counts.values().fold(0u64, |a, &c| a.wrapping_add(c));
    let mut v: Vec<(u32, FunctionHeat)> = counts
        .into_iter()
        .map(|(f, count)| {
            let func = &funcs[f as usize];
            (
                f,
                FunctionHeat {
                    name: func.profile_name(bolted).to_string(),
                    address: func.address,
                    count,
                    share: share(count, total),
                    exec_count: exec.get(&f).copied().unwrap_or(0),
                    cfg: None,
                },
            )
        })
        .collect();
    v.sort_by(|a, b| {
        b.1.count
            .cmp(&a.1.count)
            .then_with(|| a.1.name.cmp(&b.1.name))
    });
    (v, total)
}

/// The report of a branch profile: function counts, block heat of the `cfg_functions` hottest
/// functions with a CFG, BOLT's quality figures. For a BOLTed binary (`agg` in BAT mode) the
/// blocks and figures are those of the input binary: they need `input`, the input binary's
/// aggregator (not in BAT mode), onto whose CFGs the profile is read as llvm-bolt reads the
/// `boltedcollection` fdata.
pub fn branch_report(
    agg: &Aggregator<'_, '_>,
    profile: &BranchProfile,
    input: Option<&Aggregator<'_, '_>>,
    binary: &str,
    profile_name: &str,
    cfg_functions: usize,
) -> Report {
    let mut counts: FxHashMap<u32, u64> = FxHashMap::default();
    let mut exec: FxHashMap<u32, u64> = FxHashMap::default();
    for (k, c) in &profile.records {
        let e = counts.entry(k.func).or_default();
        *e = e.wrapping_add(c.count);
        if let Loc::Func(t, 0) = k.to {
            let e = exec.entry(t).or_default();
            *e = e.wrapping_add(c.count);
        }
    }
    let (mut functions, total) = functions_by_count(agg, counts, &exec);
    // The CFGs the profile belongs to: the binary's, or the input binary's for a BOLTed one.
    let (quality, quality_note) = match (agg.is_bat(), input) {
        (false, _) => branch_cfgs(agg, agg, profile, &mut functions, cfg_functions),
        (true, Some(input)) => branch_cfgs(agg, input, profile, &mut functions, cfg_functions),
        (true, None) => (
            None,
            Some(
                "the profile was collected on a BOLT-optimized binary: its blocks are those of \
                 the input binary; give the input binary (`--input-binary`) for block heat and \
                 BOLT's figures"
                    .to_string(),
            ),
        ),
    };
    Report {
        binary: binary.to_string(),
        profile: profile_name.to_string(),
        kind: ProfileKind::Branches,
        bolted: agg.is_bat(),
        total,
        functions: functions.into_iter().map(|f| f.1).collect(),
        quality,
        quality_note,
        inline: None,
        stale: None,
    }
}

/// [`branch_report`]'s block heat and BOLT's figures, read on the CFGs of `cagg` (`agg`
/// itself, or the input binary's aggregator for a BOLTed one): the quality figures, or a note
/// saying why there are none. A function of its own, generic over both aggregators' lifetimes:
/// they borrow different binaries.
fn branch_cfgs(
    agg: &Aggregator<'_, '_>,
    cagg: &Aggregator<'_, '_>,
    profile: &BranchProfile,
    functions: &mut [(u32, FunctionHeat)],
    cfg_functions: usize,
) -> (Option<QualityFigures>, Option<String>) {
    let view = if agg.is_bat() {
        quality::read_bat_profile(cagg, agg.image(), profile)
    } else {
        quality::read_branch_profile(cagg, profile)
    };
    let q = quality::quality(cagg, &view);
    let note = q.is_none().then(|| {
        "no function has a profile llvm-bolt accepts (every record must fit the CFG)".to_string()
    });
    // For a BOLTed binary, report functions are the binary's; their CFGs are found by name in
    // the input binary. Otherwise they are the same functions.
    let by_name = agg.is_bat().then(|| {
        let mut by_name: FxHashMap<&str, u32> = FxHashMap::default();
        for (i, f) in cagg.image().functions().iter().enumerate() {
            for n in &f.names {
                by_name.entry(&**n).or_insert(i as u32);
            }
        }
        by_name
    });
    attach_branch_cfgs(
        cagg,
        &view,
        functions,
        cfg_functions,
        |f, heat| match &by_name {
            Some(by_name) => by_name.get(heat.name.as_str()).copied(),
            None => Some(f),
        },
    );
    (q.map(figures), note)
}

fn figures(q: quality::Quality) -> QualityFigures {
    QualityFigures {
        bolt_line: q.bolt_line(),
        figures: q,
    }
}

fn attach_branch_cfgs(
    agg: &Aggregator<'_, '_>,
    view: &ProfileView,
    functions: &mut [(u32, FunctionHeat)],
    limit: usize,
    index_in_view: impl Fn(u32, &FunctionHeat) -> Option<u32>,
) {
    let mut drawn = 0;
    for (f, heat) in functions.iter_mut() {
        if drawn >= limit {
            break;
        }
        let Some(vf) = index_in_view(*f, heat) else {
            continue;
        };
        let Some(fp) = view.function(vf) else {
            continue;
        };
        let cfg = agg.cfg(vf as usize);
        let blocks = fp
            .blocks
            .iter()
            .map(|b| {
                let end = b.cfg_block.map_or(b.offset, |c| cfg.blocks[c as usize].end);
                BlockHeat {
                    offset: b.offset,
                    end,
                    count: b.count,
                    tail_call: b.cfg_block.is_none(),
                }
            })
            .collect();
        let edges = fp
            .blocks
            .iter()
            .enumerate()
            .flat_map(|(i, b)| {
                b.succs.iter().map(move |&(s, c)| EdgeHeat {
                    from: i as u32,
                    to: s,
                    count: c,
                })
            })
            .collect();
        heat.cfg = Some(CfgHeat {
            valid: fp.valid,
            blocks,
            edges,
        });
        drawn += 1;
    }
}

/// The report of a basic-sample profile: function samples, samples per block of the
/// `cfg_functions` hottest functions with a CFG (no edge counts; not for BOLTed binaries).
pub fn sample_report(
    agg: &Aggregator<'_, '_>,
    samples: &SampleProfile,
    binary: &str,
    profile_name: &str,
    cfg_functions: usize,
) -> Report {
    let mut counts: FxHashMap<u32, u64> = FxHashMap::default();
    for (&(f, _), &c) in &samples.samples {
        let e = counts.entry(f).or_default();
        *e = e.wrapping_add(c);
    }
    let (mut functions, total) = functions_by_count(agg, counts, &FxHashMap::default());
    if !agg.is_bat() {
        let mut drawn = 0;
        let funcs = agg.image().functions();
        for (f, heat) in functions.iter_mut() {
            if drawn >= cfg_functions {
                break;
            }
            if funcs[*f as usize].kind != FunctionKind::Regular {
                continue;
            }
            let cfg = agg.cfg(*f as usize);
            if !cfg.simple || cfg.blocks.is_empty() {
                continue;
            }
            let mut blocks: Vec<BlockHeat> = cfg
                .blocks
                .iter()
                .map(|b| BlockHeat {
                    offset: b.offset,
                    end: b.end,
                    count: 0,
                    tail_call: false,
                })
                .collect();
            for (&(sf, off), &c) in &samples.samples {
                if sf == *f
                    && let Some(b) = cfg.block_containing(off)
                {
                    blocks[b].count = blocks[b].count.wrapping_add(c);
                }
            }
            let edges = cfg
                .blocks
                .iter()
                .enumerate()
                .flat_map(|(i, b)| {
                    b.succs.iter().map(move |&s| EdgeHeat {
                        from: i as u32,
                        to: s,
                        count: 0,
                    })
                })
                .collect();
            heat.cfg = Some(CfgHeat {
                valid: true,
                blocks,
                edges,
            });
            drawn += 1;
        }
    }
    Report {
        binary: binary.to_string(),
        profile: profile_name.to_string(),
        kind: ProfileKind::Samples,
        bolted: agg.is_bat(),
        total,
        functions: functions.into_iter().map(|f| f.1).collect(),
        quality: None,
        quality_note: Some(
            "BOLT's quality figures need branch records (a basic-sample profile has no edges)"
                .to_string(),
        ),
        inline: None,
        stale: None,
    }
}

/// The addresses a branch profile counts, with their counts: the source of each record (the
/// branch instruction, or the last instruction before a fall-through), in the binary's
/// addresses. Empty for BOLTed binaries (records hold input offsets).
pub fn branch_addresses(agg: &Aggregator<'_, '_>, profile: &BranchProfile) -> Vec<(u64, u64)> {
    if agg.is_bat() {
        return Vec::new();
    }
    let funcs = agg.image().functions();
    profile
        .records
        .iter()
        .filter(|(k, _)| !k.external_entry)
        .map(|(k, c)| (funcs[k.func as usize].address + k.from, c.count))
        .collect()
}

/// The sample addresses of a basic-sample profile with their counts (empty for BOLTed binaries).
pub fn sample_addresses(agg: &Aggregator<'_, '_>, samples: &SampleProfile) -> Vec<(u64, u64)> {
    if agg.is_bat() {
        return Vec::new();
    }
    let funcs = agg.image().functions();
    samples
        .samples
        .iter()
        .map(|(&(f, off), &c)| (funcs[f as usize].address + off, c))
        .collect()
}

/// Counts attributed to inlined callees: for each address, the DWARF inline frames at it
/// (`pcmap-inline`'s symbolizer, llvm-symbolizer's frames); every frame but the outermost is an
/// inlined call, and its callee gets the address's count (once per address). Hottest first,
/// ties by name.
pub fn inline_hotness(
    symbolizer: &pcmap_inline::symbolize::Symbolizer<'_>,
    addresses: &[(u64, u64)],
) -> Result<Vec<InlineHeat>> {
    // Each distinct address is symbolized once.
    let mut merged: FxHashMap<u64, u64> = FxHashMap::default();
    for &(a, c) in addresses {
        let e = merged.entry(a).or_default();
        *e = e.wrapping_add(c);
    }
    let mut merged: Vec<(u64, u64)> = merged.into_iter().collect();
    merged.sort_unstable();
    let mut callees: FxHashMap<String, (u64, FxHashMap<String, u64>)> = FxHashMap::default();
    let mut total = 0u64;
    for (a, c) in merged {
        let frames = symbolizer.frames(a, true)?;
        total = total.wrapping_add(c);
        let mut seen: Vec<&str> = Vec::new();
        for (i, f) in frames.iter().enumerate() {
            if !f.inlined {
                continue;
            }
            let name = f.function.as_deref().unwrap_or("??");
            if seen.contains(&name) {
                continue;
            }
            seen.push(name);
            let caller = frames
                .get(i + 1)
                .and_then(|p| p.function.as_deref())
                .unwrap_or("??");
            let e = callees.entry(name.to_string()).or_default();
            e.0 = e.0.wrapping_add(c);
            let k = e.1.entry(caller.to_string()).or_default();
            *k = k.wrapping_add(c);
        }
    }
    let mut out: Vec<InlineHeat> = callees
        .into_iter()
        .map(|(callee, (count, callers))| {
            let mut callers: Vec<(String, u64)> = callers.into_iter().collect();
            callers.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            callers.truncate(5);
            InlineHeat {
                callee,
                count,
                share: share(count, total),
                callers,
            }
        })
        .collect();
    out.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.callee.cmp(&b.callee)));
    Ok(out)
}

/// The stale share of `report`'s profile for a new build, as llvm-bolt 22 `-report-stale`
/// finds it: each profiled function of `old` is looked up by name in `new`; its profile is stale
/// when `new` has no such function, or when `new`'s function is one llvm-bolt optimizes and its
/// hash there differs from the old build's (`pcmap_perf2bolt::block_hash::function_hash`: the
/// `hash` of perf2bolt's YAML profiles for the old build, llvm-bolt's reading view for the new
/// one, [`pcmap_perf2bolt::block_hash::Context::llvm_bolt_view`]). Both
/// aggregators must keep decoded instructions ([`Aggregator::with_hashing`]). BOLTed binaries:
/// not supported (returns `None`).
///
/// With `old_yaml`, the YAML profile of the same aggregation
/// ([`pcmap_perf2bolt::yaml::branch_profile`]), the profiled blocks of every function llvm-bolt
/// would find stale in the new build (same name; other function hash or block count; a CFG in
/// the new build) are matched to the new blocks ([`pcmap_perf2bolt::stale`]).
pub fn staleness(
    report: &Report,
    old: &Aggregator<'_, '_>,
    new: &Aggregator<'_, '_>,
    new_binary: &str,
    old_yaml: Option<&pcmap_profile::yaml::Profile>,
) -> Option<Staleness> {
    use pcmap_perf2bolt::{block_hash, stale};
    if old.is_bat() {
        return None;
    }
    let old_funcs = old.image().functions();
    let new_funcs = new.image().functions();
    let mut old_by_name: FxHashMap<&str, usize> = FxHashMap::default();
    for (i, f) in old_funcs.iter().enumerate() {
        old_by_name.entry(f.name()).or_insert(i);
    }
    let mut new_by_name: FxHashMap<&str, usize> = FxHashMap::default();
    for (i, f) in new_funcs.iter().enumerate() {
        for n in &f.names {
            new_by_name.entry(&**n).or_insert(i);
        }
    }
    let old_ctx = block_hash::Context::new(old.image());
    // The new build hashed as llvm-bolt does when it reads the profile.
    let new_ctx = block_hash::Context::new(new.image()).llvm_bolt_view();
    let hash = |ctx: &block_hash::Context<'_, '_>, agg: &Aggregator<'_, '_>, i: usize| {
        let f = &agg.image().functions()[i];
        if f.kind != FunctionKind::Regular {
            return None;
        }
        let cfg = agg.cfg(i);
        cfg.simple.then(|| block_hash::function_hash(ctx, f, cfg).0)
    };
    // Block matching, function by function of the YAML profile.
    let mut matched: FxHashMap<&str, stale::MatchStats> = FxHashMap::default();
    let blocks = old_yaml.map(|profile| {
        let names_by_id: std::collections::HashMap<u32, &str> = profile
            .functions
            .iter()
            .map(|f| (f.id, f.name.as_str()))
            .collect();
        let mut total = stale::MatchStats::default();
        for yf in &profile.functions {
            let Some(&ni) = new_by_name.get(yf.name.as_str()) else {
                continue;
            };
            let f = &new_funcs[ni];
            let cfg = new.cfg(ni);
            if f.kind != FunctionKind::Regular || !cfg.simple || cfg.blocks.is_empty() {
                continue;
            }
            let (hash, block_hashes, _) = block_hash::hashes(&new_ctx, f, cfg);
            if hash == yf.hash && yf.num_basic_blocks as usize == cfg.blocks.len() {
                continue;
            }
            let new_calls = stale::binary_call_hashes(new.image(), f, cfg);
            let profile_calls: Vec<u64> = yf
                .blocks
                .iter()
                .map(|b| stale::profile_call_hash(b, &names_by_id))
                .collect();
            let m = stale::match_function(yf, &profile_calls, &block_hashes, &new_calls);
            total.merge(&m);
            matched.insert(yf.name.as_str(), m);
        }
        total
    });
    let mut out = Staleness {
        new_binary: new_binary.to_string(),
        total: 0,
        changed: 0,
        missing: 0,
        stale_share: 0.0,
        functions: Vec::new(),
        blocks,
    };
    for fh in &report.functions {
        out.total = out.total.wrapping_add(fh.count);
        let Some(&oi) = old_by_name.get(fh.name.as_str()) else {
            continue;
        };
        let status = match new_by_name.get(fh.name.as_str()) {
            None => Some("missing"),
            // llvm-bolt reports a profile stale only for a function it can optimize (simple
            // outside strict mode) whose hash changed.
            Some(&ni) => {
                let simple = new.cfg(ni).simple_outside_strict_mode();
                match (hash(&old_ctx, old, oi), hash(&new_ctx, new, ni)) {
                    (Some(a), Some(b)) if simple && a != b => Some("changed"),
                    _ => None,
                }
            }
        };
        match status {
            Some("missing") => out.missing = out.missing.wrapping_add(fh.count),
            Some(_) => out.changed = out.changed.wrapping_add(fh.count),
            None => continue,
        }
        out.functions.push(StaleFunction {
            name: fh.name.clone(),
            count: fh.count,
            status: status.unwrap_or("changed"),
            blocks: matched.get(fh.name.as_str()).copied(),
        });
    }
    out.stale_share = share(out.changed.wrapping_add(out.missing), out.total);
    Some(out)
}
