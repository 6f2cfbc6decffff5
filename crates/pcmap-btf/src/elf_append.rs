//! Add non-allocated sections to an ELF file without moving anything: section data, a grown copy
//! of `.shstrtab` and a new section header table are appended at the end of the file, and the
//! file header is pointed at the new table. This is what `objcopy --add-section` does for
//! non-alloc sections. Hand-written on `object`'s raw structs because `object::build::elf`
//! refuses binaries with section types it does not know (e.g. `SHT_LLVM_BB_ADDR_MAP`).

use object::Endianness;
use object::elf::{self, FileHeader64, SectionHeader64};
use object::endian::{U32, U64};
use object::pod;
use object::read::elf::{FileHeader, SectionHeader};

use crate::error::{Error, Result};

/// A section to add.
#[derive(Debug, Clone)]
pub struct NewSection<'a> {
    /// Name, e.g. `.BTF.extra`.
    pub name: &'a str,
    /// Contents.
    pub data: &'a [u8],
    /// Alignment of the contents (a power of two).
    pub align: u64,
}

fn elf_err(e: object::read::Error) -> Error {
    Error::invalid("ELF file", 0, e.to_string())
}

fn align_to(out: &mut Vec<u8>, align: u64) {
    let a = align.max(1) as usize;
    let pad = (a - out.len() % a) % a;
    out.resize(out.len() + pad, 0);
}

/// Return a copy of the 64-bit ELF `input` with `sections` added as `SHT_PROGBITS` sections
/// without `SHF_ALLOC`. Fails if a section of the same name already exists.
pub fn append_sections(input: &[u8], sections: &[NewSection<'_>]) -> Result<Vec<u8>> {
    if input.get(4) != Some(&2) {
        return Err(Error::invalid(
            "e_ident[EI_CLASS]",
            4,
            "only 64-bit ELF files are supported",
        ));
    }
    let header = FileHeader64::<Endianness>::parse(input).map_err(elf_err)?;
    let endian = header.endian().map_err(elf_err)?;
    let shdrs = header.section_headers(endian, input).map_err(elf_err)?;
    if shdrs.is_empty() {
        return Err(Error::invalid(
            "e_shoff",
            0x28,
            "the file has no section header table",
        ));
    }
    let shstrndx = header.shstrndx(endian, input).map_err(elf_err)? as usize;
    let strtab_hdr = shdrs
        .get(shstrndx)
        .ok_or_else(|| Error::invalid("e_shstrndx", 0x3e, format!("{shstrndx} is out of range")))?;
    let old_names = strtab_hdr.data(endian, input).map_err(elf_err)?;
    for sh in shdrs {
        let off = sh.sh_name(endian) as usize;
        let name = old_names
            .get(off..)
            .and_then(|r| r.split(|&b| b == 0).next())
            .unwrap_or(&[]);
        if let Some(dup) = sections.iter().find(|s| s.name.as_bytes() == name) {
            return Err(Error::invalid(
                "section name",
                0,
                format!("the file already has a section named {}", dup.name),
            ));
        }
    }

    let mut out = input.to_vec();
    // 1. Section contents.
    let mut placed = Vec::with_capacity(sections.len());
    for s in sections {
        if !s.align.is_power_of_two() {
            return Err(Error::Unrepresentable {
                field: "sh_addralign",
                message: format!("{} is not a power of two", s.align),
            });
        }
        align_to(&mut out, s.align);
        placed.push(out.len() as u64);
        out.extend_from_slice(s.data);
    }
    // 2. The grown section-name string table.
    let mut names = old_names.to_vec();
    if names.last().is_some_and(|&b| b != 0) {
        names.push(0);
    }
    let mut name_offs = Vec::with_capacity(sections.len());
    for s in sections {
        name_offs.push(
            u32::try_from(names.len()).map_err(|_| Error::Unrepresentable {
                field: "sh_name",
                message: "string table over 4 GiB".into(),
            })?,
        );
        names.extend_from_slice(s.name.as_bytes());
        names.push(0);
    }
    let names_off = out.len() as u64;
    out.extend_from_slice(&names);
    // 3. The section header table.
    align_to(&mut out, 8);
    let table_off = out.len() as u64;
    let mut new_hdrs: Vec<SectionHeader64<Endianness>> = shdrs.to_vec();
    new_hdrs[shstrndx].sh_offset = U64::new(endian, names_off);
    new_hdrs[shstrndx].sh_size = U64::new(endian, names.len() as u64);
    for ((s, &off), &name) in sections.iter().zip(&placed).zip(&name_offs) {
        new_hdrs.push(SectionHeader64 {
            sh_name: U32::new(endian, name),
            sh_type: U32::new(endian, elf::SHT_PROGBITS),
            sh_flags: Default::default(),
            sh_addr: U64::new(endian, 0),
            sh_offset: U64::new(endian, off),
            sh_size: U64::new(endian, s.data.len() as u64),
            sh_link: U32::new(endian, 0),
            sh_info: U32::new(endian, 0),
            sh_addralign: U64::new(endian, s.align.max(1)),
            sh_entsize: U64::new(endian, 0),
        });
    }
    let count = new_hdrs.len();
    if count >= usize::from(elf::SHN_LORESERVE) {
        // Extended numbering: e_shnum = 0, real count in section 0's sh_size.
        new_hdrs[0].sh_size = U64::new(endian, count as u64);
    }
    out.extend_from_slice(pod::bytes_of_slice(&new_hdrs));
    // 4. The file header.
    let mut new_header = *header;
    new_header.e_shoff = U64::new(endian, table_off);
    new_header.e_shnum = object::endian::U16::new(
        endian,
        if count >= usize::from(elf::SHN_LORESERVE) {
            0
        } else {
            count as u16
        },
    );
    let hb = pod::bytes_of(&new_header);
    out[..hb.len()].copy_from_slice(hb);
    Ok(out)
}

/// The contents of the section called `name` of an ELF file (64- or 32-bit), if present.
pub fn section_data<'a>(input: &'a [u8], name: &str) -> Result<Option<&'a [u8]>> {
    use object::{Object, ObjectSection};
    let file = object::File::parse(input).map_err(elf_err)?;
    match file.section_by_name(name) {
        Some(s) => Ok(Some(s.data().map_err(elf_err)?)),
        None => Ok(None),
    }
}

/// Whether `input` starts with the ELF magic.
pub fn is_elf(input: &[u8]) -> bool {
    input.starts_with(b"\x7fELF")
}
