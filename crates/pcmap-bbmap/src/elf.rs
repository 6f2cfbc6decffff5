//! Finding and decoding the map sections of an ELF file read by [`pcmap_binary::Binary`] (the
//! workspace's one ELF model): linked executables and shared objects (one concatenated
//! `.llvm_bb_addr_map`), relocatable objects (one map section per text section, addresses from
//! RELA, REL or CREL relocations), `SHF_COMPRESSED` sections, ELF32/ELF64 in both byte orders,
//! and function names resolved the way llvm-readobj does.

use std::cell::RefCell;
use std::collections::HashMap;

use pcmap_binary::{Binary, FileKind, SHF_ALLOC, SHF_COMPRESSED, SHF_EXECINSTR, STT_FUNC};

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
    /// The file is not an ELF file the binary model can read.
    #[error("not a readable ELF file: {0}")]
    Binary(#[from] pcmap_binary::Error),
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
    #[error("unable to read relocations of section {section} ({name}): {source}")]
    Relocations {
        /// Index of the map section.
        section: usize,
        /// Its name.
        name: String,
        /// What went wrong.
        source: pcmap_binary::Error,
    },
    /// A map section could not be decompressed or read.
    #[error("unable to read map section {section} ({name}): {source}")]
    SectionData {
        /// Index of the section.
        section: usize,
        /// Its name.
        name: String,
        /// What went wrong.
        source: pcmap_binary::Error,
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

/// Parse `data` as ELF and decode every map section ([`read_binary`] on
/// [`Binary::parse`]`(data)`).
pub fn read_elf(data: &[u8], options: ReadOptions) -> Result<ElfBbAddrMaps, ElfError> {
    if data.len() >= 4 && !data.starts_with(b"\x7fELF") {
        return Err(ElfError::NotElf);
    }
    read_binary(&Binary::parse(data)?, options)
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

/// Decode every map section of an already parsed binary.
pub fn read_binary(bin: &Binary<'_>, options: ReadOptions) -> Result<ElfBbAddrMaps, ElfError> {
    let kind = match bin.kind() {
        FileKind::Relocatable => ElfKind::Relocatable,
        FileKind::Executable => ElfKind::Executable,
        FileKind::PieExecutable | FileKind::SharedObject => ElfKind::Shared,
        FileKind::Core => ElfKind::Other(4),
        FileKind::Other(t) => ElfKind::Other(t),
    };
    let our_endian = bin.endian();
    let address_size = bin.address_size();
    let symbols = bin.symtab()?;

    // STT_FUNC symbols by value, in symbol-table order (llvm-readobj's AddressToIndexMap).
    let mut func_symbols: HashMap<u64, Vec<(usize, Option<usize>)>> = HashMap::new();
    for sym in &symbols {
        if sym.st_type == STT_FUNC {
            func_symbols
                .entry(sym.value)
                .or_default()
                .push((sym.index, sym.section_index));
        }
    }
    let symbol_name = |i: usize| -> Option<String> {
        let name = symbols.get(i)?.name?;
        Some(String::from_utf8_lossy(name).into_owned())
    };

    let mut text_size = 0u64;
    let mut out = Vec::new();
    for sec in bin.sections() {
        let index = sec.index;
        let sh_type = sec.sh_type;
        let flags = sec.flags;
        if flags & SHF_ALLOC != 0 && flags & SHF_EXECINSTR != 0 {
            text_size += sec.size;
        }
        let name = sec.name.to_string();
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
        let content = bin
            .section_data(sec)
            .map_err(|source| ElfError::SectionData {
                section: index,
                name: name.clone(),
                source,
            })?;
        let decode_options = DecodeOptions {
            endian: our_endian,
            address_size,
            legacy,
        };
        let link = sec.link;
        let decode_err = |error: DecodeError| ElfError::Decode {
            section: index,
            name: name.clone(),
            error,
        };
        let (functions, range_sections) = if kind == ElfKind::Relocatable {
            let resolver = relocations_for(bin, index, &name)?;
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
                    .find(|(_, sec)| kind != ElfKind::Relocatable || *sec == Some(link as usize))
                    .and_then(|&(i, _)| symbol_name(i))
            })
            .collect();
        out.push(MapSection {
            index,
            name,
            sh_type,
            link,
            file_size: sec.size,
            data_size: content.len() as u64,
            compressed: flags & SHF_COMPRESSED != 0,
            functions,
            names,
            range_sections,
        });
    }
    Ok(ElfBbAddrMaps {
        kind,
        endian: our_endian,
        address_size,
        machine: bin.machine().e_machine(),
        sections: out,
        text_size,
        symbol_count: symbols.len() as u64,
    })
}

/// llvm-readobj 22 keeps a relocated address in an `unsigned` (32 bits): an addend above 4 GiB
/// is truncated. Section offsets never get there in practice; we match the oracle.
fn readobj_addend(addend: i64) -> u64 {
    u64::from(addend as u32)
}

/// Collect the relocations that apply to map section `target`.
fn relocations_for(bin: &Binary<'_>, target: usize, name: &str) -> Result<Relocated, ElfError> {
    let relocations = bin
        .relocations_for(target)
        .map_err(|source| ElfError::Relocations {
            section: target,
            name: name.to_string(),
            source,
        })?
        .ok_or_else(|| ElfError::NoRelocations {
            section: target,
            name: name.to_string(),
        })?;
    let fields = relocations
        .iter()
        .map(|r| {
            (
                r.offset,
                (
                    r.addend.map(readobj_addend),
                    r.symbol_section.map(|s| s as u32),
                ),
            )
        })
        .collect();
    Ok(Relocated {
        fields,
        sections_seen: RefCell::new(Vec::new()),
    })
}
