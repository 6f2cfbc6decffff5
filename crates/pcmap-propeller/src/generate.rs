//! From a [`ProgramCfg`] to the two output profiles: lays out every hot function (in parallel),
//! orders the functions, and renders the cc profile and the linker symbol order.

use rayon::prelude::*;

use crate::cc_profile::{CcFunction, CcProfile, CfgNode};
use crate::cfg::{BlockCall, FunctionIndex, ProgramCfg};
use crate::function_order::{self, FunctionOrderOptions};
use crate::layout::{self, FunctionLayout, LayoutOptions};
use crate::ld_profile;

/// Options of the whole generation.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct PropellerOptions {
    /// Intra-function layout options.
    pub layout: LayoutOptions,
    /// Function ordering options.
    pub order: FunctionOrderOptions,
    /// Also write a `g` (CFG with counts) line per function.
    pub emit_cfg: bool,
    /// Also write an `h` (block hashes) line per function whose map carries hashes.
    pub emit_hashes: bool,
    /// Propeller's `inter_function_reordering`: lay out the hot code of all functions together
    /// (ext-TSP over the pieces of each function's hot order that no fall-through joins, with the
    /// calls between functions; see [`crate::inter`]), so a function's hot code may end up in
    /// several clusters (`name.__part.N`) that the linker places next to the functions they call. Needs the block-level calls
    /// ([`generate_with_calls`]); kept only when it scores better than one cluster per function.
    pub inter_function_reordering: bool,
}

/// Why a hot function was left out of the profile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SkipReason {
    /// Two blocks share one ID (path cloning): clusters could not name them.
    DuplicateBlockIds,
    /// The name cannot be written on an `f` line (contains whitespace).
    UnwritableName,
    /// Another hot function has the same name (e.g. `static` functions of different files built
    /// without `-funique-internal-linkage-names`): clang rejects a second `f` line for a name,
    /// and the profile could not say which function it meant.
    AmbiguousName,
}

/// The layout of one function, in link order.
#[derive(Clone, Debug, PartialEq)]
pub struct LaidOutFunction {
    /// Index into [`ProgramCfg::functions`].
    pub function: FunctionIndex,
    /// Its layout.
    pub layout: FunctionLayout,
}

/// The result of [`generate`].
#[derive(Clone, Debug, PartialEq, Default)]
pub struct PropellerProfile {
    /// Hot functions in the order the linker should place them (by their first cluster).
    pub functions: Vec<LaidOutFunction>,
    /// Hot functions left out, with the reason.
    pub skipped: Vec<(FunctionIndex, SkipReason)>,
    /// With several clusters per function: the order of the clusters for the linker, as
    /// (position in [`PropellerProfile::functions`], cluster number). Empty when every function
    /// is one cluster (the clusters then follow [`PropellerProfile::functions`]).
    pub placement: Vec<(usize, usize)>,
    /// Whole-program figures of the original layout and of the candidate layouts.
    pub summary: LayoutSummary,
}

/// The ext-TSP score and the estimated taken branches of a whole-program layout.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct LayoutScore {
    /// ext-TSP score over intra-function edges (branches and fall-throughs) and the calls
    /// between the laid-out functions (scored as jumps).
    pub score: f64,
    /// Executions of intra-function edges that are not fall-throughs in the layout.
    pub taken_branches: u64,
    /// Number of functions per cluster count: `(clusters, functions)`, by cluster count.
    pub clusters: Vec<(usize, usize)>,
}

/// [`LayoutScore`]s of the profiled functions before and after.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct LayoutSummary {
    /// The binary the profile was recorded on (its blocks at their addresses).
    pub before: LayoutScore,
    /// One hot cluster per function, functions in call-chain-clustered order.
    pub one_cluster: LayoutScore,
    /// Inter-function reordering (several clusters per function), when it was tried.
    pub several_clusters: Option<LayoutScore>,
    /// Whether the profile uses the several-cluster layout.
    pub chose_several: bool,
}

fn skip_reason(program: &ProgramCfg, f: FunctionIndex) -> Option<SkipReason> {
    let cfg = &program.functions[f];
    if std::iter::once(&cfg.name)
        .chain(cfg.aliases.iter())
        .any(|n| n.is_empty() || n.chars().any(char::is_whitespace))
    {
        return Some(SkipReason::UnwritableName);
    }
    let mut ids: Vec<u32> = cfg.blocks.iter().map(|b| b.bb_id).collect();
    ids.sort_unstable();
    if ids.windows(2).any(|w| w[0] == w[1]) {
        return Some(SkipReason::DuplicateBlockIds);
    }
    None
}

/// Lay out every hot function and order them (one cluster per function: without block-level
/// calls, inter-function reordering has nothing to work with).
pub fn generate(program: &ProgramCfg, opts: &PropellerOptions) -> PropellerProfile {
    generate_with_calls(program, &[], opts)
}

/// [`generate`] with the calls between blocks (from
/// [`crate::builder::CfgBuilder::finish_with_calls`]), which inter-function reordering uses.
pub fn generate_with_calls(
    program: &ProgramCfg,
    block_calls: &[BlockCall],
    opts: &PropellerOptions,
) -> PropellerProfile {
    let results: Vec<(FunctionIndex, Result<FunctionLayout, SkipReason>)> = program
        .functions
        .par_iter()
        .enumerate()
        .filter(|(_, f)| f.is_hot())
        .filter_map(|(i, f)| match skip_reason(program, i) {
            Some(reason) => Some((i, Err(reason))),
            // `None` only for functions without executed blocks, filtered out above.
            None => layout::layout_function(f, &opts.layout).map(|l| (i, Ok(l))),
        })
        .collect();
    // Names (and aliases) used by more than one hot function.
    let mut seen: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for (i, _) in &results {
        let f = &program.functions[*i];
        let mut names: Vec<&str> = std::iter::once(f.name.as_str())
            .chain(f.aliases.iter().map(String::as_str))
            .collect();
        names.sort_unstable();
        names.dedup();
        for n in names {
            *seen.entry(n).or_default() += 1;
        }
    }
    let ambiguous = |i: FunctionIndex| {
        let f = &program.functions[i];
        std::iter::once(&f.name)
            .chain(f.aliases.iter())
            .any(|n| seen.get(n.as_str()).copied().unwrap_or(0) > 1)
    };
    let mut layouts: Vec<Option<FunctionLayout>> = vec![None; program.functions.len()];
    let mut skipped = Vec::new();
    let mut hot = Vec::new();
    for (i, r) in results {
        let r = if r.is_ok() && ambiguous(i) {
            Err(SkipReason::AmbiguousName)
        } else {
            r
        };
        match r {
            Ok(l) => {
                layouts[i] = Some(l);
                hot.push(i);
            }
            Err(reason) => skipped.push((i, reason)),
        }
    }
    let order = function_order::order_functions(program, &hot, &opts.order);
    let functions = order
        .into_iter()
        .filter_map(|f| {
            layouts[f].take().map(|layout| LaidOutFunction {
                function: f,
                layout,
            })
        })
        .collect();
    let mut profile = PropellerProfile {
        functions,
        skipped,
        placement: Vec::new(),
        summary: LayoutSummary::default(),
    };
    crate::inter::lay_out_together(program, block_calls, opts, &mut profile);
    profile
}

impl PropellerProfile {
    /// The cc profile: one `f` entry per laid-out function, in link order, with optional `g`
    /// (CFG with counts) and `h` (block hashes, only when the map has a hash for every block) lines.
    pub fn cc_profile(&self, program: &ProgramCfg, emit_cfg: bool, emit_hashes: bool) -> CcProfile {
        let functions = self
            .functions
            .iter()
            .map(|lf| {
                let cfg = &program.functions[lf.function];
                let mut names = vec![cfg.name.clone()];
                names.extend(cfg.aliases.iter().cloned());
                let clusters = lf
                    .layout
                    .clusters
                    .iter()
                    .map(|c| c.iter().map(|&b| cfg.blocks[b].bb_id).collect())
                    .collect();
                let cfg_nodes = if emit_cfg {
                    let edges = cfg.merged_edges();
                    cfg.blocks
                        .iter()
                        .enumerate()
                        .filter(|(_, b)| b.count > 0)
                        .map(|(i, b)| CfgNode {
                            bb_id: b.bb_id,
                            count: b.count,
                            successors: edges
                                .iter()
                                .filter(|e| e.0 == i)
                                .map(|&(_, d, c)| (cfg.blocks[d].bb_id, c))
                                .collect(),
                        })
                        .collect()
                } else {
                    Vec::new()
                };
                let hashes = if emit_hashes && cfg.blocks.iter().all(|b| b.hash.is_some()) {
                    cfg.blocks
                        .iter()
                        .map(|b| (b.bb_id, b.hash.unwrap_or_default()))
                        .collect()
                } else {
                    Vec::new()
                };
                CcFunction {
                    names,
                    clusters,
                    cfg: cfg_nodes,
                    hashes,
                }
            })
            .collect();
        CcProfile { functions }
    }

    /// The linker symbol order: every hot cluster of every function in link order, then the
    /// cold parts in the same function order (cold code is packed together, away from hot code).
    pub fn ld_symbols(&self, program: &ProgramCfg) -> Vec<String> {
        let mut out = Vec::new();
        for &(k, c) in &self.placement {
            let name = &program.functions[self.functions[k].function].name;
            out.push(ld_profile::cluster_symbol(name, c));
        }
        for lf in self.functions.iter().filter(|_| self.placement.is_empty()) {
            let name = &program.functions[lf.function].name;
            for (i, _) in lf.layout.clusters.iter().enumerate() {
                out.push(ld_profile::cluster_symbol(name, i));
            }
        }
        for lf in &self.functions {
            if !lf.layout.cold.is_empty() {
                out.push(ld_profile::cold_symbol(
                    &program.functions[lf.function].name,
                ));
            }
        }
        out
    }
}
