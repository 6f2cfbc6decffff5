//! The input binary as BOLT's aggregator sees it: executable sections and the functions BOLT
//! discovers in them (symbol functions with BOLT's names and sizes, PLT entries as pseudo
//! functions), with lookup of the function containing an address.
//!
//! Hand-written over `object` rather than taken from `pcmap-binary` because perf2bolt's function
//! model has rules of its own (zero-size symbols extend to the next function, lookups use the
//! "max size" up to the next function, local names are uniquified as `name/N`).
//!
//! Functions without a `FUNC` symbol, as BOLT discovers them (they matter for BOLT-optimized
//! binaries, whose original code stays in `.bolt.org.text` with stale symbols and FDEs): a code
//! section start without a function becomes `<section>/N`; an FDE start outside every function
//! becomes `__BOLT_FDE_FUNCat<addr>`; an untyped code label outside every sized function becomes
//! a function; a zero-size symbol takes the size of the FDE at its address; and a function whose
//! trailing bytes up to the next object are not zeros, NOPs or `int3` ("bad padding") is looked up only
//! within its size.

use object::{Object, ObjectSection, ObjectSymbol, ObjectSymbolTable, SectionKind, SymbolKind};

use crate::Error;

/// BOLT's name prefix for a function known only from an FDE (followed by its hex address).
const FDE_FUNCTION_PREFIX: &str = "__BOLT_FDE_FUNCat";

/// What kind of function BOLT makes of a code range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FunctionKind {
    /// An ordinary function from the symbol table: disassembled, CFG built when simple.
    Regular,
    /// A PLT entry (`name@PLT`): a pseudo function, traces inside it are accepted without edges.
    Plt,
}

/// One function of the input binary.
#[derive(Debug, Clone)]
pub struct Function {
    /// BOLT's names for the function: the first is the one printed in profiles
    /// (`name` for globals, `name/N` for locals); locals also get `name/file/N`.
    pub names: Vec<String>,
    /// Start address.
    pub address: u64,
    /// Size (the symbol size, or up to the next function for zero-size symbols).
    pub size: u64,
    /// Size up to the next function or the end of the section: addresses in
    /// `[address, address + max_size)` belong to this function for profile lookups.
    pub max_size: u64,
    /// Ordinary or PLT.
    pub kind: FunctionKind,
    /// Secondary entry points (offsets of other symbols inside the function).
    pub secondary_entries: Vec<u64>,
}

impl Function {
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
            .map(String::as_str)
            .find(|n| n.find('/').is_some_and(|i| n[i + 1..].contains('/')))
    }
}

/// A loaded binary: its bytes, code sections and functions sorted by address.
pub struct Image<'data> {
    data: &'data [u8],
    /// Executable sections: (address, size, file bytes).
    code_sections: Vec<(u64, u64, &'data [u8])>,
    /// Allocated sections with file contents: (address, size, bytes).
    alloc_sections: Vec<(u64, u64, &'data [u8])>,
    functions: Vec<Function>,
    /// `functions[i].address` and `address + max_size`, kept apart for cache-friendly lookups.
    starts: Vec<u64>,
    ends: Vec<u64>,
    build_id: Option<String>,
    build_id_raw: Option<Vec<u8>>,
    has_bat: bool,
    relocation_mode: bool,
    fixed_address: bool,
}

impl<'data> Image<'data> {
    /// Parse an ELF file and discover its functions the way BOLT does.
    pub fn parse(data: &'data [u8]) -> Result<Self, Error> {
        let file = object::File::parse(data).map_err(|e| Error::Elf(e.to_string()))?;
        let mut code_sections = Vec::new();
        let mut alloc_sections = Vec::new();
        let mut code_section_names = Vec::new();
        for section in file.sections() {
            if section.address() == 0 || section.size() == 0 {
                continue;
            }
            let Ok(bytes) = section.data() else { continue };
            if section.kind() == SectionKind::Text {
                code_sections.push((section.address(), section.size(), bytes));
                if let Ok(name) = section.name() {
                    code_section_names.push((section.address(), name));
                }
            }
            if !bytes.is_empty() {
                alloc_sections.push((section.address(), bytes.len() as u64, bytes));
            }
        }
        code_sections.sort_by_key(|s| s.0);
        let build_id_raw = file.build_id().ok().flatten().map(<[u8]>::to_vec);
        let has_bat = file.section_by_name(".note.bolt_bat").is_some();
        let fixed_address = file.kind() == object::ObjectKind::Executable;
        // BOLT runs in relocation mode (strict, for aggregation) only when the code's link-time
        // relocations were kept (`--emit-relocs`); a BOLT-optimized binary has none.
        let relocation_mode = file.section_by_name(".rela.text").is_some()
            || file.section_by_name(".rel.text").is_some();
        let build_id = build_id_raw
            .as_ref()
            .map(|b| b.iter().map(|x| format!("{x:02x}")).collect::<String>());

        // Symbol functions. BOLT walks symbols in address order and uniquifies local names with
        // a per-name counter (`name/1`, `name/2`); `name/file/N` is the alternative name.
        struct Sym<'a> {
            address: u64,
            size: u64,
            name: &'a str,
            local: bool,
            file: Option<&'a str>,
            is_func: bool,
            /// An untyped symbol in code: a secondary entry inside a function, else a function.
            is_label: bool,
            index: usize,
        }
        let mut syms = Vec::new();
        let mut current_file: Option<&str> = None;
        let table = file.symbol_table().or_else(|| file.dynamic_symbol_table());
        if let Some(table) = table {
            for sym in table.symbols() {
                if sym.kind() == SymbolKind::File {
                    current_file = sym.name().ok().filter(|n| !n.is_empty());
                    continue;
                }
                let Ok(name) = sym.name() else { continue };
                if name.is_empty() || sym.is_undefined() {
                    continue;
                }
                if sym.kind() == SymbolKind::Section {
                    continue;
                }
                let in_code = code_sections
                    .iter()
                    .any(|s| sym.address() >= s.0 && sym.address() < s.0.saturating_add(s.1));
                syms.push(Sym {
                    address: sym.address(),
                    size: sym.size(),
                    name,
                    local: sym.is_local(),
                    file: current_file.filter(|_| sym.is_local()),
                    is_func: sym.kind() == SymbolKind::Text && in_code,
                    is_label: matches!(sym.kind(), SymbolKind::Label | SymbolKind::Unknown)
                        && in_code,
                    index: sym.index().0,
                });
            }
        }
        syms.sort_by_key(|s| (s.address, s.index));
        let mut counters: rustc_hash::FxHashMap<String, u32> = Default::default();
        let mut functions: Vec<Function> = Vec::new();
        for s in &syms {
            let mut names = Vec::new();
            if s.local {
                let n = counters.entry(s.name.to_string()).or_insert(0);
                *n += 1;
                names.push(format!("{}/{}", s.name, n));
                if let Some(f) = s.file {
                    let key = format!("{}/{}", s.name, f);
                    let n = counters.entry(key.clone()).or_insert(0);
                    *n += 1;
                    names.push(format!("{key}/{n}"));
                }
            } else {
                names.push(s.name.to_string());
            }
            if s.is_label && !s.is_func {
                // BOLT makes a function of an untyped code label that no sized function
                // contains (in BOLTed binaries: a moved function's secondary entry label left in
                // the original code).
                let contained = functions.last().is_some_and(|f| {
                    s.address >= f.address && (f.size == 0 || s.address - f.address < f.size)
                });
                if contained {
                    continue;
                }
            } else if !s.is_func {
                continue;
            }
            if let Some(last) = functions.last_mut()
                && last.address == s.address
            {
                last.names.extend(names);
                last.size = last.size.max(s.size);
                continue;
            }
            functions.push(Function {
                names,
                address: s.address,
                size: s.size,
                max_size: 0,
                kind: FunctionKind::Regular,
                secondary_entries: Vec::new(),
            });
        }
        // Code at the start of an executable section without a function symbol there (in
        // BOLTed binaries: `.init`, `.fini`, the original `.bolt.org.text`) becomes a local
        // function named after the section, `<section>/N`, as BOLT names it. PLT sections get
        // pseudo functions below instead.
        for (address, name) in code_section_names {
            if name.starts_with(".plt") || functions.iter().any(|f| f.address == address) {
                continue;
            }
            let n = counters.entry(name.to_string()).or_insert(0);
            *n += 1;
            functions.push(Function {
                names: vec![format!("{name}/{n}")],
                address,
                size: 0,
                max_size: 0,
                kind: FunctionKind::Regular,
                secondary_entries: Vec::new(),
            });
        }
        // Code covered by an FDE but by no function symbol becomes `__BOLT_FDE_FUNCat<addr>`, as
        // in BOLT (in BOLTed binaries: the original functions BOLT moved away).
        let mut fdes = fde_ranges(&file);
        fdes.sort_unstable();
        // A function symbol without size takes the size of an FDE starting at its address.
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
        for &(address, size) in &fdes {
            let in_code = code_sections
                .iter()
                .any(|s| address >= s.0 && address < s.0.saturating_add(s.1));
            let i = known.partition_point(|f| f.0 <= address);
            let covered = i
                .checked_sub(1)
                .and_then(|j| known.get(j))
                .is_some_and(|&(start, len)| address == start || address - start < len);
            if !in_code || covered {
                continue;
            }
            functions.push(Function {
                names: vec![format!("{FDE_FUNCTION_PREFIX}{address:x}")],
                address,
                size,
                max_size: 0,
                kind: FunctionKind::Regular,
                secondary_entries: Vec::new(),
            });
        }
        add_plt_functions(&file, &mut functions);
        functions.sort_by_key(|f| f.address);
        // Sizes: zero-size symbols extend to the next function; max size reaches the next
        // function or the end of the containing section.
        for i in 0..functions.len() {
            let addr = functions[i].address;
            let section_end = code_sections
                .iter()
                .find(|s| addr >= s.0 && addr < s.0.saturating_add(s.1))
                .map(|s| s.0.saturating_add(s.1))
                .unwrap_or(addr.saturating_add(functions[i].size));
            let next = functions
                .get(i + 1)
                .map(|f| f.address)
                .unwrap_or(u64::MAX)
                .min(section_end);
            let max = next.saturating_sub(addr);
            if functions[i].size == 0 {
                functions[i].size = max;
            }
            functions[i].size = functions[i].size.min(section_end - addr);
            functions[i].max_size = max.max(functions[i].size);
            // BOLT accepts only zero bytes, NOPs and `int3` between a function's end and the next
            // object ("bad padding" otherwise): then lookups stop at the function's size (seen in
            // BOLTed binaries, where moved functions' code stays without symbols).
            let f = &functions[i];
            if f.kind == FunctionKind::Regular
                && f.max_size > f.size
                && !is_valid_padding(&code_sections, f.address + f.size, f.address + f.max_size)
            {
                functions[i].max_size = functions[i].size;
            }
        }
        let starts = functions.iter().map(|f| f.address).collect();
        let ends = functions
            .iter()
            .map(|f| f.address.saturating_add(f.max_size))
            .collect();
        let mut image = Self {
            starts,
            ends,
            data,
            code_sections,
            alloc_sections,
            functions,
            build_id,
            build_id_raw,
            has_bat,
            fixed_address,
            relocation_mode,
        };
        image.add_interprocedural_entry_points();
        Ok(image)
    }

    /// BOLT's `processInterproceduralReferences`: a direct branch or call, or a RIP-relative
    /// reference, from one function into the middle of another (within its size) makes that
    /// address a secondary entry point of the target. perf2bolt disassembles every function,
    /// and in BAT mode counts the references of the functions it ignores too, so references of
    /// every function that decodes are taken. (In a BOLT-optimized binary, the stale copy of
    /// `_start` in `.bolt.org.text` still points at the original `main`, which becomes an entry
    /// point of whatever function now covers that code.)
    fn add_interprocedural_entry_points(&mut self) {
        use rayon::prelude::*;
        let refs: Vec<u64> = (0..self.functions.len())
            .into_par_iter()
            .filter(|&i| self.functions[i].kind == FunctionKind::Regular)
            .flat_map_iter(|i| crate::cfg::outgoing_references(self, &self.functions[i]))
            .collect();
        let mut entries: Vec<(usize, u64)> = refs
            .into_iter()
            .filter_map(|addr| {
                let i = self.starts.partition_point(|&s| s <= addr).checked_sub(1)?;
                let f = &self.functions[i];
                let offset = addr - f.address;
                (f.kind == FunctionKind::Regular && offset != 0 && offset < f.size)
                    .then_some((i, offset))
            })
            .collect();
        entries.sort_unstable();
        entries.dedup();
        for (i, offset) in entries {
            self.functions[i].secondary_entries.push(offset);
        }
    }

    /// The whole file.
    pub fn data(&self) -> &'data [u8] {
        self.data
    }

    /// The GNU build-id as lower-case hex.
    pub fn build_id(&self) -> Option<&str> {
        self.build_id.as_deref()
    }

    /// Whether the binary was produced by BOLT with address translation tables
    /// (`.note.bolt_bat`): profiles of such binaries must be translated through BAT.
    pub fn has_bat(&self) -> bool {
        self.has_bat
    }

    /// Whether BOLT would process the binary in relocation mode: its code relocations were kept
    /// (`.rela.text`, from `--emit-relocs`). perf2bolt then runs in strict mode.
    pub fn relocation_mode(&self) -> bool {
        self.relocation_mode
    }

    /// Whether the binary is loaded at its link-time addresses (`ET_EXEC`, not PIE).
    pub fn fixed_address(&self) -> bool {
        self.fixed_address
    }

    /// The GNU build-id bytes.
    pub fn build_id_bytes(&self) -> Option<&[u8]> {
        self.build_id_raw.as_deref()
    }

    /// Functions sorted by address.
    pub fn functions(&self) -> &[Function] {
        &self.functions
    }

    /// Index of the function whose `[address, address + max_size)` contains `addr`.
    pub fn function_containing(&self, addr: u64) -> Option<usize> {
        let i = self.starts.partition_point(|&a| a <= addr).checked_sub(1)?;
        (addr < self.ends[i]).then_some(i)
    }

    /// Index of the function starting exactly at `addr`.
    pub fn function_at(&self, addr: u64) -> Option<usize> {
        self.starts.binary_search(&addr).ok()
    }

    /// The contents of the section named `name`, if the binary has one.
    pub fn section_data(&self, name: &str) -> Option<&'data [u8]> {
        let file = object::File::parse(self.data).ok()?;
        file.section_by_name(name)?.data().ok()
    }

    /// The bytes of `[addr, addr + len)` when they lie in one code section.
    pub fn code_bytes(&self, addr: u64, len: u64) -> Option<&'data [u8]> {
        let (start, size, bytes) = self
            .code_sections
            .iter()
            .find(|s| addr >= s.0 && addr < s.0.saturating_add(s.1))?;
        let off = usize::try_from(addr - start).ok()?;
        let end =
            usize::try_from(addr.saturating_add(len).min(start.saturating_add(*size)) - start)
                .ok()?;
        bytes.get(off..end.min(bytes.len()))
    }

    /// Read a little-endian u32 from any allocated section (for jump tables).
    pub fn read_u32(&self, addr: u64) -> Option<u32> {
        let (start, _, bytes) = self
            .alloc_sections
            .iter()
            .find(|s| addr >= s.0 && addr < s.0.saturating_add(s.1))?;
        let off = usize::try_from(addr - start).ok()?;
        let b = bytes.get(off..off.checked_add(4)?)?;
        Some(u32::from_le_bytes(b.try_into().ok()?))
    }

    /// Read a little-endian u64 from any allocated section (for jump tables).
    pub fn read_u64(&self, addr: u64) -> Option<u64> {
        let (start, _, bytes) = self
            .alloc_sections
            .iter()
            .find(|s| addr >= s.0 && addr < s.0.saturating_add(s.1))?;
        let off = usize::try_from(addr - start).ok()?;
        let b = bytes.get(off..off.checked_add(8)?)?;
        Some(u64::from_le_bytes(b.try_into().ok()?))
    }
}

/// PLT entries of a lazily bound `.plt` (16-byte header, 16-byte entries in `.rela.plt` order)
/// become `name@PLT` pseudo functions, as BOLT names them.
fn add_plt_functions(file: &object::File<'_>, functions: &mut Vec<Function>) {
    let (Some(plt), Some(rela)) = (
        file.section_by_name(".plt"),
        file.section_by_name(".rela.plt"),
    ) else {
        return;
    };
    let Some(dynsym) = file.dynamic_symbol_table() else {
        return;
    };
    let Ok(rela_bytes) = rela.data() else { return };
    // BOLT covers the PLT header with a pseudo function of its own.
    functions.push(Function {
        names: vec!["__BOLT_PSEUDO_.plt".to_string()],
        address: plt.address(),
        size: 16,
        max_size: 16,
        kind: FunctionKind::Plt,
        secondary_entries: Vec::new(),
    });
    for (i, entry) in rela_bytes.chunks_exact(24).enumerate() {
        let info = u64::from_le_bytes(entry[8..16].try_into().unwrap_or_default());
        let sym_index = (info >> 32) as usize;
        let Ok(sym) = dynsym.symbol_by_index(object::SymbolIndex(sym_index)) else {
            continue;
        };
        let Ok(name) = sym.name() else { continue };
        let Some(address) = (16 * i as u64 + 16).checked_add(plt.address()) else {
            break;
        };
        if address.saturating_add(16) > plt.address().saturating_add(plt.size()) {
            break;
        }
        functions.push(Function {
            names: vec![format!("{name}@PLT")],
            address,
            size: 16,
            max_size: 16,
            kind: FunctionKind::Plt,
            secondary_entries: Vec::new(),
        });
    }
}

/// Whether `[start, end)` holds only zero bytes, NOPs and `int3` (lld's fill).
fn is_valid_padding(code_sections: &[(u64, u64, &[u8])], start: u64, end: u64) -> bool {
    let Some((base, _, bytes)) = code_sections
        .iter()
        .find(|s| start >= s.0 && start < s.0.saturating_add(s.1))
    else {
        return true;
    };
    let (Ok(from), Ok(to)) = (
        usize::try_from(start - base),
        usize::try_from(end.saturating_sub(*base)),
    ) else {
        return true;
    };
    let Some(pad) = bytes.get(from..to.min(bytes.len())) else {
        return true;
    };
    let mut at = 0usize;
    while at < pad.len() {
        if pad[at] == 0 {
            at += 1;
            continue;
        }
        let mut decoder = iced_x86::Decoder::with_ip(
            64,
            &pad[at..],
            start + at as u64,
            iced_x86::DecoderOptions::NONE,
        );
        let insn = decoder.decode();
        if insn.is_invalid()
            || !matches!(
                insn.mnemonic(),
                iced_x86::Mnemonic::Nop | iced_x86::Mnemonic::Int3
            )
        {
            return false;
        }
        at += insn.len();
    }
    true
}

/// `(start, length)` of every FDE in `.eh_frame`.
fn fde_ranges(file: &object::File<'_>) -> Vec<(u64, u64)> {
    use gimli::UnwindSection;
    let Some(section) = file.section_by_name(".eh_frame") else {
        return Vec::new();
    };
    let Ok(bytes) = section.data() else {
        return Vec::new();
    };
    let mut eh_frame = gimli::EhFrame::new(bytes, gimli::LittleEndian);
    eh_frame.set_address_size(8);
    let mut bases = gimli::BaseAddresses::default().set_eh_frame(section.address());
    if let Some(text) = file.section_by_name(".text") {
        bases = bases.set_text(text.address());
    }
    let mut out = Vec::new();
    let mut entries = eh_frame.entries(&bases);
    while let Ok(Some(entry)) = entries.next() {
        if let gimli::CieOrFde::Fde(partial) = entry
            && let Ok(fde) = partial.parse(gimli::EhFrame::cie_from_offset)
            && fde.len() > 0
        {
            out.push((fde.initial_address(), fde.len()));
        }
    }
    out
}
