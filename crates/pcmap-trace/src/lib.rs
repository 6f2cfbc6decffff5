//! Control-flow traces and their hierarchical trace representation (HTR).
//!
//! * [`format`](mod@format): readers and writers. The native text format ("pcmap-trace v1")
//!   and the compact binary format ("PCMTRACE") are read and written; qemu-user `-d exec` logs, valgrind lackey
//!   `I` lines, libipt `ptxed` output, `perf script` instruction and branch samples and plain
//!   address lists are read, auto-detected by [`format::detect`]. Every reader yields
//!   [`Record`]s and reports failures as a [`TraceError`] naming the file and line (or byte offset).
//! * [`trace`]: a whole trace in memory, split per thread, each thread's instructions interned
//!   into a table of distinct units ([`trace::Trace`]).
//! * [`htr`]: layers and passes: the instruction layer, the basic-super-block pass (with START/END
//!   sentinels and gap units, see [`htr::superblock`] for where pcmap differs from lldb), the loop
//!   pass, the function-call pass driven by a [`symbols::CodeInfo`], an exact model of lldb's own
//!   pass ([`htr::lldb`]) and the streaming, chunk-parallel first pass ([`htr::streaming`]).
//! * [`export`]: Chrome/Perfetto JSON (object format with named tracks), lldb's JSON array, folded
//!   stacks and flame-graph SVGs.
//!
//! * `summary`: the report of `pcmap trace summarize` (super blocks, loops, functions per
//!   thread, text or JSON); `recording`: a tracer's log turned into trace records.
//!
//! Besides `pcmap-bytes` (LEB128) the crate depends on nothing else of pcmap's: symbols come in
//! through the small [`symbols::CodeInfo`] trait or the sorted [`symbols::SymbolTable`]; the
//! `binary` feature adds `binary_code::BinaryCode`, a `CodeInfo` read from a `pcmap_binary::Binary`.
#![deny(missing_docs)]

#[cfg(feature = "binary")]
pub mod binary_code;
pub mod error;
pub mod export;
pub mod format;
pub mod htr;
pub mod record;
pub mod recording;
pub mod summary;
pub mod symbols;
pub mod synthetic;
pub mod trace;

pub use error::{Result, TraceError, TraceError as Error};
pub use record::{GapReason, Record};
