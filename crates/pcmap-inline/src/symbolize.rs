//! Inline-aware symbolization: the frames `llvm-symbolizer --inlining` prints for an address.
//!
//! Built on the `addr2line` crate (innermost inline frame first, callers with their call
//! locations). Like llvm-symbolizer's default (`--functions=linkage`, symbol table enabled), the
//! outermost frame takes its name from the ELF symbol that contains the address when there is one,
//! so clones such as `foo.constprop.0` or `foo.cold` keep their symbol names.

use serde::Serialize;

use crate::Error;
use crate::sections::{DebugData, ElfSymbol, Slice};

/// One frame of a symbolized address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
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
}

/// A symbolizer over one binary's DWARF and symbol table. Not `Sync`: use one per thread.
pub struct Symbolizer<'d> {
    context: addr2line::Context<Slice<'d>>,
    symbols: &'d [ElfSymbol<'d>],
    /// Address ranges of line-table rows with line 0, with their column: `addr2line` drops the
    /// column of such rows, llvm-symbolizer prints it (`file:0:7`).
    line0: Vec<(u64, u64, u32)>,
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
        Ok(Symbolizer {
            context,
            symbols: &data.symbols,
            line0: line0_rows(&data.dwarf()),
        })
    }

    fn line0_column(&self, address: u64) -> Option<u32> {
        let i = self
            .line0
            .partition_point(|r| r.0 <= address)
            .checked_sub(1)?;
        let (start, end, column) = self.line0[i];
        (start <= address && address < end).then_some(column)
    }

    /// The ELF function symbol containing `address` (llvm-symbolizer's rule: the last symbol starting
    /// at or below the address, whose size covers it or is zero).
    pub fn symbol_at(&self, address: u64) -> Option<&'d ElfSymbol<'d>> {
        let idx = self.symbols.partition_point(|s| s.address <= address);
        let sym = self.symbols.get(idx.checked_sub(1)?)?;
        (sym.size == 0 || address - sym.address < sym.size).then_some(sym)
    }

    /// Frames for `address`, innermost first. Without `inlines`, one frame: the innermost function
    /// name with the address's own source location (what `llvm-symbolizer --no-inlines` prints).
    pub fn frames(&self, address: u64, inlines: bool) -> Result<Vec<Frame>, Error> {
        let err = |source| Error::Symbolize { address, source };
        let mut iter = self
            .context
            .find_frames(address)
            .skip_all_loads()
            .map_err(err)?;
        let mut frames = Vec::new();
        while let Some(f) = iter.next().map_err(err)? {
            let function = f
                .function
                .as_ref()
                .and_then(|n| n.raw_name().ok().map(|s| s.into_owned()));
            let (file, line, column) = match &f.location {
                Some(l) => (
                    l.file.map(str::to_string),
                    l.line.unwrap_or(0),
                    l.column.unwrap_or(0),
                ),
                None => (None, 0, 0),
            };
            frames.push(Frame {
                function,
                file,
                line,
                column,
                inlined: true,
            });
        }
        if let Some(first) = frames.first_mut()
            && first.line == 0
            && first.file.is_some()
            && let Some(c) = self.line0_column(address)
        {
            first.column = c;
        }
        if frames.is_empty() {
            frames.push(Frame {
                function: None,
                file: None,
                line: 0,
                column: 0,
                inlined: true,
            });
        }
        if let Some(last) = frames.last_mut() {
            last.inlined = false;
            if let Some(sym) = self.symbol_at(address) {
                last.function = Some(sym.name.to_string());
            }
        }
        if !inlines {
            // llvm-symbolizer --no-inlines: the innermost location, named from the symbol table
            // when a symbol covers the address, else the innermost DWARF function.
            let n = frames.len();
            let mut only = frames.swap_remove(0);
            if n > 1 {
                only.inlined = false;
                if let Some(sym) = self.symbol_at(address) {
                    only.function = Some(sym.name.to_string());
                }
            }
            return Ok(vec![only]);
        }
        Ok(frames)
    }
}

/// Ranges of all line-table rows whose line is 0, sorted by address. Malformed line programs are
/// skipped (the column is cosmetic).
fn line0_rows(dwarf: &gimli::Dwarf<Slice<'_>>) -> Vec<(u64, u64, u32)> {
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
        let mut prev: Option<(u64, u32)> = None;
        while let Ok(Some((_, row))) = rows.next_row() {
            let addr = row.address();
            if let Some((start, column)) = prev.take()
                && start < addr
            {
                out.push((start, addr, column));
            }
            if !row.end_sequence() && row.line().is_none() {
                let column = match row.column() {
                    gimli::ColumnType::LeftEdge => 0,
                    gimli::ColumnType::Column(c) => u32::try_from(c.get()).unwrap_or(u32::MAX),
                };
                prev = Some((addr, column));
            }
        }
    }
    out.sort_unstable();
    out
}
