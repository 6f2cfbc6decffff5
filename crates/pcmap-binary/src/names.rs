//! Names of section types and flags, as `readelf` prints them.

use crate::Section;

/// The name `readelf` gives a section type, without the `SHT_` prefix (`PROGBITS`,
/// `LLVM_BB_ADDR_MAP`), or the number in hex for types it does not know.
pub fn section_type_name(t: u32) -> String {
    match t {
        0 => "NULL".into(),
        1 => "PROGBITS".into(),
        2 => "SYMTAB".into(),
        3 => "STRTAB".into(),
        4 => "RELA".into(),
        5 => "HASH".into(),
        6 => "DYNAMIC".into(),
        7 => "NOTE".into(),
        8 => "NOBITS".into(),
        9 => "REL".into(),
        11 => "DYNSYM".into(),
        14 => "INIT_ARRAY".into(),
        15 => "FINI_ARRAY".into(),
        16 => "PREINIT_ARRAY".into(),
        17 => "GROUP".into(),
        18 => "SYMTAB_SHNDX".into(),
        19 => "RELR".into(),
        0x6fff_4c0a => "LLVM_BB_ADDR_MAP".into(),
        0x6fff_4c0c => "LLVM_ADDRSIG".into(),
        0x6fff_4c00 => "LLVM_ODRTAB".into(),
        0x6fff_4c14 => "CREL".into(),
        0x6fff_fff6 => "GNU_HASH".into(),
        0x6fff_fffe => "VERNEED".into(),
        0x6fff_ffff => "VERSYM".into(),
        0x6fff_fffd => "VERDEF".into(),
        0x7000_0001 => "X86_64_UNWIND".into(),
        t => format!("{t:#x}"),
    }
}

/// `readelf`'s flag letters for `sh_flags` (`WAX`, `MS`, `C` for compressed…).
pub fn section_flag_letters(f: u64) -> String {
    let mut s = String::new();
    for (bit, c) in [
        (1u64, 'W'),
        (2, 'A'),
        (4, 'X'),
        (0x10, 'M'),
        (0x20, 'S'),
        (0x40, 'I'),
        (0x80, 'L'),
        (0x200, 'G'),
        (0x400, 'T'),
        (0x800, 'C'),
        (0x8000_0000, 'R'),
    ] {
        if f & bit != 0 {
            s.push(c);
        }
    }
    s
}

impl Section<'_> {
    /// [`section_type_name`] of this section's `sh_type`.
    pub fn type_name(&self) -> String {
        section_type_name(self.sh_type)
    }

    /// [`section_flag_letters`] of this section's `sh_flags`.
    pub fn flag_letters(&self) -> String {
        section_flag_letters(self.flags)
    }
}

impl crate::Machine {
    /// The `e_machine` value.
    pub fn e_machine(self) -> u16 {
        match self {
            crate::Machine::X86_64 => 62,
            crate::Machine::X86 => 3,
            crate::Machine::Aarch64 => 183,
            crate::Machine::Other(m) => m,
        }
    }
}
