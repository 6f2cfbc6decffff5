//! The control-flow graph model the layout works on: one [`FunctionCfg`] per profiled function
//! (blocks in their original address order, intra-function edges with counts) and the calls
//! between functions in a [`ProgramCfg`].
//!
//! These types are independent of where the data came from (a basic-block address map plus a
//! branch profile, see [`crate::builder`], or a test that writes them by hand).

/// Index of a block in [`FunctionCfg::blocks`].
pub type BlockIndex = usize;

/// Index of a function in [`ProgramCfg::functions`].
pub type FunctionIndex = usize;

/// One basic block of a function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CfgBlock {
    /// The basic-block ID from the address map (what the cc profile refers to).
    pub bb_id: u32,
    /// Start address in the profiled binary.
    pub address: u64,
    /// Size in bytes in the profiled binary.
    pub size: u64,
    /// How many times the block was entered according to the profile (0 = never executed).
    pub count: u64,
    /// Block hash from the address map (`-mllvm -emit-bb-hash`), if any.
    pub hash: Option<u64>,
}

/// How control moved along an intra-function edge.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EdgeKind {
    /// A taken branch (jump, conditional jump taken, indirect jump).
    Branch,
    /// Execution ran off the end of the source block into the destination block.
    FallThrough,
}

/// An intra-function edge with its profile count.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CfgEdge {
    /// Source block.
    pub src: BlockIndex,
    /// Destination block.
    pub dst: BlockIndex,
    /// How many times the edge was taken.
    pub count: u64,
    /// Branch or fall-through.
    pub kind: EdgeKind,
}

/// The CFG of one function.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FunctionCfg {
    /// The function's symbol name (the name the compiler knows it by).
    pub name: String,
    /// Other symbol names at the same address (written as aliases in the cc profile).
    pub aliases: Vec<String>,
    /// Blocks in their original address order; `blocks[0]` is the entry block.
    pub blocks: Vec<CfgBlock>,
    /// Intra-function edges (several edges may join the same pair of blocks with different kinds).
    pub edges: Vec<CfgEdge>,
}

impl FunctionCfg {
    /// Whether any block of the function was executed.
    pub fn is_hot(&self) -> bool {
        self.blocks.iter().any(|b| b.count > 0)
    }

    /// Total size of the blocks that were executed.
    pub fn hot_size(&self) -> u64 {
        self.blocks
            .iter()
            .filter(|b| b.count > 0)
            .map(|b| b.size)
            .sum()
    }

    /// An estimate of the bytes executed in the function: the sum of `count * size` over its
    /// blocks (saturating). Used as the function's weight when ordering functions.
    pub fn executed_bytes(&self) -> u64 {
        self.blocks.iter().fold(0u64, |acc, b| {
            acc.saturating_add(b.count.saturating_mul(b.size.max(1)))
        })
    }

    /// Edges summed per (source, destination) pair, whatever their kind, sorted by the pair.
    pub fn merged_edges(&self) -> Vec<(BlockIndex, BlockIndex, u64)> {
        let mut v: Vec<(BlockIndex, BlockIndex, u64)> = self
            .edges
            .iter()
            .filter(|e| e.count > 0)
            .map(|e| (e.src, e.dst, e.count))
            .collect();
        v.sort_unstable_by_key(|&(s, d, _)| (s, d));
        let mut out: Vec<(BlockIndex, BlockIndex, u64)> = Vec::with_capacity(v.len());
        for (s, d, c) in v {
            match out.last_mut() {
                Some(last) if last.0 == s && last.1 == d => last.2 = last.2.saturating_add(c),
                _ => out.push((s, d, c)),
            }
        }
        out
    }

    /// Raise every block count to at least the sum of its incoming and of its outgoing edge
    /// counts, so that an edge with a count never touches a block that looks unexecuted.
    pub fn make_counts_consistent(&mut self) {
        let n = self.blocks.len();
        let mut inflow = vec![0u64; n];
        let mut outflow = vec![0u64; n];
        for e in &self.edges {
            if e.src < n && e.dst < n {
                outflow[e.src] = outflow[e.src].saturating_add(e.count);
                inflow[e.dst] = inflow[e.dst].saturating_add(e.count);
            }
        }
        for (i, b) in self.blocks.iter_mut().enumerate() {
            b.count = b.count.max(inflow[i]).max(outflow[i]);
        }
    }
}

/// A call (or tail call) from one function to another's entry, with its count.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallEdge {
    /// The calling function.
    pub caller: FunctionIndex,
    /// The called function.
    pub callee: FunctionIndex,
    /// How many times the call was made.
    pub count: u64,
}

/// All function CFGs of a binary plus the call graph between them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProgramCfg {
    /// One CFG per function (profiled or not).
    pub functions: Vec<FunctionCfg>,
    /// Calls between functions (aggregated: at most one edge per caller/callee pair).
    pub calls: Vec<CallEdge>,
}

/// A call from a block of one function to another function's entry block, with its count
/// (what inter-function reordering lays out together).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockCall {
    /// The calling function.
    pub src_function: FunctionIndex,
    /// The block making the call.
    pub src_block: BlockIndex,
    /// The called function.
    pub dst_function: FunctionIndex,
    /// The block called (its entry block).
    pub dst_block: BlockIndex,
    /// How many times.
    pub count: u64,
}
