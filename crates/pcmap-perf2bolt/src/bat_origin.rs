//! Where an address of a BOLTed binary comes from: the input function and offset perf2bolt
//! attributes it to (`pcmap bat translate`, `pcmap explain`).

use pcmap_bat::BatTable;
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
    let (function_address, offset, translated) =
        match table.translate_in(function.address, address, is_branch_src) {
            Some(t) => (t.function_address, t.input_offset, true),
            None => (function.address, address - function.address, false),
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
        translated,
    })
}
