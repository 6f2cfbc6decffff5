//! perf2bolt 22's semantics in Rust, for `pcmap perf2bolt`:
//!
//! * the input binary as BOLT's aggregator sees it comes from `pcmap-binary`
//!   ([`pcmap_binary::bolt::BoltFunctions`], built from a [`pcmap_binary::Binary`] the caller
//!   parsed once): functions with BOLT's names, sizes and "max sizes", PLT pseudo functions;
//! * [`cfg`](mod@cfg): CFGs built like BOLT's from the disassembly (leaders, successor order, jump tables,
//!   tail calls, which functions are simple);
//! * [`preagg`] and [`perfdata`]: pre-aggregated text and perf.data (branch stacks and basic
//!   samples) into the same merged trace records;
//! * [`aggregate`]: taken branches, fall-through validation with call continuation, external
//!   origins, returns, statistics, in parallel over address-sorted traces;
//! * [`fdata`] and [`yaml`]: perf2bolt's output files; [`stringmap`]: LLVM `StringSet` order;
//! * [`block_hash`]: BOLT's function hash and block hashes (`BlendedBlockHash`) from LLVM opcode names, AT&T
//!   mnemonics, MCInst operands and LLVM register numbers ([`block_hash_table`], generated).
//!
//! BOLT-optimized inputs (with `.note.bolt_bat`) are aggregated in perf2bolt's BAT mode
//! ([`aggregate::Aggregator::with_bat`]) for fdata and BAT YAML output.
//!
//! Not covered yet: landing pads (C++ exceptions), perf.data of position-independent binaries.

pub mod aggregate;
pub mod block_hash;
#[rustfmt::skip]
pub mod block_hash_table;
pub mod cfg;
pub mod fdata;
pub mod perfdata;
pub mod preagg;
pub mod stringmap;
pub mod yaml;

/// Errors of this crate.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The binary cannot be used (malformed, or a machine BOLT's model does not decode).
    #[error("reading the binary: {0}")]
    Binary(#[from] pcmap_binary::Error),
    /// The perf.data file cannot be used.
    #[error("perf.data: {0}")]
    PerfData(String),
    /// A pre-aggregated profile line is malformed.
    #[error("pre-aggregated profile line {line}, column {column}: {message}")]
    Parse {
        /// 1-based line number.
        line: u64,
        /// 1-based column.
        column: usize,
        /// What was expected.
        message: String,
    },
}
