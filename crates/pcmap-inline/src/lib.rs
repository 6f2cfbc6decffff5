//! Inlined call sites from DWARF, for tracers.
//!
//! This crate reads the DWARF of an ELF binary (with [`gimli`]) and produces one [`InlineSite`] per
//! `DW_TAG_inlined_subroutine`, together with the location of every parameter of the inlined
//! function *at the site address*, a census of those sites ([`census::Census`]) and an
//! inline-aware symbolizer ([`symbolize::Symbolizer`], frames like `llvm-symbolizer --inlining`).
//!
//! # The site model (what the BTF encoders consume)
//!
//! [`extract_sites`] returns an [`InlineInfo`]:
//!
//! * [`InlineInfo::functions`]: one [`Function`] per *root* subprogram DIE that is inlined somewhere
//!   or contains inline sites. The root is reached by following `DW_AT_abstract_origin` /
//!   `DW_AT_specification` chains, so every inline instance and every out-of-line copy of a function
//!   share one [`FunctionId`]. A function carries its declared parameters ([`ParamDecl`], in
//!   declaration order, with the `.debug_info` offset of the parameter's type so a BTF writer can map
//!   it to base BTF), its return type and whether it also has an out-of-line copy.
//! * [`InlineInfo::sites`]: every inline site in `.debug_info` order. [`InlineSite::callee`] is
//!   the inlined function, [`InlineSite::caller`] the enclosing concrete (out-of-line) function,
//!   [`InlineSite::parent`] the enclosing inline site (nesting), [`InlineSite::site_addr`] the
//!   address a probe should be placed at (`DW_AT_entry_pc`, else `DW_AT_low_pc`, else the first
//!   range; see [`SiteAddrSource`]), and [`InlineSite::params`] one [`ParamLocation`] per entry of
//!   the callee's [`Function::params`], same order.
//! * [`Location`] classifies a parameter's DWARF location at the site address: constant
//!   (register-free expressions are evaluated), memory at a fixed address, a link-time address as
//!   value, register, register+offset value, memory at register+offset, frame-base relative memory
//!   or value (with the frame base resolved to register+offset, through `.eh_frame`/`.debug_frame`
//!   for `DW_OP_call_frame_cfa`, when possible), entry value,
//!   pieces, implicit pointer, parameter reference, other computed expression, or why there is no
//!   location (no location attribute, no parameter DIE at the site, location list not covering the
//!   site address). GCC's zero-length location-list entries at the site address count as covering
//!   when nothing else does ([`ParamLocation::zero_length_view`]).
//! * [`DebugData::file_offset`] turns a site address into the file offset uprobes and `perf probe` use.
//!
//! Register numbers are DWARF register numbers (x86-64: 0 `rax`, 1 `rdx`, 2 `rcx`, 3 `rbx`, 4 `rsi`,
//! 5 `rdi`, 6 `rbp`, 7 `rsp`, 8-15 `r8`-`r15`, 16 return address, 17-32 `xmm0`-`xmm15`); see
//! [`location::x86_64_register_name`].
//!
//! The library never prints; all failures are [`Error`]s.

#![deny(missing_docs)]

#[cfg(feature = "btf")]
pub mod btf;
pub mod census;
mod cfa;
mod error;
mod extract;
pub mod location;
pub mod report;
mod sections;
pub mod symbolize;

pub use error::{Error, Result};
pub use extract::{ParamsAt, extract_sites};
pub use location::{Location, LocationPiece, RegOffset};
pub use sections::DebugData;

use std::borrow::Cow;
use std::ops::Range;

/// Index of a [`Function`] in [`InlineInfo::functions`].
pub type FunctionId = u32;
/// Index of an [`InlineSite`] in [`InlineInfo::sites`].
pub type SiteId = u32;
/// Index of a file name in [`InlineInfo::files`].
pub type FileId = u32;

/// All inline sites of a binary and the functions they refer to.
#[derive(Debug, Clone, Default)]
pub struct InlineInfo<'data> {
    /// Root functions: callees of inline sites and enclosing concrete functions.
    pub functions: Vec<Function<'data>>,
    /// Every `DW_TAG_inlined_subroutine`, in `.debug_info` order (a parent comes before its children).
    pub sites: Vec<InlineSite>,
    /// Call-site file names (deduplicated), referenced by [`InlineSite::call_file`].
    pub files: Vec<String>,
    /// Number of compilation units read.
    pub units: usize,
}

/// A function, identified by its root (abstract or only) subprogram DIE.
#[derive(Debug, Clone)]
pub struct Function<'data> {
    /// `.debug_info` offset of the root subprogram DIE.
    pub die: u64,
    /// `DW_AT_name` (the first one found along the origin chain).
    pub name: Option<Cow<'data, str>>,
    /// `DW_AT_linkage_name` / `DW_AT_MIPS_linkage_name`, if any.
    pub linkage_name: Option<Cow<'data, str>>,
    /// `.debug_info` offset of the return type DIE (`None` = void or unknown).
    pub return_type: Option<u64>,
    /// Declared formal parameters of the root DIE, in order.
    pub params: Vec<ParamDecl<'data>>,
    /// True when the function has `DW_TAG_unspecified_parameters` (variadic).
    pub variadic: bool,
    /// True when some subprogram DIE with code (an out-of-line copy) resolves to this function.
    pub out_of_line: bool,
    /// Number of inline sites whose callee is this function.
    pub inline_sites: u32,
}

/// A declared formal parameter of a [`Function`].
#[derive(Debug, Clone)]
pub struct ParamDecl<'data> {
    /// `.debug_info` offset of the `DW_TAG_formal_parameter` DIE.
    pub die: u64,
    /// Parameter name.
    pub name: Option<Cow<'data, str>>,
    /// `.debug_info` offset of the parameter's type DIE.
    pub type_die: Option<u64>,
    /// Byte size of the type after typedef/cv qualifiers (`None` when unknown, e.g. arrays).
    pub byte_size: Option<u64>,
}

/// Where the site address of an [`InlineSite`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SiteAddrSource {
    /// `DW_AT_entry_pc` (GCC).
    EntryPc,
    /// `DW_AT_low_pc` (single contiguous range).
    LowPc,
    /// Start of the first entry of `DW_AT_ranges`.
    FirstRange,
    /// The site has no code address at all.
    None,
}

/// One `DW_TAG_inlined_subroutine`.
#[derive(Debug, Clone)]
pub struct InlineSite {
    /// `.debug_info` offset of the `DW_TAG_inlined_subroutine` DIE.
    pub die: u64,
    /// The inlined function.
    pub callee: FunctionId,
    /// The enclosing concrete (out-of-line) function, if the site is inside one.
    pub caller: Option<FunctionId>,
    /// `.debug_info` offset of the enclosing concrete subprogram DIE.
    pub caller_die: Option<u64>,
    /// The enclosing inline site, if this site is nested in another one.
    pub parent: Option<SiteId>,
    /// Nesting depth: 1 for a site directly inside its concrete function.
    pub depth: u32,
    /// All address ranges of the site (half-open), in DWARF order.
    pub ranges: Vec<Range<u64>>,
    /// True when the ranges came from `DW_AT_ranges` (rather than low/high pc).
    pub range_list: bool,
    /// The probe address of the site.
    pub site_addr: Option<u64>,
    /// Which attribute gave [`InlineSite::site_addr`].
    pub site_addr_source: SiteAddrSource,
    /// `DW_AT_call_file`, resolved to a path.
    pub call_file: Option<FileId>,
    /// `DW_AT_call_line` (0 = unknown).
    pub call_line: u32,
    /// `DW_AT_call_column` (0 = unknown).
    pub call_column: u32,
    /// One entry per [`Function::params`] of the callee.
    pub params: Vec<ParamLocation>,
}

/// How a parameter's location was described in DWARF.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LocationSource {
    /// No attribute (or no DIE).
    None,
    /// `DW_AT_location` with a single expression (`exprloc`).
    Expression,
    /// `DW_AT_location` as a location list with this many (non-tombstone) entries.
    LocationList(u32),
    /// `DW_AT_const_value`.
    ConstValue,
}

/// The location of one parameter at an inline site's address.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ParamLocation {
    /// The classified location.
    pub location: Location,
    /// How DWARF described it.
    pub source: LocationSource,
    /// True when only a GCC zero-length (view) location-list entry at the site address covered it.
    pub zero_length_view: bool,
}

impl<'data> InlineInfo<'data> {
    /// The name of a function (`"<unknown>"` when it has none).
    pub fn function_name(&self, id: FunctionId) -> &str {
        self.functions
            .get(id as usize)
            .and_then(|f| f.name.as_deref())
            .unwrap_or("<unknown>")
    }

    /// The inline sites whose code ranges contain `address`, innermost (deepest) first: one per
    /// inlined frame llvm-symbolizer prints for the address.
    pub fn sites_at(&self, address: u64) -> Vec<&InlineSite> {
        let mut around: Vec<&InlineSite> = self
            .sites
            .iter()
            .filter(|s| s.ranges.iter().any(|r| r.contains(&address)))
            .collect();
        around.sort_by_key(|s| std::cmp::Reverse(s.depth));
        around
    }

    /// The file name of a call site.
    pub fn file_name(&self, id: Option<FileId>) -> &str {
        id.and_then(|i| self.files.get(i as usize))
            .map(String::as_str)
            .unwrap_or("??")
    }
}
