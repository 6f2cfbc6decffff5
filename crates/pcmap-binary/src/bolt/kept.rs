//! The discovered model as plain data, kept between runs on the same bytes
//! ([`BoltFunctions::discovered`], [`BoltFunctions::from_discovered`]).
//!
//! Discovery walks every symbol in address order, parses every FDE and reads the code after
//! every function: on a binary of 200,000 functions that is most of a later run's time, though
//! its result depends only on the bytes. The model is kept with its names as references to the
//! symbols they come from (the binary's symbols are parsed in every run anyway): a stored name
//! by the symbol's index, and BOLT's numbered name of a local (`name/N`, `name/file/N`) by the
//! index and the number. So rebuilding it needs no naming pass over every symbol
//! ([`Binary::bolt_name`]), and allocates one list per table and a string only for the local
//! names and the few names discovery makes itself.

use std::borrow::Cow;

use super::{BoltFunction, BoltFunctions, FunctionKind, Names};
use crate::symbols::local_bolt_name;
use crate::{Binary, Error, Result};

/// A [`BoltFunctions`] model as plain data (this module).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Discovered {
    /// The functions, sorted by address.
    pub functions: Vec<DiscoveredFunction>,
    /// Every function's names, function after function ([`DiscoveredFunction::names`] says how
    /// many are whose).
    pub names: Vec<NameRef>,
    /// `(function start, LSDA address)` of the FDEs with an LSDA, sorted.
    pub lsdas: Vec<(u64, u64)>,
    /// Secondary entry points made from labels inside functions, sorted.
    pub label_entries: Vec<u64>,
    /// Starts of the functions with a symbol in their middle
    /// ([`BoltFunctions::has_symbol_inside`]), sorted.
    pub symbol_inside: Vec<u64>,
    /// Starts of the functions whose padding BOLT rejects
    /// ([`BoltFunctions::rejected_paddings`]), sorted.
    pub rejected_padding: Vec<u64>,
}

/// One function of a [`Discovered`] model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiscoveredFunction {
    /// Start address.
    pub address: u64,
    /// Size.
    pub size: u64,
    /// Extent for profile lookups ([`BoltFunction::max_size`]).
    pub max_size: u64,
    /// Ordinary or PLT.
    pub kind: FunctionKind,
    /// How many of [`Discovered::names`], after those of the functions before it, are its own.
    pub names: u32,
}

/// Where a function's name comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NameRef {
    /// The stored name of symbol `index` ([`crate::Symbol::name`]; a global's BOLT name).
    Symbol {
        /// The symbol's index in the table ([`Binary::symbols`]).
        index: u32,
    },
    /// BOLT's name of local symbol `index` given its number: `name/number`
    /// ([`Binary::bolt_name`]) or, `in_file`, `name/file/number` ([`Binary::bolt_file_name`]).
    Local {
        /// The symbol's index in the table ([`Binary::symbols`]).
        index: u32,
        /// The number BOLT's naming pass gave it.
        number: u64,
        /// The alternative name, with the file the symbol is tied to ([`crate::Symbol::file`]).
        in_file: bool,
    },
    /// A name discovery made itself (FDE and PLT functions, the PLT header), and any other
    /// BOLT name (`PG.L...`, `ANONYMOUS.i`).
    Text(Box<str>),
}

/// How `name`, a name of a function at the address of symbol `index` of `binary`, is kept: as
/// the symbol's stored name, or as the number of its BOLT name if it is a local's; or `None`.
/// Only the text matters, as that is what the model is rebuilt to; so this needs no naming
/// pass over the symbols either, and finds the names of a rebuilt model again.
fn symbol_name_ref(binary: &Binary<'_>, index: u32, name: &str) -> Option<NameRef> {
    let symbol = binary.symbols().get(index as usize)?;
    if name == symbol.name {
        return Some(NameRef::Symbol { index });
    }
    if !symbol.is_local {
        return None;
    }
    // `name/N` or `name/file/N`, if the name rebuilt from the number is this one.
    let number = name.rsplit_once('/')?.1.parse().ok()?;
    let base = binary.naming_name(symbol);
    let local = |in_file| NameRef::Local {
        index,
        number,
        in_file,
    };
    if local_bolt_name(base, None, number) == name {
        return Some(local(false));
    }
    let file = symbol.file?;
    (local_bolt_name(base, Some(file), number) == name).then(|| local(true))
}

impl<'a, 'data> BoltFunctions<'a, 'data> {
    /// This model as plain data, to rebuild it with [`Self::from_discovered`] in a later run on
    /// the same bytes.
    pub fn discovered(&self) -> Discovered {
        // Where each function's names start in the list of all names.
        let mut first_name = Vec::with_capacity(self.functions.len() + 1);
        first_name.push(0);
        for f in &self.functions {
            first_name.push(first_name.last().copied().unwrap_or(0) + f.names.len());
        }
        let mut names: Vec<Option<NameRef>> = vec![None; first_name.last().copied().unwrap_or(0)];
        // A name that comes from a symbol is one a symbol at the function's address has
        // (section start functions too: their section symbol lies there): it is found one
        // symbol at a time, with no table of all the names. Names found in no symbol are
        // discovery's own.
        for (index, symbol) in self.binary.symbols().iter().enumerate() {
            let Ok(index) = u32::try_from(index) else {
                break;
            };
            let at = self.starts.partition_point(|&s| s < symbol.address);
            for fi in at..self.starts.len() {
                if self.starts[fi] != symbol.address {
                    break;
                }
                for (k, name) in self.functions[fi].names.iter().enumerate() {
                    let slot = &mut names[first_name[fi] + k];
                    if slot.is_none() {
                        *slot = symbol_name_ref(self.binary, index, name);
                    }
                }
            }
        }
        let names = self
            .functions
            .iter()
            .flat_map(|f| f.names.iter())
            .zip(names)
            .map(|(name, found)| found.unwrap_or_else(|| NameRef::Text(name.as_ref().into())))
            .collect();
        let functions = self
            .functions
            .iter()
            .map(|f| DiscoveredFunction {
                address: f.address,
                size: f.size,
                max_size: f.max_size,
                kind: f.kind,
                names: f.names.len() as u32,
            })
            .collect();
        Discovered {
            functions,
            names,
            lsdas: self.lsdas.clone(),
            label_entries: self.label_entries.clone(),
            symbol_inside: self.symbol_inside.clone(),
            rejected_padding: self.rejected_padding.clone(),
        }
    }

    /// The model of `binary` from `discovered`, made by [`Self::discovered`] on the same bytes
    /// (in an earlier run): what [`Self::discover`] would find, without its passes. The model
    /// is checked as far as it can be without them: names that refer to no symbol, tables out
    /// of order or counts that do not add up give [`Error::Discovered`]. A model kept for other
    /// bytes that passes these checks is wrong: the caller keys it by the bytes.
    pub fn from_discovered(binary: &'a Binary<'data>, discovered: Discovered) -> Result<Self> {
        let bitness = Self::bitness_of(binary)?;
        let bad = |problem| Error::Discovered { problem };
        let Discovered {
            functions: kept,
            names,
            lsdas,
            label_entries,
            symbol_inside,
            rejected_padding,
        } = discovered;
        // Searched, so in order; equal neighbours do no harm.
        let sorted = |list: &[u64]| list.windows(2).all(|w| w[0] <= w[1]);
        if !kept.windows(2).all(|w| w[0].address <= w[1].address) {
            return Err(bad("functions out of address order"));
        }
        if !lsdas.windows(2).all(|w| w[0] <= w[1])
            || !sorted(&label_entries)
            || !sorted(&symbol_inside)
            || !sorted(&rejected_padding)
        {
            return Err(bad("a table out of address order"));
        }
        let symbols = binary.symbols();
        let resolve = |name: NameRef| -> Result<Cow<'a, str>> {
            let symbol = |index: u32| {
                symbols
                    .get(index as usize)
                    .ok_or_else(|| bad("a name of a symbol the binary does not have"))
            };
            Ok(match name {
                NameRef::Symbol { index } => Cow::Borrowed(symbol(index)?.name),
                NameRef::Local {
                    index,
                    number,
                    in_file,
                } => {
                    let s = symbol(index)?;
                    let file = match (in_file, s.file) {
                        (false, _) => None,
                        (true, Some(file)) => Some(file),
                        (true, None) => {
                            return Err(bad("a name/file/N name of a symbol with no file"));
                        }
                    };
                    Cow::Owned(local_bolt_name(binary.naming_name(s), file, number))
                }
                NameRef::Text(text) => Cow::Owned(text.into()),
            })
        };
        let mut names = names.into_iter();
        let mut next = || {
            names
                .next()
                .ok_or_else(|| bad("fewer names than the functions have"))
                .and_then(resolve)
        };
        let mut functions = Vec::with_capacity(kept.len());
        for f in &kept {
            // Most functions have one name: no list for it.
            let own = match f.names {
                0 => Names::Many(Vec::new()),
                1 => Names::One(next()?),
                n => {
                    let mut all = Vec::with_capacity(n as usize);
                    for _ in 0..n {
                        all.push(next()?);
                    }
                    Names::Many(all)
                }
            };
            functions.push(BoltFunction {
                names: own,
                address: f.address,
                size: f.size,
                max_size: f.max_size,
                kind: f.kind,
            });
        }
        if names.next().is_some() {
            return Err(bad("more names than the functions have"));
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
}
