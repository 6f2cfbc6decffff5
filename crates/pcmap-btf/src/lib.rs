//! BTF for inline sites: a zero-copy reader and a writer for BTF (standard kinds, the location
//! kinds 20-22 of the October-2025 RFC and of the 2026 revision, the kind-layout section, split
//! BTF over a base), the encodings of inline sites with their parameter locations (the RFC's
//! `.BTF.inline`, `btf-2025`, `btf-2026`, and pcmap's compact encoding), a bpftool-style raw
//! printer, and an ELF appender that adds a non-allocated section without moving anything.
//!
//! The encoders take the neutral [`model::SiteSet`]; the crate depends only on `pcmap-bytes`
//! (byte primitives), plus `pcmap-binary` for the ELF appender (default feature `elf`).
#![deny(missing_docs)]

pub mod dump;
#[cfg(feature = "elf")]
pub mod elf_append;
pub mod encoding;
pub mod error;
pub mod header;
pub mod kind;
pub mod layout;
pub mod model;
pub mod raw;
pub mod reader;
pub mod resolve;
pub mod writer;

pub use encoding::{EncodeStats, Encoded, Format, decode, encode};
pub use error::{Error, Result};
pub use kind::Kind;
pub use model::{
    CodeSection, DecodedSite, FuncParam, InlineFunc, Loc, ParamLoc, Site, SiteSet, TypeDesc,
};
pub use reader::{Btf, LocFlavor, TypeRecord};
pub use writer::BtfWriter;
