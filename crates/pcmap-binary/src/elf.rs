//! The ELF binary model: parsing the file header, sections, segments, notes and symbols.

use std::borrow::Cow;
use std::sync::OnceLock;

use object::read::elf::{FileHeader, ProgramHeader, SectionHeader, Sym};
use object::{Endianness, elf};

use crate::Function;
use crate::error::{Error, Result, malformed};
use crate::section::{
    Compression, CompressionFormat, SHF_ALLOC, SHF_COMPRESSED, SHT_NOBITS, SHT_NOTE, Section,
};
use crate::symbols::{
    BoltNames, FunctionSymbol, FunctionTable, NamingKind, NamingSymbol, NamingTable, Symbol,
    SymbolKind, bolt_names,
};
use crate::x86::InstructionIter;

/// ELF file type (`e_type`), with PIE executables told apart from shared libraries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// `ET_REL`: a relocatable object.
    Relocatable,
    /// `ET_EXEC`: a position-dependent executable.
    Executable,
    /// `ET_DYN` with `PT_INTERP` or `DF_1_PIE`: a position-independent executable.
    PieExecutable,
    /// `ET_DYN` otherwise: a shared library.
    SharedObject,
    /// `ET_CORE`.
    Core,
    /// Any other `e_type` value.
    Other(u16),
}

impl FileKind {
    /// A short description, e.g. "PIE executable".
    pub fn describe(self) -> String {
        match self {
            FileKind::Relocatable => "relocatable object (ET_REL)".into(),
            FileKind::Executable => "executable (ET_EXEC)".into(),
            FileKind::PieExecutable => "PIE executable (ET_DYN)".into(),
            FileKind::SharedObject => "shared object (ET_DYN)".into(),
            FileKind::Core => "core file (ET_CORE)".into(),
            FileKind::Other(t) => format!("unknown type {t:#x}"),
        }
    }
}

/// The target machine (`e_machine`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Machine {
    /// `EM_X86_64`.
    X86_64,
    /// `EM_386`.
    X86,
    /// `EM_AARCH64`.
    Aarch64,
    /// Anything else, with its `e_machine` value.
    Other(u16),
}

impl Machine {
    /// The machine's usual name.
    pub fn name(self) -> &'static str {
        match self {
            Machine::X86_64 => "x86-64",
            Machine::X86 => "i386",
            Machine::Aarch64 => "AArch64",
            Machine::Other(_) => "unknown machine",
        }
    }
}

/// One program header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// `p_type`.
    pub p_type: u32,
    /// `p_flags`.
    pub flags: u32,
    /// `p_offset`.
    pub offset: u64,
    /// `p_vaddr`.
    pub vaddr: u64,
    /// `p_filesz`.
    pub file_size: u64,
    /// `p_memsz`.
    pub mem_size: u64,
    /// `p_align`.
    pub align: u64,
}

/// `PT_LOAD`.
pub const PT_LOAD: u32 = 1;

/// One ELF note (from an `SHT_NOTE` section, or a `PT_NOTE` segment when there are no sections).
#[derive(Debug, Clone, Copy)]
pub struct Note<'data> {
    /// The section holding the note, if it came from a section.
    pub section: Option<usize>,
    /// Owner name without the terminating NUL (e.g. `GNU`, `BOLT`).
    pub name: &'data [u8],
    /// `n_type`.
    pub n_type: u32,
    /// Descriptor bytes.
    pub desc: &'data [u8],
}

/// `NT_GNU_BUILD_ID`.
pub const NT_GNU_BUILD_ID: u32 = 3;

/// A parsed ELF file borrowing the bytes it was parsed from.
#[derive(Debug)]
pub struct Binary<'data> {
    data: &'data [u8],
    is_64: bool,
    is_little_endian: bool,
    kind: FileKind,
    machine: Machine,
    entry: u64,
    sections: Vec<Section<'data>>,
    segments: Vec<Segment>,
    notes: Vec<Note<'data>>,
    note_errors: Vec<Error>,
    /// Built on first use ([`Binary::function_table`]) from `symbols` and `function_symbols`:
    /// BOLT's function model walks `symbols` instead (perf2bolt asks for this table only for
    /// BAT origins), and on a 200,000-function binary it is 40 MB.
    functions: OnceLock<FunctionTable<'data>>,
    /// What [`FunctionSymbol`] has that [`Symbol`] does not, for each function symbol, in
    /// table order.
    function_symbols: Vec<FunctionSymbolExtra<'data>>,
    /// Every entry of the symbol table the functions come from, by index.
    symbols: Vec<Symbol<'data>>,
    /// The names BOLT gives `symbols`, by index ([`Binary::bolt_name`]): made on first use,
    /// as they take a pass over every symbol that a later run keeping BOLT's model of the
    /// functions between runs never needs.
    bolt_names: OnceLock<Vec<SymbolBoltNames<'data>>>,
    /// Names of `.dynsym` entries by index.
    dynamic_symbol_names: Vec<&'data str>,
    /// True when the functions came from `.dynsym` because there is no `.symtab`.
    symbols_from_dynsym: bool,
    /// Told about bytes a pass has finished reading ([`Binary::set_release`]).
    release: Release<'data>,
    /// Where the code sections are, for [`Binary::code_section_at`].
    code_ranges: CodeRanges,
}

/// The code sections ([`Binary::code_sections`]) as `(start, size, index in sections)`, for
/// finding the one containing an address: that is asked for every symbol, FDE and profiled
/// address, and a file has dozens of sections. Sorted by start and searched when no two
/// overlap (as in any linked file); else in file order and walked, the first containing the
/// address found.
#[derive(Debug)]
struct CodeRanges {
    ranges: Vec<(u64, u64, usize)>,
    sorted: bool,
}

impl CodeRanges {
    fn new(file_order: impl Iterator<Item = (u64, u64, usize)>) -> Self {
        let in_file_order: Vec<(u64, u64, usize)> = file_order.collect();
        let mut ranges = in_file_order.clone();
        ranges.sort_unstable();
        // Disjoint: each range ends at or before the next starts (an end past the top of the
        // address space overlaps whatever follows).
        let disjoint = ranges
            .windows(2)
            .all(|w| w[0].0.checked_add(w[0].1).is_some_and(|end| end <= w[1].0));
        if disjoint {
            CodeRanges {
                ranges,
                sorted: true,
            }
        } else {
            CodeRanges {
                ranges: in_file_order,
                sorted: false,
            }
        }
    }

    /// The section index of the range containing `address`.
    fn find(&self, address: u64) -> Option<usize> {
        let contains =
            |&(start, size, _): &(u64, u64, usize)| address >= start && address - start < size;
        if self.sorted {
            let i = self
                .ranges
                .partition_point(|r| r.0 <= address)
                .checked_sub(1)?;
            let r = &self.ranges[i];
            contains(r).then_some(r.2)
        } else {
            self.ranges.iter().find(|r| contains(r)).map(|r| r.2)
        }
    }
}

/// A function symbol's fields a [`Symbol`] does not have ([`Binary::function_table`]).
#[derive(Debug, Clone, Copy)]
struct FunctionSymbolExtra<'data> {
    /// Index in the symbol table.
    symbol_index: usize,
    /// `STB_WEAK` binding.
    is_weak: bool,
    /// The `STT_FILE` symbol before it, for a local one ([`FunctionSymbol::file`]).
    file: Option<&'data str>,
}

/// The callback of [`Binary::set_release`], if any.
#[derive(Default)]
struct Release<'data>(Option<&'data ReleaseFn<'data>>);

/// What [`Binary::set_release`] takes.
pub type ReleaseFn<'a> = dyn Fn(&[u8]) + Send + Sync + 'a;

impl std::fmt::Debug for Release<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Release(set)"
        } else {
            "Release(none)"
        })
    }
}

impl<'data> Binary<'data> {
    /// Parse an ELF file (ELF32 or ELF64, either endianness). Fails with a typed error naming
    /// the structure and file offset for any malformed part the model relies on.
    pub fn parse(data: &'data [u8]) -> Result<Self> {
        if data.len() < 16 || &data[..4] != b"\x7fELF" {
            return Err(Error::NotElf(if data.len() < 4 {
                format!("the file is only {} bytes long", data.len())
            } else {
                "the file does not start with the ELF magic bytes 7f 45 4c 46".into()
            }));
        }
        match data[4] {
            1 => parse_elf::<elf::FileHeader32<Endianness>>(data),
            2 => parse_elf::<elf::FileHeader64<Endianness>>(data),
            c => Err(malformed(
                "file header",
                4,
                format!("EI_CLASS is {c}, expected 1 (ELF32) or 2 (ELF64)"),
            )),
        }
    }

    /// The bytes the binary was parsed from.
    pub fn data(&self) -> &'data [u8] {
        self.data
    }

    /// Register a callback for bytes of [`Self::data`] that a pass over the whole binary has
    /// finished reading. Function discovery calls it with the code it checked for padding, the
    /// data references with the relocation sections they read, and perf2bolt's decoding pass
    /// with each stretch of code it decoded. A caller that memory-maps the file can drop those
    /// pages from its resident set (`MADV_DONTNEED`), so that the resident file pages follow
    /// what is in use rather than the whole binary. Released bytes may still be read again (a
    /// file map faults them back in): the callback is only a hint.
    ///
    /// The callback is borrowed, not owned: a `Binary` has no destructor, so the bytes it
    /// borrows are free again as soon as it is last used.
    pub fn set_release(&mut self, release: &'data ReleaseFn<'data>) {
        self.release = Release(Some(release));
    }

    /// Tell the [`Self::set_release`] callback, if any, that `bytes` are no longer needed.
    pub fn release(&self, bytes: &[u8]) {
        if let Some(f) = self.release.0 {
            f(bytes);
        }
    }

    /// ELF64 rather than ELF32.
    pub fn is_64(&self) -> bool {
        self.is_64
    }

    /// The size of an address in bytes: 8 for ELF64, 4 for ELF32.
    pub fn address_size(&self) -> u8 {
        if self.is_64 { 8 } else { 4 }
    }

    /// Little-endian rather than big-endian.
    pub fn is_little_endian(&self) -> bool {
        self.is_little_endian
    }

    /// The file's byte order, for a [`pcmap_bytes::Cursor`] over its contents.
    pub fn endian(&self) -> pcmap_bytes::Endian {
        if self.is_little_endian {
            pcmap_bytes::Endian::Little
        } else {
            pcmap_bytes::Endian::Big
        }
    }

    /// File type.
    pub fn kind(&self) -> FileKind {
        self.kind
    }

    /// Target machine.
    pub fn machine(&self) -> Machine {
        self.machine
    }

    /// Entry point (`e_entry`).
    pub fn entry(&self) -> u64 {
        self.entry
    }

    /// All section headers, in file order (index 0 is the null section).
    pub fn sections(&self) -> &[Section<'data>] {
        &self.sections
    }

    /// The first section called `name`.
    pub fn section_by_name(&self, name: &str) -> Option<&Section<'data>> {
        self.sections.iter().find(|s| s.name == name)
    }

    /// A section's contents, decompressed if it is `SHF_COMPRESSED`.
    pub fn section_data(&self, section: &Section<'data>) -> Result<Cow<'data, [u8]>> {
        section.data()
    }

    /// Program headers.
    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// All notes of well-formed note sections (or `PT_NOTE` segments).
    pub fn notes(&self) -> &[Note<'data>] {
        &self.notes
    }

    /// Errors from note sections whose notes could not be walked (their notes are left out of
    /// [`Binary::notes`]).
    pub fn note_errors(&self) -> &[Error] {
        &self.note_errors
    }

    /// The GNU build-id (`NT_GNU_BUILD_ID` note), if present.
    pub fn build_id(&self) -> Option<&'data [u8]> {
        self.notes
            .iter()
            .find(|n| n.name == b"GNU" && n.n_type == NT_GNU_BUILD_ID)
            .map(|n| n.desc)
    }

    /// The build-id as lower-case hex, as `perf buildid-list` and BOLT print it.
    pub fn build_id_hex(&self) -> Option<String> {
        self.build_id()
            .map(|b| b.iter().map(|x| format!("{x:02x}")).collect())
    }

    /// The function table (symbols from `.symtab`, or `.dynsym` in a stripped file).
    /// Built on first use.
    pub fn function_table(&self) -> &FunctionTable<'data> {
        self.functions.get_or_init(|| {
            let names = self.symbol_bolt_names();
            let symbols = self
                .function_symbols
                .iter()
                .filter_map(|extra| {
                    let s = self.symbols.get(extra.symbol_index)?;
                    let named = names.get(extra.symbol_index);
                    Some(FunctionSymbol {
                        symbol_index: extra.symbol_index,
                        name: s.name,
                        address: s.address,
                        size: s.size,
                        is_local: s.is_local,
                        is_weak: extra.is_weak,
                        is_ifunc: s.kind == SymbolKind::Ifunc,
                        section_index: s.section_index,
                        file: extra.file,
                        // A function symbol BOLT does not name (address 0, non-alloc section)
                        // keeps its stored name.
                        bolt_name: named
                            .and_then(|n| n.name.clone())
                            .unwrap_or(Cow::Borrowed(s.name)),
                        bolt_file_name: named.and_then(|n| n.file_name.clone()),
                    })
                })
                .collect();
            FunctionTable::new(symbols)
        })
    }

    /// Distinct functions sorted by address.
    pub fn functions(&self) -> &[Function] {
        self.function_table().functions()
    }

    /// The function containing `address`, in O(log n).
    pub fn function_at(&self, address: u64) -> Option<&Function> {
        self.function_table().function_at(address)
    }

    /// The primary (first) symbol naming `function`.
    pub fn function_name(&self, function: &Function) -> &'data str {
        self.function_table().primary(function).name
    }

    /// Every entry of the symbol table the functions come from (`.symtab`, or `.dynsym` when
    /// there is none), indexed by symbol index (entry 0 is the null symbol).
    pub fn symbols(&self) -> &[Symbol<'data>] {
        &self.symbols
    }

    /// The name BOLT gives symbol `index` (`name`, `name/N` for locals, `PG.L...`,
    /// `ANONYMOUS.i`; see [`FunctionSymbol::bolt_name`]); `None` for symbols BOLT does not name
    /// (address 0, not in memory, `__hot_start`, ...) and indices past the table. Borrowed from
    /// the file where it is the stored name (most globals). The first call names every symbol.
    pub fn bolt_name(&self, index: usize) -> Option<&str> {
        self.symbol_bolt_names().get(index)?.name.as_deref()
    }

    /// BOLT's alternative name of local function symbol `index` with a file symbol:
    /// `name/file/N`. The first call names every symbol.
    pub fn bolt_file_name(&self, index: usize) -> Option<&str> {
        self.symbol_bolt_names().get(index)?.file_name.as_deref()
    }

    /// The names BOLT gives the symbols, made on first use.
    fn symbol_bolt_names(&self) -> &[SymbolBoltNames<'data>] {
        self.bolt_names.get_or_init(|| {
            let mut table = ParsedSymbols {
                symbols: &self.symbols,
                sections: &self.sections,
                names: std::iter::repeat_with(Default::default)
                    .take(self.symbols.len())
                    .collect(),
            };
            bolt_names(&mut table);
            table.names
        })
    }

    /// The name BOLT's naming pass reads for symbol `symbol` of [`Binary::symbols`]: a section
    /// symbol's is its section's name (as LLVM's reader reports it), any other's its own.
    pub(crate) fn naming_name(&self, symbol: &Symbol<'data>) -> &'data str {
        naming_name(symbol, &self.sections)
    }

    /// The name of `.dynsym` entry `index` (what `.rela.plt` entries refer to).
    pub fn dynamic_symbol_name(&self, index: usize) -> Option<&'data str> {
        self.dynamic_symbol_names.get(index).copied()
    }

    /// Sections holding loaded code: `SHT_PROGBITS`, `SHF_ALLOC | SHF_EXECINSTR`, at a non-zero
    /// address with a non-zero size.
    pub fn code_sections(&self) -> impl Iterator<Item = &Section<'data>> + '_ {
        code_sections(&self.sections)
    }

    /// The code section containing `address` (the first in file order, should two overlap).
    pub fn code_section_at(&self, address: u64) -> Option<&Section<'data>> {
        self.code_ranges
            .find(address)
            .and_then(|i| self.sections.get(i))
    }

    /// Up to `len` code bytes at `address`: the bytes of the code section containing `address`,
    /// cut at the section's end.
    pub fn code_bytes(&self, address: u64, len: u64) -> Option<&'data [u8]> {
        let s = self.code_section_at(address)?;
        let from = usize::try_from(address - s.address).ok()?;
        let to = usize::try_from(
            address
                .saturating_add(len)
                .min(s.address.saturating_add(s.size))
                - s.address,
        )
        .ok()?;
        s.raw.get(from..to.min(s.raw.len()))
    }

    /// The file contents from `address` to the end of the section placed at a non-zero address
    /// that holds it ([`Self::read_u32`] and [`Self::read_u64`] read from here). A caller
    /// reading many words in a row (a jump table's entries) finds the section once.
    pub fn bytes_from(&self, address: u64) -> Option<&'data [u8]> {
        let s = self.sections.iter().find(|s| {
            s.address != 0
                && s.sh_type != SHT_NOBITS
                && s.compression.is_none()
                && address >= s.address
                && address - s.address < s.raw.len() as u64
        })?;
        s.raw.get(usize::try_from(address - s.address).ok()?..)
    }

    /// `N` bytes of file contents at `address` ([`Self::bytes_from`]).
    fn read_array<const N: usize>(&self, address: u64) -> Option<[u8; N]> {
        self.bytes_from(address)?.get(..N)?.try_into().ok()
    }

    /// The 32-bit word at virtual address `address` in the file's byte order (e.g. a jump-table
    /// entry); `None` where the address has no file bytes.
    pub fn read_u32(&self, address: u64) -> Option<u32> {
        let b = self.read_array::<4>(address)?;
        Some(if self.is_little_endian {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        })
    }

    /// The 64-bit word at virtual address `address` in the file's byte order.
    pub fn read_u64(&self, address: u64) -> Option<u64> {
        let b = self.read_array::<8>(address)?;
        Some(if self.is_little_endian {
            u64::from_le_bytes(b)
        } else {
            u64::from_be_bytes(b)
        })
    }

    /// True if the code's link-time relocations were kept (a `.rela.text` or `.rel.text`
    /// section, from `--emit-relocs`): BOLT then works in relocation mode.
    pub fn has_text_relocations(&self) -> bool {
        self.section_by_name(".rela.text").is_some() || self.section_by_name(".rel.text").is_some()
    }

    /// True if the file is loaded at its link-time addresses (`ET_EXEC`).
    pub fn is_fixed_address(&self) -> bool {
        self.kind == FileKind::Executable
    }

    /// True if function symbols were taken from `.dynsym` because the file has no `.symtab`.
    pub fn symbols_from_dynsym(&self) -> bool {
        self.symbols_from_dynsym
    }

    /// The file offset of virtual address `address`, through the `PT_LOAD` segment holding it.
    pub fn vaddr_to_offset(&self, address: u64) -> Option<u64> {
        self.segments
            .iter()
            .filter(|s| s.p_type == PT_LOAD)
            .find(|s| address >= s.vaddr && address - s.vaddr < s.file_size)
            .and_then(|s| s.offset.checked_add(address - s.vaddr))
    }

    /// The virtual address at file offset `offset`, through the `PT_LOAD` segment holding it.
    pub fn offset_to_vaddr(&self, offset: u64) -> Option<u64> {
        self.segments
            .iter()
            .filter(|s| s.p_type == PT_LOAD)
            .find(|s| offset >= s.offset && offset - s.offset < s.file_size)
            .map(|s| s.vaddr + (offset - s.offset))
    }

    /// The load bias of a process mapping: a mapping of this file starting at run-time address
    /// `map_start` with file offset `map_offset` (perf's MMAP `pgoff`, `/proc/PID/maps`' offset)
    /// means run-time address = file virtual address + bias. `None` if no `PT_LOAD` segment
    /// corresponds to the mapping. Non-PIE executables have bias 0 when mapped where they were
    /// linked.
    ///
    /// The loader maps each `PT_LOAD` segment from its page-aligned file offset, so the segment
    /// whose offset rounds down to `map_offset` is the one mapped; where several segments share
    /// that page (tiny files), the executable one is preferred, as samples are taken in code.
    pub fn load_bias(&self, map_start: u64, map_offset: u64) -> Option<u64> {
        const PAGE: u64 = 4096;
        const PF_X: u32 = 1;
        let loads = || self.segments.iter().filter(|s| s.p_type == PT_LOAD);
        let segment = loads()
            .filter(|s| s.offset & !(PAGE - 1) == map_offset)
            .max_by_key(|s| s.flags & PF_X)
            .or_else(|| {
                loads()
                    .find(|s| map_offset >= s.offset && map_offset - s.offset < s.file_size.max(1))
            })?;
        // The run-time address of file offset `map_offset` is `map_start`; its link-time address
        // in this segment's mapping is the segment's vaddr minus the distance from the offset.
        let vaddr = if map_offset <= segment.offset {
            segment.vaddr.wrapping_sub(segment.offset - map_offset)
        } else {
            segment.vaddr.wrapping_add(map_offset - segment.offset)
        };
        Some(map_start.wrapping_sub(vaddr))
    }

    /// `len` bytes of loaded content at virtual address `address` (from the file; `None` where
    /// the range is not backed by file bytes).
    pub fn bytes_at(&self, address: u64, len: u64) -> Option<&'data [u8]> {
        let section = self.sections.iter().find(|s| {
            s.contains_address(address) && s.sh_type != SHT_NOBITS && s.compression.is_none()
        })?;
        let start = usize::try_from(address - section.address).ok()?;
        let end = start.checked_add(usize::try_from(len).ok()?)?;
        section.raw.get(start..end)
    }

    /// The bytes of `function`, read from its symbol's section (so this also works in
    /// relocatable objects, where addresses are section offsets).
    pub fn function_bytes(&self, function: &Function) -> Result<&'data [u8]> {
        let no_bytes = || Error::NoBytes {
            what: format!("function {}", self.function_name(function)),
            address: function.address,
        };
        let section = function
            .section_index
            .and_then(|i| self.sections.get(i))
            .filter(|s| s.sh_type != SHT_NOBITS && s.compression.is_none())
            .ok_or_else(no_bytes)?;
        let base = if self.kind == FileKind::Relocatable {
            0
        } else {
            section.address
        };
        let start = function.address.checked_sub(base).ok_or_else(no_bytes)?;
        let end = start.checked_add(function.size).ok_or_else(no_bytes)?;
        let (start, end) = (
            usize::try_from(start).map_err(|_| no_bytes())?,
            usize::try_from(end).map_err(|_| no_bytes())?,
        );
        section.raw.get(start..end).ok_or_else(no_bytes)
    }

    /// Decode the instructions of `function`. x86-64 and i386 are decoded; other machines
    /// (AArch64 included) give [`Error::UnsupportedMachine`].
    pub fn instructions(&self, function: &Function) -> Result<InstructionIter<'data>> {
        let bitness = self.bitness()?;
        let bytes = self.function_bytes(function)?;
        Ok(InstructionIter::new(bitness, bytes, function.address))
    }

    /// Decode arbitrary code bytes at `address` with this binary's instruction set.
    pub fn decode<'b>(&self, bytes: &'b [u8], address: u64) -> Result<InstructionIter<'b>> {
        Ok(InstructionIter::new(self.bitness()?, bytes, address))
    }

    fn bitness(&self) -> Result<u32> {
        match self.machine {
            Machine::X86_64 => Ok(64),
            Machine::X86 => Ok(32),
            m => Err(Error::UnsupportedMachine { machine: m.name() }),
        }
    }
}

fn object_error(structure: &str, offset: u64) -> impl Fn(object::read::Error) -> Error + '_ {
    move |e| malformed(structure, offset, e.to_string())
}

fn parse_elf<'data, Elf>(data: &'data [u8]) -> Result<Binary<'data>>
where
    Elf: FileHeader<Endian = Endianness>,
{
    let header_size = std::mem::size_of::<Elf>();
    if data.len() < header_size {
        return Err(malformed(
            "file header",
            0,
            format!(
                "the file is {} bytes long; an ELF{} header needs {header_size}",
                data.len(),
                if header_size == 64 { 64 } else { 32 }
            ),
        ));
    }
    let header = Elf::parse(data).map_err(object_error("file header", 0))?;
    let endian = header.endian().map_err(object_error("file header", 5))?;
    let file_len = data.len() as u64;

    // Section header table bounds, checked here so the error says where and why.
    let shoff: u64 = header.e_shoff(endian).into();
    if shoff != 0 {
        let entsize = u64::from(header.e_shentsize(endian));
        let expected = if header.is_type_64() { 64 } else { 40 };
        if entsize != expected {
            return Err(malformed(
                "section header table",
                shoff,
                format!("e_shentsize is {entsize}, expected {expected}"),
            ));
        }
        let shnum = header
            .shnum(endian, data)
            .map_err(object_error("section header table", shoff))?;
        let end = shoff.checked_add(u64::from(shnum) * entsize);
        if end.is_none_or(|end| end > file_len) {
            return Err(malformed(
                "section header table",
                shoff,
                format!(
                    "{shnum} entries of {entsize} bytes extend past the end of the file ({file_len} bytes)"
                ),
            ));
        }
    }
    let table = header
        .sections(endian, data)
        .map_err(object_error("section header table", shoff))?;
    let shstrndx = header.shstrndx(endian, data).unwrap_or(0) as usize;
    let (strtab_offset, strtab_size) = table
        .section(object::SectionIndex(shstrndx))
        .map(|s| (s.sh_offset(endian).into(), s.sh_size(endian).into()))
        .unwrap_or((0u64, 0u64));

    let mut sections = Vec::with_capacity(table.len());
    for (index, sh) in table.enumerate() {
        let index = index.0;
        let sh_name = sh.sh_name(endian);
        let name = table_string(
            table.section_name(endian, sh),
            || format!("name of section {index}"),
            strtab_offset,
            sh_name,
            || format!("the section name table (.shstrtab, {strtab_size} bytes)"),
        )?;
        let sh_type = sh.sh_type(endian).0;
        let flags = sh.sh_flags(endian).0;
        let offset: u64 = sh.sh_offset(endian).into();
        let size: u64 = sh.sh_size(endian).into();
        let raw = if sh_type == SHT_NOBITS || index == 0 {
            &[][..]
        } else {
            sh.data(endian, data).map_err(|_| {
                malformed(
                    format!("contents of section {index} ({name})"),
                    offset,
                    format!("{size} bytes at offset {offset:#x} extend past the end of the file ({file_len} bytes)"),
                )
            })?
        };
        let compression = if flags & SHF_COMPRESSED != 0 && sh_type != SHT_NOBITS {
            let (chdr, stream_offset, _) = sh
                .compression(endian, data)
                .map_err(object_error(
                    &format!("compression header of section {index} ({name})"),
                    offset,
                ))?
                .ok_or_else(|| {
                    malformed(
                        format!("compression header of section {index} ({name})"),
                        offset,
                        "missing",
                    )
                })?;
            use object::read::elf::CompressionHeader as _;
            let format = match chdr.ch_type(endian) {
                elf::ELFCOMPRESS_ZLIB => CompressionFormat::Zlib,
                elf::ELFCOMPRESS_ZSTD => CompressionFormat::Zstd,
                t => {
                    return Err(malformed(
                        format!("compression header of section {index} ({name})"),
                        offset,
                        format!("unknown ch_type {}, expected 1 (zlib) or 2 (zstd)", t.0),
                    ));
                }
            };
            Some(Compression {
                format,
                header_len: (stream_offset - offset) as usize,
                uncompressed_size: chdr.ch_size(endian).into(),
            })
        } else {
            None
        };
        sections.push(Section {
            index,
            name,
            sh_type,
            flags,
            address: sh.sh_addr(endian).into(),
            offset,
            size,
            align: sh.sh_addralign(endian).into(),
            link: sh.sh_link(endian),
            info: sh.sh_info(endian),
            entsize: sh.sh_entsize(endian).into(),
            raw,
            compression,
        });
    }

    // Program headers.
    let phoff: u64 = header.e_phoff(endian).into();
    let phdrs = header.program_headers(endian, data).map_err(|e| {
        malformed(
            "program header table",
            phoff,
            format!(
                "{e} ({} entries at offset {phoff:#x}, file is {file_len} bytes)",
                header.e_phnum(endian)
            ),
        )
    })?;
    let segments: Vec<Segment> = phdrs
        .iter()
        .map(|p| Segment {
            p_type: p.p_type(endian).0,
            flags: p.p_flags(endian).0,
            offset: p.p_offset(endian).into(),
            vaddr: p.p_vaddr(endian).into(),
            file_size: p.p_filesz(endian).into(),
            mem_size: p.p_memsz(endian).into(),
            align: p.p_align(endian).into(),
        })
        .collect();

    // Notes: from sections, or from PT_NOTE segments when the file has no section headers.
    let mut notes = Vec::new();
    let mut note_errors = Vec::new();
    for (index, sh) in table.enumerate() {
        if sh.sh_type(endian).0 != SHT_NOTE {
            continue;
        }
        let offset: u64 = sh.sh_offset(endian).into();
        let structure = format!("notes of section {} ({})", index.0, sections[index.0].name);
        // A malformed note section does not make the whole file unreadable: its notes are
        // skipped and the error is kept for `note_errors`, so a tool that reads that section's
        // bytes itself (e.g. the BAT decoder) can report the problem at its own offset.
        let mut section_notes = Vec::new();
        let parsed = (|| -> Result<()> {
            if let Some(mut iter) = sh
                .notes(endian, data)
                .map_err(object_error(&structure, offset))?
            {
                while let Some(note) = iter.next().map_err(object_error(&structure, offset))? {
                    section_notes.push(Note {
                        section: Some(index.0),
                        name: note.name(),
                        n_type: note.n_type(endian).0,
                        desc: note.desc(),
                    });
                }
            }
            Ok(())
        })();
        match parsed {
            Ok(()) => notes.extend(section_notes),
            Err(e) => note_errors.push(e),
        }
    }
    if table.is_empty() {
        for p in phdrs {
            let offset: u64 = p.p_offset(endian).into();
            if let Some(mut iter) = p
                .notes(endian, data)
                .map_err(object_error("PT_NOTE segment", offset))?
            {
                while let Some(note) = iter
                    .next()
                    .map_err(object_error("PT_NOTE segment", offset))?
                {
                    notes.push(Note {
                        section: None,
                        name: note.name(),
                        n_type: note.n_type(endian).0,
                        desc: note.desc(),
                    });
                }
            }
        }
    }

    // Symbols: .symtab, else .dynsym.
    let mut symtab = table
        .symbols(endian, data, elf::SHT_SYMTAB)
        .map_err(object_error("symbol table (.symtab)", 0))?;
    let mut from_dynsym = false;
    if symtab.is_empty() {
        symtab = table
            .symbols(endian, data, elf::SHT_DYNSYM)
            .map_err(object_error("dynamic symbol table (.dynsym)", 0))?;
        from_dynsym = !symtab.is_empty();
    }
    let strtab_section = table.section(symtab.string_section()).ok();
    let (sym_strtab_offset, sym_strtab_size) = strtab_section
        .map(|s| (s.sh_offset(endian).into(), s.sh_size(endian).into()))
        .unwrap_or((0u64, 0u64));
    // The string table as text when all of it is UTF-8, as in nearly every binary: a name is
    // then a slice of it, checked once rather than once per symbol (a tenth of the parse of a
    // large binary). Any other table, and any name not found this way, goes through `object`.
    let strtab_text: Option<&'data str> = strtab_section
        .and_then(|s| s.data(endian, data).ok())
        .and_then(|bytes| std::str::from_utf8(bytes).ok());

    // Sized for the whole table: pages past what is written are never touched, and growing by
    // doubling would copy a large binary's list several times.
    let mut funcs = Vec::with_capacity(symtab.len());
    let mut all_symbols: Vec<Symbol<'data>> = Vec::with_capacity(symtab.len());
    let mut current_file: Option<&'data str> = None;
    // The file BOLT ties locals to: LTO's artificial `ld-temp.o` does not count.
    let mut bolt_file: Option<&'data str> = None;
    for (sym_index, sym) in symtab.enumerate() {
        let i = sym_index.0;
        if i == 0 {
            all_symbols.push(Symbol {
                index: 0,
                name: "",
                address: 0,
                size: 0,
                kind: SymbolKind::NoType,
                is_local: true,
                is_undefined: true,
                is_absolute: false,
                section_index: None,
                file: None,
            });
            continue;
        }
        let st_type = sym.st_type();
        let st_bind = sym.st_bind();
        let shndx = sym.st_shndx(endian);
        let section_index = symtab
            .symbol_section(endian, sym, sym_index)
            // The error's text is made only on failure: this runs once per symbol.
            .map_err(|e| malformed(format!("section index of symbol {i}"), 0, e.to_string()))?
            .map(|s| s.0);
        let is_undefined = shndx == elf::SHN_UNDEF;
        let is_absolute = shndx == elf::SHN_ABS;
        let st_name = sym.st_name(endian);
        let name = match strtab_text.and_then(|text| string_at(text, st_name)) {
            Some(name) => name,
            None => table_string(
                symtab.symbol_name(endian, sym),
                || format!("name of symbol {i}"),
                sym_strtab_offset,
                st_name,
                || format!("the symbol string table ({sym_strtab_size} bytes)"),
            )?,
        };
        all_symbols.push(Symbol {
            index: i,
            name,
            address: sym.st_value(endian).into(),
            size: sym.st_size(endian).into(),
            kind: match st_type {
                elf::STT_NOTYPE => SymbolKind::NoType,
                elf::STT_OBJECT | elf::STT_COMMON => SymbolKind::Object,
                elf::STT_FUNC => SymbolKind::Function,
                elf::STT_GNU_IFUNC => SymbolKind::Ifunc,
                elf::STT_SECTION => SymbolKind::Section,
                elf::STT_FILE => SymbolKind::File,
                elf::STT_TLS => SymbolKind::Tls,
                t => SymbolKind::Other(t.0),
            },
            is_local: st_bind == elf::STB_LOCAL,
            is_undefined,
            is_absolute,
            section_index,
            file: bolt_file.filter(|f| st_bind == elf::STB_LOCAL && !is_undefined && !f.is_empty()),
        });
        if st_type == elf::STT_FILE {
            current_file = Some(name);
            if !is_undefined && name != "ld-temp.o" {
                bolt_file = Some(name);
            }
            continue;
        }
        if (st_type == elf::STT_FUNC || st_type == elf::STT_GNU_IFUNC) && !is_undefined {
            funcs.push(FunctionSymbolExtra {
                symbol_index: i,
                is_weak: st_bind == elf::STB_WEAK,
                file: if st_bind == elf::STB_LOCAL {
                    current_file
                } else {
                    None
                },
            });
        }
    }
    // `.dynsym` names by index, for PLT entries (`.rela.plt` refers to `.dynsym`).
    let dynamic_symbol_names = if from_dynsym {
        all_symbols.iter().map(|s| s.name).collect()
    } else {
        let dynsym = table
            .symbols(endian, data, elf::SHT_DYNSYM)
            .map_err(object_error("dynamic symbol table (.dynsym)", 0))?;
        dynsym
            .iter()
            .map(|sym| {
                dynsym
                    .symbol_name(endian, sym)
                    .ok()
                    .and_then(|n| std::str::from_utf8(n).ok())
                    .unwrap_or("")
            })
            .collect()
    };

    let e_type = header.e_type(endian).0;
    let kind = match e_type {
        1 => FileKind::Relocatable,
        2 => FileKind::Executable,
        3 => {
            let has_interp = segments.iter().any(|s| s.p_type == elf::PT_INTERP.0);
            if has_interp || dynamic_has_pie_flag(&sections, header.is_type_64(), endian) {
                FileKind::PieExecutable
            } else {
                FileKind::SharedObject
            }
        }
        4 => FileKind::Core,
        t => FileKind::Other(t),
    };
    let machine = match header.e_machine(endian).0 {
        62 => Machine::X86_64,
        3 => Machine::X86,
        183 => Machine::Aarch64,
        m => Machine::Other(m),
    };

    Ok(Binary {
        data,
        is_64: header.is_type_64(),
        is_little_endian: header.is_little_endian(),
        kind,
        machine,
        entry: header.e_entry(endian).into(),
        segments,
        notes,
        note_errors,
        functions: OnceLock::new(),
        function_symbols: funcs,
        symbols: all_symbols,
        bolt_names: OnceLock::new(),
        dynamic_symbol_names,
        symbols_from_dynsym: from_dynsym,
        release: Release::default(),
        code_ranges: CodeRanges::new(
            code_sections(&sections).map(|s| (s.address, s.size, s.index)),
        ),
        sections,
    })
}

/// A name `object` read from a string table at file offset `table_offset` (its bytes, or why
/// not), as text. Errors name `structure` and the name's offset; `table` says which table it
/// is outside of. Both are made only on failure: this runs once per section and, when the
/// symbol string table is not text throughout ([`string_at`]), once per symbol.
fn table_string(
    bytes: object::read::Result<&[u8]>,
    structure: impl Fn() -> String,
    table_offset: u64,
    offset: u32,
    table: impl FnOnce() -> String,
) -> Result<&str> {
    let at = table_offset.saturating_add(u64::from(offset));
    let bytes = bytes.map_err(|_| {
        malformed(
            structure(),
            at,
            format!("string offset {offset:#x} is outside {}", table()),
        )
    })?;
    std::str::from_utf8(bytes).map_err(|_| malformed(structure(), at, "not valid UTF-8"))
}

/// The NUL-terminated string at `offset` of a string table read as text; `None` if the offset
/// is past the table or inside a character, or the string has no NUL (what `object`'s reader
/// then reports).
fn string_at(table: &str, offset: u32) -> Option<&str> {
    let rest = table.get(usize::try_from(offset).ok()?..)?;
    // `memchr`'s vector search: core's byte search was most of this on short names.
    memchr::memchr(0, rest.as_bytes()).map(|end| &rest[..end])
}

/// [`Binary::code_sections`] of `sections`.
fn code_sections<'a, 'data>(
    sections: &'a [Section<'data>],
) -> impl Iterator<Item = &'a Section<'data>> + 'a {
    const SHT_PROGBITS: u32 = 1;
    sections.iter().filter(|s| {
        s.sh_type == SHT_PROGBITS
            && s.is_alloc()
            && s.is_executable()
            && s.address != 0
            && s.size != 0
    })
}

/// The names BOLT gives one symbol ([`Binary::bolt_name`], [`Binary::bolt_file_name`]).
#[derive(Debug, Default)]
struct SymbolBoltNames<'data> {
    name: Option<Cow<'data, str>>,
    file_name: Option<Box<str>>,
}

/// [`Binary::naming_name`] of `symbol`, with `sections` its binary's.
fn naming_name<'data>(symbol: &Symbol<'data>, sections: &[Section<'data>]) -> &'data str {
    if symbol.kind == SymbolKind::Section {
        symbol
            .section_index
            .and_then(|i| sections.get(i))
            .map_or("", |s| s.name)
    } else {
        symbol.name
    }
}

/// The parsed symbol table (in table order: entry `index` is symbol `index`) as BOLT's naming
/// pass sees it, and the names it gives them.
struct ParsedSymbols<'a, 'data> {
    symbols: &'a [Symbol<'data>],
    sections: &'a [Section<'data>],
    names: Vec<SymbolBoltNames<'data>>,
}

impl<'data> NamingTable<'data> for ParsedSymbols<'_, 'data> {
    fn len(&self) -> usize {
        self.symbols.len()
    }

    fn symbol(&self, index: usize) -> NamingSymbol<'data> {
        let s = &self.symbols[index];
        let section = s.section_index.and_then(|i| self.sections.get(i));
        let kind = match s.kind {
            // LLVM's reader calls STT_GNU_IFUNC "other", so BOLT never names a function after one.
            SymbolKind::Function => NamingKind::Function,
            SymbolKind::Section => NamingKind::Section,
            SymbolKind::File => NamingKind::File,
            _ => NamingKind::Other,
        };
        NamingSymbol {
            name: naming_name(s, self.sections),
            address: s.address,
            kind,
            is_local: s.is_local,
            is_undefined: s.is_undefined,
            is_absolute: s.is_absolute,
            in_alloc_section: section.is_some_and(|s| s.flags & SHF_ALLOC != 0),
            in_plt_section: section
                .is_some_and(|s| matches!(s.name, ".plt" | ".plt.got" | ".plt.sec" | ".iplt")),
            file: s.file,
        }
    }

    fn set_names(&mut self, index: usize, (primary, alt): BoltNames<'data>) {
        self.names[index] = SymbolBoltNames {
            name: Some(primary),
            file_name: alt.map(String::into_boxed_str),
        };
    }
}

/// `DT_FLAGS_1 & DF_1_PIE` in `.dynamic` (static-pie executables have no `PT_INTERP`).
fn dynamic_has_pie_flag(sections: &[Section<'_>], is_64: bool, endian: Endianness) -> bool {
    const SHT_DYNAMIC: u32 = 6;
    const DT_FLAGS_1: u64 = 0x6fff_fffb;
    const DF_1_PIE: u64 = 0x0800_0000;
    let Some(dynamic) = sections.iter().find(|s| s.sh_type == SHT_DYNAMIC) else {
        return false;
    };
    let word = if is_64 { 8 } else { 4 };
    let read = |b: &[u8]| -> u64 {
        let mut v = 0u64;
        for (k, &x) in b.iter().enumerate() {
            match endian {
                Endianness::Little => v |= u64::from(x) << (8 * k),
                Endianness::Big => v = (v << 8) | u64::from(x),
            }
        }
        v
    };
    dynamic
        .raw
        .chunks_exact(2 * word)
        .map(|e| (read(&e[..word]), read(&e[word..])))
        .any(|(tag, val)| tag == DT_FLAGS_1 && val & DF_1_PIE != 0)
}

#[cfg(test)]
mod tests {
    use super::{CodeRanges, string_at};
    use proptest::prelude::*;

    proptest! {
        /// A name read from the table as text is what reading its bytes up to the NUL and
        /// checking them gives, at any offset (inside characters and past the end too).
        #[test]
        fn string_at_reads_like_the_bytes(
            table in "(\\PC|\0){0,40}",
            offset in 0u32..100,
        ) {
            let bytes = table.as_bytes();
            let by_bytes = bytes.get(offset as usize..).and_then(|rest| {
                let end = rest.iter().position(|&b| b == 0)?;
                std::str::from_utf8(&rest[..end]).ok()
            });
            prop_assert_eq!(string_at(&table, offset), by_bytes);
        }

        /// The search finds what a walk in file order finds: the first range containing the
        /// address, whether the ranges overlap or not.
        #[test]
        fn code_ranges_find_the_first_containing_range(
            ranges in proptest::collection::vec((0u64..400, 1u64..120), 0..8),
            top in proptest::bool::ANY,
            addresses in proptest::collection::vec(0u64..600, 1..40),
        ) {
            let mut ranges: Vec<(u64, u64, usize)> = ranges
                .into_iter()
                .enumerate()
                .map(|(i, (start, size))| (start, size, i))
                .collect();
            if top {
                ranges.push((u64::MAX - 10, 20, ranges.len()));
            }
            let index = CodeRanges::new(ranges.iter().copied());
            let walk = |a: u64| {
                ranges
                    .iter()
                    .find(|&&(start, size, _)| a >= start && a - start < size)
                    .map(|r| r.2)
            };
            for a in addresses.into_iter().chain([u64::MAX, u64::MAX - 10, u64::MAX - 11]) {
                prop_assert_eq!(index.find(a), walk(a), "address {}", a);
            }
        }

        /// Disjoint ranges are searched, not walked.
        #[test]
        fn disjoint_ranges_are_sorted(
            gaps in proptest::collection::vec((0u64..50, 1u64..50), 1..10),
        ) {
            let mut start = 0;
            let mut ranges = Vec::new();
            for (i, (gap, size)) in gaps.into_iter().enumerate() {
                start += gap;
                ranges.push((start, size, i));
                start += size;
            }
            ranges.reverse();
            prop_assert!(CodeRanges::new(ranges.into_iter()).sorted);
        }
    }
}
