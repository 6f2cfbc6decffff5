//! Finding and decoding the map sections of an ELF file with `object`: linked executables and
//! shared objects (one concatenated `.llvm_bb_addr_map`), relocatable objects (one map section
//! per text section, addresses from RELA, REL or CREL relocations), `SHF_COMPRESSED` sections,
//! ELF32/ELF64 in both byte orders, and function names resolved the way llvm-readobj does.

use std::cell::RefCell;
use std::collections::HashMap;

use object::FileKind;
use object::elf;
use object::read::elf::{Crel, ElfFile, FileHeader, Rel, SectionHeader, Sym};
use object::read::{Object, ObjectSection, SectionIndex, SymbolIndex};

use crate::decode::{
    AddressResolver, DecodeError, DecodeErrorKind, DecodeOptions, Endian, LegacyMode,
    decode_section,
};
use crate::model::FunctionMap;

/// `SHT_LLVM_BB_ADDR_MAP`.
pub const SHT_LLVM_BB_ADDR_MAP: u32 = 0x6fff_4c0a;
/// The original unversioned `SHT_LLVM_BB_ADDR_MAP_V0` (LLVM 12-13), removed from LLVM.
pub const SHT_LLVM_BB_ADDR_MAP_V0: u32 = 0x6fff_4c08;
/// Section name used by the `.bb_info` proposal.
pub const BB_INFO_SECTION_NAME: &str = ".bb_info";

/// Errors while locating or decoding map sections.
#[derive(Debug, thiserror::Error)]
pub enum ElfError {
    /// The file is not an ELF file `object` can read.
    #[error("not a readable ELF file: {0}")]
    Object(#[from] object::Error),
    /// The file is not ELF.
    #[error("not an ELF file")]
    NotElf,
    /// A relocatable object's map section has no relocation section (llvm-readobj refuses it).
    #[error("unable to get relocation section for map section {section} ({name})")]
    NoRelocations {
        /// Index of the map section.
        section: usize,
        /// Its name.
        name: String,
    },
    /// A relocation section could not be read.
    #[error("unable to read relocations of section {section} ({name}): {message}")]
    Relocations {
        /// Index of the map section.
        section: usize,
        /// Its name.
        name: String,
        /// What went wrong.
        message: String,
    },
    /// A map section could not be decompressed or read.
    #[error("unable to read map section {section} ({name}): {message}")]
    SectionData {
        /// Index of the section.
        section: usize,
        /// Its name.
        name: String,
        /// What went wrong.
        message: String,
    },
    /// The content of a map section is invalid.
    #[error("unable to decode map section {section} ({name}): {error}")]
    Decode {
        /// Index of the section.
        section: usize,
        /// Its name.
        name: String,
        /// The decoder's error (with the offset inside the section).
        error: DecodeError,
    },
}

/// Kind of ELF file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ElfKind {
    /// `ET_REL`: addresses are section offsets taken from relocations.
    Relocatable,
    /// `ET_EXEC`.
    Executable,
    /// `ET_DYN` (PIE or shared object).
    Shared,
    /// Anything else.
    Other(u16),
}

/// One decoded map section.
#[derive(Debug, Clone)]
pub struct MapSection {
    /// Section header index.
    pub index: usize,
    /// Section name.
    pub name: String,
    /// `sh_type`.
    pub sh_type: u32,
    /// `sh_link` (the text section in a relocatable object).
    pub link: u32,
    /// Size in the file (compressed size when `SHF_COMPRESSED`).
    pub file_size: u64,
    /// Size of the (decompressed) content.
    pub data_size: u64,
    /// Whether the section is `SHF_COMPRESSED`.
    pub compressed: bool,
    /// The function records in section order.
    pub functions: Vec<FunctionMap>,
    /// Name of each function, resolved as llvm-readobj does (`None` prints as `<?>`).
    pub names: Vec<Option<String>>,
    /// For relocatable objects: for each function, the section each range's address is relative
    /// to (the section of the relocation's symbol). Empty for linked files.
    pub range_sections: Vec<Vec<Option<u32>>>,
}

/// All map sections of one file.
#[derive(Debug, Clone)]
pub struct ElfBbAddrMaps {
    /// File type.
    pub kind: ElfKind,
    /// Byte order.
    pub endian: Endian,
    /// 4 or 8.
    pub address_size: u8,
    /// `e_machine`.
    pub machine: u16,
    /// Map sections in section-header order.
    pub sections: Vec<MapSection>,
    /// Sum of the sizes of allocated executable sections.
    pub text_size: u64,
    /// Number of symbols in `.symtab`.
    pub symbol_count: u64,
}

impl ElfBbAddrMaps {
    /// llvm-readobj's `Format` string (`elf64-x86-64`, `elf32-i386`, `elf64-littleaarch64`, ...).
    pub fn format_name(&self) -> String {
        let class = if self.address_size == 8 { 64 } else { 32 };
        let arch = match (self.machine, self.address_size, self.endian) {
            (62, 8, _) => "x86-64".to_string(),
            (3, 4, _) => "i386".to_string(),
            (62, 4, _) => "x86-64".to_string(),
            (183, _, Endian::Little) => "littleaarch64".to_string(),
            (183, _, Endian::Big) => "bigaarch64".to_string(),
            (_, _, Endian::Little) => "little".to_string(),
            (_, _, Endian::Big) => "big".to_string(),
        };
        format!("elf{class}-{arch}")
    }

    /// llvm-readobj's `Arch` string.
    pub fn arch_name(&self) -> &'static str {
        match (self.machine, self.endian) {
            (62, _) => "x86_64",
            (3, _) => "i386",
            (183, Endian::Little) => "aarch64",
            (183, Endian::Big) => "aarch64_be",
            _ => "unknown",
        }
    }
}

/// Options for [`read_elf`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadOptions {
    /// Also decode legacy maps: versions 0/1 in `SHT_LLVM_BB_ADDR_MAP`, the unversioned layout in
    /// `SHT_LLVM_BB_ADDR_MAP_V0`, and sections named `.bb_info` in the proposal's layout.
    pub legacy: bool,
}

/// Parse `data` as ELF and decode every map section.
pub fn read_elf(data: &[u8], options: ReadOptions) -> Result<ElfBbAddrMaps, ElfError> {
    match FileKind::parse(data)? {
        FileKind::Elf32 => read_elf_generic::<elf::FileHeader32<object::Endianness>>(data, options),
        FileKind::Elf64 => read_elf_generic::<elf::FileHeader64<object::Endianness>>(data, options),
        _ => Err(ElfError::NotElf),
    }
}

/// Address fields of a relocatable map section: value by field offset, `None` meaning the
/// addend is stored in the field (REL); records which section each resolved field points into.
struct Relocated {
    fields: HashMap<u64, (Option<u64>, Option<u32>)>,
    sections_seen: RefCell<Vec<Option<u32>>>,
}

impl AddressResolver for Relocated {
    fn resolve(&self, field_offset: u64, stored: u64) -> Result<u64, DecodeErrorKind> {
        match self.fields.get(&field_offset) {
            Some(&(addend, section)) => {
                self.sections_seen.borrow_mut().push(section);
                Ok(addend.unwrap_or(stored))
            }
            None => Err(DecodeErrorKind::MissingRelocation),
        }
    }
}

fn read_elf_generic<'data, Elf: FileHeader<Endian = object::Endianness>>(
    data: &'data [u8],
    options: ReadOptions,
) -> Result<ElfBbAddrMaps, ElfError> {
    let file = ElfFile::<Elf, &'data [u8]>::parse(data)?;
    let endian = file.endian();
    let header = file.elf_header();
    let sections = file.elf_section_table();
    let kind = match header.e_type(endian) {
        elf::ET_REL => ElfKind::Relocatable,
        elf::ET_EXEC => ElfKind::Executable,
        elf::ET_DYN => ElfKind::Shared,
        other => ElfKind::Other(other.0),
    };
    let our_endian = if file.is_little_endian() {
        Endian::Little
    } else {
        Endian::Big
    };
    let address_size: u8 = if file.is_64() { 8 } else { 4 };
    let is_mips64el = header.is_mips64el(endian);
    let symbols = file.elf_symbol_table();

    // STT_FUNC symbols by value, in symbol-table order (llvm-readobj's AddressToIndexMap).
    let mut func_symbols: HashMap<u64, Vec<(usize, Option<SectionIndex>)>> = HashMap::new();
    for (i, sym) in symbols.enumerate() {
        if sym.st_type() == elf::STT_FUNC {
            let value: u64 = sym.st_value(endian).into();
            let sec = symbols.symbol_section(endian, sym, i).ok().flatten();
            func_symbols.entry(value).or_default().push((i.0, sec));
        }
    }
    let symbol_name = |i: usize| -> Option<String> {
        let sym = symbols.symbol(SymbolIndex(i)).ok()?;
        let name = symbols.symbol_name(endian, sym).ok()?;
        Some(String::from_utf8_lossy(name).into_owned())
    };

    let mut text_size = 0u64;
    let mut out = Vec::new();
    for (index, sh) in sections.enumerate() {
        let sh_type = sh.sh_type(endian).0;
        let flags = sh.sh_flags(endian);
        if flags.contains(elf::SHF_ALLOC) && flags.contains(elf::SHF_EXECINSTR) {
            text_size += sh.sh_size(endian).into();
        }
        let name = sections
            .section_name(endian, sh)
            .map(|n| String::from_utf8_lossy(n).into_owned())
            .unwrap_or_default();
        let legacy = if sh_type == SHT_LLVM_BB_ADDR_MAP {
            if options.legacy {
                LegacyMode::Versions0And1
            } else {
                LegacyMode::Strict
            }
        } else if options.legacy && sh_type == SHT_LLVM_BB_ADDR_MAP_V0 {
            LegacyMode::Unversioned
        } else if options.legacy && name == BB_INFO_SECTION_NAME {
            LegacyMode::BbInfoProposal
        } else {
            continue;
        };
        let section_error = |message: String| ElfError::SectionData {
            section: index.0,
            name: name.clone(),
            message,
        };
        let section = file
            .section_by_index(index)
            .map_err(|e| section_error(e.to_string()))?;
        let content = section
            .uncompressed_data()
            .map_err(|e| section_error(e.to_string()))?;
        let decode_options = DecodeOptions {
            endian: our_endian,
            address_size,
            legacy,
        };
        let link = sh.sh_link(endian);
        let decode_err = |error: DecodeError| ElfError::Decode {
            section: index.0,
            name: name.clone(),
            error,
        };
        let (functions, range_sections) = if kind == ElfKind::Relocatable {
            let resolver = relocations_for(
                data,
                &file,
                index,
                &name,
                is_mips64el,
                symbols_section_of(&file),
            )?;
            let functions =
                decode_section(&content, decode_options, &resolver).map_err(decode_err)?;
            let seen = resolver.sections_seen.into_inner();
            let mut it = seen.into_iter();
            let range_sections = functions
                .iter()
                .map(|f| f.ranges.iter().map(|_| it.next().flatten()).collect())
                .collect();
            (functions, range_sections)
        } else {
            let functions = decode_section(&content, decode_options, &crate::decode::StoredAddress)
                .map_err(decode_err)?;
            (functions, Vec::new())
        };
        let names = functions
            .iter()
            .map(|f| {
                let candidates = func_symbols.get(&f.function_address())?;
                candidates
                    .iter()
                    .find(|(_, sec)| {
                        kind != ElfKind::Relocatable || *sec == Some(SectionIndex(link as usize))
                    })
                    .and_then(|&(i, _)| symbol_name(i))
            })
            .collect();
        out.push(MapSection {
            index: index.0,
            name,
            sh_type,
            link,
            file_size: sh.sh_size(endian).into(),
            data_size: content.len() as u64,
            compressed: flags.contains(elf::SHF_COMPRESSED),
            functions,
            names,
            range_sections,
        });
    }
    Ok(ElfBbAddrMaps {
        kind,
        endian: our_endian,
        address_size,
        machine: header.e_machine(endian).0,
        sections: out,
        text_size,
        symbol_count: symbols.len() as u64,
    })
}

fn symbols_section_of<'data, Elf: FileHeader<Endian = object::Endianness>>(
    file: &ElfFile<'data, Elf, &'data [u8]>,
) -> SectionIndex {
    file.elf_symbol_table().section()
}

/// llvm-readobj 22 keeps a relocated address in an `unsigned` (32 bits): an addend above 4 GiB
/// is truncated. Section offsets never get there in practice; we match the oracle.
fn readobj_addend(addend: i64) -> u64 {
    u64::from(addend as u32)
}

/// Collect the relocations that apply to map section `target`.
fn relocations_for<'data, Elf: FileHeader<Endian = object::Endianness>>(
    data: &'data [u8],
    file: &ElfFile<'data, Elf, &'data [u8]>,
    target: SectionIndex,
    name: &str,
    is_mips64el: bool,
    _symtab: SectionIndex,
) -> Result<Relocated, ElfError> {
    let endian = file.endian();
    let sections = file.elf_section_table();
    let symbols = file.elf_symbol_table();
    let reloc_error = |message: String| ElfError::Relocations {
        section: target.0,
        name: name.to_string(),
        message,
    };
    let mut found = false;
    let mut fields = HashMap::new();
    let symbol_section = |sym: u32| -> Option<u32> {
        let idx = SymbolIndex(sym as usize);
        let s = symbols.symbol(idx).ok()?;
        symbols
            .symbol_section(endian, s, idx)
            .ok()
            .flatten()
            .map(|i| i.0 as u32)
    };
    for sh in sections.iter() {
        let t = sh.sh_type(endian);
        if t != elf::SHT_RELA && t != elf::SHT_REL && t != elf::SHT_CREL {
            continue;
        }
        if sh.sh_info(endian) as usize != target.0 {
            continue;
        }
        found = true;
        if let Some((rels, _)) = sh
            .rel(endian, data)
            .map_err(|e| reloc_error(e.to_string()))?
        {
            for r in rels {
                let offset: u64 = r.r_offset(endian).into();
                fields.insert(offset, (None, symbol_section(r.r_sym(endian))));
            }
        } else if let Some((relas, _)) = sh
            .rela(endian, data)
            .map_err(|e| reloc_error(e.to_string()))?
        {
            for r in relas {
                let c = Crel::from_rela(r, endian, is_mips64el);
                fields.insert(
                    c.r_offset,
                    (Some(readobj_addend(c.r_addend)), symbol_section(c.r_sym)),
                );
            }
        } else if let Some((crels, _)) = sh
            .crel(endian, data)
            .map_err(|e| reloc_error(e.to_string()))?
        {
            let is_rela = crels.is_rela();
            for c in crels {
                let c = c.map_err(|e| reloc_error(e.to_string()))?;
                let addend = if is_rela {
                    Some(readobj_addend(c.r_addend))
                } else {
                    None
                };
                fields.insert(c.r_offset, (addend, symbol_section(c.r_sym)));
            }
        }
    }
    if !found {
        return Err(ElfError::NoRelocations {
            section: target.0,
            name: name.to_string(),
        });
    }
    Ok(Relocated {
        fields,
        sections_seen: RefCell::new(Vec::new()),
    })
}
