//! Hierarchical trace representation: layers of blocks built by passes.
//!
//! Layer 0 is the instruction layer (one unit per executed instruction, instruction block or
//! gap). Every higher layer is a sequence of units, each an index into the layer's table of block
//! definitions; a definition lists its content as units of the layer below (repeated `repeat`
//! times for a loop), so every occurrence of a block has the same content and expanding a layer
//! reproduces layer 0. Durations count instructions; gaps count none.
//!
//! The default pipeline is basic-super-block pass, loop pass, and again, until a pass no longer
//! shrinks the layer ([`Htr::build`]). The function-call pass works on the instruction layer and
//! yields a call tree ([`function`]); [`lldb`] is an exact model of lldb's own pass and JSON.

pub mod function;
pub mod lldb;
pub mod loops;
pub mod streaming;
pub mod superblock;

use crate::GapReason;
use crate::trace::{ThreadTrace, Unit};

/// The largest number of distinct definitions in one layer (ids above are sentinels).
pub const MAX_DEFS: u32 = u32::MAX - 8;

/// What a layer holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayerKind {
    /// Layer 0: instructions (and gaps).
    Instructions,
    /// Output of the basic-super-block pass.
    SuperBlocks,
    /// Output of the loop pass.
    Loops,
}

impl LayerKind {
    /// A short track name.
    pub fn name(self) -> &'static str {
        match self {
            LayerKind::Instructions => "instructions",
            LayerKind::SuperBlocks => "super blocks",
            LayerKind::Loops => "loops",
        }
    }
}

/// A block definition: the same content at every occurrence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockDef {
    /// Address of the first instruction (the block's name; 0 for a gap).
    pub first_addr: u64,
    /// Instructions in one occurrence.
    pub insns: u64,
    /// Content: definitions of the layer below (empty in layer 0).
    pub children: Vec<u32>,
    /// How many times `children` repeats (a loop's iteration count; 1 otherwise).
    pub repeat: u32,
    /// `Some` for a gap.
    pub gap: Option<GapReason>,
}

/// One layer: definitions and the unit sequence.
#[derive(Debug, Clone)]
pub struct Layer {
    /// What the layer holds.
    pub kind: LayerKind,
    /// Distinct blocks, in order of first occurrence.
    pub defs: Vec<BlockDef>,
    /// The unit sequence (indices into `defs`).
    pub units: Vec<u32>,
}

impl Layer {
    /// The instruction layer of a thread.
    pub fn instructions(thread: &ThreadTrace) -> Layer {
        let defs = thread
            .units
            .iter()
            .map(|u| match u {
                Unit::Insn { addr, insns } => BlockDef {
                    first_addr: *addr,
                    insns: *insns as u64,
                    children: Vec::new(),
                    repeat: 1,
                    gap: None,
                },
                Unit::Gap { reason, .. } => BlockDef {
                    first_addr: 0,
                    insns: 0,
                    children: Vec::new(),
                    repeat: 1,
                    gap: Some(*reason),
                },
            })
            .collect();
        Layer {
            kind: LayerKind::Instructions,
            defs,
            units: thread.ids.clone(),
        }
    }

    /// Per-definition gap flags.
    pub fn gap_flags(&self) -> Vec<bool> {
        self.defs.iter().map(|d| d.gap.is_some()).collect()
    }

    /// Total instructions.
    pub fn insns(&self) -> u64 {
        self.units
            .iter()
            .map(|&u| self.defs[u as usize].insns)
            .sum()
    }

    /// The instruction index at which each unit starts, plus the total at the end.
    pub fn starts(&self) -> Vec<u64> {
        let mut out = Vec::with_capacity(self.units.len() + 1);
        let mut t = 0u64;
        for &u in &self.units {
            out.push(t);
            t += self.defs[u as usize].insns;
        }
        out.push(t);
        out
    }
}

/// Options of [`Htr::build`].
#[derive(Debug, Clone)]
pub struct BuildOptions {
    /// Stop after this many block layers.
    pub max_layers: usize,
    /// Run the loop pass between super-block passes.
    pub loops: bool,
    /// Longest loop body the loop pass looks for, in units.
    pub loop_max_period: usize,
}

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions {
            max_layers: 8,
            loops: true,
            loop_max_period: 16,
        }
    }
}

/// The layers of one thread.
#[derive(Debug, Clone)]
pub struct Htr {
    /// Layer 0 first.
    pub layers: Vec<Layer>,
}

impl Htr {
    /// Build layer 0 from `thread`, then layer 1 with the basic-super-block pass, then alternate
    /// loop and super-block passes while they shrink the layer.
    pub fn build(thread: &ThreadTrace, opts: &BuildOptions) -> Htr {
        let mut layers = vec![Layer::instructions(thread)];
        let first = superblock::super_block_pass(&layers[0]);
        layers.push(first);
        let mut next_is_loop = true;
        while layers.len() <= opts.max_layers {
            let last = layers.last().expect("layer 1 exists");
            let new = if next_is_loop {
                if !opts.loops {
                    break;
                }
                loops::loop_pass(last, opts.loop_max_period)
            } else {
                superblock::super_block_pass(last)
            };
            if new.units.len() >= last.units.len() {
                break;
            }
            layers.push(new);
            next_is_loop = !next_is_loop;
        }
        Htr { layers }
    }

    /// Expand unit `def` of layer `layer` down to layer-0 definitions, appending to `out`.
    pub fn expand_into(&self, layer: usize, def: u32, out: &mut Vec<u32>) {
        if layer == 0 {
            out.push(def);
            return;
        }
        let d = &self.layers[layer].defs[def as usize];
        for _ in 0..d.repeat {
            for &c in &d.children {
                self.expand_into(layer - 1, c, out);
            }
        }
    }

    /// Expand a whole layer down to layer-0 definitions.
    pub fn expand_layer(&self, layer: usize) -> Vec<u32> {
        let mut out = Vec::new();
        for &u in &self.layers[layer].units {
            self.expand_into(layer, u, &mut out);
        }
        out
    }
}
