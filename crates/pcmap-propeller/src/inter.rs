//! Whole-program layout: the figures of a layout (ext-TSP score, estimated taken branches) and
//! inter-function reordering, Propeller's `inter_function_reordering`.
//!
//! Every block of the laid-out functions is a node of one graph whose edges are the
//! intra-function edges and the calls (calling block -> callee entry) between functions; calls
//! score as jumps only (they are taken however close the code is). Returns are not used: BOLT's
//! profiles do not record them, and the layout must be the same whichever format the profile
//! came in.
//!
//! Each function's one-cluster order (ext-TSP, [`crate::layout`]) is cut into *pieces* wherever
//! two consecutive blocks are not joined by a profiled fall-through: cutting there loses no
//! fall-through, so the intra-function branches taken in the result are at most those of one
//! cluster per function. The greedy ext-TSP merge ([`crate::ext_tsp::merge_chains`], with chain
//! splitting) then runs over the pieces of all functions at once, so a hot callee can land
//! between two hot pieces of its caller. Each resulting chain is cut into runs of one function
//! — a run holding a function's entry block starts with it — and every run becomes a cluster:
//! the entry run is the function itself, the others `name.__part.N`, numbered in link order.
//! Chains are ordered with call-chain clustering ([`crate::function_order::order_functions`]
//! over chains instead of functions).
//!
//! Both candidate layouts — one cluster per function in function order, and several clusters —
//! are scored with the same objective over the whole program (clusters are sections: control
//! never falls from one into the next); the several-cluster layout is kept only when it scores
//! higher, so turning the option on never makes the modelled layout worse.

use rustc_hash::FxHashMap;

use crate::cfg::{BlockCall, CallEdge, CfgBlock, FunctionCfg, ProgramCfg};
use crate::ext_tsp;
use crate::function_order;
use crate::generate::{LayoutScore, PropellerOptions, PropellerProfile};

/// Largest chain of pieces (bytes of hot code) the whole-program merge builds: a jump scores
/// nothing beyond 1 KiB, so longer chains gain little, and the cap keeps the merge near-linear
/// in the program size. Chains are then placed by call-chain clustering (up to
/// [`crate::function_order::FunctionOrderOptions::max_cluster_size`]).
const MAX_CHAIN_BYTES: u64 = 64 << 10;

/// All blocks of the laid-out functions numbered as one graph.
struct Graph {
    /// First node of each laid-out function (position in `profile.functions`).
    base: Vec<usize>,
    sizes: Vec<u64>,
    counts: Vec<u64>,
    addresses: Vec<u64>,
    /// Node -> position of its function in `profile.functions`.
    owner: Vec<usize>,
    /// Intra-function edges (node numbers), merged per pair.
    edges: Vec<(usize, usize, u64)>,
    /// Calls between laid-out functions (node numbers), scored as jumps.
    jumps: Vec<(usize, usize, u64)>,
}

impl Graph {
    fn new(program: &ProgramCfg, block_calls: &[BlockCall], profile: &PropellerProfile) -> Self {
        let mut g = Graph {
            base: Vec::with_capacity(profile.functions.len()),
            sizes: Vec::new(),
            counts: Vec::new(),
            addresses: Vec::new(),
            owner: Vec::new(),
            edges: Vec::new(),
            jumps: Vec::new(),
        };
        let mut position: FxHashMap<usize, usize> = FxHashMap::default();
        for (k, lf) in profile.functions.iter().enumerate() {
            let f = &program.functions[lf.function];
            let base = g.sizes.len();
            g.base.push(base);
            position.insert(lf.function, k);
            for b in &f.blocks {
                g.sizes.push(b.size);
                g.counts.push(b.count);
                g.addresses.push(b.address);
                g.owner.push(k);
            }
            g.edges.extend(
                f.merged_edges()
                    .into_iter()
                    .map(|(s, d, c)| (base + s, base + d, c)),
            );
        }
        for c in block_calls {
            let (Some(&a), Some(&b)) =
                (position.get(&c.src_function), position.get(&c.dst_function))
            else {
                continue;
            };
            let nb = |k: usize| {
                program.functions[profile.functions[k].function]
                    .blocks
                    .len()
            };
            if c.src_block >= nb(a) || c.dst_block >= nb(b) {
                continue;
            }
            g.jumps
                .push((g.base[a] + c.src_block, g.base[b] + c.dst_block, c.count));
        }
        g
    }

    fn score(
        &self,
        params: &ext_tsp::ExtTspParams,
        addr: &[Option<u64>],
        clusters: Vec<(usize, usize)>,
    ) -> LayoutScore {
        LayoutScore {
            score: ext_tsp::score_placed(params, addr, &self.sizes, &self.edges, &self.jumps),
            taken_branches: ext_tsp::taken_branches(addr, &self.sizes, &self.edges),
            clusters,
        }
    }
}

/// Functions per cluster count.
fn histogram(counts: impl Iterator<Item = usize>) -> Vec<(usize, usize)> {
    let mut m: std::collections::BTreeMap<usize, usize> = std::collections::BTreeMap::new();
    for c in counts {
        *m.entry(c).or_default() += 1;
    }
    m.into_iter().collect()
}

/// Fill in `profile.summary` and, with `inter_function_reordering`, replace the one-cluster
/// layouts by the several-cluster layout when it scores higher.
pub(crate) fn lay_out_together(
    program: &ProgramCfg,
    block_calls: &[BlockCall],
    opts: &PropellerOptions,
    profile: &mut PropellerProfile,
) {
    if profile.functions.is_empty() {
        return;
    }
    let params = &opts.layout.ext_tsp;
    let g = Graph::new(program, block_calls, profile);
    let n = g.sizes.len();
    let before: Vec<Option<u64>> = g.addresses.iter().map(|&a| Some(a)).collect();
    profile.summary.before = g.score(
        params,
        &before,
        histogram(profile.functions.iter().map(|_| 1)),
    );
    // One cluster per function, in function order; the cold parts after all hot code.
    let mut one: Vec<Vec<usize>> = Vec::new();
    for (k, lf) in profile.functions.iter().enumerate() {
        for c in &lf.layout.clusters {
            one.push(c.iter().map(|&b| g.base[k] + b).collect());
        }
    }
    let colds: Vec<Vec<usize>> = profile
        .functions
        .iter()
        .enumerate()
        .filter(|(_, lf)| !lf.layout.cold.is_empty())
        .map(|(k, lf)| lf.layout.cold.iter().map(|&b| g.base[k] + b).collect())
        .collect();
    let with_cold = |hot: &[Vec<usize>]| -> Vec<Option<u64>> {
        let all: Vec<Vec<usize>> = hot.iter().chain(colds.iter()).cloned().collect();
        ext_tsp::cluster_addresses(n, &g.sizes, &all)
    };
    profile.summary.one_cluster = g.score(
        params,
        &with_cold(&one),
        histogram(profile.functions.iter().map(|lf| lf.layout.clusters.len())),
    );
    if !opts.inter_function_reordering || !opts.layout.reorder_blocks {
        return;
    }

    // Pieces: each function's one-cluster order cut wherever consecutive blocks are not joined
    // by a profiled fall-through. Cutting there costs no fall-through, so whatever order the
    // pieces end up in, the intra-function edges taken as branches are at most those of the
    // one-cluster layout.
    let mut has_edge: rustc_hash::FxHashSet<(usize, usize)> = rustc_hash::FxHashSet::default();
    for &(s, d, c) in &g.edges {
        if c > 0 {
            has_edge.insert((s, d));
        }
    }
    let mut pieces: Vec<Vec<usize>> = Vec::new(); // node numbers
    for c in &one {
        let mut cur: Vec<usize> = Vec::new();
        for &v in c {
            if let Some(&last) = cur.last()
                && !has_edge.contains(&(last, v))
            {
                pieces.push(std::mem::take(&mut cur));
            }
            cur.push(v);
        }
        if !cur.is_empty() {
            pieces.push(cur);
        }
    }
    let mut piece_of = vec![usize::MAX; n];
    for (p, c) in pieces.iter().enumerate() {
        for &v in c {
            piece_of[v] = p;
        }
    }
    let sizes: Vec<u64> = pieces
        .iter()
        .map(|c| c.iter().map(|&v| g.sizes[v]).sum())
        .collect();
    let piece_counts: Vec<u64> = pieces
        .iter()
        .map(|c| c.iter().fold(0u64, |a, &v| a.saturating_add(g.counts[v])))
        .collect();
    // Edges between pieces: a fall-through only from the last block of one to the first of the
    // other; anything else is a jump.
    let (mut p_edges, mut p_jumps) = (Vec::new(), Vec::new());
    for &(s, d, c) in &g.edges {
        let (ps, pd) = (piece_of[s], piece_of[d]);
        if ps == usize::MAX || pd == usize::MAX || ps == pd {
            continue;
        }
        if pieces[ps].last() == Some(&s) && pieces[pd].first() == Some(&d) {
            p_edges.push((ps, pd, c));
        } else {
            p_jumps.push((ps, pd, c));
        }
    }
    let sub = |list: &[(usize, usize, u64)]| -> Vec<(usize, usize, u64)> {
        list.iter()
            .filter(|&&(s, d, _)| piece_of[s] != usize::MAX && piece_of[d] != usize::MAX)
            .map(|&(s, d, c)| (piece_of[s], piece_of[d], c))
            .collect()
    };
    p_jumps.extend(sub(&g.jumps));
    let capped = ext_tsp::ExtTspParams {
        max_chain_bytes: params.max_chain_bytes.min(MAX_CHAIN_BYTES),
        ..*params
    };
    let chains = ext_tsp::merge_chains(&capped, &sizes, &p_edges, &p_jumps, None);

    // Order the chains with call-chain clustering: each chain is a "function" of its blocks.
    let mut chain_of = vec![usize::MAX; pieces.len()];
    for (ci, c) in chains.iter().enumerate() {
        for &v in c {
            chain_of[v] = ci;
        }
    }
    let mut chain_calls: FxHashMap<(usize, usize), u64> = FxHashMap::default();
    for (s, d, c) in sub(&g.jumps) {
        let (a, b) = (chain_of[s], chain_of[d]);
        if a != b {
            let e = chain_calls.entry((a, b)).or_default();
            *e = e.saturating_add(c);
        }
    }
    let mut chain_calls: Vec<((usize, usize), u64)> = chain_calls.into_iter().collect();
    chain_calls.sort_unstable();
    let as_functions = ProgramCfg {
        functions: chains
            .iter()
            .map(|c| FunctionCfg {
                blocks: c
                    .iter()
                    .map(|&p| CfgBlock {
                        bb_id: 0,
                        address: 0,
                        size: sizes[p],
                        count: piece_counts[p],
                        hash: None,
                    })
                    .collect(),
                ..FunctionCfg::default()
            })
            .collect(),
        calls: chain_calls
            .into_iter()
            .map(|((caller, callee), count)| CallEdge {
                caller,
                callee,
                count,
            })
            .collect(),
    };
    let all: Vec<usize> = (0..chains.len()).collect();
    let chain_order = function_order::order_functions(&as_functions, &all, &opts.order);

    // Cut the chains into runs of one function; a function's entry starts its run.
    let mut runs: Vec<(usize, Vec<usize>)> = Vec::new(); // (function position, local blocks)
    for &ci in &chain_order {
        for &node in chains[ci].iter().flat_map(|&p| pieces[p].iter()) {
            let k = g.owner[node];
            let b = node - g.base[k];
            match runs.last_mut() {
                Some((rk, blocks)) if *rk == k && b != 0 => blocks.push(b),
                _ => runs.push((k, vec![b])),
            }
        }
    }
    let nf = profile.functions.len();
    let mut clusters: Vec<Vec<Vec<usize>>> = vec![Vec::new(); nf];
    let mut placement: Vec<(usize, usize)> = Vec::with_capacity(runs.len());
    // Cluster 0 is the run with the entry block; the others are numbered in link order.
    let mut number: Vec<usize> = vec![0; runs.len()];
    let mut next = vec![1usize; nf];
    for (i, (k, blocks)) in runs.iter().enumerate() {
        if blocks[0] == 0 {
            number[i] = 0;
        } else {
            number[i] = next[*k];
            next[*k] += 1;
        }
    }
    for (k, c) in clusters.iter_mut().enumerate() {
        c.resize(next[k], Vec::new());
    }
    for (i, (k, blocks)) in runs.iter().enumerate() {
        clusters[*k][number[i]] = blocks.clone();
        placement.push((*k, number[i]));
    }
    if clusters
        .iter()
        .any(|c| c.is_empty() || c[0].first() != Some(&0))
    {
        return; // every function's entry block is hot, so this cannot happen; keep one cluster
    }
    let hot_runs: Vec<Vec<usize>> = runs
        .iter()
        .map(|(k, blocks)| blocks.iter().map(|&b| g.base[*k] + b).collect())
        .collect();
    let addr = with_cold(&hot_runs);
    let several = g.score(params, &addr, histogram(clusters.iter().map(Vec::len)));
    let better = several.score > profile.summary.one_cluster.score + 1e-9;
    profile.summary.several_clusters = Some(several);
    if !better {
        return;
    }
    profile.summary.chose_several = true;
    // Per-function scores at the new addresses (intra-function edges only).
    for (k, lf) in profile.functions.iter_mut().enumerate() {
        let f = &program.functions[lf.function];
        let base = g.base[k];
        let mine: Vec<Option<u64>> = addr[base..base + f.blocks.len()].to_vec();
        let sizes: Vec<u64> = f.blocks.iter().map(|b| b.size).collect();
        lf.layout.score_after =
            ext_tsp::score_placed(params, &mine, &sizes, &f.merged_edges(), &[]);
        lf.layout.clusters = std::mem::take(&mut clusters[k]);
    }
    // Functions in the order of their entry clusters; placement follows the new positions.
    let mut first_at: Vec<usize> = vec![usize::MAX; nf];
    for (i, &(k, c)) in placement.iter().enumerate() {
        if c == 0 {
            first_at[k] = i;
        }
    }
    let mut perm: Vec<usize> = (0..nf).collect();
    perm.sort_by_key(|&k| first_at[k]);
    let mut new_pos = vec![0usize; nf];
    for (p, &k) in perm.iter().enumerate() {
        new_pos[k] = p;
    }
    let mut old: Vec<Option<crate::generate::LaidOutFunction>> =
        std::mem::take(&mut profile.functions)
            .into_iter()
            .map(Some)
            .collect();
    profile.functions = perm.iter().filter_map(|&k| old[k].take()).collect();
    profile.placement = placement
        .into_iter()
        .map(|(k, c)| (new_pos[k], c))
        .collect();
}
