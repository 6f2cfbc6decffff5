//! Inline-aware symbolization: the frames `llvm-symbolizer --inlining` prints for an address.
//!
//! Built on the `addr2line` crate (innermost inline frame first, callers with their call
//! locations). Like llvm-symbolizer's default (`--functions=linkage`, symbol table enabled), the
//! outermost frame takes its name from the ELF symbol that contains the address when there is one,
//! so clones such as `foo.constprop.0` or `foo.cold` keep their symbol names.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use gimli::{AttributeValue, UnitRef};
use serde::Serialize;

use crate::Error;
use crate::sections::{DebugData, Slice};

/// One frame of a symbolized address: llvm-symbolizer's `DILineInfo`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Frame {
    /// Function name (`None` when unknown, printed as `??`).
    pub function: Option<String>,
    /// Source file (`None` when unknown, printed as `??`).
    pub file: Option<String>,
    /// Line (0 = unknown).
    pub line: u32,
    /// Column (0 = unknown).
    pub column: u32,
    /// True for every frame except the outermost (the out-of-line function).
    pub inlined: bool,
    /// Discriminator: of the line-table row for the innermost frame, `DW_AT_GNU_discriminator` of
    /// the call for the others (0 = none).
    pub discriminator: u32,
    /// `DW_AT_decl_file` of the frame's function (`None` when unknown).
    pub start_file: Option<String>,
    /// `DW_AT_decl_line` of the frame's function (0 = unknown).
    pub start_line: u32,
    /// `DW_AT_low_pc` of the frame's DIE, or the start of the ELF symbol that named the frame.
    pub start_address: Option<u64>,
}

/// Which function name a frame carries (llvm-symbolizer's `--functions=`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FunctionNameKind {
    /// No function names (`--functions=none`).
    None,
    /// `DW_AT_name` (`--functions=short`); the symbol table is not consulted.
    Short,
    /// The linkage name, the outermost frame named from the ELF symbol table when a symbol covers
    /// the address (`--functions=linkage`, llvm-symbolizer's default).
    #[default]
    Linkage,
}

/// What [`Symbolizer::lookup`] answers, as llvm-symbolizer's options say it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Options {
    /// Every inline frame (`--inlines`), or only the innermost location (`--no-inlines`).
    pub inlines: bool,
    /// Which function names (`--functions=`).
    pub names: FunctionNameKind,
    /// The answer is for the GNU layout (`--output-style=GNU`), whose single frame follows GNU
    /// addr2line.
    pub gnu: bool,
    /// File names without their directories (`--basenames`).
    pub basenames: bool,
    /// Function names in source form (`--demangle`, llvm-symbolizer's default), demangled by
    /// `pcmap_demangle` as llvm-symbolizer demangles them.
    pub demangle: bool,
}

/// One entry of the symbol table as llvm-symbolizer keeps it: function, object and untyped
/// symbols of allocated sections, one per address (the largest), local symbols with the name of
/// the `STT_FILE` symbol before them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableSymbol<'data> {
    /// Start address.
    pub address: u64,
    /// Size in bytes (0 when unknown: then it covers everything up to the next symbol).
    pub size: u64,
    /// Symbol name.
    pub name: &'data str,
    /// For local symbols, the preceding `STT_FILE` symbol's name.
    pub file: Option<&'data str>,
}

/// The symbol table of `bin` with llvm-symbolizer's rules (`SymbolizableObjectFile`): `.symtab`
/// entries of type `STT_FUNC`, `STT_OBJECT`, `STT_COMMON` or `STT_NOTYPE` defined in an `SHF_ALLOC`
/// section; sorted by (address, size), and of several at one address the last (the largest) kept.
pub(crate) fn symbol_table<'data>(
    bin: &pcmap_binary::Binary<'data>,
) -> Result<Vec<TableSymbol<'data>>, Error> {
    const STT_NOTYPE: u8 = 0;
    const STT_OBJECT: u8 = 1;
    const STT_FUNC: u8 = 2;
    const STT_FILE: u8 = 4;
    const STT_COMMON: u8 = 5;
    const STB_LOCAL: u8 = 0;
    const SHF_ALLOC: u64 = 2;
    let entries = bin.symtab()?;
    let mut allocated = vec![
        false;
        bin.sections()
            .iter()
            .map(|s| s.index + 1)
            .max()
            .unwrap_or(0)
    ];
    for s in bin.sections() {
        allocated[s.index] = s.flags & SHF_ALLOC != 0;
    }
    let alloc = |index: usize| allocated.get(index).copied().unwrap_or(false);
    let name = |n: Option<&'data [u8]>| n.and_then(|n| std::str::from_utf8(n).ok());
    let mut files: Vec<(usize, &'data str)> = Vec::new();
    let mut out: Vec<(TableSymbol<'data>, usize)> = Vec::new();
    for e in &entries {
        if e.index == 0 {
            continue;
        }
        let Some(section) = e.section_index else {
            if e.st_type == STT_FILE {
                files.push((e.index, name(e.name).unwrap_or("")));
            }
            continue;
        };
        if !alloc(section) || !matches!(e.st_type, STT_NOTYPE | STT_OBJECT | STT_FUNC | STT_COMMON)
        {
            continue;
        }
        let Some(n) = name(e.name) else { continue };
        let local = if e.st_bind == STB_LOCAL { e.index } else { 0 };
        out.push((
            TableSymbol {
                address: e.value,
                size: e.size,
                name: n,
                file: None,
            },
            local,
        ));
    }
    out.sort_by_key(|(s, _)| (s.address, s.size));
    let mut kept: Vec<TableSymbol<'data>> = Vec::with_capacity(out.len());
    for (i, (sym, local)) in out.iter().enumerate() {
        if out.get(i + 1).is_some_and(|n| n.0.address == sym.address) {
            continue;
        }
        let mut sym = sym.clone();
        if *local != 0 {
            let j = files.partition_point(|f| f.0 < *local);
            sym.file = j.checked_sub(1).map(|j| files[j].1);
        }
        kept.push(sym);
    }
    Ok(kept)
}

/// What one frame's DIE says, origins followed.
#[derive(Default)]
struct DieInfo {
    name: Option<String>,
    decl_file: Option<String>,
    decl_line: u32,
    low_pc: Option<u64>,
    call_discriminator: u32,
}

/// A line-table row worth remembering: line 0 (its column, which `addr2line` drops) or a non-zero
/// discriminator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct RowNote {
    start: u64,
    end: u64,
    line0_column: Option<u32>,
    discriminator: u32,
}

/// A symbolizer over one binary's DWARF and symbol table. Not `Sync`: use one per thread.
pub struct Symbolizer<'d> {
    context: addr2line::Context<Slice<'d>>,
    symbols: &'d [TableSymbol<'d>],
    rows: Vec<RowNote>,
    /// The sections again, for DIEs that refer to other units (`DW_FORM_ref_addr`).
    dwarf: gimli::Dwarf<Slice<'d>>,
    /// Every unit header with its `.debug_info` offset, sorted.
    headers: Vec<(usize, gimli::UnitHeader<Slice<'d>>)>,
    /// Units parsed for such references, by position in `headers`.
    parsed: RefCell<HashMap<usize, Rc<gimli::Unit<Slice<'d>>>>>,
}

impl std::fmt::Debug for Symbolizer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Symbolizer")
            .field("symbols", &self.symbols.len())
            .finish()
    }
}

impl<'d> Symbolizer<'d> {
    /// Build a symbolizer for `data`.
    pub fn new(data: &'d DebugData<'d>) -> Result<Self, Error> {
        let context =
            addr2line::Context::from_dwarf(data.dwarf()).map_err(|source| Error::Dwarf {
                section: ".debug_info",
                offset: 0,
                what: "symbolizer context",
                source,
            })?;
        let dwarf = data.dwarf();
        let mut headers = Vec::new();
        let mut units = dwarf.units();
        while let Ok(Some(h)) = units.next() {
            if let Some(o) = h.debug_info_offset() {
                headers.push((o.0, h));
            }
        }
        headers.sort_by_key(|h| h.0);
        Ok(Symbolizer {
            context,
            symbols: &data.symbol_table,
            rows: row_notes(&dwarf),
            dwarf,
            headers,
            parsed: RefCell::new(HashMap::new()),
        })
    }

    /// The unit holding `.debug_info` offset `offset`, parsed (once), and the offset in it.
    fn unit_containing(
        &self,
        offset: gimli::DebugInfoOffset,
    ) -> Option<(Rc<gimli::Unit<Slice<'d>>>, gimli::UnitOffset)> {
        let i = self
            .headers
            .partition_point(|h| h.0 <= offset.0)
            .checked_sub(1)?;
        let header = &self.headers[i].1;
        let unit_offset = offset.to_unit_offset(header)?;
        let mut parsed = self.parsed.borrow_mut();
        let unit = match parsed.get(&i) {
            Some(u) => u.clone(),
            None => {
                let u = Rc::new(gimli::Unit::new(&self.dwarf, *header).ok()?);
                parsed.insert(i, u.clone());
                u
            }
        };
        Some((unit, unit_offset))
    }

    /// What the DIE at `offset` of `unit` says, following `DW_AT_abstract_origin` and
    /// `DW_AT_specification` (into other units too) for the name and the declaration, as llvm's
    /// `findRecursively`; the declaration file is resolved in the unit of the DIE that has it.
    fn die_info(&self, unit: UnitRef<'_, Slice<'d>>, offset: gimli::UnitOffset) -> DieInfo {
        let mut info = DieInfo::default();
        let (mut file, mut line, mut name) = (None, None, None);
        let mut other: Option<Rc<gimli::Unit<Slice<'d>>>> = None;
        let mut next = Some(offset);
        // Own attributes first, then the origins (a bounded chain).
        for depth in 0..16 {
            let Some(off) = next.take() else { break };
            let u = match &other {
                Some(o) => UnitRef::new(&self.dwarf, o),
                None => unit,
            };
            let Ok(entry) = u.entry(off) else { break };
            let mut jump = None;
            for a in entry.attrs() {
                match a.name() {
                    gimli::DW_AT_name if name.is_none() => {
                        name = u
                            .attr_string(a.value())
                            .ok()
                            .map(|s| String::from_utf8_lossy(s.slice()).into_owned());
                    }
                    // llvm reads a file index only from an unsigned constant form; GCC's
                    // DW_FORM_implicit_const (gimli: Sdata) gives llvm no file.
                    gimli::DW_AT_decl_file if file.is_none() => {
                        file = Some(match a.raw_value() {
                            AttributeValue::Sdata(_) => None,
                            v => v
                                .udata_value()
                                .and_then(|f| crate::extract::file_path(u, f)),
                        });
                    }
                    gimli::DW_AT_decl_line if line.is_none() => line = a.udata_value(),
                    gimli::DW_AT_low_pc if depth == 0 => {
                        info.low_pc = u.attr_address(a.value()).ok().flatten();
                    }
                    gimli::DW_AT_GNU_discriminator if depth == 0 => {
                        info.call_discriminator = a
                            .udata_value()
                            .and_then(|v| u32::try_from(v).ok())
                            .unwrap_or(0);
                    }
                    gimli::DW_AT_abstract_origin | gimli::DW_AT_specification
                        if next.is_none() && jump.is_none() =>
                    {
                        match a.value() {
                            AttributeValue::UnitRef(o) => next = Some(o),
                            AttributeValue::DebugInfoRef(o) => match o.to_unit_offset(&u.header) {
                                Some(o) => next = Some(o),
                                None => jump = Some(o),
                            },
                            _ => {}
                        }
                    }
                    _ => {}
                }
            }
            if let Some(o) = jump {
                let Some((unit, off)) = self.unit_containing(o) else {
                    break;
                };
                other = Some(unit);
                next = Some(off);
            }
        }
        info.name = name;
        info.decl_file = file.flatten();
        info.decl_line = line.and_then(|l| u32::try_from(l).ok()).unwrap_or(0);
        info
    }

    fn row_note(&self, address: u64) -> Option<RowNote> {
        let i = self
            .rows
            .partition_point(|r| r.start <= address)
            .checked_sub(1)?;
        let r = self.rows[i];
        (r.start <= address && address < r.end).then_some(r)
    }

    /// The symbol containing `address` (llvm-symbolizer's rule: the last symbol starting at or
    /// below the address, whose size covers it or is zero).
    pub fn symbol_at(&self, address: u64) -> Option<&'d TableSymbol<'d>> {
        let idx = self.symbols.partition_point(|s| s.address <= address);
        let sym = self.symbols.get(idx.checked_sub(1)?)?;
        (sym.size == 0 || address - sym.address < sym.size).then_some(sym)
    }

    /// Frames for `address`, innermost first, with linkage names. Without `inlines`, one frame:
    /// the innermost function name with the address's own source location (what
    /// `llvm-symbolizer --no-inlines` prints).
    pub fn frames(&self, address: u64, inlines: bool) -> Result<Vec<Frame>, Error> {
        self.frames_with(address, inlines, FunctionNameKind::Linkage)
    }

    /// The frames llvm-symbolizer prints for `address` with `options`.
    ///
    /// llvm-symbolizer's GNU layout without inline frames prints the innermost frame of the
    /// inline chain (as GNU addr2line does): the symbol table names it only when it is the
    /// out-of-line function itself, not when it was inlined.
    pub fn lookup(&self, address: u64, options: &Options) -> Result<Vec<Frame>, Error> {
        let mut frames = if options.gnu && !options.inlines {
            let mut frames = self.frames_with(address, true, options.names)?;
            frames.truncate(1);
            if let Some(f) = frames.first_mut() {
                f.inlined = false;
            }
            frames
        } else {
            self.frames_with(address, options.inlines, options.names)?
        };
        if options.demangle {
            for f in &mut frames {
                if let Some(name) = &mut f.function
                    && let std::borrow::Cow::Owned(d) = pcmap_demangle::demangle(name)
                {
                    *name = d;
                }
            }
        }
        if options.basenames {
            let base = |p: &mut Option<String>| {
                if let Some(p) = p
                    && let Some(i) = p.rfind('/')
                {
                    p.replace_range(..=i, "");
                }
            };
            for f in &mut frames {
                base(&mut f.file);
                base(&mut f.start_file);
            }
        }
        Ok(frames)
    }

    /// llvm-symbolizer's symbol lookup (`SYMBOL` or `SYMBOL+OFFSET` inputs): for every symbol of
    /// that name, the single-frame location of its address (plus `offset` when the symbol is
    /// larger than it), kept when it has a source file.
    pub fn find_symbol(
        &self,
        name: &str,
        offset: u64,
        options: &Options,
    ) -> Result<Vec<Frame>, Error> {
        let single = Options {
            inlines: false,
            gnu: false,
            ..*options
        };
        let mut found = Vec::new();
        for sym in self.symbols.iter().filter(|s| s.name == name) {
            let address = sym.address + if offset < sym.size { offset } else { 0 };
            found.extend(
                self.lookup(address, &single)?
                    .into_iter()
                    .filter(|f| f.file.is_some()),
            );
        }
        Ok(found)
    }

    /// The DWARF frames of `address`, innermost first, appended to `frames`.
    fn dwarf_frames(
        &self,
        address: u64,
        names: FunctionNameKind,
        frames: &mut Vec<Frame>,
    ) -> Result<(), gimli::Error> {
        let unit = self.context.find_dwarf_and_unit(address).skip_all_loads();
        let mut iter = self.context.find_frames(address).skip_all_loads()?;
        let mut call_discriminator = 0;
        while let Some(f) = iter.next()? {
            let die = match (unit, f.dw_die_offset) {
                (Some(u), Some(o)) => self.die_info(u, o),
                _ => DieInfo::default(),
            };
            let function = match names {
                FunctionNameKind::None => None,
                FunctionNameKind::Short => die.name.clone(),
                FunctionNameKind::Linkage => f
                    .function
                    .as_ref()
                    .and_then(|n| n.raw_name().ok().map(|s| s.into_owned())),
            };
            let (file, line, column) = match &f.location {
                Some(l) => (
                    l.file.map(str::to_string),
                    l.line.unwrap_or(0),
                    l.column.unwrap_or(0),
                ),
                None => (None, 0, 0),
            };
            let discriminator = if frames.is_empty() {
                self.row_note(address).map_or(0, |r| r.discriminator)
            } else {
                call_discriminator
            };
            call_discriminator = die.call_discriminator;
            frames.push(Frame {
                function,
                file,
                line,
                column,
                inlined: true,
                discriminator,
                start_file: die.decl_file,
                start_line: die.decl_line,
                start_address: die.low_pc,
            });
        }
        Ok(())
    }

    /// [`Symbolizer::frames`] with llvm-symbolizer's choice of function names.
    pub fn frames_with(
        &self,
        address: u64,
        inlines: bool,
        names: FunctionNameKind,
    ) -> Result<Vec<Frame>, Error> {
        let err = |source| Error::Symbolize { address, source };
        let mut frames: Vec<Frame> = Vec::new();
        // No DWARF range (half-open) can hold the last address; addr2line overflows on it.
        if address != u64::MAX {
            self.dwarf_frames(address, names, &mut frames)
                .map_err(err)?;
        }
        if let Some(first) = frames.first_mut()
            && first.line == 0
            && first.file.is_some()
            && let Some(c) = self.row_note(address).and_then(|r| r.line0_column)
        {
            first.column = c;
        }
        if frames.is_empty() {
            frames.push(Frame::default());
        }
        if !inlines {
            frames.truncate(1);
        }
        if let Some(last) = frames.last_mut() {
            last.inlined = false;
            if names == FunctionNameKind::Linkage
                && let Some(sym) = self.symbol_at(address)
            {
                last.function = Some(sym.name.to_string());
                last.start_address = Some(sym.address);
                if last.file.is_none() {
                    last.file = sym.file.filter(|f| !f.is_empty()).map(str::to_string);
                }
            }
        }
        Ok(frames)
    }
}

/// Line-table rows with line 0 or a discriminator, sorted by address. Malformed line programs
/// are skipped (these are cosmetic).
fn row_notes(dwarf: &gimli::Dwarf<Slice<'_>>) -> Vec<RowNote> {
    let mut out = Vec::new();
    let mut units = dwarf.units();
    while let Ok(Some(header)) = units.next() {
        let Ok(unit) = dwarf.unit(header) else {
            continue;
        };
        let Some(program) = unit.line_program.clone() else {
            continue;
        };
        let mut rows = program.rows();
        let mut prev: Option<RowNote> = None;
        while let Ok(Some((_, row))) = rows.next_row() {
            let addr = row.address();
            if let Some(mut note) = prev.take()
                && note.start < addr
            {
                note.end = addr;
                out.push(note);
            }
            let discriminator = u32::try_from(row.discriminator()).unwrap_or(0);
            if !row.end_sequence() && (row.line().is_none() || discriminator != 0) {
                let column = match row.column() {
                    gimli::ColumnType::LeftEdge => 0,
                    gimli::ColumnType::Column(c) => u32::try_from(c.get()).unwrap_or(u32::MAX),
                };
                prev = Some(RowNote {
                    start: addr,
                    end: addr,
                    line0_column: row.line().is_none().then_some(column),
                    discriminator,
                });
            }
        }
    }
    out.sort_unstable();
    out
}
