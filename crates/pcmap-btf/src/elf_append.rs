//! Add non-allocated sections to an ELF file without moving anything: section data, a grown copy
//! of `.shstrtab` and a new section header table are appended at the end of the file, and the
//! file header is pointed at the new table. This is what `objcopy --add-section` does for
//! non-alloc sections. The file is read through [`pcmap_binary::Binary`] (the workspace's one ELF
//! model); the new headers are written by hand because `object::build::elf` refuses binaries
//! with section types it does not know (e.g. `SHT_LLVM_BB_ADDR_MAP`).

use pcmap_binary::Binary;

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

/// `SHT_PROGBITS`.
const SHT_PROGBITS: u32 = 1;
/// `SHN_LORESERVE`: from this many sections on, ELF uses extended numbering.
const SHN_LORESERVE: usize = 0xff00;
/// Size of an `Elf64_Shdr`.
const SHDR64_SIZE: usize = 64;

fn align_to(out: &mut Vec<u8>, align: u64) {
    let a = align.max(1) as usize;
    let pad = (a - out.len() % a) % a;
    out.resize(out.len() + pad, 0);
}

/// Writes fields in the file's byte order.
#[derive(Clone, Copy)]
struct Put {
    little: bool,
}

impl Put {
    fn bytes<const N: usize>(self, le: [u8; N], be: [u8; N]) -> [u8; N] {
        if self.little { le } else { be }
    }
    fn u16_at(self, out: &mut [u8], at: usize, v: u16) {
        out[at..at + 2].copy_from_slice(&self.bytes(v.to_le_bytes(), v.to_be_bytes()));
    }
    fn u64_at(self, out: &mut [u8], at: usize, v: u64) {
        out[at..at + 8].copy_from_slice(&self.bytes(v.to_le_bytes(), v.to_be_bytes()));
    }
    fn u32(self, out: &mut Vec<u8>, v: u32) {
        out.extend_from_slice(&self.bytes(v.to_le_bytes(), v.to_be_bytes()));
    }
    fn u64(self, out: &mut Vec<u8>, v: u64) {
        out.extend_from_slice(&self.bytes(v.to_le_bytes(), v.to_be_bytes()));
    }
}

/// Return a copy of the 64-bit ELF `input` with `sections` added as `SHT_PROGBITS` sections
/// without `SHF_ALLOC`. Fails if a section of the same name already exists.
pub fn append_sections(input: &[u8], sections: &[NewSection<'_>]) -> Result<Vec<u8>> {
    if input.starts_with(b"\x7fELF") && input.get(4) != Some(&2) {
        return Err(class_error());
    }
    append_sections_to(&Binary::parse(input)?, sections)
}

fn class_error() -> Error {
    Error::invalid(
        "e_ident[EI_CLASS]",
        4,
        "only 64-bit ELF files are supported",
    )
}

/// [`append_sections`] on an already parsed binary.
pub fn append_sections_to(bin: &Binary<'_>, sections: &[NewSection<'_>]) -> Result<Vec<u8>> {
    if !bin.is_64() {
        return Err(class_error());
    }
    let input = bin.data();
    let put = Put {
        little: bin.is_little_endian(),
    };
    let table = bin.section_header_table();
    if table.count == 0 || table.offset == 0 {
        return Err(Error::invalid(
            "e_shoff",
            0x28,
            "the file has no section header table",
        ));
    }
    let shstrndx = table.shstrndx;
    let strtab = bin
        .sections()
        .get(shstrndx)
        .ok_or_else(|| Error::invalid("e_shstrndx", 0x3e, format!("{shstrndx} is out of range")))?;
    let old_names = strtab.raw;
    if let Some(dup) = sections
        .iter()
        .find(|s| bin.sections().iter().any(|old| old.name == s.name))
    {
        return Err(Error::invalid(
            "section name",
            0,
            format!("the file already has a section named {}", dup.name),
        ));
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
    // 3. The section header table: the old entries verbatim, then the new ones.
    align_to(&mut out, 8);
    let table_off = out.len();
    let old_start = table.offset as usize;
    let old_table = input
        .get(old_start..old_start + table.count * SHDR64_SIZE)
        .ok_or_else(|| {
            Error::invalid(
                "e_shoff",
                0x28,
                "the section header table extends past the end of the file",
            )
        })?;
    out.extend_from_slice(old_table);
    let strtab_entry = table_off + shstrndx * SHDR64_SIZE;
    put.u64_at(&mut out, strtab_entry + 0x18, names_off); // sh_offset
    put.u64_at(&mut out, strtab_entry + 0x20, names.len() as u64); // sh_size
    for ((s, &off), &name) in sections.iter().zip(&placed).zip(&name_offs) {
        put.u32(&mut out, name); // sh_name
        put.u32(&mut out, SHT_PROGBITS); // sh_type
        put.u64(&mut out, 0); // sh_flags
        put.u64(&mut out, 0); // sh_addr
        put.u64(&mut out, off); // sh_offset
        put.u64(&mut out, s.data.len() as u64); // sh_size
        put.u32(&mut out, 0); // sh_link
        put.u32(&mut out, 0); // sh_info
        put.u64(&mut out, s.align.max(1)); // sh_addralign
        put.u64(&mut out, 0); // sh_entsize
    }
    let count = table.count + sections.len();
    if count >= SHN_LORESERVE {
        // Extended numbering: e_shnum = 0, real count in section 0's sh_size.
        put.u64_at(&mut out, table_off + 0x20, count as u64);
    }
    // 4. The file header.
    put.u64_at(&mut out, 0x28, table_off as u64); // e_shoff
    let shnum = if count >= SHN_LORESERVE {
        0
    } else {
        count as u16
    };
    put.u16_at(&mut out, 0x3c, shnum); // e_shnum
    Ok(out)
}

/// The contents of the section called `name` of an ELF file (64- or 32-bit), if present.
pub fn section_data<'a>(input: &'a [u8], name: &str) -> Result<Option<&'a [u8]>> {
    Ok(section_data_of(&Binary::parse(input)?, name))
}

/// The stored contents of the section called `name` of an already parsed binary, if present.
pub fn section_data_of<'a>(bin: &Binary<'a>, name: &str) -> Option<&'a [u8]> {
    bin.section_by_name(name).map(|s| s.raw)
}

/// Whether `input` starts with the ELF magic.
pub fn is_elf(input: &[u8]) -> bool {
    input.starts_with(b"\x7fELF")
}
