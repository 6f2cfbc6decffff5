//! The functions BOLT discovers in a binary, as its aggregator (perf2bolt) sees them: symbol
//! functions with BOLT's names, sizes and "max sizes", PLT entries as pseudo functions,
//! functions known only from FDEs or from code section starts, and secondary entry points.
//!
//! Built from an already parsed [`Binary`] (see [`BoltFunctions::discover`]):
//!
//! * every `STT_FUNC`/`STT_GNU_IFUNC` symbol in a code section is a function, named by BOLT's
//!   naming pass ([`crate::Binary::bolt_name`]: `name`, `name/N`, `name/file/N`, ...); aliases
//!   at one address are merged (largest size wins);
//! * an untyped code label (`STT_NOTYPE`) that no sized function contains becomes a function
//!   (in BOLTed binaries: a moved function's secondary entry label left in the original code);
//! * a code section start without a function (`.init`, `.fini`, the original `.bolt.org.text`
//!   of a BOLTed binary) becomes `<section>/N`;
//! * a zero-size symbol takes the size of the FDE at its address; an FDE start outside every
//!   function becomes `__BOLT_FDE_FUNCat<addr>` (not in a `.plt*` section: the FDE GNU ld
//!   writes for the PLT covers BOLT's PLT pseudo functions);
//! * a lazily bound `.plt` (16-byte header and entries in `.rela.plt` order) gives the pseudo
//!   functions `__BOLT_PSEUDO_.plt` and `name@PLT`;
//! * zero-size functions extend to the next function; every function's *max size* reaches the
//!   next function or the end of its section, unless the bytes after its size are not zeros,
//!   NOPs or `int3` ("bad padding"), when lookups stop at its size;
//!
//! Secondary entry points need every function's instructions: BOLT's
//! `processInterproceduralReferences` makes a direct branch or call, or a RIP-relative reference,
//! from one function into the middle of another (within its size) an entry point of the target.
//! References of every function that decodes completely count (perf2bolt disassembles every
//! function; in BAT mode it counts the references of the functions it ignores too). A caller
//! that decodes some functions anyway (perf2bolt builds CFGs of the profiled ones) takes their
//! references from its own decode ([`references_out_of`]) and lets
//! [`BoltFunctions::outgoing_references`] decode the others, so each function is decoded once;
//! [`BoltFunctions::entry_points`] applies the rule.

use std::borrow::Cow;

use iced_x86::{Code, Decoder, DecoderOptions, FlowControl, Instruction, Mnemonic, OpKind};
use rayon::slice::ParallelSliceMut;

use crate::symbols::SymbolKind;
use crate::{Binary, Machine, Result};

mod kept;
pub use kept::{Discovered, DiscoveredFunction, NameRef};

/// BOLT's name prefix for a function known only from an FDE (followed by its hex address).
const FDE_FUNCTION_PREFIX: &str = "__BOLT_FDE_FUNCat";

/// What kind of function BOLT makes of a code range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FunctionKind {
    /// An ordinary function: disassembled, CFG built when simple.
    Regular,
    /// A PLT entry (`name@PLT`) or the PLT header: a pseudo function without CFG.
    Plt,
}

/// One function as BOLT discovers it.
#[derive(Debug, Clone)]
pub struct BoltFunction<'a> {
    /// BOLT's names for the function: the first is the one printed in profiles
    /// (`name` for globals, `name/N` for locals); local functions with a file symbol also get
    /// `name/file/N`. Borrowed from the binary's symbols where they name it; one is held
    /// without an allocation of its own (a large binary has hundreds of thousands of functions,
    /// nearly all with one name).
    pub names: Names<'a>,
    /// Start address.
    pub address: u64,
    /// Size (the symbol size, or up to the next function for zero-size symbols).
    pub size: u64,
    /// Addresses in `[address, address + max_size)` belong to this function for profile
    /// lookups: up to the next function or the end of the section, or just `size` after bad
    /// padding.
    pub max_size: u64,
    /// Ordinary or PLT.
    pub kind: FunctionKind,
}

/// A function's names ([`BoltFunction::names`], read as a slice): one is held without an
/// allocation of its own, as it is for nearly every function.
///
/// Written here rather than taken from `smallvec`: a `SmallVec` is invariant in the lifetime of
/// its items, which would make every model borrowing a binary invariant in that borrow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Names<'a> {
    /// The one name of most functions.
    One(Cow<'a, str>),
    /// Several names (or none).
    Many(Vec<Cow<'a, str>>),
}

impl<'a> Names<'a> {
    /// Add `name` after the others.
    pub fn push(&mut self, name: Cow<'a, str>) {
        match self {
            Names::Many(all) => all.push(name),
            // Taking the name leaves an empty owned string behind, which allocates nothing.
            Names::One(first) => *self = Names::Many(vec![std::mem::take(first), name]),
        }
    }
}

impl<'a> std::ops::Deref for Names<'a> {
    type Target = [Cow<'a, str>];

    fn deref(&self) -> &[Cow<'a, str>] {
        match self {
            Names::One(name) => std::slice::from_ref(name),
            Names::Many(all) => all,
        }
    }
}

impl<'a> Extend<Cow<'a, str>> for Names<'a> {
    fn extend<I: IntoIterator<Item = Cow<'a, str>>>(&mut self, names: I) {
        for name in names {
            self.push(name);
        }
    }
}

impl<'a> FromIterator<Cow<'a, str>> for Names<'a> {
    fn from_iter<I: IntoIterator<Item = Cow<'a, str>>>(names: I) -> Self {
        let mut names = names.into_iter();
        let Some(first) = names.next() else {
            return Names::Many(Vec::new());
        };
        let mut all = Names::One(first);
        all.extend(names);
        all
    }
}

impl<'n, 'a> IntoIterator for &'n Names<'a> {
    type Item = &'n Cow<'a, str>;
    type IntoIter = std::slice::Iter<'n, Cow<'a, str>>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<Names<'_>>() == 32);

impl BoltFunction<'_> {
    /// The name printed in fdata for this function.
    pub fn name(&self) -> &str {
        &self.names[0]
    }

    /// The name perf2bolt prints for this function: in BAT mode (a profile of a BOLT-optimized
    /// binary) the `name/file/N` alias of a local function when it has one, else [`Self::name`].
    pub fn profile_name(&self, bat: bool) -> &str {
        if bat {
            self.file_name_alias().unwrap_or_else(|| self.name())
        } else {
            self.name()
        }
    }

    /// Whether BOLT discovered the function from an FDE alone (no symbol): such functions are
    /// created after the symbol and PLT functions, and numbered after them.
    pub fn is_fde_only(&self) -> bool {
        self.names[0].starts_with(FDE_FUNCTION_PREFIX)
    }

    /// Whether this is the pseudo function BOLT makes of a PLT header (`__BOLT_PSEUDO_.plt`):
    /// a PLT function here, but not one of BOLT's PLT entries (numbered after them, counted in
    /// the program statistics).
    pub fn is_plt_header(&self) -> bool {
        self.names[0].starts_with("__BOLT_PSEUDO_")
    }

    /// The `name/file/N` alias of a local function (preferred in BAT mode), if any.
    pub fn file_name_alias(&self) -> Option<&str> {
        self.names
            .iter()
            .map(|n| &**n)
            .find(|n| n.find('/').is_some_and(|i| n[i + 1..].contains('/')))
    }

    /// True if `address` lies in `[address, address + max_size)`.
    pub fn contains(&self, address: u64) -> bool {
        address >= self.address && address - self.address < self.max_size
    }
}

/// The functions of a binary as BOLT discovers them, sorted by address, with the binary-wide
/// facts perf2bolt's aggregation depends on.
#[derive(Debug)]
pub struct BoltFunctions<'a, 'data> {
    binary: &'a Binary<'data>,
    functions: Vec<BoltFunction<'a>>,
    /// `functions[i].address` and `address + max_size`, kept apart for cache-friendly lookups.
    starts: Vec<u64>,
    ends: Vec<u64>,
    /// Page index over `starts`, so a lookup searches a handful of functions.
    pages: pcmap_bytes::StartIndex,
    /// Decoder bitness (64 for x86-64, 32 for i386).
    bitness: u32,
    /// `(function start, LSDA address)` of the FDEs with an LSDA, sorted.
    lsdas: Vec<(u64, u64)>,
    /// Addresses of the symbols inside functions that BOLT makes secondary entry points
    /// ([`label_entry_points`]), sorted.
    label_entries: Vec<u64>,
    /// Start addresses of the functions with a symbol in their middle that may not be there
    /// ([`label_entry_points`]), sorted.
    symbol_inside: Vec<u64>,
    /// Start addresses of the functions whose padding BOLT rejects ([`set_max_sizes`]), in
    /// either mode, sorted.
    rejected_padding: Vec<u64>,
    /// Code addresses data refers to ([`BoltFunctions::data_references_in`]), read on first use.
    data_refs: std::sync::OnceLock<Vec<u64>>,
}

impl<'a, 'data> BoltFunctions<'a, 'data> {
    /// Discover the functions of `binary` the way BOLT does (see the module documentation).
    /// Instruction decoding (for references and padding) needs x86: other machines get
    /// [`crate::Error::UnsupportedMachine`].
    pub fn discover(binary: &'a Binary<'data>) -> Result<Self> {
        Self::discover_with(binary, None)
    }

    /// [`Self::discover`], with the verdicts of its padding checks given: `rejected`, the
    /// [`Self::rejected_paddings`] of an earlier discovery on the same bytes (kept between runs).
    /// The paddings are then not decoded, and the code's pages not read.
    pub fn discover_knowing_paddings(binary: &'a Binary<'data>, rejected: &[u64]) -> Result<Self> {
        Self::discover_with(binary, Some(rejected))
    }

    fn discover_with(binary: &'a Binary<'data>, rejected: Option<&[u64]>) -> Result<Self> {
        let bitness = Self::bitness_of(binary)?;
        let in_code = |a: u64| binary.code_section_at(a).is_some();
        // The FDEs (read below) are parsed beside the walk of the symbols.
        let (all_fdes, (syms, mut functions, from_label)) =
            rayon::join(|| binary.fdes(), || functions_of_symbols(binary));
        // Code section starts without a function but with a section symbol (kept by
        // `--emit-relocs`): a function named like BOLT names that symbol (`<section>/N`). Code
        // of a section without one (say a `.noplt` section of stubs in a binary linked without
        // relocations) stays unknown, as perf2bolt leaves it. PLT sections get pseudo functions
        // below instead.
        let mut section_starts: Vec<(u64, u64)> = Vec::new();
        for section in binary.code_sections() {
            let address = section.address;
            if section.name.starts_with(".plt") || functions.iter().any(|f| f.address == address) {
                continue;
            }
            let Some(name) = binary
                .symbols()
                .iter()
                .find(|s| s.kind == SymbolKind::Section && s.section_index == Some(section.index))
                .and_then(|s| binary.bolt_name(s.index))
            else {
                continue;
            };
            functions.push(BoltFunction {
                names: Names::One(Cow::Borrowed(name)),
                address,
                size: 0,
                max_size: 0,
                kind: FunctionKind::Regular,
            });
            section_starts.push((address, address.saturating_add(section.size)));
        }
        // BOLT sees the section symbol in address order with the others: a zero-size untyped
        // label after it (before any other function of the section) is inside that zero-size
        // function, not a function of its own (say a global label left in the original code,
        // `.bolt.org.text`, of a BOLTed binary); a sized one is a function.
        if !section_starts.is_empty() && !from_label.is_empty() {
            functions.sort_by_key(|f| f.address);
            let mut open: Option<(u64, u64)> = None;
            functions.retain(|f| {
                if let Some(&range) = section_starts.iter().find(|r| r.0 == f.address) {
                    open = Some(range);
                    return true;
                }
                let inside = open.is_some_and(|(start, end)| f.address > start && f.address < end);
                if inside && from_label.binary_search(&f.address).is_ok() {
                    return false;
                }
                open = None;
                true
            });
        }
        // FDEs: sizes of zero-size symbols, and functions of code no symbol covers.
        let mut lsdas: Vec<(u64, u64)> = all_fdes
            .iter()
            .filter_map(|&(start, _, lsda)| Some((start, lsda?)))
            .collect();
        lsdas.sort_unstable();
        let mut fdes: Vec<(u64, u64)> = all_fdes.into_iter().map(|(s, l, _)| (s, l)).collect();
        fdes.sort_unstable();
        for f in functions.iter_mut().filter(|f| f.size == 0) {
            let i = fdes.partition_point(|fde| fde.0 < f.address);
            if let Some(&(address, size)) = fdes.get(i)
                && address == f.address
            {
                f.size = size;
            }
        }
        let mut known: Vec<(u64, u64)> = functions.iter().map(|f| (f.address, f.size)).collect();
        known.sort_unstable();
        // Both lists in address order: the functions starting at or before each FDE are found
        // by walking forward, not by a search per FDE.
        let mut i = 0;
        for &(address, size) in &fdes {
            while known.get(i).is_some_and(|f| f.0 <= address) {
                i += 1;
            }
            let covered = i
                .checked_sub(1)
                .and_then(|j| known.get(j))
                .is_some_and(|&(start, len)| address == start || address - start < len);
            // The FDE GNU ld writes for the PLT: BOLT's PLT pseudo functions own that code.
            let in_plt = binary
                .code_section_at(address)
                .is_some_and(|s| s.name.starts_with(".plt"));
            if !in_code(address) || covered || in_plt {
                continue;
            }
            functions.push(BoltFunction {
                names: Names::One(Cow::Owned(format!("{FDE_FUNCTION_PREFIX}{address:x}"))),
                address,
                size,
                max_size: 0,
                kind: FunctionKind::Regular,
            });
        }
        add_plt_functions(binary, &mut functions);
        functions.sort_by_key(|f| f.address);
        let rejected_padding = set_max_sizes(binary, bitness, &mut functions, rejected);
        let (label_entries, symbol_inside) = label_entry_points(binary, &syms, &functions);
        // BOLT's "symbol seen in the middle of the function": lookups stop at its size.
        for f in functions.iter_mut() {
            if symbol_inside.binary_search(&f.address).is_ok() {
                f.max_size = f.size;
            }
        }
        Ok(Self::assemble(
            binary,
            bitness,
            functions,
            lsdas,
            label_entries,
            symbol_inside,
            rejected_padding,
        ))
    }

    /// The decoder bitness of `binary`'s machine; other machines than x86 get
    /// [`crate::Error::UnsupportedMachine`].
    fn bitness_of(binary: &Binary<'_>) -> Result<u32> {
        match binary.machine() {
            Machine::X86_64 => Ok(64),
            Machine::X86 => Ok(32),
            m => Err(crate::Error::UnsupportedMachine { machine: m.name() }),
        }
    }

    /// The model of the functions found (sorted by address, final sizes) and the facts found
    /// with them, with its lookup tables.
    fn assemble(
        binary: &'a Binary<'data>,
        bitness: u32,
        mut functions: Vec<BoltFunction<'a>>,
        lsdas: Vec<(u64, u64)>,
        label_entries: Vec<u64>,
        symbol_inside: Vec<u64>,
        rejected_padding: Vec<u64>,
    ) -> Self {
        // Kept for the whole run, without the room its growth left.
        functions.shrink_to_fit();
        let starts: Vec<u64> = functions.iter().map(|f| f.address).collect();
        let pages = pcmap_bytes::StartIndex::new(&starts, |&s| s);
        let ends = functions
            .iter()
            .map(|f| f.address.saturating_add(f.max_size))
            .collect();
        Self {
            binary,
            functions,
            starts,
            ends,
            pages,
            bitness,
            lsdas,
            label_entries,
            symbol_inside,
            rejected_padding,
            data_refs: std::sync::OnceLock::new(),
        }
    }

    /// Whether BOLT finds a symbol in the middle of the function starting at `address` that may
    /// not be there (`adjustFunctionBoundaries`: a sized or typed symbol such as a data object
    /// before the function's end, so its maximum size is below its size): BOLT prints
    /// "symbol seen in the middle of the function" and makes it non-simple (no CFG: its
    /// fall-throughs do not match, its branches are still recorded).
    pub fn has_symbol_inside(&self, address: u64) -> bool {
        self.symbol_inside.binary_search(&address).is_ok()
    }

    /// Whether BOLT ignores the function starting at `address` for its padding
    /// (`adjustCodePadding`): in relocation mode, bytes between its end and the next function
    /// that are not padding (see `set_max_sizes`) make it non-simple, its maximum size kept;
    /// BOLT prints "has invalid padding. Ignoring the function". (Without relocations its
    /// maximum size is cut to its size instead.)
    pub fn has_invalid_padding(&self, address: u64) -> bool {
        // The search first: the list is nearly always empty, and the mode is found by name
        // among the sections (this is asked for every function).
        self.rejected_padding.binary_search(&address).is_ok() && self.relocation_mode()
    }

    /// Start addresses of the functions whose padding BOLT rejects, in either mode (see
    /// [`Self::has_invalid_padding`]), sorted: what [`Self::discover_knowing_paddings`] takes.
    pub fn rejected_paddings(&self) -> &[u64] {
        &self.rejected_padding
    }

    /// [`Self::has_symbol_inside`] or [`Self::has_invalid_padding`]: BOLT builds no CFG for the
    /// function (its branches are still recorded).
    pub fn is_ignored(&self, address: u64) -> bool {
        self.has_symbol_inside(address) || self.has_invalid_padding(address)
    }

    /// The C++ exception table (LSDA) of function `index`: the one named by the FDE that starts
    /// at the function's address, as BOLT associates them. `None` without one.
    pub fn lsda(&self, index: usize) -> Option<Result<crate::Lsda>> {
        let address = self.functions.get(index)?.address;
        let i = self.lsdas.partition_point(|l| l.0 < address);
        let &(start, lsda) = self.lsdas.get(i)?;
        (start == address).then(|| self.binary.lsda(lsda, address))
    }

    /// The binary the functions were discovered in.
    pub fn binary(&self) -> &'a Binary<'data> {
        self.binary
    }

    /// Functions sorted by address.
    pub fn functions(&self) -> &[BoltFunction<'a>] {
        &self.functions
    }

    /// Index of the function whose `[address, address + max_size)` contains `address`.
    pub fn function_containing(&self, address: u64) -> Option<usize> {
        let i = self
            .pages
            .upper_bound(&self.starts, address, |&s| s)
            .checked_sub(1)?;
        (address < self.ends[i]).then_some(i)
    }

    /// [`Self::function_containing`], trying function `hint` first: a caller walking addresses in
    /// order passes its last answer and mostly skips the search. Same answer for any hint.
    pub fn function_containing_near(&self, address: u64, hint: usize) -> Option<usize> {
        let hit = self.starts.get(hint).is_some_and(|&s| s <= address)
            && self.ends.get(hint).is_some_and(|&e| address < e)
            && self.starts.get(hint + 1).is_none_or(|&next| address < next);
        if hit {
            return Some(hint);
        }
        self.function_containing(address)
    }

    /// Index of the function starting exactly at `address`.
    pub fn function_at(&self, address: u64) -> Option<usize> {
        self.starts.binary_search(&address).ok()
    }

    /// The code addresses in `[start, end)` that data refers to, sorted (see
    /// [`Self::data_references`]).
    pub fn data_references_in(&self, start: u64, end: u64) -> &[u64] {
        let refs = self.data_references();
        let lo = refs.partition_point(|&a| a < start);
        let hi = refs.partition_point(|&a| a < end);
        &refs[lo..hi]
    }

    /// Every code address that data refers to, sorted ([`DataReferences`]), read on first use
    /// unless given ([`Self::take_data_references`]).
    pub fn data_references(&self) -> &[u64] {
        self.data_refs
            .get_or_init(|| DataReferences::read(self.binary).0)
    }

    /// Take the binary's data references, read beforehand (for instance beside
    /// [`Self::discover`], which runs on one thread). Ignored if they were already read, or
    /// were read from another binary.
    pub fn take_data_references(&self, refs: DataReferences<'_, '_>) {
        if std::ptr::eq(refs.1.data(), self.binary.data()) {
            let _ = self.data_refs.set(refs.0);
        }
    }

    /// Whether BOLT processes the binary in relocation mode (its code relocations were kept,
    /// see [`Binary::has_text_relocations`]); perf2bolt then runs in strict mode.
    pub fn relocation_mode(&self) -> bool {
        self.binary.has_text_relocations()
    }

    /// Whether the binary is loaded at its link-time addresses (`ET_EXEC`).
    pub fn fixed_address(&self) -> bool {
        self.binary.is_fixed_address()
    }

    /// Whether the binary was produced by BOLT with address translation tables
    /// (`.note.bolt_bat`): profiles of such binaries must be translated through BAT.
    pub fn has_bat(&self) -> bool {
        self.binary.section_by_name(".note.bolt_bat").is_some()
    }

    /// The decoder bitness of the binary's code (64 for x86-64, 32 for i386).
    pub fn bitness(&self) -> u32 {
        self.bitness
    }

    /// Addresses outside function `index` that it references (see [`references_out_of`]),
    /// decoding it; empty for PLT functions and functions that do not decode completely.
    pub fn outgoing_references(&self, index: usize) -> Vec<u64> {
        let Some(func) = self.functions.get(index) else {
            return Vec::new();
        };
        let Some(bytes) = self.binary.code_bytes(func.address, func.size) else {
            return Vec::new();
        };
        if func.kind != FunctionKind::Regular {
            return Vec::new();
        }
        let mut decoder = Decoder::with_ip(self.bitness, bytes, func.address, DecoderOptions::NONE);
        let mut out = Vec::new();
        let mut ins = Instruction::default();
        while decoder.can_decode() {
            decoder.decode_out(&mut ins);
            if ins.is_invalid() {
                return Vec::new();
            }
            out.extend(instruction_reference(&ins).filter(|&a| !contains(func, a)));
        }
        out
    }

    /// The secondary entry point a reference to `addr` from outside its function makes, as
    /// (function index, offset): an address inside a regular function, past its start and
    /// within its size ([`Self::entry_points`]). Most references are calls to a function's
    /// start, which make none.
    #[inline]
    pub fn entry_point_at(&self, addr: u64) -> Option<(usize, u64)> {
        // Every direct call of the program passes here, nearly all to a function's start: the
        // page index finds the function, and its start (already read) settles those without
        // reading the function itself.
        let i = self
            .pages
            .upper_bound(&self.starts, addr, |&s| s)
            .checked_sub(1)?;
        let offset = addr - self.starts[i];
        if offset == 0 {
            return None;
        }
        let f = &self.functions[i];
        (f.kind == FunctionKind::Regular && offset < f.size).then_some((i, offset))
    }

    /// The secondary entry points (sorted offsets of each function, [`EntryPoints::of`] its
    /// index in [`Self::functions`]): those BOLT's `processInterproceduralReferences` makes of
    /// `references` (addresses referenced from outside the function they land in), and the
    /// symbols inside functions its `adjustFunctionBoundaries` adds (`label_entry_points`);
    /// each an address inside a regular function, past its start and within its size.
    pub fn entry_points(&self, references: impl IntoIterator<Item = u64>) -> EntryPoints {
        let mut entries: Vec<(usize, u64)> = references
            .into_iter()
            .chain(self.label_entries.iter().copied())
            .filter_map(|addr| self.entry_point_at(addr))
            .collect();
        entries.sort_unstable();
        entries.dedup();
        EntryPoints::from_sorted(&entries)
    }
}

/// Every code address that data refers to, sorted: the targets (`S + A`) of the absolute
/// relocations (`R_X86_64_64`, `32`, `32S`) that `--emit-relocs` keeps in non-executable
/// sections. In relocation mode these are BOLT's "externally referenced offsets" of the function
/// they fall in (jump-table entries, computed-goto tables). PC-relative ones
/// (position-independent jump tables) are left to jump-table analysis, as BOLT does. Empty
/// outside relocation mode ([`BoltFunctions::relocation_mode`]).
///
/// Read from the binary alone, so that it can be read while the functions are discovered
/// ([`BoltFunctions::take_data_references`]); it keeps the binary it was read from.
pub struct DataReferences<'b, 'data>(Vec<u64>, &'b Binary<'data>);

impl<'b, 'data> DataReferences<'b, 'data> {
    /// Read `binary`'s data references.
    pub fn read(binary: &'b Binary<'data>) -> Self {
        if !binary.has_text_relocations() {
            return DataReferences(Vec::new(), binary);
        }
        let symbols = binary.symbols();
        let mut out = Vec::new();
        for sec in binary.sections() {
            if !sec.is_alloc() || sec.is_executable() {
                continue;
            }
            // Collected per section: a malformed relocation section adds nothing.
            let mut targets = Vec::new();
            let read = binary.visit_relocations_for(sec.index, |r| {
                if r.kind != crate::RelocationKind::Absolute || r.symbol == 0 {
                    return;
                }
                let Some(sym) = symbols.get(r.symbol as usize) else {
                    return;
                };
                let target = sym.address.wrapping_add(r.addend.unwrap_or(0) as u64);
                if binary.code_section_at(target).is_some() {
                    targets.push(target);
                }
            });
            if read.is_ok() {
                // Jump tables repeat their targets: merged before the next section's are read.
                targets.par_sort_unstable();
                targets.dedup();
                out.append(&mut targets);
            }
        }
        out.par_sort_unstable();
        out.dedup();
        out.shrink_to_fit();
        DataReferences(out, binary)
    }

    /// `binary`'s data references as an earlier [`Self::read`] of the same bytes found them
    /// (kept between runs): sorted here unless they are already, so that nothing else depends
    /// on where they were kept.
    pub fn known(binary: &'b Binary<'data>, mut refs: Vec<u64>) -> Self {
        if !refs.is_sorted_by(|a, b| a < b) {
            refs.sort_unstable();
            refs.dedup();
        }
        DataReferences(refs, binary)
    }
}

/// The secondary entry points of a binary's functions ([`BoltFunctions::entry_points`]), kept
/// only for the functions that have any: on 200,000 functions, one empty list per function was
/// 5 MB.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EntryPoints {
    /// The functions with entry points (indices, increasing).
    functions: Vec<usize>,
    /// Where each of `functions` starts in `offsets`.
    starts: Vec<usize>,
    /// Every function's entry points, function after function, each sorted.
    offsets: Vec<u64>,
}

impl EntryPoints {
    /// From (function index, offset) pairs, sorted and without duplicates.
    fn from_sorted(entries: &[(usize, u64)]) -> Self {
        let mut out = EntryPoints::default();
        for &(i, offset) in entries {
            if out.functions.last() != Some(&i) {
                out.functions.push(i);
                out.starts.push(out.offsets.len());
            }
            out.offsets.push(offset);
        }
        out
    }

    /// The entry points of function `index` (offsets, sorted; empty when it has none).
    pub fn of(&self, index: usize) -> &[u64] {
        match self.functions.binary_search(&index) {
            Ok(k) => self.of_slot(k),
            Err(_) => &[],
        }
    }

    /// The entry points of the `k`-th function that has any.
    fn of_slot(&self, k: usize) -> &[u64] {
        let end = self
            .starts
            .get(k + 1)
            .copied()
            .unwrap_or(self.offsets.len());
        &self.offsets[self.starts[k]..end]
    }
}

/// [`BoltFunctions::discover`]'s walk of the symbols: the named, defined symbols other than
/// section and file symbols, in address order; the functions BOLT makes of them (sizes from FDEs
/// not yet filled in); and the addresses of the functions made from a zero-size untyped label
/// alone, increasing.
fn functions_of_symbols<'b, 'data>(
    binary: &'b Binary<'data>,
) -> (
    Vec<&'b crate::Symbol<'data>>,
    Vec<BoltFunction<'b>>,
    Vec<u64>,
) {
    let in_code = |a: u64| binary.code_section_at(a).is_some();
    // Sized for every symbol: growing by doubling would copy a large binary's list several
    // times, and the pages past its end are never touched.
    let mut functions: Vec<BoltFunction<'b>> = Vec::with_capacity(binary.symbols().len());
    // Symbols in address order (symbol-table order at one address), each with what the walk
    // below reads of it. The fields are copied out in table order, which reads the table front
    // to back, and sorted with them: walking the symbols themselves in address order missed the
    // cache on nearly every one.
    // Sized for every symbol too: collected from a filter, the list grew by doubling.
    let mut keyed: Vec<WalkedSymbol<'b>> = Vec::with_capacity(binary.symbols().len());
    keyed.extend(
        binary
            .symbols()
            .iter()
            .filter(|s| {
                !s.name.is_empty()
                    && !s.is_undefined
                    && !matches!(s.kind, SymbolKind::Section | SymbolKind::File)
            })
            .map(|s| WalkedSymbol {
                address: s.address,
                index: s.index,
                size: s.size,
                name: binary.bolt_name(s.index).unwrap_or(s.name),
                file_name: binary.bolt_file_name(s.index),
                kind: s.kind,
                is_local: s.is_local,
            }),
    );
    keyed.par_sort_unstable_by_key(|s| (s.address, s.index));
    let symbols = binary.symbols();
    // A symbol's index is its place in the table.
    let syms: Vec<&crate::Symbol<'data>> = keyed.iter().map(|s| &symbols[s.index]).collect();
    // Addresses of functions made from a zero-size untyped label alone (see the section
    // starts in `discover`), increasing: symbols come in address order.
    let mut from_label: Vec<u64> = Vec::new();
    for s in &keyed {
        let is_func = matches!(s.kind, SymbolKind::Function | SymbolKind::Ifunc);
        let is_label = matches!(s.kind, SymbolKind::NoType | SymbolKind::Other(_));
        if !(is_func || is_label) || !in_code(s.address) {
            continue;
        }
        // Borrowed, not copied: a large binary has hundreds of thousands of functions.
        let names = || {
            std::iter::once(s.name)
                .chain(s.file_name)
                .map(Cow::Borrowed)
        };
        if is_label {
            // A label inside the previous function is not a function of its own: inside
            // its size, or, when its size is unknown (0), a local untyped label of its
            // section (BOLT's `isSymbolValidInScope`; a global label after a zero-size
            // function starts a function, e.g. a moved function's secondary entry left in
            // a BOLTed binary's original code).
            let section = |a: u64| binary.code_section_at(a).map(|sec| sec.address);
            let contained = functions.last().is_some_and(|f| {
                s.address >= f.address
                    && if f.size == 0 {
                        matches!(s.kind, SymbolKind::NoType)
                            && s.is_local
                            && section(s.address) == section(f.address)
                    } else {
                        s.address - f.address < f.size
                    }
            });
            if contained {
                continue;
            }
        }
        if let Some(last) = functions.last_mut()
            && last.address == s.address
        {
            last.names.extend(names());
            last.size = last.size.max(s.size);
            // A typed symbol at the same address: no longer a function of a label alone (it
            // can only be the last one recorded).
            if is_func && from_label.last() == Some(&s.address) {
                from_label.pop();
            }
            continue;
        }
        if is_label && s.size == 0 {
            from_label.push(s.address);
        }
        functions.push(BoltFunction {
            names: names().collect(),
            address: s.address,
            size: s.size,
            max_size: 0,
            kind: FunctionKind::Regular,
        });
    }
    (syms, functions, from_label)
}

/// What [`functions_of_symbols`] reads of a symbol, copied out of it (64 bytes).
struct WalkedSymbol<'b> {
    address: u64,
    index: usize,
    size: u64,
    /// BOLT's name, else the stored one.
    name: &'b str,
    /// BOLT's `name/file/N` alias.
    file_name: Option<&'b str>,
    kind: SymbolKind,
    is_local: bool,
}

#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<WalkedSymbol<'_>>() == 64);

/// The symbols BOLT's `adjustFunctionBoundaries` makes secondary entry points: walking the
/// symbols after each function's start and before the next function's, in address order, each
/// one "valid in scope" (in the function's section, and either zero-sized inside the function or
/// an untyped local symbol) is an entry point, except assembler-private `.L` labels; the walk
/// stops at the first symbol that is not valid. Addresses, sorted; and the start addresses of
/// the functions where that first invalid symbol lies before the function's end (BOLT's
/// "symbol seen in the middle of the function": max size below size), sorted.
/// `syms`: the named, defined symbols other than section and file symbols, in address order (as
/// function discovery walks them).
fn label_entry_points(
    binary: &Binary<'_>,
    syms: &[&crate::Symbol<'_>],
    functions: &[BoltFunction<'_>],
) -> (Vec<u64>, Vec<u64>) {
    use rayon::prelude::*;
    // In parallel over runs of functions; each run finds its first symbol once.
    const RUN: usize = 4096;
    let runs: Vec<(Vec<u64>, Vec<u64>)> = (0..functions.len().div_ceil(RUN))
        .into_par_iter()
        .map(|run| {
            let (mut out, mut inside) = (Vec::new(), Vec::new());
            let range = run * RUN..functions.len().min((run + 1) * RUN);
            // The first symbol after the current function's start: functions and symbols are
            // both in address order, so it only moves forward (no search per function).
            let mut first = functions
                .get(range.start)
                .map_or(0, |f| syms.partition_point(|s| s.address <= f.address));
            for i in range {
                let f = &functions[i];
                if f.kind != FunctionKind::Regular || f.size == 0 {
                    continue;
                }
                let Some(section) = binary.code_section_at(f.address) else {
                    continue;
                };
                let next = functions.get(i + 1).map_or(u64::MAX, |n| n.address);
                while syms.get(first).is_some_and(|s| s.address <= f.address) {
                    first += 1;
                }
                for s in &syms[first..] {
                    if s.address >= next {
                        break;
                    }
                    if s.is_absolute {
                        continue;
                    }
                    let in_section = s.address >= section.address
                        && s.address - section.address < section.size
                        && s.section_index.is_none_or(|k| k == section.index);
                    let valid = in_section
                        && ((s.size == 0 && contains(f, s.address))
                            || (matches!(s.kind, SymbolKind::NoType) && s.is_local));
                    if !valid {
                        if contains(f, s.address) {
                            inside.push(f.address);
                        }
                        break;
                    }
                    if s.name.starts_with(".L") {
                        continue;
                    }
                    out.push(s.address);
                }
            }
            (out, inside)
        })
        .collect();
    let (mut out, mut inside): (Vec<u64>, Vec<u64>) = (
        runs.iter().flat_map(|r| r.0.iter().copied()).collect(),
        runs.iter().flat_map(|r| r.1.iter().copied()).collect(),
    );
    out.sort_unstable();
    out.dedup();
    inside.sort_unstable();
    inside.dedup();
    (out, inside)
}

/// Whether `address` lies within `func`'s size.
fn contains(func: &BoltFunction<'_>, address: u64) -> bool {
    address >= func.address && address - func.address < func.size
}

/// The address an instruction refers to in BOLT's interprocedural analysis: a direct branch or
/// call target, or a RIP-relative memory operand.
pub fn instruction_reference(ins: &Instruction) -> Option<u64> {
    if matches!(
        ins.op0_kind(),
        OpKind::NearBranch64 | OpKind::NearBranch32 | OpKind::NearBranch16
    ) {
        Some(ins.near_branch_target())
    } else if ins.is_ip_rel_memory_operand() {
        Some(ins.ip_rel_memory_address())
    } else {
        None
    }
}

/// The addresses outside `func` that its instructions (all of them, decoded from its start)
/// refer to; empty when one is invalid (BOLT takes no references from a function it cannot
/// disassemble).
pub fn references_out_of<'i>(
    func: &BoltFunction<'_>,
    instructions: impl IntoIterator<Item = &'i Instruction>,
) -> Vec<u64> {
    let mut out = Vec::new();
    for ins in instructions {
        if ins.is_invalid() {
            return Vec::new();
        }
        out.extend(reference_out_of(func, ins));
    }
    out
}

/// The address outside `func` that one of its instructions refers to, if any (see
/// [`references_out_of`], which takes them all).
#[inline]
pub fn reference_out_of(func: &BoltFunction<'_>, ins: &Instruction) -> Option<u64> {
    instruction_reference(ins).filter(|&a| !contains(func, a))
}

/// How many bytes of code a pass over every function ([`code_stretches`]) reads before it
/// releases them.
pub const CODE_STRETCH: u64 = 8 << 20;

/// `functions` (in address order) cut into runs of consecutive ones whose code spans about
/// `window` bytes, each within one code section: the stretches a pass over the whole binary's
/// code reads, one after the other, handing each back ([`release_stretch`]) before the next.
/// The file pages resident then follow the pass, not the whole text (84 MB on a
/// 200,000-function binary).
pub fn code_stretches<'s>(
    binary: &'s Binary<'_>,
    functions: &'s [BoltFunction<'_>],
    window: u64,
) -> impl Iterator<Item = std::ops::Range<usize>> + 's {
    let mut first = 0;
    std::iter::from_fn(move || {
        let start = functions.get(first)?.address;
        let mut limit = start.saturating_add(window);
        if let Some(s) = binary.code_section_at(start) {
            limit = limit.min(s.address.saturating_add(s.size));
        }
        let mut end = first + 1;
        while end < functions.len() && functions[end].address < limit {
            end += 1;
        }
        let stretch = first..end;
        first = end;
        Some(stretch)
    })
}

/// [`Binary::release`] the code of a stretch of functions ([`code_stretches`]): from the first
/// one's start to the last one's end, its padding included.
pub fn release_stretch(binary: &Binary<'_>, functions: &[BoltFunction<'_>]) {
    let (Some(first), Some(last)) = (functions.first(), functions.last()) else {
        return;
    };
    let end = last.address.saturating_add(last.size.max(last.max_size));
    if let Some(bytes) = binary.code_bytes(first.address, end.saturating_sub(first.address)) {
        binary.release(bytes);
    }
}

/// Sizes: zero-size functions extend to the next function; max size reaches the next function
/// or the end of the containing section. Padding that BOLT rejects ([`is_valid_padding`]) cuts
/// the max size to the size, or, in relocation mode, makes BOLT ignore the function. Returns
/// the start addresses of the functions whose padding is rejected, in either mode, sorted;
/// `known`, when given, is that list from an earlier check of the same bytes, taken instead of
/// checking.
///
/// In parallel, stretch by stretch ([`code_stretches`]): the padding checks are the first reads
/// of the code's pages, and read a little of every one. What needs code later reads it again.
fn set_max_sizes(
    binary: &Binary<'_>,
    bitness: u32,
    functions: &mut [BoltFunction<'_>],
    known: Option<&[u64]>,
) -> Vec<u64> {
    use rayon::prelude::*;
    let relocation_mode = binary.has_text_relocations();
    let next_starts: Vec<u64> = functions
        .iter()
        .skip(1)
        .map(|f| f.address)
        .chain([u64::MAX])
        .collect();
    // Sizes and extent; `valid(f)` says whether the padding of a function that has one is.
    let sized =
        |f: &mut BoltFunction<'_>, next: u64, valid: &mut dyn FnMut(&BoltFunction<'_>) -> bool| {
            let addr = f.address;
            let section_end = binary
                .code_section_at(addr)
                .map(|s| s.address.saturating_add(s.size))
                .unwrap_or(addr.saturating_add(f.size));
            let max = next.min(section_end).saturating_sub(addr);
            if f.size == 0 {
                f.size = max;
            }
            f.size = f.size.min(section_end - addr);
            f.max_size = max.max(f.size);
            let rejected = f.kind == FunctionKind::Regular && f.max_size > f.size && !valid(f);
            if rejected && !relocation_mode {
                f.max_size = f.size;
            }
            rejected.then_some(addr)
        };
    if let Some(known) = known {
        // The verdicts of an earlier check of the same bytes: no code is read.
        return functions
            .par_iter_mut()
            .zip(&next_starts)
            .filter_map(|(f, &next)| {
                sized(f, next, &mut |f| known.binary_search(&f.address).is_err())
            })
            .collect();
    }
    let stretches: Vec<_> = code_stretches(binary, functions, CODE_STRETCH).collect();
    let mut rejected = Vec::new();
    for stretch in stretches {
        let funcs = &mut functions[stretch.clone()];
        let found = funcs.par_iter_mut().zip(&next_starts[stretch]).map_init(
            PaddingDecoder::default,
            |decoder, (f, &next)| {
                sized(f, next, &mut |f| {
                    is_valid_padding(binary, bitness, decoder, f)
                })
            },
        );
        rejected.par_extend(found.flatten());
        release_stretch(binary, funcs);
    }
    rejected
}

/// Whether BOLT takes an instruction iced-x86 decodes as `code` for a NOP (`isNoop` on what
/// LLVM's disassembler decodes): iced-x86's NOPs, and `0F 1F` whatever its ModRM `reg` field
/// (LLVM's `nopl`/`nopw`; iced-x86 calls those with `reg` other than 0 reserved NOPs). The other
/// reserved-NOP opcodes (`0F 18`–`0F 1E`) are not NOPs to LLVM.
pub fn is_nop(code: Code) -> bool {
    code.mnemonic() == Mnemonic::Nop
        || matches!(
            code,
            Code::Reservednop_rm16_r16_0F1F
                | Code::Reservednop_rm32_r32_0F1F
                | Code::Reservednop_rm64_r64_0F1F
        )
}

/// A decoder over one code section, kept by a thread of [`set_max_sizes`] from one padding check
/// to the next: making a decoder for each padding cost more than decoding its few NOPs.
#[derive(Default)]
struct PaddingDecoder<'data> {
    /// The section's address and a decoder over its bytes.
    over: Option<(u64, Decoder<'data>)>,
}

impl<'data> PaddingDecoder<'data> {
    /// The instruction at `address` in `binary`'s code, if it decodes.
    fn decode(
        &mut self,
        binary: &Binary<'data>,
        bitness: u32,
        address: u64,
    ) -> Option<Instruction> {
        let section = binary.code_section_at(address)?;
        let decoder = match &mut self.over {
            Some((start, d)) if *start == section.address => d,
            slot => {
                let bytes = binary.code_bytes(section.address, section.size)?;
                let d = Decoder::with_ip(bitness, bytes, section.address, DecoderOptions::NONE);
                &mut slot.insert((section.address, d)).1
            }
        };
        decoder
            .set_position(usize::try_from(address - section.address).ok()?)
            .ok()?;
        decoder.set_ip(address);
        let insn = decoder.decode();
        (!insn.is_invalid()).then_some(insn)
    }
}

/// Whether the bytes between `func`'s size and its max size are padding as BOLT's
/// `hasValidCodePadding` accepts it: `int3` only; or, after any leading `int3`s, NOPs, zero
/// bytes and unconditional jumps forward to no further than the padding's end, in any mix. An
/// instruction must end within the padding (BOLT decodes the padding alone).
fn is_valid_padding<'data>(
    binary: &Binary<'data>,
    bitness: u32,
    decoder: &mut PaddingDecoder<'data>,
    func: &BoltFunction<'_>,
) -> bool {
    let (start, end) = (func.address + func.size, func.address + func.max_size);
    let Some(pad) = binary.code_bytes(start, end - start) else {
        return true;
    };
    // Breakpoints first: a padding of them alone is accepted as it is.
    let mut at = pad.iter().position(|&b| b != 0xcc).unwrap_or(pad.len());
    while at < pad.len() {
        match pad[at] {
            0 => {
                at += pad[at..]
                    .iter()
                    .position(|&b| b != 0)
                    .unwrap_or(pad.len() - at);
                continue;
            }
            // A one-byte `nop`, without the decoder.
            0x90 => {
                at += 1;
                continue;
            }
            _ => {}
        }
        let address = start + at as u64;
        let Some(insn) = decoder.decode(binary, bitness, address) else {
            return false;
        };
        let next = address.saturating_add(insn.len() as u64);
        let forward_jump = insn.flow_control() == FlowControl::UnconditionalBranch
            && matches!(
                insn.op0_kind(),
                OpKind::NearBranch64 | OpKind::NearBranch32 | OpKind::NearBranch16
            )
            && (next..=end).contains(&insn.near_branch_target());
        if next > end || !(is_nop(insn.code()) || forward_jump) {
            return false;
        }
        at += insn.len();
    }
    true
}

/// PLT entries of a lazily bound `.plt` (16-byte header, 16-byte entries in `.rela.plt`
/// order) become `name@PLT` pseudo functions, as BOLT names them.
fn add_plt_functions<'a>(binary: &'a Binary<'_>, functions: &mut Vec<BoltFunction<'a>>) {
    let (Some(plt), Some(rela)) = (
        binary.section_by_name(".plt"),
        binary.section_by_name(".rela.plt"),
    ) else {
        return;
    };
    let pseudo = |names: Names<'a>, address: u64| BoltFunction {
        names,
        address,
        size: 16,
        max_size: 16,
        kind: FunctionKind::Plt,
    };
    // BOLT covers the PLT header with a pseudo function of its own.
    functions.push(pseudo(
        Names::One(Cow::Borrowed("__BOLT_PSEUDO_.plt")),
        plt.address,
    ));
    let (entry_size, word) = if binary.is_64() { (24, 8) } else { (12, 4) };
    for (i, entry) in rela.raw.chunks_exact(entry_size).enumerate() {
        let info = &entry[word..2 * word];
        let info = info.iter().enumerate().fold(0u64, |v, (k, &x)| {
            if binary.is_little_endian() {
                v | u64::from(x) << (8 * k)
            } else {
                (v << 8) | u64::from(x)
            }
        });
        let sym_index = if binary.is_64() {
            info >> 32
        } else {
            info >> 8
        };
        let Some(name) = binary.dynamic_symbol_name(sym_index as usize) else {
            continue;
        };
        let Some(address) = (16 * i as u64 + 16).checked_add(plt.address) else {
            break;
        };
        if address.saturating_add(16) > plt.address.saturating_add(plt.size) {
            break;
        }
        functions.push(pseudo(
            Names::One(Cow::Owned(format!("{name}@PLT"))),
            address,
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::{EntryPoints, Names};
    use proptest::prelude::*;
    use std::borrow::Cow;

    proptest! {
        /// Names pushed one by one after a first, or collected, read back as the list of all of
        /// them, in order, whether one is held inline or several in a list.
        #[test]
        fn names_read_back_in_the_order_given(
            first in "[a-z/]{0,6}",
            rest in proptest::collection::vec("[a-z/]{0,6}", 0..5),
        ) {
            let mut names = Names::One(Cow::Owned(first.clone()));
            names.extend(rest.iter().map(|n| Cow::Owned(n.clone())));
            let want: Vec<&str> = std::iter::once(&first).chain(&rest).map(String::as_str).collect();
            let got: Vec<&str> = names.iter().map(|n| &**n).collect();
            prop_assert_eq!(&got, &want);
            prop_assert_eq!((&names).into_iter().count(), want.len());
            prop_assert_eq!(names.len() == 1, matches!(names, Names::One(_)));
            let collected: Names<'_> =
                std::iter::once(&first).chain(&rest).map(|n| Cow::Borrowed(n.as_str())).collect();
            let collected: Vec<&str> = collected.iter().map(|n| &**n).collect();
            prop_assert_eq!(&collected, &want);
        }

        /// Each function's entry points are the offsets paired with its index, in order; a
        /// function with none has an empty list.
        #[test]
        fn entry_points_of_a_function_are_its_pairs(
            pairs in proptest::collection::btree_set((0usize..64, 0u64..1000), 0..200),
        ) {
            let pairs: Vec<(usize, u64)> = pairs.into_iter().collect();
            let entries = EntryPoints::from_sorted(&pairs);
            for i in 0..70 {
                let want: Vec<u64> =
                    pairs.iter().filter(|p| p.0 == i).map(|p| p.1).collect();
                prop_assert_eq!(entries.of(i), &want[..]);
            }
        }
    }
}
