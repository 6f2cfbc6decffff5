//! Function ordering for the linker: call-chain clustering (C3), after G. Ottoni and B. Maher,
//! "Optimizing Function Placement for Large-Scale Data-Center Applications", CGO 2017 — the
//! algorithm behind HHVM's hfsort, BOLT's `-reorder-functions=hfsort` and Propeller's
//! `call_chain_clustering`.
//!
//! * Every hot function starts as a cluster of its own. Its *weight* is the number of bytes it
//!   executed (`Σ count × size` over its blocks, a proxy for the time spent in it) and its *size*
//!   is the size of its hot part (cold parts are placed far away anyway).
//! * Functions are visited by decreasing weight. For each, the caller with the largest call count
//!   is looked up; unless the two are already in the same cluster, the merged cluster would exceed
//!   `max_cluster_size`, or the caller's cluster is much sparser than the callee's (density below
//!   1/8 of it, hfsort's rule against dragging a hot callee into a cold caller's cluster), the
//!   callee's cluster is appended to the caller's: callees end up right after their hottest caller.
//! * Finally the clusters are sorted by decreasing density (weight per byte), ties by the first
//!   function's index, so the hottest code is packed at the front of the text section.

use crate::cfg::{FunctionIndex, ProgramCfg};

/// Options of the function ordering.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FunctionOrderOptions {
    /// Largest cluster (bytes of hot code) that a merge may produce. Propeller's default
    /// `cluster_merge_size_threshold` is 2 MiB (a huge page).
    pub max_cluster_size: u64,
    /// Merge along calls at all (otherwise functions are only sorted by density).
    pub call_chain_clustering: bool,
}

impl Default for FunctionOrderOptions {
    fn default() -> Self {
        FunctionOrderOptions {
            max_cluster_size: 2 << 20,
            call_chain_clustering: true,
        }
    }
}

/// Order the functions listed in `hot` (indices into `program.functions`). Calls touching
/// other functions are ignored. Returns a permutation of `hot`.
pub fn order_functions(
    program: &ProgramCfg,
    hot: &[FunctionIndex],
    opts: &FunctionOrderOptions,
) -> Vec<FunctionIndex> {
    let nf = program.functions.len();
    let mut slot = vec![usize::MAX; nf];
    for (k, &f) in hot.iter().enumerate() {
        if f < nf {
            slot[f] = k;
        }
    }
    let k = hot.len();
    let weight: Vec<u128> = hot
        .iter()
        .map(|&f| program.functions[f].executed_bytes() as u128)
        .collect();
    let size: Vec<u128> = hot
        .iter()
        .map(|&f| program.functions[f].hot_size().max(1) as u128)
        .collect();

    // The hottest caller of each function (ties: lower caller index), self-calls excluded.
    let mut best_caller: Vec<Option<(usize, u64)>> = vec![None; k];
    for c in &program.calls {
        if c.caller >= nf || c.callee >= nf {
            continue;
        }
        let (a, b) = (slot[c.caller], slot[c.callee]);
        if a == usize::MAX || b == usize::MAX || a == b || c.count == 0 {
            continue;
        }
        let better = match best_caller[b] {
            None => true,
            Some((pa, pc)) => c.count > pc || (c.count == pc && a < pa),
        };
        if better {
            best_caller[b] = Some((a, c.count));
        }
    }

    // Cluster state.
    let mut cluster_of: Vec<usize> = (0..k).collect();
    let mut members: Vec<Vec<usize>> = (0..k).map(|i| vec![i]).collect();
    let mut cw = weight.clone();
    let mut cs = size.clone();

    let mut visit: Vec<usize> = (0..k).collect();
    visit.sort_by(|&x, &y| weight[y].cmp(&weight[x]).then(x.cmp(&y)));
    if opts.call_chain_clustering {
        for f in visit {
            let Some((caller, _)) = best_caller[f] else {
                continue;
            };
            let (into, from) = (cluster_of[caller], cluster_of[f]);
            if into == from {
                continue;
            }
            if cs[into] + cs[from] > opts.max_cluster_size as u128 {
                continue;
            }
            // density(into) * 8 < density(from)  <=>  w_into * s_from * 8 < w_from * s_into
            if cw[into].saturating_mul(cs[from]).saturating_mul(8)
                < cw[from].saturating_mul(cs[into])
            {
                continue;
            }
            let moved = std::mem::take(&mut members[from]);
            for &m in &moved {
                cluster_of[m] = into;
            }
            members[into].extend(moved);
            cw[into] = cw[into].saturating_add(cw[from]);
            cs[into] = cs[into].saturating_add(cs[from]);
            cw[from] = 0;
            cs[from] = 0;
        }
    }
    let mut clusters: Vec<usize> = (0..k).filter(|&c| !members[c].is_empty()).collect();
    clusters.sort_by(|&x, &y| {
        cw[y]
            .saturating_mul(cs[x])
            .cmp(&cw[x].saturating_mul(cs[y]))
            .then(members[x][0].cmp(&members[y][0]))
    });
    clusters
        .into_iter()
        .flat_map(|c| members[c].iter().map(|&m| hot[m]).collect::<Vec<_>>())
        .collect()
}
