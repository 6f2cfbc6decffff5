//! Byte primitives shared by every pcmap format crate: one LEB128 read/write pair
//! ([`leb128`]), one bounds-checked field cursor ([`Cursor`]), and one page index over sorted
//! start addresses ([`StartIndex`]) for "which function, fragment or block holds this address".
//!
//! This crate depends on nothing of ours (and on `thiserror` only), so the format crates that
//! use it (`pcmap-bat`, `pcmap-bbmap`, `pcmap-btf`, `pcmap-trace`) can still be fuzzed and
//! published alone. Errors carry the absolute byte offset of the field being read; a format crate
//! adds the name of the field and maps the [`ErrorKind`] to its own error type, so each format
//! keeps its own messages.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod cursor;
pub mod leb128;
mod starts;

pub use cursor::{Cursor, Endian};
pub use starts::StartIndex;

/// What went wrong reading a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ErrorKind {
    /// A fixed-size field needs more bytes than are left.
    #[error("needs {needed} bytes, {available} available")]
    UnexpectedEnd {
        /// Bytes the field needs.
        needed: usize,
        /// Bytes left in the input.
        available: usize,
    },
    /// The input ends inside a LEB128 number (every byte left has the continuation bit).
    #[error("LEB128 number extends past the end of the input")]
    LebPastEnd,
    /// A LEB128 number has payload bits beyond the width of its type.
    #[error("LEB128 number does not fit in {bits} bits")]
    LebOverflow {
        /// Width of the type read (64, or 128 for [`leb128::read_uleb128_u128`]).
        bits: u32,
    },
}

/// A failure reading a field: where (absolute byte offset of the field's first byte) and what.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("at byte offset {offset:#x}: {kind}")]
pub struct Error {
    /// Absolute offset of the field's first byte (the cursor's `base` plus its position).
    pub offset: usize,
    /// What went wrong.
    pub kind: ErrorKind,
}

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
