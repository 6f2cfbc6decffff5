//! The extended TSP (ext-TSP) objective and a greedy chain-merging layout for it, after
//! A. Newell and S. Pupyrev, "Improved Basic Block Reordering", IEEE Trans. Computers 2020.
//!
//! # Objective
//! Blocks are placed one after another from address 0 in the order given (the gaps that
//! alignment adds in a real binary are ignored, and block sizes are the sizes in the profiled
//! binary: the jumps the compiler adds or removes when it re-lays the function out are not
//! modelled). Every edge `s -> d` with count `w` then scores, with `end(s) = addr(s) + size(s)`:
//!
//! | placement | score |
//! |---|---|
//! | `end(s) == addr(d)` (fall-through) | `w * 1.0` |
//! | forward jump, `δ = addr(d) - end(s) <= 1024` | `w * 0.1 * (1 - δ / 1024)` |
//! | backward jump, `δ = end(s) - addr(d) <= 640` | `w * 0.1 * (1 - δ / 640)` |
//! | anything farther | `0` |
//!
//! These are the weights and distances the paper fitted on real workloads and that LLVM's
//! `CodeLayout` uses by default (without its 1.05 bonus for unconditional fall-throughs, which
//! needs the branch kind of each edge): a fall-through is about ten times better than a short
//! jump because it is neither a taken branch nor a fetch redirect; short jumps still score a
//! little because their target is likely in the same (or the next) cache line / i-TLB page, and
//! backward jumps get a shorter window because loops that fit in a small window benefit most
//! from the loop stream detector. Propeller's own scorer uses the same shape (10 : 1, 1024 / 680).
//!
//! # Algorithm
//! Every block starts as a chain of its own. Repeatedly, over all pairs of chains joined by at
//! least one edge, the merge with the largest score gain is applied, where a merge of `X` and
//! `Y` is one of `X·Y`, `Y·X`, or — when `X` has at most `chain_split_threshold` blocks — `X` cut
//! in two (`X1`, `X2`) and `X1·Y·X2`, `Y·X2·X1` or `X2·X1·Y` (and the same with `X` and `Y`
//! swapped). A merge that would move the entry block away from the front of its chain is never
//! considered. When no merge has a positive gain the chains are concatenated: the entry chain
//! first, then the others by decreasing density (executions per byte).
//! Candidate merges wait in a max-heap; only the pairs that touch a merged chain are recomputed
//! (older heap entries are recognised as stale by per-chain version stamps).
//! Above `max_exact_blocks` blocks chain splitting is switched off to keep the work near-linear
//! per merge, and no merge builds a chain larger than `max_chain_bytes`.

use std::cmp::Ordering;
use std::collections::{BTreeSet, BinaryHeap};

/// Weights and distances of the ext-TSP objective and limits of the layout search.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ExtTspParams {
    /// Score per execution of a fall-through edge.
    pub fallthrough_weight: f64,
    /// Score per execution of a zero-length forward jump (decays linearly to 0 at `forward_distance`).
    pub forward_weight: f64,
    /// Score per execution of a zero-length backward jump (decays linearly to 0 at `backward_distance`).
    pub backward_weight: f64,
    /// Longest forward jump (bytes) that still scores.
    pub forward_distance: u64,
    /// Longest backward jump (bytes) that still scores.
    pub backward_distance: u64,
    /// Chains longer than this are never cut in two during a merge.
    pub chain_split_threshold: usize,
    /// Above this many blocks, chain splitting is disabled for the whole function.
    pub max_exact_blocks: usize,
    /// Two chains are never merged into one larger than this many bytes (`u64::MAX`: no limit).
    /// Whole-program layouts cap it so that the work stays near-linear in the program size.
    pub max_chain_bytes: u64,
}

impl Default for ExtTspParams {
    fn default() -> Self {
        ExtTspParams {
            fallthrough_weight: 1.0,
            forward_weight: 0.1,
            backward_weight: 0.1,
            forward_distance: 1024,
            backward_distance: 640,
            chain_split_threshold: 128,
            max_exact_blocks: 4096,
            max_chain_bytes: u64::MAX,
        }
    }
}

impl ExtTspParams {
    /// The score of one edge executed `count` times, from a block at `src_addr` of `src_size`
    /// bytes to a block at `dst_addr`.
    pub fn edge_score(&self, src_addr: u64, src_size: u64, dst_addr: u64, count: u64) -> f64 {
        let w = count as f64;
        let src_end = src_addr.saturating_add(src_size);
        if src_end == dst_addr {
            return w * self.fallthrough_weight;
        }
        if src_end < dst_addr {
            let d = dst_addr - src_end;
            if d <= self.forward_distance && self.forward_distance > 0 {
                return w * self.forward_weight * (1.0 - d as f64 / self.forward_distance as f64);
            }
        } else {
            let d = src_end - dst_addr;
            if d <= self.backward_distance && self.backward_distance > 0 {
                return w * self.backward_weight * (1.0 - d as f64 / self.backward_distance as f64);
            }
        }
        0.0
    }

    /// The score of a call or return edge: like [`ExtTspParams::edge_score`], except that
    /// adjacency is never a fall-through (control transfers to another function by a taken
    /// branch however close the code is), so distance 0 scores as the shortest forward jump.
    pub fn jump_score(&self, src_addr: u64, src_size: u64, dst_addr: u64, count: u64) -> f64 {
        let src_end = src_addr.saturating_add(src_size);
        if src_end == dst_addr {
            return count as f64 * self.forward_weight;
        }
        self.edge_score(src_addr, src_size, dst_addr, count)
    }
}

/// The score of blocks placed at the given addresses (`None` = not placed, e.g. in a cold
/// part): `edges` score as branches or fall-throughs ([`ExtTspParams::edge_score`]), `jumps`
/// (calls between functions) as jumps only ([`ExtTspParams::jump_score`]).
pub fn score_placed(
    params: &ExtTspParams,
    addr: &[Option<u64>],
    sizes: &[u64],
    edges: &[(usize, usize, u64)],
    jumps: &[(usize, usize, u64)],
) -> f64 {
    let at = |i: usize| addr.get(i).copied().flatten();
    let mut s = 0.0;
    for &(a, b, c) in edges {
        if let (Some(x), Some(y)) = (at(a), at(b)) {
            s += params.edge_score(x, sizes[a], y, c);
        }
    }
    for &(a, b, c) in jumps {
        if let (Some(x), Some(y)) = (at(a), at(b)) {
            s += params.jump_score(x, sizes[a], y, c);
        }
    }
    s
}

/// The execution count of the `edges` that are not fall-throughs when blocks are placed at the
/// given addresses (an edge with an end not placed counts as taken): the taken branches a layout
/// leaves, as far as the profile knows (calls and returns are taken in every layout and are not
/// counted).
pub fn taken_branches(addr: &[Option<u64>], sizes: &[u64], edges: &[(usize, usize, u64)]) -> u64 {
    let at = |i: usize| addr.get(i).copied().flatten();
    edges
        .iter()
        .filter(|&&(a, b, _)| match (at(a), at(b)) {
            (Some(x), Some(y)) => x.saturating_add(sizes[a]) != y,
            _ => true,
        })
        .fold(0u64, |t, &(_, _, c)| t.saturating_add(c))
}

/// Addresses of blocks laid out as `clusters` one after another from 0, with a one-byte gap
/// between clusters: a cluster is a section of its own, so control never falls from one into
/// the next (the compiler ends a cluster that falls through with a jump).
pub fn cluster_addresses(n: usize, sizes: &[u64], clusters: &[Vec<usize>]) -> Vec<Option<u64>> {
    let mut addr = vec![None; n];
    let mut next = 0u64;
    for c in clusters {
        for &b in c {
            if let Some(slot) = addr.get_mut(b) {
                *slot = Some(next);
                next = next.saturating_add(sizes[b]);
            }
        }
        next = next.saturating_add(1);
    }
    addr
}

/// The ext-TSP score of placing the blocks listed in `order` contiguously, in that order.
/// `sizes[i]` is the size of block `i`; `edges` are `(src, dst, count)`. Edges with an end that
/// is not in `order` (a block placed elsewhere, e.g. in the cold part) score nothing.
pub fn score(
    params: &ExtTspParams,
    sizes: &[u64],
    edges: &[(usize, usize, u64)],
    order: &[usize],
) -> f64 {
    let mut addr: Vec<Option<u64>> = vec![None; sizes.len()];
    let mut next = 0u64;
    for &b in order {
        if let Some(slot) = addr.get_mut(b) {
            *slot = Some(next);
            next = next.saturating_add(sizes[b]);
        }
    }
    edges
        .iter()
        .map(|&(s, d, c)| {
            match (
                addr.get(s).copied().flatten(),
                addr.get(d).copied().flatten(),
            ) {
                (Some(sa), Some(da)) => params.edge_score(sa, sizes[s], da, c),
                _ => 0.0,
            }
        })
        .fold(0.0, |a, b| a + b)
}

/// Differences smaller than this are treated as no gain (floating-point noise).
const EPS: f64 = 1e-9;

/// A merge waiting in the heap, with the versions of its two chains when it was computed.
#[derive(Clone, Copy, Debug)]
struct Candidate {
    choice: MergeChoice,
    a: usize,
    b: usize,
    va: u32,
    vb: u32,
}

impl PartialEq for Candidate {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Candidate {}
impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Candidate {
    /// Larger gain first; among equal gains the pair with the smaller chain numbers (deterministic).
    fn cmp(&self, other: &Self) -> Ordering {
        self.choice
            .gain
            .total_cmp(&other.choice.gain)
            .then_with(|| (other.a, other.b).cmp(&(self.a, self.b)))
    }
}

/// A candidate merge: the resulting sequence described as up to three slices of the two chains.
#[derive(Clone, Copy, Debug)]
struct MergeChoice {
    gain: f64,
    /// Which chain is cut (0 = first of the pair, 1 = second) and where; `usize::MAX` = no cut.
    cut_chain: u8,
    cut_at: usize,
    kind: MergeKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MergeKind {
    /// `A·B` (A is the chain given first).
    AB,
    /// `A1·B·A2`.
    A1BA2,
    /// `B·A2·A1`.
    BA2A1,
    /// `A2·A1·B`.
    A2A1B,
}

struct Solver<'a> {
    params: &'a ExtTspParams,
    sizes: &'a [u64],
    /// Outgoing edges: (destination, count, scored as a jump only).
    out: Vec<Vec<(usize, u64, bool)>>,
    adj: Vec<Vec<usize>>,
    /// The block that must stay at the front of its chain, if any.
    entry: Option<usize>,
    // scratch for sequence scoring
    mark: Vec<u32>,
    /// Scratch: membership of the other chain while choosing cut points.
    other: Vec<u32>,
    other_stamp: u32,
    addr: Vec<u64>,
    stamp: u32,
}

impl Solver<'_> {
    fn seq_score(&mut self, parts: &[&[usize]]) -> f64 {
        self.stamp = self.stamp.wrapping_add(1);
        if self.stamp == 0 {
            self.mark.iter_mut().for_each(|m| *m = 0);
            self.stamp = 1;
        }
        let mut a = 0u64;
        for part in parts {
            for &n in *part {
                self.mark[n] = self.stamp;
                self.addr[n] = a;
                a = a.saturating_add(self.sizes[n]);
            }
        }
        let mut s = 0.0;
        for part in parts {
            for &n in *part {
                for &(d, w, jump) in &self.out[n] {
                    if self.mark[d] == self.stamp {
                        let (p, a, sz, b) =
                            (self.params, self.addr[n], self.sizes[n], self.addr[d]);
                        s += if jump {
                            p.jump_score(a, sz, b, w)
                        } else {
                            p.edge_score(a, sz, b, w)
                        };
                    }
                }
            }
        }
        s
    }

    /// Best merge of chains `a` and `b` (with current scores `sa`, `sb`).
    fn best_merge(
        &mut self,
        a: &[usize],
        b: &[usize],
        sa: f64,
        sb: f64,
        split: bool,
    ) -> Option<MergeChoice> {
        let base = sa + sb;
        let mut best: Option<MergeChoice> = None;
        let a_entry = self.entry.is_some() && a.first() == self.entry.as_ref();
        let b_entry = self.entry.is_some() && b.first() == self.entry.as_ref();
        let mut consider = |solver: &mut Self, parts: &[&[usize]], choice: MergeChoice| {
            let gain = solver.seq_score(parts) - base;
            if best.is_none_or(|b| gain > b.gain + EPS) {
                best = Some(MergeChoice { gain, ..choice });
            }
        };
        let plain = |kind, cut_chain| MergeChoice {
            gain: 0.0,
            cut_chain,
            cut_at: usize::MAX,
            kind,
        };
        // (first, second, cut index of `first`): try both roles.
        for (role, (x, y, x_entry, y_entry)) in [
            (0u8, (a, b, a_entry, b_entry)),
            (1u8, (b, a, b_entry, a_entry)),
        ] {
            if !y_entry {
                consider(self, &[x, y], plain(MergeKind::AB, role));
            }
            if split && x.len() > 1 && x.len() <= self.params.chain_split_threshold {
                // Only cut next to a block that has an edge to or from `y`: elsewhere inserting
                // `y` cannot create a fall-through or a shorter jump (LLVM prunes the same way).
                self.other_stamp = self.other_stamp.wrapping_add(1);
                if self.other_stamp == 0 {
                    self.other.iter_mut().for_each(|m| *m = 0);
                    self.other_stamp = 1;
                }
                for &v in y {
                    self.other[v] = self.other_stamp;
                }
                let touches: Vec<bool> = x
                    .iter()
                    .map(|&v| {
                        self.adj[v]
                            .iter()
                            .any(|&w| self.other[w] == self.other_stamp)
                    })
                    .collect();
                for k in 1..x.len() {
                    if !touches[k - 1] && !touches[k] {
                        continue;
                    }
                    let (x1, x2) = x.split_at(k);
                    let c = |kind| MergeChoice {
                        gain: 0.0,
                        cut_chain: role,
                        cut_at: k,
                        kind,
                    };
                    if !y_entry {
                        consider(self, &[x1, y, x2], c(MergeKind::A1BA2));
                    }
                    if !x_entry {
                        consider(self, &[y, x2, x1], c(MergeKind::BA2A1));
                        if !y_entry {
                            consider(self, &[x2, x1, y], c(MergeKind::A2A1B));
                        }
                    }
                }
            }
        }
        best
    }
}

fn apply(a: &[usize], b: &[usize], m: &MergeChoice) -> Vec<usize> {
    let (x, y) = if m.cut_chain == 0 { (a, b) } else { (b, a) };
    let mut v = Vec::with_capacity(a.len() + b.len());
    match m.kind {
        MergeKind::AB => {
            v.extend_from_slice(x);
            v.extend_from_slice(y);
        }
        MergeKind::A1BA2 => {
            let (x1, x2) = x.split_at(m.cut_at);
            v.extend_from_slice(x1);
            v.extend_from_slice(y);
            v.extend_from_slice(x2);
        }
        MergeKind::BA2A1 => {
            let (x1, x2) = x.split_at(m.cut_at);
            v.extend_from_slice(y);
            v.extend_from_slice(x2);
            v.extend_from_slice(x1);
        }
        MergeKind::A2A1B => {
            let (x1, x2) = x.split_at(m.cut_at);
            v.extend_from_slice(x2);
            v.extend_from_slice(x1);
            v.extend_from_slice(y);
        }
    }
    v
}

/// Order `sizes.len()` blocks for the ext-TSP objective. `counts[i]` is the execution count of
/// block `i` (used to order the chains that could not be merged), `edges` are `(src, dst, count)`
/// and `entry` is the block that must come first. Returns a permutation of `0..sizes.len()`.
///
/// Panics if `counts.len() != sizes.len()` or an index is out of range (caller's contract).
pub fn order_blocks(
    params: &ExtTspParams,
    sizes: &[u64],
    counts: &[u64],
    edges: &[(usize, usize, u64)],
    entry: usize,
) -> Vec<usize> {
    let n = sizes.len();
    assert_eq!(counts.len(), n, "one count per block");
    if n == 0 {
        return Vec::new();
    }
    assert!(entry < n, "entry block out of range");
    let chains = merge_chains(params, sizes, edges, &[], Some(entry));
    // Concatenate: entry chain first, then by decreasing density, ties by first block.
    let mut rest: Vec<&Vec<usize>> = chains.iter().filter(|c| c[0] != entry).collect();
    let density = |c: &[usize]| {
        let cnt: u128 = c.iter().map(|&v| counts[v] as u128).sum();
        let sz: u128 = c.iter().map(|&v| sizes[v].max(1) as u128).sum();
        (cnt, sz)
    };
    rest.sort_by(|x, y| {
        let (cx, sx) = density(x);
        let (cy, sy) = density(y);
        // cx/sx > cy/sy  <=>  cx*sy > cy*sx (exact in u128 for realistic values)
        (cy.saturating_mul(sx))
            .cmp(&cx.saturating_mul(sy))
            .then(x[0].cmp(&y[0]))
    });
    let mut order = Vec::with_capacity(n);
    if let Some(c) = chains.iter().find(|c| c[0] == entry) {
        order.extend_from_slice(c);
    }
    for c in rest {
        order.extend_from_slice(c);
    }
    order
}

/// The chains of the greedy ext-TSP merge (see the module documentation), in the order of their
/// first block. `edges` score as branches or fall-throughs, `jumps` (calls between functions laid
/// out together) as jumps only. With `entry`, that block stays at the front of its
/// chain. Every block is in exactly one chain.
///
/// Panics if an index is out of range (caller's contract).
pub fn merge_chains(
    params: &ExtTspParams,
    sizes: &[u64],
    edges: &[(usize, usize, u64)],
    jumps: &[(usize, usize, u64)],
    entry: Option<usize>,
) -> Vec<Vec<usize>> {
    let n = sizes.len();
    if n == 0 {
        return Vec::new();
    }
    let mut out: Vec<Vec<(usize, u64, bool)>> = vec![Vec::new(); n];
    let mut adj: Vec<Vec<usize>> = vec![Vec::new(); n];
    let all = edges
        .iter()
        .map(|&e| (e, false))
        .chain(jumps.iter().map(|&e| (e, true)));
    for ((s, d, c), jump) in all {
        assert!(s < n && d < n, "edge out of range");
        if c == 0 {
            continue;
        }
        out[s].push((d, c, jump));
        if s != d {
            adj[s].push(d);
            adj[d].push(s);
        }
    }
    let split = n <= params.max_exact_blocks;
    let mut solver = Solver {
        params,
        sizes,
        out,
        adj,
        entry,
        mark: vec![0; n],
        other: vec![0; n],
        other_stamp: 0,
        addr: vec![0; n],
        stamp: 0,
    };
    let mut chains: Vec<Vec<usize>> = (0..n).map(|i| vec![i]).collect();
    let mut chain_score: Vec<f64> = (0..n).map(|i| solver.seq_score(&[&[i]])).collect();
    let mut neighbours: Vec<BTreeSet<usize>> = solver
        .adj
        .iter()
        .map(|v| v.iter().copied().collect())
        .collect();
    for (i, s) in neighbours.iter_mut().enumerate() {
        s.remove(&i);
    }
    // Max-heap of candidate merges; an entry is stale once either chain changed (version stamps).
    let mut version: Vec<u32> = vec![0; n];
    let mut heap: BinaryHeap<Candidate> = BinaryHeap::new();
    let mut bytes: Vec<u64> = sizes.to_vec();
    let push = |solver: &mut Solver<'_>,
                heap: &mut BinaryHeap<Candidate>,
                chains: &mut [Vec<usize>],
                chain_score: &[f64],
                version: &[u32],
                bytes: &[u64],
                a: usize,
                b: usize| {
        let (a, b) = (a.min(b), a.max(b));
        if bytes[a].saturating_add(bytes[b]) > params.max_chain_bytes {
            return;
        }
        let (ca, cb) = (
            std::mem::take(&mut chains[a]),
            std::mem::take(&mut chains[b]),
        );
        let c = solver.best_merge(&ca, &cb, chain_score[a], chain_score[b], split);
        chains[a] = ca;
        chains[b] = cb;
        if let Some(choice) = c
            && choice.gain > EPS
        {
            heap.push(Candidate {
                choice,
                a,
                b,
                va: version[a],
                vb: version[b],
            });
        }
    };
    let initial: Vec<(usize, usize)> = neighbours
        .iter()
        .enumerate()
        .flat_map(|(i, ns)| ns.iter().filter(move |&&j| i < j).map(move |&j| (i, j)))
        .collect();
    for (i, j) in initial {
        push(
            &mut solver,
            &mut heap,
            &mut chains,
            &chain_score,
            &version,
            &bytes,
            i,
            j,
        );
    }
    while let Some(Candidate {
        choice,
        a,
        b,
        va,
        vb,
    }) = heap.pop()
    {
        if chains[a].is_empty() || chains[b].is_empty() || version[a] != va || version[b] != vb {
            continue;
        }
        let merged = apply(&chains[a], &chains[b], &choice);
        chain_score[a] = solver.seq_score(&[&merged]);
        bytes[a] = bytes[a].saturating_add(bytes[b]);
        bytes[b] = 0;
        chains[a] = merged;
        chains[b] = Vec::new();
        version[a] += 1;
        version[b] += 1;
        let nb = std::mem::take(&mut neighbours[b]);
        let na = std::mem::take(&mut neighbours[a]);
        let mut union: BTreeSet<usize> = na.union(&nb).copied().collect();
        union.remove(&a);
        union.remove(&b);
        for &c in &union {
            neighbours[c].remove(&b);
            neighbours[c].insert(a);
        }
        neighbours[a] = union;
        let ns: Vec<usize> = neighbours[a].iter().copied().collect();
        for c in ns {
            push(
                &mut solver,
                &mut heap,
                &mut chains,
                &chain_score,
                &version,
                &bytes,
                a,
                c,
            );
        }
    }
    let mut result: Vec<Vec<usize>> = chains.into_iter().filter(|c| !c.is_empty()).collect();
    result.sort_by_key(|c| c[0]);
    result
}
