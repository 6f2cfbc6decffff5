//! The raw symbol table, for readers that must see the file exactly as it is stored (`pcmap_bbmap`'s relocatable-object maps, llvm-readobj's naming rules),
//! rather than through the [`FunctionTable`](crate::FunctionTable).
//!
//! It re-reads the (already validated) section header table with `object`; the cost is a few
//! header reads, and it keeps this view independent of the function model.

use object::read::elf::{FileHeader, SectionTable, Sym};
use object::{Endianness, elf};

use crate::Binary;
use crate::error::{Error, Result, malformed};

/// One entry of `.symtab`, as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SymbolEntry<'data> {
    /// Index in the symbol table (0 is the null symbol).
    pub index: usize,
    /// Name bytes, `None` when `st_name` is outside the string table.
    pub name: Option<&'data [u8]>,
    /// `st_value`.
    pub value: u64,
    /// `st_size`.
    pub size: u64,
    /// `ST_TYPE(st_info)` (`STT_FUNC` = 2, ...).
    pub st_type: u8,
    /// `ST_BIND(st_info)`.
    pub st_bind: u8,
    /// Section index (`st_shndx`, extended indices resolved); `None` for undefined, absolute and
    /// other special indices.
    pub section_index: Option<usize>,
}

/// `STT_FUNC`.
pub const STT_FUNC: u8 = 2;

pub(crate) fn problem(structure: String, offset: u64) -> impl Fn(object::read::Error) -> Error {
    // object's errors are static descriptions; they are the whole cause.
    move |e| malformed(structure.clone(), offset, e.to_string())
}

impl<'data> Binary<'data> {
    /// Every entry of `.symtab` in table order (empty when the file has none; `.dynsym` is not
    /// consulted).
    pub fn symtab(&self) -> Result<Vec<SymbolEntry<'data>>> {
        if self.is_64() {
            symtab::<elf::FileHeader64<Endianness>>(self.data())
        } else {
            symtab::<elf::FileHeader32<Endianness>>(self.data())
        }
    }
}

/// The file header, its byte order and the section table of an ELF file.
pub(crate) type Tables<'data, Elf> = (
    &'data Elf,
    Endianness,
    SectionTable<'data, Elf, &'data [u8]>,
);

pub(crate) fn tables<'data, Elf: FileHeader<Endian = Endianness>>(
    data: &'data [u8],
) -> Result<Tables<'data, Elf>> {
    let header = Elf::parse(data).map_err(problem("file header".into(), 0))?;
    let endian = header.endian().map_err(problem("file header".into(), 0))?;
    let sections = header
        .sections(endian, data)
        .map_err(problem("section header table".into(), 0))?;
    Ok((header, endian, sections))
}

fn symtab<'data, Elf: FileHeader<Endian = Endianness>>(
    data: &'data [u8],
) -> Result<Vec<SymbolEntry<'data>>> {
    let (_, endian, sections) = tables::<Elf>(data)?;
    let symbols = sections
        .symbols(endian, data, elf::SHT_SYMTAB)
        .map_err(problem("symbol table (.symtab)".into(), 0))?;
    Ok(symbols
        .enumerate()
        .map(|(i, sym)| SymbolEntry {
            index: i.0,
            name: symbols.symbol_name(endian, sym).ok(),
            value: sym.st_value(endian).into(),
            size: sym.st_size(endian).into(),
            st_type: sym.st_type().0,
            st_bind: sym.st_bind().0,
            section_index: symbols
                .symbol_section(endian, sym, i)
                .ok()
                .flatten()
                .map(|s| s.0),
        })
        .collect())
}
