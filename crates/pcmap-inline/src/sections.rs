//! Loading the DWARF, CFI and symbol sections of an ELF file.

use std::borrow::Cow;

use pcmap_binary::Binary;

use crate::Error;

/// The reader type used throughout the crate.
pub(crate) type Slice<'a> = gimli::EndianSlice<'a, gimli::RunTimeEndian>;

/// A function symbol from the ELF symbol table.
#[derive(Debug, Clone)]
pub struct ElfSymbol<'data> {
    /// Start address.
    pub address: u64,
    /// Size in bytes (0 when unknown).
    pub size: u64,
    /// Symbol name.
    pub name: &'data str,
}

/// The debug sections of one ELF file, decompressed where needed (borrowed when not compressed).
///
/// Build it once with [`DebugData::load`] and hand it to [`crate::extract_sites`],
/// [`crate::symbolize::Symbolizer::new`] and friends.
pub struct DebugData<'data> {
    endian: gimli::RunTimeEndian,
    sections: Vec<(gimli::SectionId, Cow<'data, [u8]>)>,
    pub(crate) eh_frame: Option<(u64, Cow<'data, [u8]>)>,
    pub(crate) debug_frame: Option<Cow<'data, [u8]>>,
    pub(crate) text_addr: u64,
    /// Function symbols sorted by address (then by name, for determinism).
    pub symbols: Vec<ElfSymbol<'data>>,
    /// The symbol table as llvm-symbolizer sees it (the symbolizer's names).
    pub(crate) symbol_table: Vec<crate::symbolize::TableSymbol<'data>>,
    /// Size of `.debug_info` in bytes (after decompression).
    pub debug_info_size: u64,
    /// Loadable segments as (virtual address, file offset, file size).
    segments: Vec<(u64, u64, u64)>,
    /// Called with section bytes the extractor is done with (see [`DebugData::set_release`]).
    release: Option<Release<'data>>,
}

/// A callback told which mapped bytes are no longer needed.
type Release<'data> = Box<dyn Fn(&[u8]) + Send + Sync + 'data>;

impl std::fmt::Debug for DebugData<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DebugData")
            .field("sections", &self.sections.len())
            .field("debug_info_size", &self.debug_info_size)
            .finish()
    }
}

impl<'data> DebugData<'data> {
    /// Parse an ELF image and collect its DWARF sections, `.eh_frame`, `.debug_frame` and
    /// function symbols. Prefer [`DebugData::from_binary`] when the caller already parsed the
    /// file.
    pub fn load(data: &'data [u8]) -> Result<Self, Error> {
        Self::from_binary(&Binary::parse(data)?)
    }

    /// Collect the DWARF sections (decompressed where needed), `.eh_frame`, `.debug_frame` and
    /// the function symbols of an already parsed binary.
    pub fn from_binary(bin: &Binary<'data>) -> Result<Self, Error> {
        Self::build(bin, true)
    }

    /// Like [`DebugData::from_binary`] without the symbol tables ([`DebugData::symbols`] and the
    /// symbolizer's names stay empty): enough for [`crate::extract_sites`] and the BTF glue, and
    /// on a kernel image it saves tens of megabytes and a sort of every symbol.
    pub fn dwarf_from_binary(bin: &Binary<'data>) -> Result<Self, Error> {
        Self::build(bin, false)
    }

    fn build(bin: &Binary<'data>, with_symbols: bool) -> Result<Self, Error> {
        let endian = if bin.is_little_endian() {
            gimli::RunTimeEndian::Little
        } else {
            gimli::RunTimeEndian::Big
        };
        let section_data = |sec: &pcmap_binary::Section<'data>| {
            bin.section_data(sec).map_err(|source| Error::Section {
                section: sec.name.to_string(),
                source,
            })
        };
        let mut sections = Vec::new();
        let mut debug_info_size = 0;
        for id in ALL_SECTIONS {
            if let Some(sec) = bin.section_by_name(id.name()) {
                let bytes = section_data(sec)?;
                if *id == gimli::SectionId::DebugInfo {
                    debug_info_size = bytes.len() as u64;
                }
                sections.push((*id, bytes));
            }
        }
        if debug_info_size == 0 {
            return Err(Error::NoDebugInfo);
        }
        let eh_frame = match bin.section_by_name(".eh_frame") {
            Some(sec) => Some((sec.address, section_data(sec)?)),
            None => None,
        };
        let debug_frame = match bin.section_by_name(".debug_frame") {
            Some(sec) => Some(section_data(sec)?),
            None => None,
        };
        let text_addr = bin.section_by_name(".text").map_or(0, |s| s.address);
        // Defined `STT_FUNC` symbols of `.symtab` (not `.dynsym`, not `STT_GNU_IFUNC`, not
        // absolute), as the DWARF tools name functions.
        let mut symbols: Vec<ElfSymbol<'data>> = if !with_symbols || bin.symbols_from_dynsym() {
            Vec::new()
        } else {
            bin.function_table()
                .symbols()
                .iter()
                .filter(|s| !s.is_ifunc && s.section_index.is_some() && !s.name.is_empty())
                .map(|s| ElfSymbol {
                    address: s.address,
                    size: s.size,
                    name: s.name,
                })
                .collect()
        };
        symbols.sort_by(|a, b| a.address.cmp(&b.address).then(a.name.cmp(b.name)));
        Ok(DebugData {
            endian,
            sections,
            eh_frame,
            debug_frame,
            text_addr,
            symbols,
            symbol_table: if with_symbols {
                crate::symbolize::symbol_table(bin)?
            } else {
                Vec::new()
            },
            debug_info_size,
            segments: bin
                .segments()
                .iter()
                .filter(|s| s.p_type == pcmap_binary::PT_LOAD)
                .map(|s| (s.vaddr, s.offset, s.file_size))
                .collect(),
            release: None,
        })
    }

    /// Register a callback that [`crate::extract_sites`] calls with the bytes of each unit of
    /// `.debug_info` once it has read the unit, and with every DWARF section once all units are
    /// read. A caller that memory-maps the file can drop those pages from its resident set
    /// (`MADV_DONTNEED`): reading them again later only faults them back in, so this bounds the
    /// resident file pages by the units in flight instead of the whole `.debug_info`. The bytes
    /// may be a decompressed copy rather than part of the file; the callback should then ignore
    /// them.
    pub fn set_release(&mut self, release: impl Fn(&[u8]) + Send + Sync + 'data) {
        self.release = Some(Box::new(release));
    }

    /// Tell the release callback, if any, that `bytes` are no longer needed.
    pub(crate) fn release(&self, bytes: &[u8]) {
        if let Some(f) = &self.release {
            f(bytes);
        }
    }

    /// Release every DWARF section (see [`DebugData::set_release`]).
    pub(crate) fn release_sections(&self) {
        for (_, bytes) in &self.sections {
            self.release(bytes);
        }
    }

    /// The bytes of the `.debug_info` unit at `offset` spanning `len` bytes (empty when out of
    /// range).
    pub(crate) fn debug_info_bytes(&self, offset: usize, len: usize) -> &[u8] {
        let info = self.section(gimli::SectionId::DebugInfo);
        offset
            .checked_add(len)
            .and_then(|end| info.get(offset..end))
            .unwrap_or(&[])
    }

    /// The file offset of a virtual address (what uprobes and `perf probe` use), if a loadable
    /// segment maps it from the file.
    pub fn file_offset(&self, address: u64) -> Option<u64> {
        self.segments.iter().find_map(|&(vaddr, off, size)| {
            let delta = address.checked_sub(vaddr)?;
            (delta < size).then(|| off + delta)
        })
    }

    fn section(&self, id: gimli::SectionId) -> &[u8] {
        self.sections
            .iter()
            .find(|(i, _)| *i == id)
            .map_or(&[][..], |(_, b)| &b[..])
    }

    /// A gimli view of the DWARF sections.
    pub(crate) fn dwarf(&self) -> gimli::Dwarf<Slice<'_>> {
        let load = |id: gimli::SectionId| -> Result<Slice<'_>, std::convert::Infallible> {
            Ok(gimli::EndianSlice::new(self.section(id), self.endian))
        };
        match gimli::Dwarf::load(load) {
            Ok(d) => d,
            Err(never) => match never {},
        }
    }

    pub(crate) fn endian(&self) -> gimli::RunTimeEndian {
        self.endian
    }
}

const ALL_SECTIONS: &[gimli::SectionId] = &[
    gimli::SectionId::DebugAbbrev,
    gimli::SectionId::DebugAddr,
    gimli::SectionId::DebugAranges,
    gimli::SectionId::DebugInfo,
    gimli::SectionId::DebugLine,
    gimli::SectionId::DebugLineStr,
    gimli::SectionId::DebugLoc,
    gimli::SectionId::DebugLocLists,
    gimli::SectionId::DebugRanges,
    gimli::SectionId::DebugRngLists,
    gimli::SectionId::DebugStr,
    gimli::SectionId::DebugStrOffsets,
    gimli::SectionId::DebugTypes,
];
