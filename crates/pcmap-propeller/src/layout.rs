//! Intra-function layout: hot/cold splitting plus ext-TSP ordering of the hot blocks.
//!
//! * Blocks that the profile never saw executed (count 0) go to the cold part (the `.cold`
//!   section clang makes for blocks that no cluster lists). The entry block always stays hot.
//! * The hot blocks are ordered with [`crate::ext_tsp::order_blocks`] into one cluster that
//!   starts with the entry block.
//! * Safety net: if the ext-TSP order scores lower than the hot blocks in their original
//!   relative order (possible for a greedy search), the original order is kept. So the score
//!   never decreases against the original layout.

use crate::cfg::{BlockIndex, FunctionCfg};
use crate::ext_tsp::{self, ExtTspParams};

/// Options of the intra-function layout.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LayoutOptions {
    /// ext-TSP weights and search limits.
    pub ext_tsp: ExtTspParams,
    /// Move never-executed blocks to the cold part (`.cold`).
    pub split_functions: bool,
    /// Reorder the hot blocks (otherwise they keep their original relative order).
    pub reorder_blocks: bool,
}

impl Default for LayoutOptions {
    fn default() -> Self {
        LayoutOptions {
            ext_tsp: ExtTspParams::default(),
            split_functions: true,
            reorder_blocks: true,
        }
    }
}

/// The layout chosen for one function.
#[derive(Clone, Debug, PartialEq)]
pub struct FunctionLayout {
    /// Hot clusters in layout order; `clusters[0][0]` is the entry block. Cluster `i > 0`
    /// becomes the symbol `<name>.__part.<i>`.
    pub clusters: Vec<Vec<BlockIndex>>,
    /// Blocks for the cold part, in original order (empty when nothing is cold).
    pub cold: Vec<BlockIndex>,
    /// ext-TSP score of the original order (all blocks placed contiguously by address).
    pub score_before: f64,
    /// ext-TSP score of the new order (hot clusters contiguous; cold blocks elsewhere).
    pub score_after: f64,
}

impl FunctionLayout {
    /// All hot blocks in layout order.
    pub fn hot_order(&self) -> impl Iterator<Item = BlockIndex> + '_ {
        self.clusters.iter().flatten().copied()
    }
}

/// Lay out one function. Returns `None` when no block of the function was executed (the
/// function is left to the compiler) or the function has no blocks.
pub fn layout_function(cfg: &FunctionCfg, opts: &LayoutOptions) -> Option<FunctionLayout> {
    if cfg.blocks.is_empty() || !cfg.is_hot() {
        return None;
    }
    let n = cfg.blocks.len();
    let sizes: Vec<u64> = cfg.blocks.iter().map(|b| b.size).collect();
    let edges = cfg.merged_edges();
    let original: Vec<BlockIndex> = (0..n).collect();
    let score_before = ext_tsp::score(&opts.ext_tsp, &sizes, &edges, &original);

    let is_hot = |i: usize| i == 0 || cfg.blocks[i].count > 0 || !opts.split_functions;
    let hot: Vec<BlockIndex> = (0..n).filter(|&i| is_hot(i)).collect();
    let cold: Vec<BlockIndex> = (0..n).filter(|&i| !is_hot(i)).collect();

    let mut order = hot.clone();
    if opts.reorder_blocks && hot.len() > 1 {
        // Renumber the hot blocks 0..k for the solver.
        let mut local = vec![usize::MAX; n];
        for (k, &b) in hot.iter().enumerate() {
            local[b] = k;
        }
        let sub_sizes: Vec<u64> = hot.iter().map(|&b| sizes[b]).collect();
        let sub_counts: Vec<u64> = hot.iter().map(|&b| cfg.blocks[b].count).collect();
        let sub_edges: Vec<(usize, usize, u64)> = edges
            .iter()
            .filter(|&&(s, d, _)| local[s] != usize::MAX && local[d] != usize::MAX)
            .map(|&(s, d, c)| (local[s], local[d], c))
            .collect();
        let entry = local[0];
        let sub = ext_tsp::order_blocks(&opts.ext_tsp, &sub_sizes, &sub_counts, &sub_edges, entry);
        let candidate: Vec<BlockIndex> = sub.into_iter().map(|k| hot[k]).collect();
        let s_new = ext_tsp::score(&opts.ext_tsp, &sizes, &edges, &candidate);
        let s_orig = ext_tsp::score(&opts.ext_tsp, &sizes, &edges, &hot);
        if s_new >= s_orig {
            order = candidate;
        }
    }
    let score_after = ext_tsp::score(&opts.ext_tsp, &sizes, &edges, &order);
    Some(FunctionLayout {
        clusters: vec![order],
        cold,
        score_before,
        score_after,
    })
}
