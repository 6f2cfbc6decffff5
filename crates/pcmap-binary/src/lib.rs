//! The binary model under every pcmap capability: an ELF file read from a memory map, without
//! copying, with what address-mapping tools need.
//!
//! ```no_run
//! use pcmap_binary::{Binary, MappedFile};
//! # fn main() -> Result<(), pcmap_binary::Error> {
//! let file = MappedFile::open("a.out")?;
//! let bin = Binary::parse(file.bytes())?;
//! if let Some(f) = bin.function_at(0x401136) {
//!     println!("{} at {:#x}", bin.function_name(f), f.address);
//!     for insn in bin.instructions(f)? {
//!         println!("{:#x} {:?} {:?}", insn.address(), insn.kind(), insn.target());
//!     }
//! }
//! # Ok(()) }
//! ```
//!
//! * [`Binary`]: ELF32/ELF64, both endiannesses; `ET_EXEC`, `ET_DYN` (PIE or shared object),
//!   `ET_REL`. Sections ([`Section`], `SHF_COMPRESSED` zlib/zstd contents decompressed on
//!   demand), notes and the GNU build-id, program headers with virtual address <-> file offset
//!   mapping and the load bias of a process mapping.
//! * [`FunctionTable`]: `STT_FUNC`/`STT_GNU_IFUNC` symbols (global and local, aliases grouped
//!   per address) sorted by address, `function_at` in O(log n), and the names BOLT gives local
//!   functions (`name/N`, `name/file/N`; see [`FunctionSymbol::bolt_name`]).
//! * [`bolt`]: the functions BOLT (and perf2bolt) discovers from the parsed binary
//!   ([`bolt::BoltFunctions`]): FDE-only functions, PLT pseudo functions, sizes and "max sizes"
//!   up to the next function, `<section>/N`, untyped code labels, and the interprocedural
//!   reference rule for secondary entry points. [`Binary::symbols`] (every symbol; BOLT's
//!   names for them from [`Binary::bolt_name`], made on first use),
//!   [`Binary::code_relocations`] and [`Binary::fde_ranges`] feed it.
//! * [`x86`]: x86-64 / i386 decoding with `iced-x86` into [`Instruction`]s with a
//!   [`BranchKind`] and direct targets. Other machines are recognised and reported as not yet
//!   disassembled ([`Error::UnsupportedMachine`]).
//!
//! Every malformed input gives an [`Error`] naming the structure and file offset; nothing panics.
#![deny(missing_docs)]

pub mod bolt;
mod elf;
mod error;
mod header;
mod lsda;
mod mapped;
mod names;
mod reloc;
mod section;
mod symbols;
mod symtab;
pub mod x86;

pub use elf::{Binary, FileKind, Machine, NT_GNU_BUILD_ID, Note, PT_LOAD, ReleaseFn, Segment};
pub use error::{Error, Result};
pub use header::SectionHeaderTable;
pub use lsda::{CallSite, Lsda};
pub use mapped::MappedFile;
pub use names::{section_flag_letters, section_type_name};
pub use reloc::{Relocation, RelocationKind};
pub use section::{
    CompressionFormat, SHF_ALLOC, SHF_COMPRESSED, SHF_EXECINSTR, SHT_LLVM_BB_ADDR_MAP, SHT_NOBITS,
    SHT_NOTE, Section,
};
pub use symbols::{Function, FunctionSymbol, FunctionTable, Symbol, SymbolKind};
pub use symtab::{STT_FUNC, SymbolEntry};
pub use x86::{BranchKind, Instruction, InstructionIter, StandalonePrefix};

/// Exercise every parser of this crate on untrusted bytes (the fuzz target's body): parse,
/// decompress every section, walk notes and functions, decode every function, and read every
/// LSDA. Errors are
/// expected and ignored; a panic is a bug.
#[doc(hidden)]
pub fn fuzz_walk(data: &[u8]) {
    let Ok(bin) = Binary::parse(data) else { return };
    for s in bin.sections() {
        let _ = bin.section_data(s);
    }
    let _ = bin.build_id_hex();
    for f in bin.functions() {
        let _ = bin.function_at(f.address);
        let _ = bin.function_table().names_of(f);
        if let Ok(iter) = bin.instructions(f) {
            for insn in iter.take(10_000) {
                let _ = (insn.kind(), insn.target());
            }
        }
    }
    let _ = bin.vaddr_to_offset(bin.entry());
    let _ = bin.code_relocations();
    // C++ exception tables: every LSDA an FDE names (each read is bounded by its section).
    for (function, lsda) in bin.fde_lsdas().into_iter().take(10_000) {
        let _ = bin.lsda(lsda, function);
    }
    if let Ok(functions) = bolt::BoltFunctions::discover(&bin) {
        let refs = (0..functions.functions().len().min(64))
            .flat_map(|i| functions.outgoing_references(i))
            .collect::<Vec<_>>();
        let _ = functions.entry_points(refs);
    }
}
