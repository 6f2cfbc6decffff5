//! Propeller-style layout profiles: from a basic-block address map and a branch profile to the
//! files clang 22 and lld 22 take for a relink with basic-block sections.
//!
//! The pipeline:
//! 1. [`builder`] turns `SHT_LLVM_BB_ADDR_MAP` blocks plus taken-branch and fall-through records
//!    into per-function CFGs with block and edge counts and a call graph ([`cfg`](mod@cfg)).
//! 2. [`layout`] splits every hot function into hot blocks and a cold part and orders the hot
//!    blocks for the ext-TSP objective ([`ext_tsp`]).
//! 3. [`function_order`] orders the hot functions with call-chain clustering; with
//!    inter-function reordering, [`inter`] cuts each function's hot order where no fall-through
//!    joins it and chains the pieces of all functions along calls, so a function may become
//!    several clusters (`name.__part.N`); it also scores whole-program layouts (ext-TSP score,
//!    estimated taken branches).
//! 4. [`cc_profile`] writes the `-fbasic-block-sections=list=` profile (version 1) and
//!    [`ld_profile`] the `--symbol-ordering-file` list. [`generate()`] ties 2–4 together.
//!
//! [`input`] reads the map of an ELF file and pre-aggregated profiles into the builder.
#![deny(missing_docs)]

pub mod builder;
pub mod cc_profile;
pub mod cfg;
pub mod ext_tsp;
pub mod function_order;
pub mod generate;
pub mod input;
pub mod inter;
pub mod layout;
pub mod ld_profile;

pub use cc_profile::{CcFunction, CcProfile, CcProfileError, read_cc_profile, write_cc_profile};
pub use cfg::{
    BlockCall, BlockIndex, CallEdge, CfgBlock, CfgEdge, EdgeKind, FunctionCfg, FunctionIndex,
    ProgramCfg,
};
pub use ext_tsp::ExtTspParams;
pub use function_order::FunctionOrderOptions;
pub use generate::{
    LaidOutFunction, LayoutScore, LayoutSummary, PropellerOptions, PropellerProfile, SkipReason,
    generate, generate_with_calls,
};
pub use layout::{FunctionLayout, LayoutOptions};
