//! The raw layout of the section header table, for tools that rewrite a file in place
//! (`pcmap_btf`'s section appender).

use object::read::elf::FileHeader;
use object::{Endianness, elf};

use crate::Binary;

/// Where the section header table lies and which section holds the section names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SectionHeaderTable {
    /// `e_shoff`: file offset of the table (0 when the file has none).
    pub offset: u64,
    /// `e_shentsize`: 64 for ELF64, 40 for ELF32.
    pub entry_size: u16,
    /// Number of entries (extended numbering resolved).
    pub count: usize,
    /// Index of the section-name string table (`e_shstrndx`, extended numbering resolved).
    pub shstrndx: usize,
}

impl Binary<'_> {
    /// The layout of the section header table, as [`Binary::parse`] validated it.
    pub fn section_header_table(&self) -> SectionHeaderTable {
        fn read<Elf: FileHeader<Endian = Endianness>>(
            data: &[u8],
            count: usize,
        ) -> SectionHeaderTable {
            let Ok(header) = Elf::parse(data) else {
                return SectionHeaderTable {
                    offset: 0,
                    entry_size: 0,
                    count,
                    shstrndx: 0,
                };
            };
            let endian = header.endian().unwrap_or(Endianness::Little);
            SectionHeaderTable {
                offset: header.e_shoff(endian).into(),
                entry_size: header.e_shentsize(endian),
                count,
                shstrndx: header.shstrndx(endian, data).unwrap_or(0) as usize,
            }
        }
        let count = self.sections().len();
        if self.is_64() {
            read::<elf::FileHeader64<Endianness>>(self.data(), count)
        } else {
            read::<elf::FileHeader32<Endianness>>(self.data(), count)
        }
    }
}
