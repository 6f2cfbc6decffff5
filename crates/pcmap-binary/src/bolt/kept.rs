//! The discovered model as plain data, kept between runs on the same bytes
//! ([`BoltFunctions::discovered`], [`BoltFunctions::from_discovered`]).
//!
//! Discovery walks every symbol in address order, parses every FDE and reads the code after
//! every function: on a binary of 200,000 functions that is most of a later run's time, though
//! its result depends only on the bytes. The model is kept with its names as references to the
//! symbols they are borrowed from (the binary's symbols are parsed in every run anyway), so
//! rebuilding it allocates one list per table and a string only for the few names discovery
//! makes itself.

use std::borrow::Cow;

use super::{BoltFunction, BoltFunctions, FunctionKind, Names};
use crate::{Binary, Error, Result};

/// A [`BoltFunctions`] model as plain data ([module](self)).
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
    /// A name of symbol `index` ([`Binary::symbols`]).
    Symbol {
        /// The symbol's index in the table.
        index: u32,
        /// Which of its names.
        field: SymbolField,
    },
    /// A name discovery made itself (FDE and PLT functions, the PLT header).
    Text(Box<str>),
}

/// Which name of a symbol a function borrows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SymbolField {
    /// [`crate::Symbol::name`], as stored.
    Name,
    /// [`crate::Symbol::bolt_name`].
    BoltName,
    /// [`crate::Symbol::bolt_file_name`].
    BoltFileName,
}

/// The name `field` of `symbol`, if it has one.
fn field_of<'s>(symbol: &'s crate::Symbol<'_>, field: SymbolField) -> Option<&'s str> {
    match field {
        SymbolField::Name => Some(symbol.name),
        SymbolField::BoltName => symbol.bolt_name.as_deref(),
        SymbolField::BoltFileName => symbol.bolt_file_name.as_deref(),
    }
}

const FIELDS: [SymbolField; 3] = [
    SymbolField::Name,
    SymbolField::BoltName,
    SymbolField::BoltFileName,
];

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
        // A name borrowed from a symbol is the very string a symbol at the function's address
        // holds (section start functions too: their section symbol lies there): it is found by
        // where it lies and its length, one symbol at a time, with no table of all the names.
        // Names found in no symbol are discovery's own.
        for (index, symbol) in self.binary.symbols().iter().enumerate() {
            let Ok(index) = u32::try_from(index) else {
                break;
            };
            let at = self.starts.partition_point(|&s| s < symbol.address);
            for fi in at..self.starts.len() {
                if self.starts[fi] != symbol.address {
                    break;
                }
                let own = &self.functions[fi].names;
                for field in FIELDS {
                    let Some(text) = field_of(symbol, field) else {
                        continue;
                    };
                    for (k, name) in own.iter().enumerate() {
                        let slot = &mut names[first_name[fi] + k];
                        if slot.is_none()
                            && name.as_ptr() == text.as_ptr()
                            && name.len() == text.len()
                        {
                            *slot = Some(NameRef::Symbol { index, field });
                        }
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
        let mut names = names.into_iter();
        let mut functions = Vec::with_capacity(kept.len());
        for f in &kept {
            let own = (0..f.names)
                .map(|_| match names.next() {
                    None => Err(bad("fewer names than the functions have")),
                    Some(NameRef::Symbol { index, field }) => symbols
                        .get(index as usize)
                        .and_then(|s| field_of(s, field))
                        .map(Cow::Borrowed)
                        .ok_or_else(|| bad("a name of a symbol the binary does not have")),
                    Some(NameRef::Text(text)) => Ok(Cow::Owned(text.into())),
                })
                .collect::<Result<Names<'a>>>()?;
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
