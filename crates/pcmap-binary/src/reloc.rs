//! Link-time relocations kept in a linked binary (`--emit-relocs`) and FDE ranges of
//! `.eh_frame`: what BOLT's function discovery and operand symbolization read besides symbols.

use crate::Binary;
use crate::elf::Machine;

/// What a relocation computes, as far as symbolization needs to know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RelocationKind {
    /// `S + A` (`R_X86_64_64`, `_32`, `_32S`, `_16`, `_8`; `R_386_32`, `_16`, `_8`).
    Absolute,
    /// `S + A - P` (`R_X86_64_PC32`, `_PC16`, `_PC8`; `R_386_PC32`, `_PC16`, `_PC8`).
    Relative,
    /// Anything else (GOT, PLT, TLS, other machines).
    Other,
}

/// One relocation against code (from a `SHT_RELA`/`SHT_REL` section of `.symtab` whose target
/// is a code section: `SHT_PROGBITS` with `SHF_ALLOC | SHF_EXECINSTR`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Relocation {
    /// `r_offset`: the address of the relocated bytes in a linked binary.
    pub offset: u64,
    /// The relocation type (`ELF*_R_TYPE`).
    pub r_type: u32,
    /// Index into [`Binary::symbols`] (0: no symbol).
    pub symbol: usize,
    /// `r_addend` (0 for `SHT_REL`).
    pub addend: i64,
    /// The relocation's kind.
    pub kind: RelocationKind,
}

const SHT_PROGBITS: u32 = 1;
const SHT_SYMTAB: u32 = 2;
const SHT_RELA: u32 = 4;
const SHT_REL: u32 = 9;

fn kind(machine: Machine, r_type: u32) -> RelocationKind {
    match (machine, r_type) {
        // R_X86_64_64, _32, _32S, _16, _8
        (Machine::X86_64, 1 | 10 | 11 | 12 | 14) => RelocationKind::Absolute,
        // R_X86_64_PC32, _PC16, _PC8
        (Machine::X86_64, 2 | 13 | 15) => RelocationKind::Relative,
        // R_386_32, _16, _8
        (Machine::X86, 1 | 20 | 22) => RelocationKind::Absolute,
        // R_386_PC32, _PC16, _PC8
        (Machine::X86, 2 | 21 | 23) => RelocationKind::Relative,
        _ => RelocationKind::Other,
    }
}

impl<'data> Binary<'data> {
    /// Relocations against code sections, in section order (empty when the binary kept none, or
    /// its symbols come from `.dynsym`). Malformed trailing bytes of a relocation section are
    /// ignored.
    pub fn code_relocations(&self) -> Vec<Relocation> {
        let sections = self.sections();
        let Some(symtab) = sections.iter().find(|s| s.sh_type == SHT_SYMTAB) else {
            return Vec::new();
        };
        if self.symbols_from_dynsym() {
            return Vec::new();
        }
        let (word, le) = (if self.is_64() { 8 } else { 4 }, self.is_little_endian());
        let read = |b: &[u8]| -> u64 {
            b.iter().enumerate().fold(0u64, |v, (k, &x)| {
                if le {
                    v | u64::from(x) << (8 * k)
                } else {
                    (v << 8) | u64::from(x)
                }
            })
        };
        let mut out = Vec::new();
        for s in sections {
            let rela = match s.sh_type {
                SHT_RELA => true,
                SHT_REL => false,
                _ => continue,
            };
            let target = sections.get(s.info as usize);
            if s.link as usize != symtab.index
                || s.info == 0
                || !target
                    .is_some_and(|t| t.sh_type == SHT_PROGBITS && t.is_alloc() && t.is_executable())
            {
                continue;
            }
            let entry = word * if rela { 3 } else { 2 };
            for e in s.raw.chunks_exact(entry) {
                let offset = read(&e[..word]);
                let info = read(&e[word..2 * word]);
                let (symbol, r_type) = if self.is_64() {
                    (info >> 32, info & 0xffff_ffff)
                } else {
                    (info >> 8, info & 0xff)
                };
                let addend = if rela {
                    let a = read(&e[2 * word..]);
                    if self.is_64() {
                        a as i64
                    } else {
                        i64::from(a as u32 as i32)
                    }
                } else {
                    0
                };
                out.push(Relocation {
                    offset,
                    r_type: r_type as u32,
                    symbol: symbol as usize,
                    addend,
                    kind: kind(self.machine(), r_type as u32),
                });
            }
        }
        out
    }

    /// `(start, length)` of every FDE with a non-zero length in `.eh_frame`, in section order;
    /// parsing stops at the first malformed entry.
    pub fn fde_ranges(&self) -> Vec<(u64, u64)> {
        use gimli::UnwindSection;
        let Some(section) = self.section_by_name(".eh_frame") else {
            return Vec::new();
        };
        let Ok(bytes) = section.data() else {
            return Vec::new();
        };
        let endian = if self.is_little_endian() {
            gimli::RunTimeEndian::Little
        } else {
            gimli::RunTimeEndian::Big
        };
        let mut eh_frame = gimli::EhFrame::new(&bytes, endian);
        eh_frame.set_address_size(if self.is_64() { 8 } else { 4 });
        let mut bases = gimli::BaseAddresses::default().set_eh_frame(section.address);
        if let Some(text) = self.section_by_name(".text") {
            bases = bases.set_text(text.address);
        }
        let mut out = Vec::new();
        let mut entries = eh_frame.entries(&bases);
        while let Ok(Some(entry)) = entries.next() {
            if let gimli::CieOrFde::Fde(partial) = entry
                && let Ok(fde) = partial.parse(gimli::EhFrame::cie_from_offset)
                && fde.len() > 0
            {
                out.push((fde.initial_address(), fde.len()));
            }
        }
        out
    }
}
