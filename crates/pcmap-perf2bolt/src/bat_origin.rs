//! Where an address of a BOLTed binary comes from: the input function and offset perf2bolt
//! attributes it to (`pcmap bat translate`, `pcmap explain`).

use pcmap_bat::{BatTable, Block};
use pcmap_binary::Binary;
use pcmap_binary::bolt::BoltFunctions;

/// The input location of an address of a BOLTed binary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin<'a> {
    /// The input function's name (the symbol's own name where a function symbol starts at its
    /// address, else BOLT's name; `<unknown>` when neither exists).
    pub function: &'a str,
    /// The input function's address in the BOLTed binary (its hot fragment).
    pub function_address: u64,
    /// Offset in the input function.
    pub offset: u64,
    /// True when BAT translated the address (the function was rewritten), false when the offset
    /// is the address's own offset in an untouched function.
    pub translated: bool,
    /// Start of the fragment holding the address (the hot fragment, or a split-off cold one).
    pub fragment_address: u64,
    /// True when the address lies in a cold (split-off) fragment.
    pub cold: bool,
    /// The input basic block BAT records for the address (index and `BBHash`), when translated.
    pub block: Option<Block>,
    /// BAT's `FuncHash` of the input function, when translated.
    pub function_hash: Option<u64>,
}

impl Origin<'_> {
    /// The address this input location has in the input binary `input` (the binary BOLT read):
    /// the input function is found by name among `input`'s function symbols (BOLT keeps them),
    /// preferring one whose size covers the offset. `None` when `input` has no such function.
    pub fn input_address(&self, input: &Binary<'_>) -> Option<u64> {
        let table = input.function_table();
        let mut candidates = table.by_name(self.function);
        let first = candidates.next()?;
        let covers = |f: &pcmap_binary::Function| f.size == 0 || self.offset < f.size;
        let chosen = if covers(first) {
            first
        } else {
            candidates.find(|f| covers(f)).unwrap_or(first)
        };
        chosen.address.checked_add(self.offset)
    }
}

/// The input location of `address`, as perf2bolt finds it: the function whose max size (padding
/// included) covers the address; if BOLT rewrote it (a BAT fragment), the translation through
/// that fragment names the hot fragment (the input function); else the offset is already an
/// input offset. `None` when no function covers the address.
pub fn origin<'a>(
    bin: &'a Binary<'_>,
    functions: &'a BoltFunctions<'_, '_>,
    table: &BatTable,
    address: u64,
    is_branch_src: bool,
) -> Option<Origin<'a>> {
    let function = &functions.functions()[functions.function_containing(address)?];
    let translation = table.translate_in(function.address, address, is_branch_src);
    let (function_address, offset) = match &translation {
        Some(t) => (t.function_address, t.input_offset),
        None => (function.address, address - function.address),
    };
    let name = bin
        .function_at(function_address)
        .filter(|f| f.address == function_address)
        .map(|f| bin.function_name(f))
        .or_else(|| {
            functions
                .function_at(function_address)
                .map(|i| functions.functions()[i].name())
        })
        .unwrap_or("<unknown>");
    Some(Origin {
        function: name,
        function_address,
        offset,
        translated: translation.is_some(),
        fragment_address: translation.map_or(function.address, |t| t.fragment_address),
        cold: translation.is_some_and(|t| t.fragment_address != t.function_address),
        block: translation.and_then(|t| t.block),
        function_hash: translation
            .and_then(|t| table.function(t.function_address))
            .map(|f| f.hash),
    })
}
