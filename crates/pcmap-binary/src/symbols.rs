//! Function symbols, the address-sorted function table, and BOLT's names for local functions.

use std::borrow::Cow;

use rustc_hash::FxHashMap;

/// The type of a symbol (`STT_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SymbolKind {
    /// `STT_NOTYPE`: an untyped label.
    NoType,
    /// `STT_OBJECT` or `STT_COMMON`: data.
    Object,
    /// `STT_FUNC`.
    Function,
    /// `STT_GNU_IFUNC`.
    Ifunc,
    /// `STT_SECTION`.
    Section,
    /// `STT_FILE`.
    File,
    /// `STT_TLS`.
    Tls,
    /// Any other type, with its value.
    Other(u8),
}

/// One entry of the symbol table the binary's functions come from (`.symtab`, or `.dynsym` in a
/// stripped file). The names BOLT gives it: [`crate::Binary::bolt_name`].
#[derive(Debug, Clone)]
pub struct Symbol<'data> {
    /// Index in its symbol table (equal to the position in [`crate::Binary::symbols`]).
    pub index: usize,
    /// The name as stored.
    pub name: &'data str,
    /// `st_value`.
    pub address: u64,
    /// `st_size`.
    pub size: u64,
    /// The symbol's type.
    pub kind: SymbolKind,
    /// `STB_LOCAL` binding.
    pub is_local: bool,
    /// `SHN_UNDEF`.
    pub is_undefined: bool,
    /// `SHN_ABS`.
    pub is_absolute: bool,
    /// Section index for symbols defined in a section (`None` for undefined, absolute and common
    /// symbols).
    pub section_index: Option<usize>,
    /// The `STT_FILE` symbol (other than LTO's `ld-temp.o`) that precedes this local symbol.
    pub file: Option<&'data str>,
}

// The names BOLT gives a symbol are not here: they take a pass over the whole table, which a
// run that keeps BOLT's model between runs never needs.
#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<Symbol<'_>>() == 80);

/// One `STT_FUNC` or `STT_GNU_IFUNC` symbol defined in the file.
#[derive(Debug, Clone)]
pub struct FunctionSymbol<'data> {
    /// Index in its symbol table.
    pub symbol_index: usize,
    /// The symbol's name as stored.
    pub name: &'data str,
    /// `st_value`: a virtual address (section offset in relocatable objects).
    pub address: u64,
    /// `st_size`.
    pub size: u64,
    /// `STB_LOCAL` binding.
    pub is_local: bool,
    /// `STB_WEAK` binding.
    pub is_weak: bool,
    /// `STT_GNU_IFUNC` rather than `STT_FUNC`.
    pub is_ifunc: bool,
    /// Section index (`st_shndx`, extended indices resolved); `None` for absolute symbols.
    pub section_index: Option<usize>,
    /// The `STT_FILE` symbol that precedes this local symbol in the table, if any.
    pub file: Option<&'data str>,
    /// The name BOLT gives this symbol (`name` for globals, `name/N` for locals); borrowed from
    /// the file where it is the stored name.
    pub bolt_name: Cow<'data, str>,
    /// BOLT's alternative name for a local function with a file symbol: `name/file/N`.
    pub bolt_file_name: Option<Box<str>>,
}

/// A function: one address range named by one or more symbols (aliases share an address).
#[derive(Debug, Clone)]
pub struct Function {
    /// Start address.
    pub address: u64,
    /// Size in bytes: the largest size among the symbols at this address.
    pub size: u64,
    /// Section index of the primary symbol.
    pub section_index: Option<usize>,
    /// Range of [`FunctionTable::symbols`] naming this function; the first is the primary name.
    symbols: std::ops::Range<usize>,
}

impl Function {
    /// One past the last byte.
    pub fn end(&self) -> u64 {
        self.address.saturating_add(self.size)
    }

    /// True if `address` is inside the function (a zero-sized function contains only its start).
    pub fn contains(&self, address: u64) -> bool {
        address == self.address || (address > self.address && address < self.end())
    }
}

/// All function symbols of a binary, sorted by address, and the functions they name.
#[derive(Debug, Clone, Default)]
pub struct FunctionTable<'data> {
    symbols: Vec<FunctionSymbol<'data>>,
    functions: Vec<Function>,
}

impl<'data> FunctionTable<'data> {
    /// Build the table from symbols in any order.
    pub(crate) fn new(mut symbols: Vec<FunctionSymbol<'data>>) -> Self {
        // Address order; at one address, symbol-table order, so the primary (first) name is the
        // one BOLT picks for the function.
        symbols.sort_unstable_by_key(|s| (s.section_index, s.address, s.symbol_index));
        let mut functions: Vec<Function> = Vec::with_capacity(symbols.len());
        for (i, s) in symbols.iter().enumerate() {
            match functions.last_mut() {
                Some(f) if f.address == s.address && f.section_index == s.section_index => {
                    f.size = f.size.max(s.size);
                    f.symbols.end = i + 1;
                }
                _ => functions.push(Function {
                    address: s.address,
                    size: s.size,
                    section_index: s.section_index,
                    symbols: i..i + 1,
                }),
            }
        }
        // Relocatable objects key functions by (section, offset); lookups by address want one
        // global address order.
        functions.sort_unstable_by_key(|f| (f.address, f.section_index));
        // Both are kept for the whole run: without the room their growth left (a quarter of
        // the symbols' 27 MB on a 200,000-function binary).
        symbols.shrink_to_fit();
        functions.shrink_to_fit();
        FunctionTable { symbols, functions }
    }

    /// Every function symbol, grouped by function and sorted by address.
    pub fn symbols(&self) -> &[FunctionSymbol<'data>] {
        &self.symbols
    }

    /// Distinct functions sorted by address.
    pub fn functions(&self) -> &[Function] {
        &self.functions
    }

    /// The symbols naming `function`, primary first.
    pub fn names_of(&self, function: &Function) -> &[FunctionSymbol<'data>] {
        &self.symbols[function.symbols.clone()]
    }

    /// The primary symbol of `function`.
    pub fn primary(&self, function: &Function) -> &FunctionSymbol<'data> {
        &self.symbols[function.symbols.start]
    }

    /// The function containing `address`, in O(log n). Where functions overlap, the one that
    /// starts last before `address` and still contains it wins.
    pub fn function_at(&self, address: u64) -> Option<&Function> {
        let idx = self.functions.partition_point(|f| f.address <= address);
        // Walk back over a few overlapping candidates (e.g. a zero-sized label inside a function).
        self.functions[..idx]
            .iter()
            .rev()
            .take(8)
            .find(|f| f.contains(address))
    }

    /// Functions whose symbol is named `name` (stored name, BOLT name or BOLT file name).
    pub fn by_name<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Function> + 'a {
        self.functions.iter().filter(move |f| {
            self.names_of(f).iter().any(|s| {
                s.name == name || s.bolt_name == name || s.bolt_file_name.as_deref() == Some(name)
            })
        })
    }
}

/// What BOLT's naming pass needs to know about one symbol of the table.
#[derive(Debug, Clone)]
pub(crate) struct NamingSymbol<'data> {
    /// Stored name; for `STT_SECTION` symbols the section's name (as LLVM's reader reports it).
    pub(crate) name: &'data str,
    pub(crate) address: u64,
    pub(crate) kind: NamingKind,
    pub(crate) is_local: bool,
    pub(crate) is_undefined: bool,
    pub(crate) is_absolute: bool,
    /// The symbol's section is `SHF_ALLOC`.
    pub(crate) in_alloc_section: bool,
    /// The symbol's section is a PLT section (`.plt`, `.plt.got`, `.plt.sec`, `.iplt`).
    pub(crate) in_plt_section: bool,
    /// The file a defined local symbol is tied to ([`Symbol::file`]).
    pub(crate) file: Option<&'data str>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NamingKind {
    Function,
    Section,
    File,
    Other,
}

/// A symbol's names in BOLT: the primary one (borrowed from the file when it is the stored name)
/// and, for a local function with a file symbol, the alternative `name/file/N`.
pub(crate) type BoltNames<'data> = (Cow<'data, str>, Option<String>);

/// The symbol table as BOLT's naming pass reads and names it: symbols by index (entry 0 the null
/// symbol), each seen through [`NamingSymbol`] (made on demand: a large binary has hundreds of
/// thousands of symbols, and a list of views would be tens of megabytes of fresh pages).
pub(crate) trait NamingTable<'data> {
    /// The number of entries.
    fn len(&self) -> usize;
    /// Entry `index` (below [`NamingTable::len`]).
    fn symbol(&self, index: usize) -> NamingSymbol<'data>;
    /// Give entry `index` its names.
    fn set_names(&mut self, index: usize, names: BoltNames<'data>);
}

/// Give every symbol of `table` that BOLT names its names, in naming order.
///
/// BOLT (`RewriteInstance::discoverFileObjects` in LLVM 22) names symbols like this, and perf2bolt
/// writes the same names into fdata and YAML profiles:
/// 1. Walking the symbol table in order, every `STT_FILE` symbol (except LTO's artificial
///    `ld-temp.o`) becomes the current file; each later defined local symbol is tied to it
///    ([`Symbol::file`], which the parse finds: [`NamingSymbol::file`]).
/// 2. Symbols that live in memory (absolute, or in an `SHF_ALLOC` section; not `STT_FILE`, not
///    undefined) are stably sorted by address; at one address functions come first and section
///    symbols last.
/// 3. In that order, skipping address 0, `__hot_start`/`__hot_end` and section symbols of PLT
///    sections, each symbol gets a name: a global keeps its name; a local `n` becomes `n/K`
///    where K counts the locals named `n` seen so far (starting at 1), and a local function
///    tied to file `f` also gets the alternative `n/f/K'` with its own counter for `n/f`.
///    Names starting with `.L` are prefixed with `PG` first; empty names become `ANONYMOUS.i`.
pub(crate) fn bolt_names<'data>(table: &mut impl NamingTable<'data>) {
    // Rank at equal addresses: functions, then others, then section symbols. (BOLT's comparator
    // is this order expressed pairwise.) The symbol index last: the stable order. Rank and index
    // share one word, so that the keys sorted are two words and hold no reference.
    const RANK_SHIFT: u32 = 62;
    let rank = |k: NamingKind| -> u64 {
        match k {
            NamingKind::Function => 0,
            NamingKind::Section => 2,
            _ => 1,
        }
    };
    // Only locals (counted per name) and empty names (numbered) depend on the order of step 3.
    // Every other symbol is named here, in table order, which reads the table front to back:
    // in a large C++ binary most symbols are global, and visiting them in address order cost a
    // cache miss each, besides sorting them.
    let n = table.len();
    let mut keyed: Vec<(u64, u64)> = Vec::new();
    for i in 0..n {
        let s = table.symbol(i);
        if s.kind == NamingKind::File || !(s.is_absolute || (!s.is_undefined && s.in_alloc_section))
        {
            continue;
        }
        if s.is_local || s.name.is_empty() {
            keyed.push((s.address, rank(s.kind) << RANK_SHIFT | i as u64));
        } else if is_named(&s) {
            table.set_names(i, (pg_prefixed(s.name), None));
        }
    }
    keyed.sort_unstable();

    // One counter per name, shared by primary names and `name/file` prefixes as in BOLT. Keys
    // borrow the file's strings where they can: a large binary has hundreds of thousands.
    // A new key moves into the map rather than being copied: this runs once or twice per local
    // symbol.
    let mut counters: FxHashMap<Cow<'data, str>, u64> = FxHashMap::default();
    let mut uniquify = |name: Cow<'data, str>| -> String {
        match counters.get_mut(&*name) {
            Some(n) => {
                *n += 1;
                numbered(&name, *n)
            }
            None => {
                let unique = numbered(&name, 1);
                counters.insert(name, 1);
                unique
            }
        }
    };
    let mut anonymous = 0u64;
    for (_, ranked) in keyed {
        let index = (ranked & ((1 << RANK_SHIFT) - 1)) as usize;
        let s = table.symbol(index);
        if !is_named(&s) {
            continue;
        }
        let name = pg_prefixed(s.name);
        let names = if name.is_empty() {
            let n = format!("ANONYMOUS.{anonymous}");
            anonymous += 1;
            (Cow::Owned(n), None)
        } else {
            // A local: the only symbols besides empty names in this walk.
            let alt_prefix = match (s.kind, s.file) {
                (NamingKind::Function, Some(f)) => Some(file_prefix(&name, f)),
                _ => None,
            };
            let primary = uniquify(name);
            (
                Cow::Owned(primary),
                alt_prefix.map(|p| uniquify(Cow::Owned(p))),
            )
        };
        table.set_names(index, names);
    }
}

/// `prefix/number`: BOLT's name for the `number`th local symbol (counting from 1) whose name,
/// or `name/file` prefix, is `prefix`.
fn numbered(prefix: &str, number: u64) -> String {
    let mut name = String::with_capacity(prefix.len() + 21);
    name.push_str(prefix);
    push_number(&mut name, number);
    name
}

/// `name/file`: what BOLT numbers the alternative name of a local function tied to `file` by
/// (with room for the number).
fn file_prefix(name: &str, file: &str) -> String {
    let mut prefix = String::with_capacity(name.len() + 1 + file.len() + 21);
    prefix.push_str(name);
    prefix.push('/');
    prefix.push_str(file);
    prefix
}

/// Append `/number` ([`numbered`]). These run once or twice per local symbol: pushed and
/// formatted by `itoa`, not `format!`.
fn push_number(out: &mut String, number: u64) {
    out.push('/');
    out.push_str(itoa::Buffer::new().format(number));
}

/// BOLT's name of a local symbol whose naming name ([`NamingSymbol::name`]) is `name`, given
/// its number: `name/N`, or with `file`, its alternative `name/file/N` ([`bolt_names`], step 3).
/// It is what [`bolt_names`] gives the symbol when `number` is the count it reached there.
pub(crate) fn local_bolt_name(name: &str, file: Option<&str>, number: u64) -> String {
    let name = pg_prefixed(name);
    match file {
        None => numbered(&name, number),
        Some(file) => {
            // One allocation: a later run rebuilds one of these per local function.
            let mut out = file_prefix(&name, file);
            push_number(&mut out, number);
            out
        }
    }
}

/// Whether BOLT names a symbol that lives in memory (step 3 of [`bolt_names`]): not undefined,
/// not at address 0, not `__hot_start`/`__hot_end`, not the section symbol of a PLT section.
fn is_named(s: &NamingSymbol<'_>) -> bool {
    !(s.is_undefined
        || s.address == 0
        || s.name == "__hot_start"
        || s.name == "__hot_end"
        || (s.kind == NamingKind::Section && s.in_plt_section))
}

/// `name`, with `PG` before it when it starts with `.L` (BOLT's private-global prefix); any
/// other name stays borrowed from the file, not copied.
fn pg_prefixed(name: &str) -> Cow<'_, str> {
    if name.starts_with(".L") {
        Cow::Owned(format!("PG{name}"))
    } else {
        Cow::Borrowed(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table of naming views, and the names given to them.
    struct Table(Vec<NamingSymbol<'static>>, Vec<Option<BoltNames<'static>>>);

    impl NamingTable<'static> for Table {
        fn len(&self) -> usize {
            self.0.len()
        }
        fn symbol(&self, index: usize) -> NamingSymbol<'static> {
            self.0[index].clone()
        }
        fn set_names(&mut self, index: usize, names: BoltNames<'static>) {
            assert!(self.1[index].is_none(), "symbol {index} named twice");
            self.1[index] = Some(names);
        }
    }

    fn sym(
        name: &'static str,
        address: u64,
        kind: NamingKind,
        is_local: bool,
        file: Option<&'static str>,
    ) -> NamingSymbol<'static> {
        NamingSymbol {
            name,
            address,
            kind,
            is_local,
            is_undefined: false,
            is_absolute: false,
            in_alloc_section: kind != NamingKind::File,
            in_plt_section: false,
            file,
        }
    }

    #[test]
    fn locals_count_per_name_in_address_order() {
        let syms = vec![
            NamingSymbol {
                is_undefined: true,
                ..sym("", 0, NamingKind::Other, true, None)
            },
            sym("a.c", 0, NamingKind::File, true, None),
            sym("helper", 0x2000, NamingKind::Function, true, Some("a.c")),
            sym("b.c", 0, NamingKind::File, true, None),
            sym("helper", 0x1000, NamingKind::Function, true, Some("b.c")),
            sym("helper", 0x3000, NamingKind::Other, true, Some("b.c")),
            sym("main", 0x1800, NamingKind::Function, false, None),
        ];
        let n = syms.len();
        let mut table = Table(syms, vec![None; n]);
        bolt_names(&mut table);
        let name = |i: usize| {
            let (primary, alt) = table.1[i].clone().unwrap();
            (primary.into_owned(), alt)
        };
        assert_eq!(
            name(4),
            ("helper/1".to_string(), Some("helper/b.c/1".to_string()))
        );
        assert_eq!(
            name(2),
            ("helper/2".to_string(), Some("helper/a.c/1".to_string()))
        );
        assert_eq!(name(5), ("helper/3".to_string(), None));
        assert_eq!(name(6), ("main".to_string(), None));
        // A global's name is the file's own string, not a copy.
        assert!(matches!(table.1[6].as_ref().unwrap().0, Cow::Borrowed(_)));
        // The null symbol and file symbols get no name.
        assert!(table.1[0].is_none() && table.1[1].is_none() && table.1[3].is_none());
    }

    #[test]
    fn a_locals_name_is_rebuilt_from_its_number() {
        let syms = vec![
            sym("a.c", 0, NamingKind::File, true, None),
            sym(".Lcold", 0x1000, NamingKind::Function, true, Some("a.c")),
            sym(".Lcold", 0x1100, NamingKind::Function, true, Some("a.c")),
            sym("helper", 0x1200, NamingKind::Function, true, Some("a.c")),
        ];
        let n = syms.len();
        let mut table = Table(syms, vec![None; n]);
        bolt_names(&mut table);
        let rebuilt = |name, number, alt| {
            (
                local_bolt_name(name, None, number),
                Some(local_bolt_name(name, Some("a.c"), alt)),
            )
        };
        for (i, name, number) in [(1, ".Lcold", 1), (2, ".Lcold", 2), (3, "helper", 1)] {
            let (primary, alt) = table.1[i].clone().unwrap();
            assert_eq!((primary.into_owned(), alt), rebuilt(name, number, number));
        }
        assert_eq!(local_bolt_name(".Lcold", Some("a.c"), 2), "PG.Lcold/a.c/2");
        assert_eq!(local_bolt_name("f", None, 10), "f/10");
    }

    #[test]
    fn function_at_handles_aliases_and_gaps() {
        let mk = |i, name, address, size, is_local| FunctionSymbol {
            symbol_index: i,
            name,
            address,
            size,
            is_local,
            is_weak: false,
            is_ifunc: false,
            section_index: Some(1),
            file: None,
            bolt_name: Cow::Borrowed(name),
            bolt_file_name: None,
        };
        let t = FunctionTable::new(vec![
            mk(3, "b", 0x20, 0x10, false),
            mk(1, "a", 0x10, 0x8, false),
            mk(2, "a_alias", 0x10, 0x8, true),
        ]);
        assert_eq!(t.functions().len(), 2);
        let f = t.function_at(0x17).unwrap();
        assert_eq!(t.primary(f).name, "a");
        assert_eq!(t.names_of(f)[1].name, "a_alias");
        assert_eq!(t.names_of(f).len(), 2);
        assert!(t.function_at(0x18).is_none());
        assert_eq!(t.primary(t.function_at(0x2f).unwrap()).name, "b");
        assert!(t.function_at(0x30).is_none());
        assert!(t.function_at(0x0).is_none());
    }

    /// BOLT's naming rule as its documentation states it ([`bolt_names`]): every symbol in
    /// memory sorted by (address, rank, index) and named in that order. The function under test
    /// names most symbols in table order instead; the names must not differ.
    fn names_in_address_order(syms: &[NamingSymbol<'static>]) -> Vec<Option<BoltNames<'static>>> {
        let rank = |k: NamingKind| match k {
            NamingKind::Function => 0,
            NamingKind::Section => 2,
            _ => 1,
        };
        let mut order: Vec<usize> = (0..syms.len())
            .filter(|&i| {
                let s = &syms[i];
                s.kind != NamingKind::File
                    && (s.is_absolute || (!s.is_undefined && s.in_alloc_section))
            })
            .collect();
        order.sort_by_key(|&i| (syms[i].address, rank(syms[i].kind), i));
        let mut counters: std::collections::HashMap<String, u64> = Default::default();
        let mut count = |name: &str| {
            let n = counters.entry(name.to_string()).or_default();
            *n += 1;
            format!("{name}/{n}")
        };
        let mut anonymous = 0;
        let mut out = vec![None; syms.len()];
        for i in order {
            let s = &syms[i];
            if s.is_undefined
                || s.address == 0
                || s.name == "__hot_start"
                || s.name == "__hot_end"
                || (s.kind == NamingKind::Section && s.in_plt_section)
            {
                continue;
            }
            let name = if s.name.starts_with(".L") {
                format!("PG{}", s.name)
            } else {
                s.name.to_string()
            };
            out[i] = Some(if name.is_empty() {
                anonymous += 1;
                (Cow::Owned(format!("ANONYMOUS.{}", anonymous - 1)), None)
            } else if !s.is_local {
                (Cow::Owned(name), None)
            } else {
                let alt = match (s.kind, s.file) {
                    (NamingKind::Function, Some(f)) => Some(format!("{name}/{f}")),
                    _ => None,
                };
                let primary = count(&name);
                (Cow::Owned(primary), alt.map(|a| count(&a)))
            });
        }
        out
    }

    proptest::proptest! {
        /// Naming most symbols in table order gives the names of the address-order walk, with
        /// locals of one name at tied addresses, empty and `.L` names, undefined, absolute,
        /// non-memory and PLT-section symbols mixed in.
        #[test]
        fn names_equal_the_address_order_walk(
            raw in proptest::collection::vec(
                (0usize..7, 0u64..6, 0u8..4, proptest::prelude::any::<[bool; 5]>(), 0usize..3),
                0..60,
            )
        ) {
            const NAMES: [&str; 7] = ["", "f", "g", ".Lx", "__hot_start", "f/1", "a.c"];
            const FILES: [Option<&str>; 3] = [None, Some("a.c"), Some("b.c")];
            let syms: Vec<NamingSymbol<'static>> = raw
                .iter()
                .map(|&(name, address, kind, [local, undefined, absolute, alloc, plt], file)| {
                    NamingSymbol {
                        name: NAMES[name],
                        address,
                        kind: [NamingKind::Function, NamingKind::Section, NamingKind::File, NamingKind::Other][usize::from(kind)],
                        is_local: local,
                        is_undefined: undefined,
                        is_absolute: absolute,
                        in_alloc_section: alloc,
                        in_plt_section: plt,
                        file: FILES[file],
                    }
                })
                .collect();
            let n = syms.len();
            let want = names_in_address_order(&syms);
            let mut table = Table(syms, vec![None; n]);
            bolt_names(&mut table);
            let got: Vec<Option<(String, Option<String>)>> = table
                .1
                .into_iter()
                .map(|x| x.map(|(p, a)| (p.into_owned(), a)))
                .collect();
            let want: Vec<Option<(String, Option<String>)>> = want
                .into_iter()
                .map(|x| x.map(|(p, a)| (p.into_owned(), a)))
                .collect();
            proptest::prop_assert_eq!(got, want);
        }
    }
}
