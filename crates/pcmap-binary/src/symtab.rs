//! The raw symbol table and the relocations of a section, for readers that must see the file
//! exactly as it is stored (`pcmap_bbmap`'s relocatable-object maps, llvm-readobj's naming rules),
//! rather than through the [`FunctionTable`](crate::FunctionTable).
//!
//! Both re-read the (already validated) section header table with `object`; the cost is a few
//! header reads, and it keeps this view independent of the function model.

use object::read::elf::{Crel, FileHeader, Rel, SectionHeader, SectionTable, Sym};
use object::{Endianness, SectionIndex, elf};

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

/// One relocation that applies to a section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Relocation {
    /// `r_offset`: offset of the relocated field in the target section (relocatable objects).
    pub offset: u64,
    /// `r_sym`: index of the symbol in the relocation section's symbol table.
    pub symbol: u32,
    /// `r_type`.
    pub r_type: u32,
    /// `r_addend` for RELA and RELA-style CREL; `None` for REL (the addend is in the field).
    pub addend: Option<i64>,
    /// Section of the symbol (`None` for undefined or special symbols, or a bad index).
    pub symbol_section: Option<usize>,
}

fn problem(structure: String, offset: u64) -> impl Fn(object::read::Error) -> Error {
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

    /// The relocations of every `SHT_REL`, `SHT_RELA` and `SHT_CREL` section whose `sh_info` is
    /// `target` (a section index), in section order; `None` when no relocation section applies
    /// to `target`.
    pub fn relocations_for(&self, target: usize) -> Result<Option<Vec<Relocation>>> {
        if self.is_64() {
            relocations::<elf::FileHeader64<Endianness>>(self.data(), target)
        } else {
            relocations::<elf::FileHeader32<Endianness>>(self.data(), target)
        }
    }
}

/// The file header, its byte order and the section table of an ELF file.
type Tables<'data, Elf> = (
    &'data Elf,
    Endianness,
    SectionTable<'data, Elf, &'data [u8]>,
);

fn tables<'data, Elf: FileHeader<Endian = Endianness>>(
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

fn relocations<Elf: FileHeader<Endian = Endianness>>(
    data: &[u8],
    target: usize,
) -> Result<Option<Vec<Relocation>>> {
    let (header, endian, sections) = tables::<Elf>(data)?;
    let is_mips64el = header.is_mips64el(endian);
    let symbols = sections
        .symbols(endian, data, elf::SHT_SYMTAB)
        .map_err(problem("symbol table (.symtab)".into(), 0))?;
    let symbol_section = |sym: u32| -> Option<usize> {
        let idx = object::SymbolIndex(sym as usize);
        let s = symbols.symbol(idx).ok()?;
        symbols
            .symbol_section(endian, s, idx)
            .ok()
            .flatten()
            .map(|i: SectionIndex| i.0)
    };
    let mut found = false;
    let mut out = Vec::new();
    for (index, sh) in sections.enumerate() {
        let t = sh.sh_type(endian);
        if t != elf::SHT_RELA && t != elf::SHT_REL && t != elf::SHT_CREL {
            continue;
        }
        if sh.sh_info(endian) as usize != target {
            continue;
        }
        found = true;
        let offset: u64 = sh.sh_offset(endian).into();
        let err = problem(
            format!("relocation section {} for section {target}", index.0),
            offset,
        );
        if let Some((rels, _)) = sh.rel(endian, data).map_err(&err)? {
            for r in rels {
                out.push(Relocation {
                    offset: r.r_offset(endian).into(),
                    symbol: r.r_sym(endian),
                    r_type: r.r_type(endian).0,
                    addend: None,
                    symbol_section: symbol_section(r.r_sym(endian)),
                });
            }
        } else if let Some((relas, _)) = sh.rela(endian, data).map_err(&err)? {
            for r in relas {
                let c = Crel::from_rela(r, endian, is_mips64el);
                out.push(Relocation {
                    offset: c.r_offset,
                    symbol: c.r_sym,
                    r_type: c.r_type.0,
                    addend: Some(c.r_addend),
                    symbol_section: symbol_section(c.r_sym),
                });
            }
        } else if let Some((crels, _)) = sh.crel(endian, data).map_err(&err)? {
            let is_rela = crels.is_rela();
            for c in crels {
                let c = c.map_err(&err)?;
                out.push(Relocation {
                    offset: c.r_offset,
                    symbol: c.r_sym,
                    r_type: c.r_type.0,
                    addend: is_rela.then_some(c.r_addend),
                    symbol_section: symbol_section(c.r_sym),
                });
            }
        }
    }
    Ok(found.then_some(out))
}
