//! The loop pass: compress tandem repeats (`[A B][A B][A B]`) into one unit with a count.
//!
//! Greedy and streaming: at each position the shortest period `p <= max_period` whose body
//! repeats immediately is taken, then extended for as long as the next units keep repeating it.
//! The detector needs only `2 * max_period` units of look-ahead, so it runs over a stream of any
//! length ([`LoopDetector`]). Gaps never take part in a loop. A loop definition is keyed by its
//! body and its count, so every occurrence of a definition has the same content.

use std::collections::VecDeque;

use rustc_hash::FxHashMap;

use super::superblock::NONE;
use super::{BlockDef, Layer, LayerKind};

/// What the detector emits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Emitted {
    /// A unit that is not part of a loop.
    Unit(u32),
    /// `body` repeated `count >= 2` times.
    Loop {
        /// The repeated units.
        body: Vec<u32>,
        /// Iterations.
        count: u32,
    },
}

struct OpenLoop {
    body: Vec<u32>,
    count: u32,
    phase: usize,
}

/// A streaming tandem-repeat detector.
pub struct LoopDetector<'g> {
    max_period: usize,
    gap: &'g [bool],
    pending: VecDeque<u32>,
    open: Option<OpenLoop>,
}

impl<'g> LoopDetector<'g> {
    /// A detector for bodies of up to `max_period` units; `gap[u]` marks gap definitions.
    pub fn new(max_period: usize, gap: &'g [bool]) -> Self {
        LoopDetector {
            max_period: max_period.max(1),
            gap,
            pending: VecDeque::new(),
            open: None,
        }
    }

    fn is_gap(&self, u: u32) -> bool {
        self.gap.get(u as usize).copied().unwrap_or(false)
    }

    /// Feed one unit.
    pub fn push(&mut self, u: u32, out: &mut impl FnMut(Emitted)) {
        self.pending.push_back(u);
        self.drain(out, false);
    }

    /// Flush everything at the end of the stream.
    ///
    /// A loop still open at the end is emitted, and the units of its unfinished iteration go
    /// back to the detector, where they can open another loop (`[c c]` left over from a body
    /// `[c c a b]`): repeat until no loop is open, so no unit is dropped.
    pub fn finish(mut self, out: &mut impl FnMut(Emitted)) {
        loop {
            self.drain(out, true);
            let Some(open) = self.open.take() else {
                return;
            };
            out(Emitted::Loop {
                body: open.body.clone(),
                count: open.count,
            });
            for &x in &open.body[..open.phase] {
                self.pending.push_back(x);
            }
        }
    }

    fn drain(&mut self, out: &mut impl FnMut(Emitted), fin: bool) {
        loop {
            if let Some(open) = &mut self.open {
                let Some(&u) = self.pending.front() else {
                    return;
                };
                if u == open.body[open.phase] {
                    self.pending.pop_front();
                    open.phase += 1;
                    if open.phase == open.body.len() {
                        open.phase = 0;
                        open.count = open.count.saturating_add(1);
                    }
                    continue;
                }
                let open = self.open.take().expect("checked");
                for &x in open.body[..open.phase].iter().rev() {
                    self.pending.push_front(x);
                }
                out(Emitted::Loop {
                    body: open.body,
                    count: open.count,
                });
                continue;
            }
            let len = self.pending.len();
            if len == 0 || (!fin && len < 2 * self.max_period) {
                return;
            }
            let u0 = self.pending[0];
            if self.is_gap(u0) {
                self.pending.pop_front();
                out(Emitted::Unit(u0));
                continue;
            }
            let maxp = self.max_period.min(len / 2);
            let mut found = None;
            'p: for p in 1..=maxp {
                if self.pending[p] != u0 {
                    continue;
                }
                for i in 0..p {
                    let a = self.pending[i];
                    if a != self.pending[i + p] || self.is_gap(a) {
                        continue 'p;
                    }
                }
                found = Some(p);
                break;
            }
            match found {
                Some(p) => {
                    let body: Vec<u32> = self.pending.drain(..2 * p).take(p).collect();
                    self.open = Some(OpenLoop {
                        body,
                        count: 2,
                        phase: 0,
                    });
                }
                None => {
                    self.pending.pop_front();
                    out(Emitted::Unit(u0));
                }
            }
        }
    }
}

/// Builds loop-layer definitions from emitted units, deduplicating them.
pub struct LoopLayerBuilder<'l> {
    lower: &'l Layer,
    passthrough: Vec<u32>,
    loops: FxHashMap<(Vec<u32>, u32), u32>,
    /// The definitions built so far.
    pub defs: Vec<BlockDef>,
    /// The units built so far.
    pub units: Vec<u32>,
}

impl<'l> LoopLayerBuilder<'l> {
    /// A builder over `lower`.
    pub fn new(lower: &'l Layer) -> Self {
        LoopLayerBuilder {
            lower,
            passthrough: vec![NONE; lower.defs.len()],
            loops: FxHashMap::default(),
            defs: Vec::new(),
            units: Vec::new(),
        }
    }

    /// Add one emitted item.
    pub fn add(&mut self, e: Emitted) {
        let d = match e {
            Emitted::Unit(u) => {
                let slot = self.passthrough[u as usize];
                if slot != NONE {
                    slot
                } else {
                    let l = &self.lower.defs[u as usize];
                    let d = self.defs.len() as u32;
                    self.defs.push(BlockDef {
                        first_addr: l.first_addr,
                        insns: l.insns,
                        children: vec![u],
                        repeat: 1,
                        gap: l.gap,
                    });
                    self.passthrough[u as usize] = d;
                    d
                }
            }
            Emitted::Loop { body, count } => {
                let key = (body, count);
                if let Some(&d) = self.loops.get(&key) {
                    d
                } else {
                    let per: u64 = key
                        .0
                        .iter()
                        .map(|&c| self.lower.defs[c as usize].insns)
                        .sum();
                    let d = self.defs.len() as u32;
                    self.defs.push(BlockDef {
                        first_addr: self.lower.defs[key.0[0] as usize].first_addr,
                        insns: per.saturating_mul(count as u64),
                        children: key.0.clone(),
                        repeat: count,
                        gap: None,
                    });
                    self.loops.insert(key, d);
                    d
                }
            }
        };
        self.units.push(d);
    }

    /// The finished layer.
    pub fn finish(self) -> Layer {
        Layer {
            kind: LayerKind::Loops,
            defs: self.defs,
            units: self.units,
        }
    }
}

/// Run the loop pass over `lower`.
pub fn loop_pass(lower: &Layer, max_period: usize) -> Layer {
    let gap = lower.gap_flags();
    let mut det = LoopDetector::new(max_period, &gap);
    let mut b = LoopLayerBuilder::new(lower);
    let mut sink = |e| b.add(e);
    for &u in &lower.units {
        det.push(u, &mut sink);
    }
    det.finish(&mut sink);
    b.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn detect(units: &[u32], max_period: usize) -> Vec<Emitted> {
        let gap = vec![false; 16];
        let mut det = LoopDetector::new(max_period, &gap);
        let mut out = Vec::new();
        for &u in units {
            det.push(u, &mut |e| out.push(e));
        }
        det.finish(&mut |e| out.push(e));
        out
    }

    fn len(e: &[Emitted]) -> usize {
        e.iter()
            .map(|e| match e {
                Emitted::Unit(_) => 1,
                Emitted::Loop { body, count } => body.len() * *count as usize,
            })
            .sum()
    }

    /// The end of the stream inside an iteration (`1 0 0` of the body `1 0 0 2`) whose units
    /// repeat (`0 0`): they form a loop of their own after the open loop closes, and none is
    /// lost (found by the HTR property test).
    #[test]
    fn unfinished_iteration_that_repeats_is_kept() {
        let units = [1, 0, 0, 2, 1, 0, 0, 2, 1, 0, 0];
        let e = detect(&units, 4);
        assert_eq!(len(&e), units.len(), "{e:?}");
        assert_eq!(
            e,
            vec![
                Emitted::Loop {
                    body: vec![1, 0, 0, 2],
                    count: 2
                },
                Emitted::Unit(1),
                Emitted::Loop {
                    body: vec![0],
                    count: 2
                },
            ]
        );
    }
}
