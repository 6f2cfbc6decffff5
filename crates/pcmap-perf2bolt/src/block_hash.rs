//! BOLT's block hash (`BlendedBlockHash`, YAML block `hash` with `hash-func: xxh3`), as
//! `BinaryFunction::computeBlockHashes` computes it in LLVM 22. The packed u64 (little-endian
//! fields) is:
//!
//! | bits  | field        | value                                                              |
//! |-------|--------------|--------------------------------------------------------------------|
//! | 0–15  | `Offset`     | the block's input offset                                           |
//! | 16–31 | `OpcodeHash` | low 16 bits of xxh3 of the block's sorted unique AT&T mnemonics    |
//! | 32–47 | `InstrHash`  | low 16 bits of xxh3 of opcode names and operand bytes              |
//! | 48–55 | `PredHash`   | low 8 bits of LLVM's `hash_16_bytes` folded over the predecessors' full 64-bit opcode hashes |
//! | 56–63 | `SuccHash`   | the same over the successors                                       |
//!
//! * The InstrHash string (`hashBlock`) concatenates, for every instruction except direct
//!   unconditional jumps (nops included: they stay in BOLT's blocks), its LLVM opcode name
//!   (conditional jumps as `JCC_1`, indirect tail calls as `JMP32r`/`JMP32m`, see
//!   [`crate::cfg::IndirectJump`]) and its MCInst operands: registers as LLVM register enum numbers,
//!   immediates, both as minimal little-endian bytes (`hashInteger`, 0 as one NUL byte), and
//!   symbolic operands (`hashExpr`): nothing for functions and jump tables, else the symbol's
//!   address, then for `symbol + addend` a NUL (the `Add` opcode) and the addend.
//! * The OpcodeHash string (`hashBlockLoose`) concatenates the sorted unique mnemonics
//!   (`MCInstPrinter::getMnemonic`: the asm string up to its first operand, e.g. `jmpq*`,
//!   `shll%cl,`, `cmov`, `cmpsd`) of the same instructions without nops, with whitespace
//!   removed and any conditional jump as `JMP`.
//! * Successors are the CFG's in BOLT's order (a conditional branch to the next block counts
//!   twice); predecessors are the taken-branch sources in address order, then the fall-through
//!   source.
//!
//! Operand symbolization follows BOLT's disassembler: branch and call targets are always
//! symbols (functions and labels inside the function: empty); RIP-relative displacements are
//! symbols of the referenced address; other displacements and immediates only when the binary
//! has a relocation at their bytes (`--emit-relocs`). A relocation against a real symbol keeps
//! that symbol (`symbol + addend`) unless its target lies before the symbol; otherwise a
//! referenced address is resolved like
//! `BinaryContext::handleAddressRef`: jump tables and functions hash as nothing (a function
//! interior as `Add` + offset), data as the address of the containing symbol plus the offset.
//!
//! Mnemonics, MCInst operand templates and register numbers come from tables generated with
//! llvm-mc (`tools/gen-block-hash-tables.py`); instructions missing from them hash with their
//! opcode name only and are counted in [`Stats::unknown`].

use std::borrow::Cow;
use std::sync::Arc;

use iced_x86::{Code, ConstantOffsets, Instruction, OpKind, Register};
use pcmap_binary::bolt::{BoltFunction as Function, BoltFunctions};
use pcmap_binary::{RelocationKind, Symbol, SymbolKind};
use rustc_hash::{FxHashMap, FxHashSet};

use crate::block_hash_table::{INSNS, REGISTERS};
use crate::cfg::{Cfg, Flow, IndirectJump};

/// How an immediate of iced-x86 becomes LLVM's int64 immediate: as is, or truncated to a width
/// and sign- or zero-extended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ext {
    /// iced-x86's `immediate()` value.
    Raw,
    /// Low 8 bits, sign-extended.
    S8,
    /// Low 16 bits, sign-extended.
    S16,
    /// Low 32 bits, sign-extended.
    S32,
    /// Low 8 bits, zero-extended.
    Z8,
    /// Low 16 bits, zero-extended.
    Z16,
    /// Low 32 bits, zero-extended.
    Z32,
}

/// One MCInst operand in terms of iced-x86's decoded instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Register operand `i`.
    Reg(u8),
    /// Immediate operand `i`.
    Imm(u8, Ext),
    /// Memory base register.
    MemBase,
    /// Memory index scale.
    MemScale,
    /// Memory index register.
    MemIndex,
    /// Memory displacement.
    MemDisp,
    /// Segment override register.
    MemSeg,
    /// AVX-512 opmask register.
    MaskReg,
    /// Branch target of operand `i`.
    Branch(u8),
    /// A constant (condition codes, implicit registers).
    Const(i64),
    /// Not understood by the generator.
    Unknown,
}

/// Counters of one hashing run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Instructions hashed.
    pub insns: usize,
    /// Instructions without a table entry or with an operand the tables do not describe (their
    /// hashes use a deterministic fallback and are likely wrong).
    pub unknown: usize,
    /// The first such instruction's form, for diagnostics.
    pub first_unknown: Option<(iced_x86::Code, bool)>,
}

/// One function's hashes from its CFG, computed once ([`Hashes::compute`]): an aggregator that
/// hashes ([`crate::aggregate::Aggregator::with_hashing`]) keeps them in the CFG, and the
/// functions of this module answer from them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hashes {
    /// BOLT's function hash over the blocks in input order ([`function_hash`]).
    pub function: u64,
    /// The function hash over BOLT's depth-first block order (`--profile-use-dfs`), when asked
    /// for ([`function_hash_in_order`] with [`Cfg::dfs_order`]).
    pub function_dfs: Option<u64>,
    /// The packed block hashes ([`block_hashes`]).
    pub blocks: Vec<u64>,
    /// Counters of the pass that computed them.
    pub stats: Stats,
    /// Computed with [`Context::llvm_bolt_view`].
    llvm_bolt_view: bool,
}

impl Hashes {
    /// The hashes of `func`, whose CFG is `cfg`, decoding the function again; `dfs`: also the
    /// function hash in depth-first order.
    pub fn compute(ctx: &Context<'_, '_>, func: &Function, cfg: &Cfg, dfs: bool) -> Self {
        Self::compute_from(ctx, func, cfg, None, dfs)
    }

    /// [`Self::compute`] from `decoded`, the instructions `cfg` was built from and their
    /// operand offsets (as [`crate::cfg::decode_with`] hands them), when given.
    pub fn compute_from(
        ctx: &Context<'_, '_>,
        func: &Function,
        cfg: &Cfg,
        decoded: Option<Instructions<'_>>,
        dfs: bool,
    ) -> Self {
        hash_pass(ctx, func, cfg, decoded, |names, block, stats| Hashes {
            function: names.hash(None),
            function_dfs: dfs.then(|| names.hash(Some(&cfg.dfs_order()))),
            blocks: packed_block_hashes(func, cfg, block),
            stats,
            llvm_bolt_view: ctx.llvm_bolt_view,
        })
    }

    /// The function hash in depth-first order when `dfs`, else in input order (`None` when
    /// the depth-first one was not computed).
    pub fn function_in(&self, dfs: bool) -> Option<u64> {
        if dfs {
            self.function_dfs
        } else {
            Some(self.function)
        }
    }
}

/// The hashes `cfg` keeps when they were computed in `ctx`'s view.
fn kept<'c>(ctx: &Context<'_, '_>, cfg: &'c Cfg) -> Option<&'c Hashes> {
    cfg.hashes
        .as_deref()
        .filter(|h| h.llvm_bolt_view == ctx.llvm_bolt_view)
}

/// The hashes of `func` (`dfs`: with the depth-first function hash): those its CFG keeps, else
/// computed now.
pub fn cfg_hashes<'c>(
    ctx: &Context<'_, '_>,
    func: &Function,
    cfg: &'c Cfg,
    dfs: bool,
) -> Cow<'c, Hashes> {
    match kept(ctx, cfg).filter(|h| h.function_in(dfs).is_some()) {
        Some(h) => Cow::Borrowed(h),
        None => Cow::Owned(Hashes::compute(ctx, func, cfg, dfs)),
    }
}

/// What block hashing needs to know about the whole binary (symbols, relocations); build once
/// per binary and share between functions.
#[derive(Clone)]
pub struct Context<'i, 'd> {
    image: &'i BoltFunctions<'i, 'd>,
    tables: Arc<Tables>,
    /// Hash as llvm-bolt does when it reads a profile ([`Context::llvm_bolt_view`]).
    llvm_bolt_view: bool,
}

/// The binary-wide part of a [`Context`], which borrows nothing (an aggregator keeps it).
pub(crate) struct Tables {
    /// Data symbols: (address, size), sorted by address (largest size kept per address).
    data: Vec<(u64, u64)>,
    /// The starts of `data` (a symbol starting at an address is the one found for it).
    data_starts: FxHashSet<u64>,
    /// The functions' start addresses ([`BoltFunctions::function_at`] without a search).
    function_starts: FxHashSet<u64>,
    /// Relocations in code by the address of the relocated bytes, sorted (one per address,
    /// the last in the tables): a function looks up its own run ([`Tables::relocs_in`]).
    relocs: Vec<(u64, Reloc)>,
    /// Each function's run of `relocs` by its address range.
    reloc_runs: FxHashMap<(u64, u64), (u32, u32)>,
}

/// A relocation against code bytes (binaries linked with `--emit-relocs`).
#[derive(Debug, Clone, Copy)]
struct Reloc {
    /// The symbol's address when it is a real symbol (not a section symbol).
    symbol: Option<u64>,
    /// `S + A` for absolute relocations.
    absolute: Option<u64>,
}

impl<'i, 'd> Context<'i, 'd> {
    /// Read the symbol table and relocations of `image`.
    pub fn new(image: &'i BoltFunctions<'i, 'd>) -> Self {
        Self::with_tables(image, Arc::new(Tables::new(image)))
    }

    /// The context of `image` from its [`Tables`] (made by [`Context::tables`] or
    /// [`Tables::new`]).
    pub(crate) fn with_tables(image: &'i BoltFunctions<'i, 'd>, tables: Arc<Tables>) -> Self {
        Self {
            image,
            tables,
            llvm_bolt_view: false,
        }
    }
}

impl Tables {
    /// Read the symbol table and relocations of `image`.
    pub(crate) fn new(image: &BoltFunctions<'_, '_>) -> Self {
        let mut data = Vec::new();
        let mut relocs = Vec::new();
        let binary = image.binary();
        // Symbols of `.symtab` only (a stripped binary's `.dynsym` gives BOLT no data symbols).
        let symbols: &[Symbol<'_>] = if binary.symbols_from_dynsym() {
            &[]
        } else {
            binary.symbols()
        };
        for s in symbols {
            if matches!(s.kind, SymbolKind::Section | SymbolKind::File)
                || s.section_index.is_none()
                || s.address == 0
            {
                continue;
            }
            data.push((s.address, s.size));
        }
        for r in binary.code_relocations() {
            let Some(sym) = symbols.get(r.symbol as usize).filter(|_| r.symbol != 0) else {
                continue;
            };
            let absolute = (r.kind == RelocationKind::Absolute)
                .then(|| sym.address.wrapping_add(r.addend.unwrap_or(0) as u64));
            // GOT-relative relocations refer to the GOT slot, not to the symbol.
            let symbol = (sym.kind != SymbolKind::Section
                && sym.section_index.is_some()
                && matches!(r.kind, RelocationKind::Absolute | RelocationKind::Relative))
            .then_some(sym.address);
            relocs.push((r.offset, Reloc { symbol, absolute }));
        }
        // Functions BOLT made without a symbol (from FDEs: `__BOLT_FDE_FUNCat...`) have their
        // BinaryData too.
        data.sort_unstable();
        let named = data.len();
        for f in image.functions() {
            if data[..named]
                .binary_search_by_key(&f.address, |d| d.0)
                .is_err()
            {
                data.push((f.address, f.size));
            }
        }
        data.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        data.dedup_by_key(|d| d.0);
        // Stable: of several relocations at one address the last one counts.
        relocs.sort_by_key(|r| r.0);
        relocs.dedup_by(|later, kept| {
            if later.0 != kept.0 {
                return false;
            }
            *kept = *later;
            true
        });
        // Each function's run of relocations, functions in address order (a cursor).
        let mut ranges: Vec<(u64, u64)> = image
            .functions()
            .iter()
            .map(|f| (f.address, f.address.saturating_add(f.size)))
            .collect();
        ranges.sort_unstable();
        let mut reloc_runs = FxHashMap::default();
        let mut lo = 0;
        for (start, end) in ranges {
            lo += relocs[lo..].iter().take_while(|r| r.0 < start).count();
            let len = relocs[lo..].iter().take_while(|r| r.0 < end).count();
            if len > 0 {
                reloc_runs.insert((start, end), (lo as u32, (lo + len) as u32));
            }
        }
        Self {
            data_starts: data.iter().map(|d| d.0).collect(),
            function_starts: image.functions().iter().map(|f| f.address).collect(),
            data,
            relocs,
            reloc_runs,
        }
    }

    /// The relocations of bytes in `func`.
    fn relocs_in(&self, func: &Function) -> &[(u64, Reloc)] {
        let end = func.address.saturating_add(func.size);
        self.reloc_runs
            .get(&(func.address, end))
            .map_or(&[], |&(lo, hi)| &self.relocs[lo as usize..hi as usize])
    }
}

impl<'i, 'd> Context<'i, 'd> {
    /// Hash as llvm-bolt 22 does when it reads a profile, rather than as perf2bolt writes one.
    /// The two differ on relocation-mode binaries: perf2bolt disassembles in strict mode, where an
    /// indirect jump of a function without internal references is a tail call (`JMP32r`/`JMP32m`,
    /// mnemonic `jmpl*`), while llvm-bolt runs outside strict mode and keeps such a jump as
    /// `JMP64r`/`JMP64m` (`jmpq*`) unless its block shows a tail call
    /// ([`Cfg::tail_call_outside_strict_mode`]). So llvm-bolt finds perf2bolt's own profile of,
    /// for one, crtstuff's `deregister_tm_clones` stale on the very binary it was written for.
    pub fn llvm_bolt_view(mut self) -> Self {
        self.llvm_bolt_view = true;
        self
    }

    /// Whether a function starts at `addr`.
    fn is_function_start(&self, addr: u64) -> bool {
        self.tables.function_starts.contains(&addr)
    }

    /// The data symbol BOLT would find for `addr` (`getBinaryDataContainingAddress`: only the
    /// last symbol at or below the address is looked at).
    fn data_containing(&self, addr: u64) -> Option<u64> {
        if self.tables.data_starts.contains(&addr) {
            return Some(addr);
        }
        let data = &self.tables.data;
        let i = data.partition_point(|d| d.0 <= addr).checked_sub(1)?;
        let (a, size) = data[i];
        (a == addr || addr < a.saturating_add(size)).then_some(a)
    }

    /// `hashExpr` of the symbolic operand BOLT makes for a reference to `addr` from `func`.
    fn hash_address(&self, func: &Function, jump_tables: &[u64], addr: u64, out: &mut Vec<u8>) {
        if jump_tables.contains(&addr) {
            return;
        }
        if addr >= func.address && addr - func.address < func.size {
            return; // the function itself or an entry point into it
        }
        // Other code and data alike: the symbol whose [address, address + size) holds the
        // address (BOLT's BinaryData; a function's symbol hashes as nothing), else the address.
        match self.data_containing(addr) {
            Some(a) => {
                if !self.is_function_start(a) {
                    hash_integer(a, out);
                }
                if a != addr {
                    out.push(0);
                    hash_integer(addr - a, out);
                }
            }
            None => hash_integer(addr, out),
        }
    }

    /// `hashExpr` of a reference to `addr` through a relocation against a real symbol at `sym`:
    /// BOLT keeps the relocation's symbol and makes `sym + (addr - sym)`.
    fn hash_symbol_ref(
        &self,
        func: &Function,
        jump_tables: &[u64],
        sym: u64,
        addr: u64,
        out: &mut Vec<u8>,
    ) {
        if jump_tables.contains(&addr) || jump_tables.contains(&sym) {
            return;
        }
        let in_func = sym >= func.address && sym - func.address < func.size;
        if !in_func && !self.is_function_start(sym) {
            hash_integer(sym, out);
        }
        if addr != sym {
            out.push(0);
            hash_integer(addr.wrapping_sub(sym), out);
        }
    }

    /// `hashExpr` of an operand referring to `addr`, with the relocation at its bytes if any.
    fn hash_reference(
        &self,
        func: &Function,
        jump_tables: &[u64],
        addr: u64,
        reloc: Option<Reloc>,
        out: &mut Vec<u8>,
    ) {
        // A relocation whose target lies before its symbol (`L4 - 24`, the base of a jump
        // table indexed from 3) does not keep the symbol: BOLT resolves the target address.
        match reloc.and_then(|r| r.symbol).filter(|&sym| addr >= sym) {
            Some(sym) => self.hash_symbol_ref(func, jump_tables, sym, addr, out),
            None => self.hash_address(func, jump_tables, addr, out),
        }
    }

    /// `hashExpr` of a branch or call target.
    fn hash_branch(&self, func: &Function, target: u64, out: &mut Vec<u8>) {
        if target >= func.address && target - func.address < func.size {
            return;
        }
        if self.is_function_start(target) {
            return;
        }
        hash_integer(target, out);
    }
}

/// `hashInteger`: minimal little-endian bytes, zero as one NUL byte.
fn hash_integer(v: u64, out: &mut Vec<u8>) {
    if v == 0 {
        out.push(0);
    }
    let mut v = v;
    while v != 0 {
        out.push(v as u8);
        v >>= 8;
    }
}

/// LLVM's `hashing::detail::hash_16_bytes`.
fn hash_16_bytes(low: u64, high: u64) -> u64 {
    const K: u64 = 0x9ddf_ea08_eb38_2d69;
    let mut a = (low ^ high).wrapping_mul(K);
    a ^= a >> 47;
    let mut b = (high ^ a).wrapping_mul(K);
    b ^= b >> 47;
    b.wrapping_mul(K)
}

type Entry = (u16, u8, &'static str, &'static str, &'static [Op]);

/// The table entry of an iced-x86 code in an operand form ([`form`]), with how many
/// space-separated parts its names and mnemonics have (an instruction LLVM decodes with its
/// prefixes as instructions of their own has several; nearly all have one).
fn lookup_parts(code: u16, form: u8) -> Option<(&'static Entry, (u8, u8), u32)> {
    let index = table_index();
    let c = usize::from(code);
    let (lo, hi) = match (index.first.get(c), index.first.get(c + 1)) {
        (Some(&lo), Some(&hi)) => (usize::from(lo), usize::from(hi)),
        _ => return None,
    };
    // The forms alone, not the 56-byte entries: the scan stays in one cache line.
    let i = lo + index.forms[lo..hi].iter().position(|&f| f == form)?;
    let (parts, first_mnemonic) = index.meta[i];
    Some((&INSNS[i], parts, first_mnemonic))
}

/// Lookup tables over `INSNS`, made once.
struct TableIndex {
    /// Where each code's entries start in `INSNS` (sorted by code, then form): a code has one
    /// to a few forms, so a lookup scans a few entries instead of searching 1,700.
    first: Vec<u16>,
    /// Each entry's form (as in `INSNS`), what a lookup scans.
    forms: Vec<u8>,
    /// The parts of each entry's names and mnemonics, and the rank of its first mnemonic.
    meta: Vec<((u8, u8), u32)>,
    /// Every mnemonic (each part of the entries' mnemonics, `JMP`, `jmpl*`), sorted and
    /// unique: a block's mnemonics are sorted as their ranks here (numbers, not strings).
    mnemonics: Vec<&'static str>,
    /// The ranks of `JMP` and `jmpl*`.
    jmp: u32,
    jmpl: u32,
}

fn table_index() -> &'static TableIndex {
    static INDEX: std::sync::OnceLock<TableIndex> = std::sync::OnceLock::new();
    INDEX.get_or_init(|| {
        let max = INSNS.last().map_or(0, |e| usize::from(e.0));
        let parts = |s: &str| s.split(' ').count().min(255) as u8;
        let mut mnemonics: Vec<&'static str> = INSNS
            .iter()
            .flat_map(|e| e.3.split(' '))
            .chain(["JMP", "jmpl*"])
            .collect();
        mnemonics.sort_unstable();
        mnemonics.dedup();
        let rank = |m: &str| mnemonics.binary_search(&m).map_or(u32::MAX, |r| r as u32);
        let meta = INSNS
            .iter()
            .map(|e| {
                let first_mnemonic = rank(e.3.split(' ').next().unwrap_or(""));
                ((parts(e.2), parts(e.3)), first_mnemonic)
            })
            .collect();
        let (jmp, jmpl) = (rank("JMP"), rank("jmpl*"));
        TableIndex {
            first: (0..=max + 1)
                .map(|c| INSNS.partition_point(|e| usize::from(e.0) < c) as u16)
                .collect(),
            forms: INSNS.iter().map(|e| e.1).collect(),
            meta,
            mnemonics,
            jmp,
            jmpl,
        }
    })
}

impl TableIndex {
    /// The rank of a mnemonic of the tables.
    fn rank(&self, mnemonic: &str) -> u32 {
        self.mnemonics
            .binary_search(&mnemonic)
            .map_or(u32::MAX, |r| r as u32)
    }
}

/// The operand form of an instruction, which together with its iced-x86 code selects the LLVM
/// opcode: bit 0 a memory operand, bits 1-2 AVX-512 masking (1 merging, 2 zeroing), bit 3 an
/// embedded broadcast, bit 4 embedded rounding or suppress-all-exceptions.
pub fn form(has_mem: bool, ins: &Instruction) -> u8 {
    let mask = match (ins.op_mask(), ins.zeroing_masking()) {
        (Register::None, _) => 0,
        (_, false) => 1,
        (_, true) => 2,
    };
    u8::from(has_mem)
        | mask << 1
        | u8::from(ins.is_broadcast()) << 3
        | u8::from(
            ins.rounding_control() != iced_x86::RoundingControl::None
                || ins.suppress_all_exceptions(),
        ) << 4
}

fn llvm_reg(r: Register) -> Option<u64> {
    match REGISTERS.get(r as usize) {
        Some(&n) if n != u16::MAX => Some(u64::from(n)),
        _ => None,
    }
}

fn extend(v: u64, ext: Ext) -> u64 {
    match ext {
        Ext::Raw => v,
        Ext::S8 => v as i8 as i64 as u64,
        Ext::S16 => v as i16 as i64 as u64,
        Ext::S32 => v as i32 as i64 as u64,
        Ext::Z8 => v & 0xff,
        Ext::Z16 => v & 0xffff,
        Ext::Z32 => v & 0xffff_ffff,
    }
}

/// Bases of the jump tables the function's indirect jumps use (the displacement of
/// `jmp *T(,%r,8)` or of the `mov T(,%r,8), %rX` feeding `jmp *%rX`, or the `lea T(%rip)` of the
/// position-independent sequence).
fn jump_table_bases(insns: &[Instruction], cfg: &Cfg) -> Vec<u64> {
    let mut out = Vec::new();
    for (k, ins) in insns.iter().enumerate() {
        // The CFG's classification (iced-x86's flow control, made when decoding).
        if cfg
            .insns
            .get(k)
            .is_none_or(|i| i.flow() != Flow::IndirectJump)
        {
            continue;
        }
        // Absolute tables count only when the CFG resolved the jump through them (a table of
        // function pointers used by an indirect tail call is ordinary data); the
        // position-independent sequence is a jump table whatever the CFG made of it.
        let resolved = cfg.insns.get(k).is_some_and(|i| !i.tail_call());
        if ins.op0_kind() == OpKind::Memory
            && ins.memory_base() == Register::None
            && ins.memory_index_scale() == 8
        {
            if resolved {
                out.push(ins.memory_displacement64());
            }
        } else if ins.op0_kind() == OpKind::Register {
            // `lea T(%rip), %rB; ...; movslq (%rB,%rI,4), %rX; add %rB, %rX; jmp *%rX`, the
            // `lea` possibly hoisted far above.
            let target = ins.op0_register().full_register();
            // `mov T(,%rI,8), %rX; jmp *%rX` (non-PIC, unoptimized code).
            let table_load = insns[..k]
                .iter()
                .rev()
                .find(|i| {
                    i.op_count() == 2
                        && i.op0_kind() == OpKind::Register
                        && i.op0_register().full_register() == target
                })
                .filter(|l| {
                    l.code() == Code::Mov_r64_rm64
                        && l.op1_kind() == OpKind::Memory
                        && l.memory_base() == Register::None
                        && l.memory_index_scale() == 8
                });
            if let Some(load) = table_load {
                if resolved {
                    out.push(load.memory_displacement64());
                }
                continue;
            }
            let Some(load) = insns[..k].iter().rev().find(|i| {
                i.code() == Code::Movsxd_r64_rm32
                    && i.op0_register().full_register() == target
                    && i.op1_kind() == OpKind::Memory
                    && i.memory_index_scale() == 4
            }) else {
                continue;
            };
            let base = load.memory_base().full_register();
            out.extend(
                insns[..k]
                    .iter()
                    .rev()
                    .find(|i| {
                        i.code() == Code::Lea_r64_m
                            && i.is_ip_rel_memory_operand()
                            && i.op0_register().full_register() == base
                    })
                    .map(Instruction::ip_rel_memory_address),
            );
        }
    }
    out
}

/// What operands of one function refer to: the function, its jump tables, the relocations
/// of its bytes.
#[derive(Clone, Copy)]
struct Target<'a> {
    func: &'a Function<'a>,
    jump_tables: &'a [u64],
    relocs: &'a [(u64, Reloc)],
}

/// Decode `func` ([`crate::cfg::decode_with`]) for its CFG and block hashes at once, with the
/// operand offsets of the instructions that have a relocated byte (empty ones for the others):
/// the offsets serve only to find the relocations of an immediate or a displacement, and
/// finding them costs about as much as decoding the instruction.
pub(crate) fn decode_for_hashes<R>(
    ctx: &Context<'_, '_>,
    func: &Function,
    f: impl FnOnce(crate::cfg::Decoded, &[Instruction], &[ConstantOffsets]) -> R,
) -> R {
    let relocs = ctx.tables.relocs_in(func);
    let mut next = 0;
    let relocated = move |ins: &Instruction| {
        // Asked in address order: mostly no step, or one (a search would cost more).
        while relocs.get(next).is_some_and(|r| r.0 < ins.ip()) {
            next += 1;
        }
        relocs.get(next).is_some_and(|r| r.0 < ins.next_ip())
    };
    crate::cfg::decode_with(ctx.image, func, relocated, f)
}

/// Append the operand bytes of `ins` per `ops` to `out`; `false` when an operand is unknown.
/// `offs`: where its immediate and displacement lie, to find their relocations (empty when
/// none of its bytes is relocated, [`decode_for_hashes`]).
fn hash_operands(
    ctx: &Context<'_, '_>,
    target: &Target<'_>,
    ins: &Instruction,
    offs: &ConstantOffsets,
    ops: &[Op],
    out: &mut Vec<u8>,
) -> bool {
    let mut ok = true;
    let Target {
        func,
        jump_tables,
        relocs,
    } = *target;
    let reloc_at = |off: usize, present: bool| -> Option<Reloc> {
        let at = ins.ip() + present.then_some(off)? as u64;
        let i = relocs.binary_search_by_key(&at, |r| r.0).ok()?;
        Some(relocs[i].1)
    };
    for &op in ops {
        match op {
            Op::Reg(i) => match llvm_reg(ins.op_register(u32::from(i))) {
                Some(n) => hash_integer(n, out),
                None => {
                    ok = false;
                    out.push(0);
                }
            },
            Op::Imm(i, ext) => {
                let r = reloc_at(offs.immediate_offset(), offs.has_immediate());
                if let Some((r, t)) = r.and_then(|r| Some((r, r.absolute?))) {
                    ctx.hash_reference(func, jump_tables, t, Some(r), out);
                } else {
                    hash_integer(extend(ins.immediate(u32::from(i)), ext), out);
                }
            }
            Op::MemBase => hash_integer(llvm_reg(ins.memory_base()).unwrap_or(0), out),
            Op::MemIndex => hash_integer(llvm_reg(ins.memory_index()).unwrap_or(0), out),
            Op::MemSeg => hash_integer(llvm_reg(ins.segment_prefix()).unwrap_or(0), out),
            Op::MaskReg => hash_integer(llvm_reg(ins.op_mask()).unwrap_or(0), out),
            Op::MemScale => hash_integer(u64::from(ins.memory_index_scale()), out),
            Op::MemDisp => {
                let r = reloc_at(offs.displacement_offset(), offs.has_displacement());
                if ins.is_ip_rel_memory_operand() {
                    let t = ins.ip_rel_memory_address();
                    ctx.hash_reference(func, jump_tables, t, r, out);
                } else if let Some((r, t)) = r.and_then(|r| Some((r, r.absolute?))) {
                    ctx.hash_reference(func, jump_tables, t, Some(r), out);
                } else {
                    hash_integer(ins.memory_displacement64(), out);
                }
            }
            Op::Branch(_) => ctx.hash_branch(func, ins.near_branch_target(), out),
            Op::Const(c) => hash_integer(c as u64, out),
            Op::Unknown => ok = false,
        }
    }
    ok
}

/// Whether an LLVM opcode name is a nop (`X86::isNOP`): nops stay in BOLT's blocks (and in the
/// InstrHash) but are left out of the loose OpcodeHash.
fn is_nop(name: &str) -> bool {
    name.starts_with("NOOP") || name == "NOP"
}

/// The strings BOLT hashes for every block of `func`: the InstrHash input (`hashBlock` with
/// operands) and the OpcodeHash input (`hashBlockLoose`), for diagnostics and for
/// [`block_hashes`]. Empty when the CFG has no blocks.
pub fn hash_inputs(
    ctx: &Context<'_, '_>,
    func: &Function,
    cfg: &Cfg,
    stats: &mut Stats,
) -> Vec<(Vec<u8>, String)> {
    let mut out = Vec::with_capacity(cfg.blocks.len());
    block_strings(ctx, func, cfg, None, stats, true, None, |instr, loose| {
        out.push((instr.to_vec(), String::from_utf8_lossy(loose).into_owned()))
    });
    out
}

/// BOLT's function hash (`BinaryFunction::computeHash` with `hash-func: xxh3`): xxh3 of the
/// concatenated `hashBlock` strings without operands of all blocks in input order, i.e. the
/// opcode names the block hashes use (AVX-512 masking and which indirect jumps keep
/// `JMP64r`/`JMP64m` included). The YAML writer's function hash.
pub fn function_hash(ctx: &Context<'_, '_>, func: &Function, cfg: &Cfg) -> (u64, Stats) {
    function_hash_in_order(ctx, func, cfg, None)
}

/// [`function_hash`] over the blocks in `order` (block indices; `None`: input order), as BOLT
/// hashes with `--profile-use-dfs` ([`Cfg::dfs_order`]).
pub fn function_hash_in_order(
    ctx: &Context<'_, '_>,
    func: &Function,
    cfg: &Cfg,
    order: Option<&[u32]>,
) -> (u64, Stats) {
    if let (None, Some(h)) = (order, kept(ctx, cfg)) {
        return (h.function, h.stats);
    }
    let mut stats = Stats::default();
    let mut names = BlockNames::default();
    block_strings(
        ctx,
        func,
        cfg,
        None,
        &mut stats,
        false,
        Some(&mut names),
        |_, _| {},
    );
    (names.hash(order), stats)
}

/// Every block's `hashBlock` string without operands, concatenated in input order, and where
/// each block's ends: the function hash's input, collected in the pass that hashes the blocks.
#[derive(Default)]
struct BlockNames {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl BlockNames {
    /// xxh3 of the blocks' strings in `order` (`None`: input order).
    fn hash(&self, order: Option<&[u32]>) -> u64 {
        let Some(order) = order else {
            return xxhash_rust::xxh3::xxh3_64(&self.bytes);
        };
        let mut all = Vec::with_capacity(self.bytes.len());
        for &b in order {
            let b = b as usize;
            if b < self.ends.len() {
                let start = if b == 0 { 0 } else { self.ends[b - 1] };
                all.extend_from_slice(&self.bytes[start..self.ends[b]]);
            }
        }
        xxhash_rust::xxh3::xxh3_64(&all)
    }
}

/// A function's decoded instructions and where each one's displacement and immediate lie in
/// its bytes: what block strings are made of.
pub type Instructions<'d> = (&'d [Instruction], &'d [ConstantOffsets]);

/// The strings of each block in order, handed to `block(instr, loose)`: the `hashBlock` string
/// (with operand bytes when `operands`) and the loose string. `names`: also each block's
/// string without operands (what [`function_hash`] hashes), in the same pass. The buffers are
/// reused from block to block: this runs for every instruction of every profiled function.
///
/// The instructions are `decoded` when given (the decode `cfg` was built from), else the
/// function is decoded again (into reused buffers).
#[allow(clippy::too_many_arguments)]
fn block_strings(
    ctx: &Context<'_, '_>,
    func: &Function,
    cfg: &Cfg,
    decoded: Option<Instructions<'_>>,
    stats: &mut Stats,
    operands: bool,
    names: Option<&mut BlockNames>,
    block: impl FnMut(&[u8], &[u8]),
) {
    if cfg.blocks.is_empty() {
        return;
    }
    let run = |(decoded, offsets): Instructions<'_>| {
        block_strings_of(
            ctx, func, cfg, decoded, offsets, stats, operands, names, block,
        )
    };
    match decoded {
        Some(d) => run(d),
        None => decode_for_hashes(ctx, func, |_, decoded, offsets| run((decoded, offsets))),
    }
}

/// [`block_strings`] from the instructions `cfg` was built from.
#[allow(clippy::too_many_arguments)]
fn block_strings_of(
    ctx: &Context<'_, '_>,
    func: &Function,
    cfg: &Cfg,
    decoded: &[Instruction],
    offsets: &[ConstantOffsets],
    stats: &mut Stats,
    operands: bool,
    names: Option<&mut BlockNames>,
    mut block: impl FnMut(&[u8], &[u8]),
) {
    let jump_tables = jump_table_bases(decoded, cfg);
    let target = Target {
        func,
        jump_tables: &jump_tables,
        relocs: ctx.tables.relocs_in(func),
    };
    let table = table_index();
    thread_local! {
        /// Each block's strings and mnemonic ranks, reused from block to block and function
        /// to function.
        static SCRATCH: std::cell::RefCell<(Vec<u8>, Vec<u8>, Vec<u32>)> =
            const { std::cell::RefCell::new((Vec::new(), Vec::new(), Vec::new())) };
    }
    let mut own = (Vec::new(), Vec::new(), Vec::new());
    SCRATCH.with(|scratch| {
        let mut borrowed = scratch.try_borrow_mut();
        let (instr, loose, mnemonics) = match borrowed.as_deref_mut() {
            Ok(scratch) => scratch,
            Err(_) => &mut own,
        };
        let strings = BlockStrings {
            ctx,
            cfg,
            decoded,
            offsets,
            target,
            table,
            operands,
        };
        strings.each_block(stats, names, instr, loose, mnemonics, &mut block);
    });
}

/// What [`block_strings`] needs to make one function's strings.
struct BlockStrings<'a, 'c, 'i, 'd> {
    ctx: &'a Context<'i, 'd>,
    cfg: &'c Cfg,
    decoded: &'c [Instruction],
    offsets: &'c [ConstantOffsets],
    target: Target<'a>,
    table: &'static TableIndex,
    operands: bool,
}

impl BlockStrings<'_, '_, '_, '_> {
    fn each_block(
        &self,
        stats: &mut Stats,
        mut names: Option<&mut BlockNames>,
        instr: &mut Vec<u8>,
        loose: &mut Vec<u8>,
        mnemonics: &mut Vec<u32>,
        block: &mut impl FnMut(&[u8], &[u8]),
    ) {
        let BlockStrings {
            ctx,
            cfg,
            decoded,
            offsets,
            target,
            table,
            operands,
        } = *self;
        for b in &cfg.blocks {
            instr.clear();
            mnemonics.clear();
            for k in b.first_insn..b.end_insn {
                let insn = &cfg.insns[k as usize];
                let Some(ins) = decoded.get(k as usize) else {
                    break;
                };
                let found = lookup_parts(insn.code as u16, form(insn.has_mem(), ins));
                let entry = found.map(|(e, _, _)| e);
                // Branches take BOLT's forms: conditional jumps `JCC_1`, direct tail calls `JMP_4`,
                // indirect tail calls `JMP32m`/`JMP32r`; direct jumps inside the function are left
                // out. Other instructions take the table's names.
                let tail_form = insn.indirect() == Some(IndirectJump::TailCall)
                    && (!ctx.llvm_bolt_view || cfg.tail_call_outside_strict_mode(b, k as usize));
                let names_of = match (insn.flow(), entry) {
                    (Flow::CondJump, _) => "JCC_1",
                    (Flow::Jump, _) if !insn.tail_call() => continue,
                    (Flow::Jump, _) => "JMP_4",
                    (Flow::IndirectJump, _) if tail_form && insn.has_mem() => "JMP32m",
                    (Flow::IndirectJump, _) if tail_form => "JMP32r",
                    (_, Some(e)) => e.2,
                    (_, None) => {
                        stats.insns += 1;
                        stats.unknown += 1;
                        stats
                            .first_unknown
                            .get_or_insert((insn.code, insn.has_mem()));
                        let name = format!("{:?}", insn.code);
                        instr.extend_from_slice(name.as_bytes());
                        if let Some(n) = names.as_deref_mut() {
                            n.bytes.extend_from_slice(name.as_bytes());
                        }
                        continue;
                    }
                };
                // An instruction LLVM decodes with its prefixes as instructions of their own has
                // several names (and as many mnemonics); nearly all have one. BOLT's branch forms
                // have one.
                let (num_parts, mnem_parts, first_mnem) = match found {
                    Some((e, (names, mnems), first)) => {
                        let table_names = std::ptr::eq(names_of, e.2);
                        (if table_names { names } else { 1 }, mnems, first)
                    }
                    None => (1, 0, u32::MAX),
                };
                stats.insns += 1;
                let mut known = entry.is_some() && mnem_parts == num_parts;
                let mut part_of = |part: &'static str, mnem: Option<u32>, last: bool| {
                    instr.extend_from_slice(part.as_bytes());
                    if let Some(n) = names.as_deref_mut() {
                        n.bytes.extend_from_slice(part.as_bytes());
                    }
                    if is_nop(part) {
                        // Nops stay in BOLT's blocks (InstrHash) but not in the loose hash.
                    } else if insn.flow() == Flow::CondJump && last {
                        mnemonics.push(table.jmp);
                    } else if tail_form && last {
                        // BOLT's indirect tail calls are JMP32m/JMP32r.
                        mnemonics.push(table.jmpl);
                    } else if let Some(m) = mnem {
                        mnemonics.push(m);
                    }
                    if let (true, true, Some(e)) = (operands, last, entry) {
                        // The decode gives every instruction its offsets (empty when unread).
                        let offs = offsets.get(k as usize).copied().unwrap_or_default();
                        return hash_operands(ctx, &target, ins, &offs, e.4, instr);
                    }
                    true
                };
                if num_parts == 1 {
                    known &= part_of(names_of, entry.map(|_| first_mnem), true);
                } else {
                    let mut mnems = entry.map(|e| e.3.split(' '));
                    for (pi, part) in names_of.split(' ').enumerate() {
                        let mnem = mnems.as_mut().and_then(Iterator::next);
                        let mnem = mnem.map(|m| table.rank(m));
                        known &= part_of(part, mnem, pi + 1 == usize::from(num_parts));
                    }
                }
                if !known {
                    stats.unknown += 1;
                    stats
                        .first_unknown
                        .get_or_insert((insn.code, insn.has_mem()));
                }
            }
            if let Some(n) = names.as_deref_mut() {
                n.ends.push(n.bytes.len());
            }
            // Ranks sort as the strings do.
            mnemonics.sort_unstable();
            mnemonics.dedup();
            loose.clear();
            for &m in mnemonics.iter() {
                loose.extend_from_slice(table.mnemonics[m as usize].as_bytes());
            }
            block(instr, loose);
        }
    }
}

/// The packed `BlendedBlockHash` of every block of `func` (index = block index in `cfg`), as
/// perf2bolt 22 writes it into YAML profiles with `hash-func: xxh3`; empty when the CFG has no
/// blocks. `cfg` must be the CFG of `func` ([`crate::aggregate::Aggregator::cfg`]); `ctx` is
/// the binary's [`Context`] (build it once per binary).
pub fn block_hashes(ctx: &Context<'_, '_>, func: &Function, cfg: &Cfg) -> (Vec<u64>, Stats) {
    let (_, hashes, stats) = hashes_in_order(ctx, func, cfg, None);
    (hashes, stats)
}

/// [`function_hash`] and [`block_hashes`] together, from one pass over the instructions (what
/// the YAML writer needs for each profiled function).
pub fn hashes(ctx: &Context<'_, '_>, func: &Function, cfg: &Cfg) -> (u64, Vec<u64>, Stats) {
    hashes_in_order(ctx, func, cfg, None)
}

/// [`hashes`] with the function hash over the blocks in `order` (see
/// [`function_hash_in_order`]); block hashes do not depend on the order.
pub fn hashes_in_order(
    ctx: &Context<'_, '_>,
    func: &Function,
    cfg: &Cfg,
    order: Option<&[u32]>,
) -> (u64, Vec<u64>, Stats) {
    if let (None, Some(h)) = (order, kept(ctx, cfg)) {
        return (h.function, h.blocks.clone(), h.stats);
    }
    hash_pass(ctx, func, cfg, None, |names, block, stats| {
        (
            names.hash(order),
            packed_block_hashes(func, cfg, block),
            stats,
        )
    })
}

/// One pass over the instructions: the function hash's input, each block's (InstrHash,
/// OpcodeHash) 64-bit hashes and the counters, handed to `finish` (in buffers reused from
/// function to function).
fn hash_pass<R>(
    ctx: &Context<'_, '_>,
    func: &Function,
    cfg: &Cfg,
    decoded: Option<Instructions<'_>>,
    finish: impl FnOnce(&BlockNames, &[(u64, u64)], Stats) -> R,
) -> R {
    thread_local! {
        static SCRATCH: std::cell::RefCell<(BlockNames, Vec<(u64, u64)>)> =
            std::cell::RefCell::new(Default::default());
    }
    let mut own = Default::default();
    SCRATCH.with(|scratch| {
        let mut borrowed = scratch.try_borrow_mut();
        let (names, block) = match borrowed.as_deref_mut() {
            Ok(scratch) => scratch,
            Err(_) => &mut own,
        };
        names.bytes.clear();
        names.ends.clear();
        block.clear();
        let mut stats = Stats::default();
        block_strings(
            ctx,
            func,
            cfg,
            decoded,
            &mut stats,
            true,
            Some(names),
            |instr, loose| {
                block.push((
                    xxhash_rust::xxh3::xxh3_64(instr),
                    xxhash_rust::xxh3::xxh3_64(loose),
                ))
            },
        );
        finish(names, block, stats)
    })
}

/// The packed block hashes from each block's (InstrHash, OpcodeHash) 64-bit hashes.
fn packed_block_hashes(func: &Function, cfg: &Cfg, block: &[(u64, u64)]) -> Vec<u64> {
    if block.len() != cfg.blocks.len() {
        return Vec::new();
    }
    let n = cfg.blocks.len();
    let opcode_hash = |b: u32| block[b as usize].1;
    let mut packed: Vec<u64> = cfg
        .blocks
        .iter()
        .zip(block)
        .map(|(b, &(instr_hash, opcode_hash))| {
            u64::from(b.offset as u16) | (opcode_hash & 0xffff) << 16 | (instr_hash & 0xffff) << 32
        })
        .collect();
    // Successors as BOLT lists them: a conditional branch to the next block gets that block
    // twice (the taken edge, then the fall-through edge `buildCFG` adds after it).
    fn succs_of<'c>(
        func: &Function,
        cfg: &'c Cfg,
        bi: usize,
        twice: &'c mut [u32; 2],
    ) -> &'c [u32] {
        let next = cfg.blocks.get(bi + 1);
        let to_next = cfg.last_insn(bi).is_some_and(|l| {
            l.flow() == Flow::CondJump
                && !l.tail_call()
                && next.is_some_and(|nb| l.target == func.address + u64::from(nb.offset))
        });
        if to_next && cfg.blocks[bi].succs.as_slice() == [bi as u32 + 1] {
            *twice = [bi as u32 + 1; 2];
            twice
        } else {
            &cfg.blocks[bi].succs
        }
    }
    // Predecessors in BOLT's order: taken-branch edges (added first, in source order), then
    // fall-through edges, then the edges of blocks ending in an indirect jump of unknown control
    // flow (`addUnknownControlFlow` re-adds them after the CFG is built). Every edge goes to
    // bucket `3 * successor + kind` (kind 0, 1, 2 in that order); a counting sort keeps the
    // edges of a bucket in source order, so a block's predecessors are one run of `preds`.
    let for_each_edge = |visit: &mut dyn FnMut(usize, u32)| {
        let mut twice = [0u32; 2];
        for bi in 0..n {
            let bs = succs_of(func, cfg, bi, &mut twice);
            let last = cfg.last_insn(bi);
            if last.is_some_and(|l| l.indirect() == Some(IndirectJump::Unknown)) {
                for &s in bs {
                    visit(3 * s as usize + 2, bi as u32);
                }
                continue;
            }
            for (si, &s) in bs.iter().enumerate() {
                let fall_through = s as usize == bi + 1
                    && match last.map(|l| (l.flow(), l.tail_call())) {
                        Some((Flow::CondJump, false)) => si + 1 == bs.len() && si > 0,
                        Some((Flow::CondJump, true)) => true,
                        Some((Flow::Next | Flow::Call, _)) | None => true,
                        _ => false,
                    };
                visit(3 * s as usize + usize::from(fall_through), bi as u32);
            }
        }
    };
    let mut start = vec![0u32; 3 * n + 1];
    for_each_edge(&mut |bucket, _| start[bucket + 1] += 1);
    for k in 1..start.len() {
        start[k] += start[k - 1];
    }
    let mut fill = start.clone();
    let mut preds = vec![0u32; start[3 * n] as usize];
    for_each_edge(&mut |bucket, p| {
        preds[fill[bucket] as usize] = p;
        fill[bucket] += 1;
    });
    let mut twice = [0u32; 2];
    for (bi, packed) in packed.iter_mut().enumerate() {
        let succ = succs_of(func, cfg, bi, &mut twice)
            .iter()
            .fold(0u64, |h, &s| hash_16_bytes(h, opcode_hash(s)));
        let pred = preds[start[3 * bi] as usize..start[3 * bi + 3] as usize]
            .iter()
            .fold(0u64, |h, &p| hash_16_bytes(h, opcode_hash(p)));
        *packed |= (pred & 0xff) << 48 | (succ & 0xff) << 56;
    }
    packed
}

#[cfg(test)]
mod tests {
    use super::{Entry, INSNS, lookup_parts};

    fn lookup(code: u16, form: u8) -> Option<&'static Entry> {
        lookup_parts(code, form).map(|(e, _, _)| e)
    }

    #[test]
    fn lookup_finds_every_table_entry_and_nothing_else() {
        assert!(
            INSNS
                .windows(2)
                .all(|w| (w[0].0, w[0].1) < (w[1].0, w[1].1)),
            "INSNS must be sorted by (code, form) without duplicates"
        );
        for e in INSNS {
            let found = lookup(e.0, e.1).map(|f| (f.0, f.1, f.2));
            assert_eq!(found, Some((e.0, e.1, e.2)));
        }
        // Forms and codes the table does not have.
        assert!(lookup(INSNS[0].0, 0xff).is_none());
        assert!(lookup(u16::MAX, 0).is_none());
        assert!(lookup(0, 0).is_none() || INSNS[0].0 == 0);
    }
}
