//! Relocations — the one reader of `SHT_REL`, `SHT_RELA` and `SHT_CREL` sections, used both for
//! relocatable objects (`pcmap_bbmap`'s map sections) and for the link-time relocations a linked
//! binary keeps with `--emit-relocs` (BOLT's function discovery and operand symbolization) — and
//! the FDE ranges of `.eh_frame`.

use object::read::elf::{Crel, FileHeader, Rel, SectionHeader};
use object::{Endianness, SectionIndex, elf};

use crate::Binary;
use crate::elf::Machine;
use crate::error::Result;
use crate::symtab::{problem, tables};

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

/// One relocation that applies to a section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Relocation {
    /// `r_offset`: offset of the relocated field in the target section (relocatable objects), or
    /// its address (linked binaries).
    pub offset: u64,
    /// `r_sym`: index of the symbol in `.symtab` (0: no symbol).
    pub symbol: u32,
    /// `r_type`.
    pub r_type: u32,
    /// `r_addend` for RELA and RELA-style CREL; `None` for REL (the addend is in the field).
    pub addend: Option<i64>,
    /// Section of the symbol (`None` for undefined or special symbols, or a bad index).
    pub symbol_section: Option<usize>,
    /// What the relocation computes.
    pub kind: RelocationKind,
}

const SHT_PROGBITS: u32 = 1;

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
    /// The relocations of every `SHT_REL`, `SHT_RELA` and `SHT_CREL` section whose `sh_info` is
    /// `target` (a section index), in section order; `None` when no relocation section applies
    /// to `target`.
    pub fn relocations_for(&self, target: usize) -> Result<Option<Vec<Relocation>>> {
        let mut out = Vec::new();
        let found = self.visit_relocations_for(target, |r| out.push(r))?;
        Ok(found.then_some(out))
    }

    /// [`Self::relocations_for`] handed to `visit` one by one, with nothing collected (a
    /// binary linked with `--emit-relocs` can hold millions); `false` when no relocation
    /// section applies to `target`. The relocation sections' bytes are [`Self::release`]d as
    /// they are read, about a megabyte at a time: a large binary's `.rela.rodata` (tens of
    /// megabytes) need not stay resident.
    pub fn visit_relocations_for(
        &self,
        target: usize,
        visit: impl FnMut(Relocation),
    ) -> Result<bool> {
        let release = |bytes: &[u8]| self.release(bytes);
        if self.is_64() {
            relocations::<elf::FileHeader64<Endianness>>(
                self.data(),
                self.machine(),
                target,
                visit,
                release,
            )
        } else {
            relocations::<elf::FileHeader32<Endianness>>(
                self.data(),
                self.machine(),
                target,
                visit,
                release,
            )
        }
    }

    /// Relocations against code sections (`SHT_PROGBITS` with `SHF_ALLOC | SHF_EXECINSTR`), in
    /// section order: what a linked binary kept with `--emit-relocs`. Empty when it kept none, or
    /// its symbols come from `.dynsym`; a malformed relocation section is skipped.
    pub fn code_relocations(&self) -> Vec<Relocation> {
        if self.symbols_from_dynsym() {
            return Vec::new();
        }
        let mut out = Vec::new();
        for s in self.sections() {
            if s.sh_type == SHT_PROGBITS
                && s.is_alloc()
                && s.is_executable()
                && let Ok(Some(relocs)) = self.relocations_for(s.index)
            {
                out.extend(relocs);
            }
        }
        out
    }

    /// `(start, length)` of every FDE with a non-zero length in `.eh_frame`, in section order;
    /// parsing stops at the first malformed entry.
    pub fn fde_ranges(&self) -> Vec<(u64, u64)> {
        self.fdes().into_iter().map(|(s, l, _)| (s, l)).collect()
    }

    /// The byte order of the unwind sections, as gimli names it.
    fn gimli_endian(&self) -> gimli::RunTimeEndian {
        if self.is_little_endian() {
            gimli::RunTimeEndian::Little
        } else {
            gimli::RunTimeEndian::Big
        }
    }

    /// The number of FDEs `.eh_frame_hdr` says its search table holds (0 when there is no
    /// such section or it cannot be read): only a hint, as nothing ties it to `.eh_frame`.
    fn fde_count_hint(&self) -> usize {
        let Some(section) = self.section_by_name(".eh_frame_hdr") else {
            return 0;
        };
        let Ok(bytes) = section.data() else {
            return 0;
        };
        let bases = gimli::BaseAddresses::default().set_eh_frame_hdr(section.address);
        gimli::EhFrameHdr::new(&bytes, self.gimli_endian())
            .parse(&bases, self.address_size())
            .ok()
            .and_then(|hdr| hdr.table().map(|t| t.iter(&bases).size_hint().0))
            .unwrap_or(0)
    }

    /// `(start, length, LSDA address)` of every FDE with a non-zero length in `.eh_frame`, in
    /// section order; parsing stops at the first malformed entry. The one `.eh_frame` walk.
    pub(crate) fn fdes(&self) -> Vec<(u64, u64, Option<u64>)> {
        use gimli::UnwindSection;
        let Some(section) = self.section_by_name(".eh_frame") else {
            return Vec::new();
        };
        let Ok(bytes) = section.data() else {
            return Vec::new();
        };
        let mut eh_frame = gimli::EhFrame::new(&bytes, self.gimli_endian());
        eh_frame.set_address_size(self.address_size());
        let mut bases = gimli::BaseAddresses::default().set_eh_frame(section.address);
        if let Some(text) = self.section_by_name(".text") {
            bases = bases.set_text(text.address);
        }
        // Sized from the FDE count of `.eh_frame_hdr` when there is one (grown by doubling, a
        // large binary's list was copied several times). Capped at one entry per 16 bytes of the
        // section, so that a header giving a wrong count cannot reserve more than the input
        // holds; past the cap the list grows as any other.
        let mut out = Vec::with_capacity(self.fde_count_hint().min(bytes.len() / 16));
        // A binary has a handful of CIEs shared by its (hundreds of thousands of) FDEs: each is
        // parsed once, not once per FDE. The first few are kept (a file with many more costs
        // no more than before, and no quadratic search).
        let mut cies: Vec<(gimli::EhFrameOffset, gimli::CommonInformationEntry<_>)> = Vec::new();
        let mut cie_at = |section: &gimli::EhFrame<_>, bases: &_, offset| {
            if let Some((_, cie)) = cies.iter().find(|(o, _)| *o == offset) {
                return Ok(cie.clone());
            }
            let cie = section.cie_from_offset(bases, offset)?;
            if cies.len() < 8 {
                cies.push((offset, cie.clone()));
            }
            Ok(cie)
        };
        let mut entries = eh_frame.entries(&bases);
        while let Ok(Some(entry)) = entries.next() {
            if let gimli::CieOrFde::Fde(partial) = entry
                && let Ok(fde) = partial.parse(&mut cie_at)
                && fde.len() > 0
            {
                let lsda = fde.lsda().and_then(|p| match p {
                    gimli::Pointer::Direct(a) => Some(a),
                    gimli::Pointer::Indirect(a) if self.is_64() => self.read_u64(a),
                    gimli::Pointer::Indirect(a) => self.read_u32(a).map(u64::from),
                });
                out.push((fde.initial_address(), fde.len(), lsda));
            }
        }
        out
    }
}

/// Whether a section of type `sh_type` with `sh_info` `info` holds relocations for section
/// `target`.
fn relocates(sh_type: u32, info: u32, target: usize) -> bool {
    [elf::SHT_RELA, elf::SHT_REL, elf::SHT_CREL].contains(&elf::SectionType(sh_type))
        && info as usize == target
}

/// How many bytes of a `REL`/`RELA` section [`relocations`] reads before it releases them.
const RELEASE_WINDOW: usize = 1 << 20;

fn relocations<Elf: FileHeader<Endian = Endianness>>(
    data: &[u8],
    machine: Machine,
    target: usize,
    mut visit: impl FnMut(Relocation),
    release: impl Fn(&[u8]),
) -> Result<bool> {
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
    for (index, sh) in sections.enumerate() {
        if !relocates(sh.sh_type(endian).0, sh.sh_info(endian), target) {
            continue;
        }
        found = true;
        let offset: u64 = sh.sh_offset(endian).into();
        let err = problem(
            format!("relocation section {} for section {target}", index.0),
            offset,
        );
        if let Some((rels, _)) = sh.rel(endian, data).map_err(&err)? {
            for window in rels.chunks(RELEASE_WINDOW / std::mem::size_of::<Elf::Rel>()) {
                for r in window {
                    visit(Relocation {
                        offset: r.r_offset(endian).into(),
                        symbol: r.r_sym(endian),
                        r_type: r.r_type(endian).0,
                        addend: None,
                        symbol_section: symbol_section(r.r_sym(endian)),
                        kind: kind(machine, r.r_type(endian).0),
                    });
                }
                release(object::pod::bytes_of_slice(window));
            }
        } else if let Some((relas, _)) = sh.rela(endian, data).map_err(&err)? {
            for window in relas.chunks(RELEASE_WINDOW / std::mem::size_of::<Elf::Rela>()) {
                for r in window {
                    let c = Crel::from_rela(r, endian, is_mips64el);
                    visit(Relocation {
                        offset: c.r_offset,
                        symbol: c.r_sym,
                        r_type: c.r_type.0,
                        addend: Some(c.r_addend),
                        symbol_section: symbol_section(c.r_sym),
                        kind: kind(machine, c.r_type.0),
                    });
                }
                release(object::pod::bytes_of_slice(window));
            }
        } else if let Some((crels, _)) = sh.crel(endian, data).map_err(&err)? {
            let is_rela = crels.is_rela();
            for c in crels {
                let c = c.map_err(&err)?;
                visit(Relocation {
                    offset: c.r_offset,
                    symbol: c.r_sym,
                    r_type: c.r_type.0,
                    addend: is_rela.then_some(c.r_addend),
                    symbol_section: symbol_section(c.r_sym),
                    kind: kind(machine, c.r_type.0),
                });
            }
        }
    }
    Ok(found)
}
