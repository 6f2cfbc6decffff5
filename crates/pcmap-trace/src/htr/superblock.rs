//! The basic-super-block pass: merge the longest runs of units that always occur in the same order.
//!
//! For each distinct unit the pass keeps one small state: its predecessor and its successor,
//! each *none*, *unique(x)* or *multi*. A unit with several distinct predecessors (a head) starts
//! a super block; a unit with several distinct successors (a tail) ends one (it is included).
//! (`htr.rst` states this the other way round; lldb's code and test use this rule.)
//!
//! Where pcmap differs from lldb's `BasicSuperBlockMerge`, and why:
//! * **START and END sentinels.** lldb gives the first unit no predecessor and makes the last
//!   unit a tail everywhere in the trace. pcmap records a boundary sentinel as the first unit's
//!   predecessor and the last unit's successor. With both sentinels a block is determined by its
//!   first unit, every occurrence of a super block has the same content, and a second pass
//!   changes nothing; lldb's END-only rule can produce `[1,3,4,1,3] -> [1,4]` where a second
//!   pass merges again. (lldb's exact behaviour is kept in [`super::lldb`].)
//! * **Gaps are units of their own.** lldb turns decode errors into address 0, which is never a
//!   head or tail, so blocks run across errors and later occurrences reuse the first occurrence's
//!   metadata (durations then no longer sum to the trace). pcmap keeps each gap as a singleton
//!   block and treats it as a boundary sentinel for its neighbours.
//! * **Block ids** are definitions numbered by first occurrence, not addresses, so two blocks
//!   starting at one address in different layers never collide.
//!
//! The first pass is associative: chunks of the unit sequence are processed in parallel and
//! their states merged, plus the edge between adjacent chunks ([`EdgeStates::merge`]).

use rayon::prelude::*;

use super::{BlockDef, Layer, LayerKind, MAX_DEFS};

/// No neighbour seen.
pub const NONE: u32 = u32::MAX;
/// More than one distinct neighbour seen.
pub const MULTI: u32 = u32::MAX - 1;
/// The START/END sentinel, also used on both sides of a gap.
pub const BOUNDARY: u32 = u32::MAX - 2;

/// Add neighbour `v` to a neighbour state.
#[inline]
pub fn add_neighbour(s: &mut u32, v: u32) {
    if *s == NONE {
        *s = v;
    } else if *s != v && v != NONE {
        *s = MULTI;
    }
}

/// Predecessor and successor states of every definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EdgeStates {
    /// Predecessor state per definition.
    pub pred: Vec<u32>,
    /// Successor state per definition.
    pub succ: Vec<u32>,
}

impl EdgeStates {
    /// States for `n` definitions, all *none*.
    pub fn new(n: usize) -> Self {
        EdgeStates {
            pred: vec![NONE; n],
            succ: vec![NONE; n],
        }
    }

    /// Record that `b` directly follows `a` (gaps become boundaries for their neighbours).
    #[inline]
    pub fn adjacent(&mut self, a: u32, b: u32, gap: &[bool]) {
        let (ga, gb) = (gap[a as usize], gap[b as usize]);
        if !gb {
            add_neighbour(&mut self.pred[b as usize], if ga { BOUNDARY } else { a });
        }
        if !ga {
            add_neighbour(&mut self.succ[a as usize], if gb { BOUNDARY } else { b });
        }
    }

    /// Merge the states of another part of the same sequence (associative and commutative).
    pub fn merge(&mut self, other: &EdgeStates) {
        for (s, &o) in self.pred.iter_mut().zip(&other.pred) {
            add_neighbour(s, o);
        }
        for (s, &o) in self.succ.iter_mut().zip(&other.succ) {
            add_neighbour(s, o);
        }
    }

    /// Mark the START sentinel before `first` and the END sentinel after `last`.
    pub fn close(&mut self, first: u32, last: u32, gap: &[bool]) {
        if !gap[first as usize] {
            add_neighbour(&mut self.pred[first as usize], BOUNDARY);
        }
        if !gap[last as usize] {
            add_neighbour(&mut self.succ[last as usize], BOUNDARY);
        }
    }
}

/// Compute the edge states of a unit sequence over `ndefs` definitions, in parallel chunks.
pub fn edge_states(units: &[u32], gap: &[bool]) -> EdgeStates {
    let n = gap.len();
    const CHUNK: usize = 1 << 20;
    let mut states = if units.len() <= CHUNK {
        let mut s = EdgeStates::new(n);
        for w in units.windows(2) {
            s.adjacent(w[0], w[1], gap);
        }
        s
    } else {
        let mut s = units
            .par_chunks(CHUNK)
            .fold(
                || EdgeStates::new(n),
                |mut s, chunk| {
                    for w in chunk.windows(2) {
                        s.adjacent(w[0], w[1], gap);
                    }
                    s
                },
            )
            .reduce(
                || EdgeStates::new(n),
                |mut a, b| {
                    a.merge(&b);
                    a
                },
            );
        for i in (CHUNK..units.len()).step_by(CHUNK) {
            s.adjacent(units[i - 1], units[i], gap);
        }
        s
    };
    if let (Some(&f), Some(&l)) = (units.first(), units.last()) {
        states.close(f, l, gap);
    }
    states
}

/// Where super blocks start and how their content chains, derived from the edge states alone.
#[derive(Debug, Clone)]
pub struct BlockStructure {
    /// Whether each definition starts a super block wherever it occurs.
    pub starts: Vec<bool>,
    /// The definition that always follows inside the same super block, or [`NONE`].
    pub next: Vec<u32>,
}

impl BlockStructure {
    /// Derive the structure. A unit `x` continues the block of its predecessor `p` exactly when
    /// `x`'s only predecessor is `p`, `p`'s only successor is `x`, and neither is a gap; every
    /// other unit (a head, the unit after a tail, after START or after a gap) starts a block.
    pub fn new(states: &EdgeStates, gap: &[bool]) -> Self {
        let n = gap.len();
        let mut starts = vec![true; n];
        let mut next = vec![NONE; n];
        for x in 0..n {
            if gap[x] {
                continue;
            }
            let p = states.pred[x];
            if p < BOUNDARY
                && (p as usize) < n
                && !gap[p as usize]
                && states.succ[p as usize] == x as u32
            {
                starts[x] = false;
                next[p as usize] = x as u32;
            }
        }
        BlockStructure { starts, next }
    }

    /// The content of the block starting at `start` (bounded by the number of definitions).
    pub fn content(&self, start: u32) -> Vec<u32> {
        let mut out = vec![start];
        let mut cur = start;
        while let Some(&nx) = self.next.get(cur as usize) {
            if nx == NONE || out.len() > self.next.len() {
                break;
            }
            out.push(nx);
            cur = nx;
        }
        out
    }
}

/// Run the basic-super-block pass over `lower`, producing the next layer.
pub fn super_block_pass(lower: &Layer) -> Layer {
    let gap = lower.gap_flags();
    let states = edge_states(&lower.units, &gap);
    let structure = BlockStructure::new(&states, &gap);
    let mut def_of = vec![NONE; lower.defs.len()];
    let mut defs: Vec<BlockDef> = Vec::new();
    let mut units = Vec::new();
    for &u in &lower.units {
        if !structure.starts[u as usize] {
            continue;
        }
        let mut d = def_of[u as usize];
        if d == NONE {
            let content = structure.content(u);
            let insns = content.iter().map(|&c| lower.defs[c as usize].insns).sum();
            let head = &lower.defs[u as usize];
            d = defs.len() as u32;
            debug_assert!(d < MAX_DEFS);
            defs.push(BlockDef {
                first_addr: head.first_addr,
                insns,
                children: content,
                repeat: 1,
                gap: head.gap,
            });
            def_of[u as usize] = d;
        }
        units.push(d);
    }
    Layer {
        kind: LayerKind::SuperBlocks,
        defs,
        units,
    }
}
