//! What the passes need to know about the traced code, kept behind a small trait so this crate
//! stays independent of any ELF reader: function symbols by address and, optionally, the kind
//! and length of the instruction at an address (from a disassembler).

/// A function symbol covering an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FunctionSym<'a> {
    /// Entry address.
    pub start: u64,
    /// One past the last byte (`start` if the size is unknown).
    pub end: u64,
    /// The (preferably demangled) name.
    pub name: &'a str,
}

/// The control-flow kind of an instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InsnKind {
    /// A call (direct or indirect).
    Call,
    /// A return.
    Return,
    /// An unconditional jump (direct or indirect).
    Jump,
    /// A conditional branch.
    CondJump,
    /// Anything that falls through.
    Other,
}

/// An instruction's length and control-flow kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InsnInfo {
    /// Length in bytes.
    pub len: u8,
    /// Control-flow kind.
    pub kind: InsnKind,
}

/// Code knowledge for the function pass and for naming blocks.
pub trait CodeInfo: Sync {
    /// The function containing `addr`, if any.
    fn function_at(&self, addr: u64) -> Option<FunctionSym<'_>>;

    /// The instruction at `addr`, if it can be decoded. Without it the function pass falls back
    /// to heuristics (a jump to a function entry is a call, a jump to a pending return address
    /// is a return).
    fn instruction(&self, _addr: u64) -> Option<InsnInfo> {
        None
    }

    /// `name+0xoff` for `addr`, or `0xaddr` without a symbol.
    fn describe(&self, addr: u64) -> String {
        match self.function_at(addr) {
            Some(f) if addr == f.start => f.name.to_string(),
            Some(f) => format!("{}+{:#x}", f.name, addr - f.start),
            None => format!("{addr:#x}"),
        }
    }
}

/// No symbols at all.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoCode;

impl CodeInfo for NoCode {
    fn function_at(&self, _addr: u64) -> Option<FunctionSym<'_>> {
        None
    }
}

/// A table of function symbols sorted by address, answering [`CodeInfo::function_at`] by binary
/// search. Symbols of size 0 cover addresses up to the next symbol.
#[derive(Debug, Clone, Default)]
pub struct SymbolTable {
    entries: Vec<(u64, u64, String)>,
}

impl SymbolTable {
    /// Build from `(start, size, name)` triples in any order. Duplicates at one address keep
    /// the first name given.
    pub fn new(symbols: impl IntoIterator<Item = (u64, u64, String)>) -> Self {
        let mut entries: Vec<(u64, u64, String)> = symbols
            .into_iter()
            .map(|(s, z, n)| (s, s.saturating_add(z), n))
            .collect();
        entries.sort_by_key(|e| e.0);
        entries.dedup_by_key(|e| e.0);
        let next: Vec<u64> = entries
            .iter()
            .skip(1)
            .map(|e| e.0)
            .chain(std::iter::once(u64::MAX))
            .collect();
        for (e, n) in entries.iter_mut().zip(next) {
            if e.1 <= e.0 {
                e.1 = n;
            }
        }
        SymbolTable { entries }
    }

    /// Number of symbols.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

impl CodeInfo for SymbolTable {
    fn function_at(&self, addr: u64) -> Option<FunctionSym<'_>> {
        let i = self.entries.partition_point(|e| e.0 <= addr);
        let (start, end, name) = self.entries.get(i.checked_sub(1)?)?;
        (addr < *end).then_some(FunctionSym {
            start: *start,
            end: *end,
            name,
        })
    }
}
