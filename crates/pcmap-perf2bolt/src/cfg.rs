//! Control-flow graphs built the way BOLT builds them from the input disassembly.
//!
//! Block leaders are the function entry, secondary entry points, every in-function target of a
//! direct jump or conditional jump, jump-table targets, landing pads (C++ exceptions, from the
//! function's LSDA) and every instruction that follows a terminator (jump, conditional jump,
//! return, indirect jump, `ud2`). Calls do not end blocks, neither calls with a landing pad
//! (invokes) nor calls to functions that do not return: BOLT 22's `buildCFG` ends blocks at
//! terminators only (`llvm-bolt --print-cfg` shows `callq __cxa_throw` or `callq exit` in the
//! middle of a block, with the fall-through successor after it).
//!
//! Exceptions (BOLT's `parseLSDA`, then `recomputeLandingPads`): every landing pad of the
//! call-site table that is an instruction of the function starts a block; every call (or
//! unconditional tail call) in a call-site range with such a landing pad is an invoke, and its
//! block lists the landing pad's block among its `landing_pads` (the throw edges; they
//! are not successors). A block some invoke throws to is a landing pad
//! ([`Block::is_landing_pad`]). A landing pad outside the function (in another fragment, as
//! with `-split-eh`) makes BOLT skip the function: no CFG; so does an LSDA that cannot be read.
//! Successors: a conditional branch lists its taken target first, then the fall-through block; an
//! unconditional jump its target; an indirect jump through a recognised jump table its distinct
//! targets in address order; a block without terminator falls through to the next block.
//! Branches leaving the function (tail calls, including conditional ones) contribute no successor.
//! (llvm-bolt later moves a conditional tail call into a block of its own; perf2bolt's
//! aggregation works on the CFG before that, which is what is built here.)
//!
//! A function is *simple* (has a CFG) when every instruction decodes and every in-function
//! branch target is an instruction boundary.

use iced_x86::{
    Code, ConstantOffsets, Decoder, DecoderOptions, FlowControl, Instruction,
    InstructionInfoFactory, OpAccess, OpKind, Register,
};
use pcmap_binary::bolt::{BoltFunction as Function, BoltFunctions};
use pcmap_bytes::Cursor;

/// Control-flow class of one instruction, as far as CFG building and aggregation need it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Falls through.
    Next,
    /// Direct or indirect call.
    Call,
    /// Return.
    Return,
    /// Conditional branch.
    CondJump,
    /// Direct unconditional jump.
    Jump,
    /// Indirect jump.
    IndirectJump,
    /// Ends a block without successors (`ud2`).
    Trap,
}

/// What BOLT makes of an indirect jump (`postProcessIndirectBranches` after `disassemble`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndirectJump {
    /// Through a recognised jump table: the table's targets are the successors.
    JumpTable,
    /// A tail call: BOLT's `JMP32r`/`JMP32m` opcodes (in hashes), no successors.
    TailCall,
    /// Unknown control flow: BOLT keeps `JMP64r`/`JMP64m` (it found the memory location the
    /// target comes from, so the CFG stands).
    Unknown,
    /// Outside strict (relocation) mode, in a multi-block function: no memory location for the
    /// target in the jump's block (its own memory operand, or an earlier memory access), so
    /// BOLT fails to post-process the function's indirect branches and builds no CFG.
    Unanalyzable,
}

/// One decoded instruction, in 16 bytes: a profiled program's CFGs hold millions of them.
#[derive(Clone, Copy)]
pub struct Insn {
    /// Target of a direct branch or call (0 for indirect ones and other instructions).
    pub target: u64,
    /// Offset from the function start.
    pub offset: u32,
    /// iced-x86 code (the instruction form).
    pub code: Code,
    /// The rest, packed: the length (4 bits), the [`Flow`] (3), the [`IndirectJump`] (3, 0
    /// for none) and the flags below.
    bits: u16,
}

const LEN_MASK: u16 = 0xf;
const FLOW_SHIFT: u32 = 4;
const INDIRECT_SHIFT: u32 = 7;
const HAS_MEM: u16 = 1 << 10;
const TAIL_CALL: u16 = 1 << 11;
const EPILOGUE: u16 = 1 << 12;
const FIXED_MEMORY_TARGET: u16 = 1 << 13;

const FLOWS: [Flow; 7] = [
    Flow::Next,
    Flow::Call,
    Flow::Return,
    Flow::CondJump,
    Flow::Jump,
    Flow::IndirectJump,
    Flow::Trap,
];
/// [`Flow`] by its three bits in [`Insn`]'s packed field: [`FLOWS`] and an eighth entry, never
/// stored, so that reading the field needs no bounds check.
const FLOW_OF_BITS: [Flow; 8] = [
    FLOWS[0],
    FLOWS[1],
    FLOWS[2],
    FLOWS[3],
    FLOWS[4],
    FLOWS[5],
    FLOWS[6],
    Flow::Trap,
];
const INDIRECT_JUMPS: [IndirectJump; 4] = [
    IndirectJump::JumpTable,
    IndirectJump::TailCall,
    IndirectJump::Unknown,
    IndirectJump::Unanalyzable,
];

impl Insn {
    /// An instruction as decoded (`len` at most 15, as x86 has it); no [`IndirectJump`] yet.
    #[allow(clippy::too_many_arguments)]
    fn new(
        offset: u32,
        len: u8,
        flow: Flow,
        code: Code,
        target: u64,
        has_mem: bool,
        tail_call: bool,
        epilogue: bool,
        fixed_memory_target: bool,
    ) -> Insn {
        let flag = |on: bool, bit: u16| if on { bit } else { 0 };
        Insn {
            target,
            offset,
            code,
            bits: (u16::from(len) & LEN_MASK)
                | ((flow as u16) << FLOW_SHIFT)
                | flag(has_mem, HAS_MEM)
                | flag(tail_call, TAIL_CALL)
                | flag(epilogue, EPILOGUE)
                | flag(fixed_memory_target, FIXED_MEMORY_TARGET),
        }
    }

    /// Length in bytes (never 0: an instruction is not a collection).
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> u8 {
        (self.bits & LEN_MASK) as u8
    }

    /// Control-flow class.
    pub fn flow(&self) -> Flow {
        FLOW_OF_BITS[usize::from((self.bits >> FLOW_SHIFT) & 7)]
    }

    /// Whether an operand is a memory reference.
    pub fn has_mem(&self) -> bool {
        self.bits & HAS_MEM != 0
    }

    /// A jump that leaves the function, or an indirect jump through no recognised jump table
    /// (perf2bolt's aggregation treats it as a call).
    pub fn tail_call(&self) -> bool {
        self.bits & TAIL_CALL != 0
    }

    fn set_tail_call(&mut self) {
        self.bits |= TAIL_CALL;
    }

    /// For indirect jumps of a function with blocks: BOLT's classification (the one rule for CFG
    /// rejection and for the opcodes block and function hashes use).
    pub fn indirect(&self) -> Option<IndirectJump> {
        let k = usize::from((self.bits >> INDIRECT_SHIFT) & 7);
        k.checked_sub(1).map(|k| INDIRECT_JUMPS[k])
    }

    fn set_indirect(&mut self, kind: IndirectJump) {
        self.bits = (self.bits & !(7 << INDIRECT_SHIFT)) | ((kind as u16 + 1) << INDIRECT_SHIFT);
    }

    /// `pop` or `leave`: epilogue code (an unresolved indirect jump after it in its block is a
    /// tail call).
    pub fn epilogue(&self) -> bool {
        self.bits & EPILOGUE != 0
    }

    /// For an indirect jump: its target is loaded from memory at a fixed place (no base
    /// register, or %rip; see [`IndirectJump`]).
    pub fn fixed_memory_target(&self) -> bool {
        self.bits & FIXED_MEMORY_TARGET != 0
    }

    /// Whether BOLT's `isCall` holds: calls and tail calls (including conditional ones).
    pub fn is_call(&self) -> bool {
        self.flow() == Flow::Call || self.tail_call()
    }
}

impl std::fmt::Debug for Insn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Insn")
            .field("offset", &self.offset)
            .field("len", &self.len())
            .field("flow", &self.flow())
            .field("code", &self.code)
            .field("has_mem", &self.has_mem())
            .field("tail_call", &self.tail_call())
            .field("indirect", &self.indirect())
            .field("epilogue", &self.epilogue())
            .field("fixed_memory_target", &self.fixed_memory_target())
            .field("target", &self.target)
            .finish()
    }
}

/// A block's successors.
pub type Succs = smallvec::SmallVec<[u32; 4]>;

/// One basic block (56 bytes: a profiled program's CFGs hold hundreds of thousands).
#[derive(Debug, Clone)]
pub struct Block {
    /// Offset of the first instruction.
    pub offset: u32,
    /// End offset (the next block's offset, or the function size).
    pub end: u32,
    /// Index of the first instruction in [`Cfg::insns`].
    pub first_insn: u32,
    /// One past the last instruction.
    pub end_insn: u32,
    /// Successor block indices in BOLT's order (up to four without an allocation of their own:
    /// a large program has hundreds of thousands of blocks, nearly all with one or two).
    pub succs: Succs,
    /// Whether the block is an entry point.
    pub is_entry: bool,
    /// Where this block's landing pads lie in [`Cfg::landing_pads`] (start, count): see
    /// [`Cfg::landing_pads_of`]. One list per CFG: nearly every block has none.
    landing_pads: (u32, u32),
    /// Whether an invoke of the function throws to this block (BOLT's `isLandingPad`).
    pub is_landing_pad: bool,
    /// How many instructions of this block are invokes (calls with a landing pad that is a
    /// block of the function).
    pub invokes: u32,
}

/// The CFG of one function (empty and not simple when BOLT would not build one).
///
/// Built from one decode of the function ([`build_from`]). It keeps only compact instructions:
/// block hashes are computed from the decode it is built from ([`decode_with`]) and kept in
/// [`Cfg::hashes`], or from a decode made again when asked for.
#[derive(Debug, Clone, Default)]
pub struct Cfg {
    /// Whether BOLT considers the function simple (CFG built).
    pub simple: bool,
    /// All instructions in address order (up to the first undecodable one).
    pub insns: Vec<Insn>,
    /// The function and block hashes, computed when the CFG was built by an aggregator that
    /// hashes ([`crate::aggregate::Aggregator::with_hashing`]); [`crate::block_hash`] answers
    /// from them.
    pub hashes: Option<Box<crate::block_hash::Hashes>>,
    /// Blocks in input layout (address) order.
    pub blocks: Vec<Block>,
    /// Every block's landing pads, block after block ([`Cfg::landing_pads_of`]).
    landing_pads: Vec<u32>,
    /// Offsets of the return instructions in [`Cfg::insns`], in address order: asked for every
    /// branch of a profile ([`Cfg::is_return_at`]), and a function has few.
    returns: Box<[u32]>,
}

#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<Block>() == 56);

impl Cfg {
    /// A CFG of `insns`, their blocks and the blocks' landing pads (all empty when BOLT builds
    /// none). `returns`: the offsets of the return instructions, when the caller has them
    /// (found in `insns` otherwise).
    fn new(
        simple: bool,
        insns: Vec<Insn>,
        blocks: Vec<Block>,
        landing_pads: Vec<u32>,
        returns: Option<Vec<u32>>,
    ) -> Cfg {
        let found = || -> Vec<u32> {
            insns
                .iter()
                .filter(|i| i.flow() == Flow::Return)
                .map(|i| i.offset)
                .collect()
        };
        debug_assert!(returns.as_ref().is_none_or(|r| *r == found()));
        let returns = returns.unwrap_or_else(found).into_boxed_slice();
        Cfg {
            simple,
            insns,
            hashes: None,
            blocks,
            landing_pads,
            returns,
        }
    }

    /// Whether an instruction starts exactly at `offset` and is a return: what
    /// [`Cfg::insn_at`] answers, searching only the returns.
    pub fn is_return_at(&self, offset: u64) -> bool {
        u32::try_from(offset).is_ok_and(|o| self.returns.binary_search(&o).is_ok())
    }

    /// The landing-pad blocks of the invokes in block `b` of this CFG (its throw edges), in the
    /// order their first invoke appears, without duplicates.
    pub fn landing_pads_of(&self, b: &Block) -> &[u32] {
        let (start, len) = (b.landing_pads.0 as usize, b.landing_pads.1 as usize);
        self.landing_pads.get(start..start + len).unwrap_or(&[])
    }

    /// BOLT's depth-first block order (`BinaryFunction::dfs`, used with `--profile-use-dfs`):
    /// from the entry blocks in offset order, each block's landing pads and successors pushed on
    /// a stack. After a conditional branch with two successors the fall-through is visited first
    /// when the condition is canonical (`je jl jg jb ja js jp jo`, and `jcxz`/`loop` forms),
    /// else the taken target; other blocks visit their last successor first. Unreachable blocks
    /// are left out.
    pub fn dfs_order(&self) -> Vec<u32> {
        let n = self.blocks.len();
        let mut visited = vec![false; n];
        let mut order = Vec::with_capacity(n);
        let mut entries: Vec<u32> = (0..n as u32)
            .filter(|&b| self.blocks[b as usize].is_entry)
            .collect();
        entries.sort_by_key(|&b| self.blocks[b as usize].offset);
        let mut stack: Vec<u32> = entries.into_iter().rev().collect();
        while let Some(bi) = stack.pop() {
            let Some(seen) = visited.get_mut(bi as usize) else {
                continue;
            };
            if *seen {
                continue;
            }
            *seen = true;
            order.push(bi);
            let b = &self.blocks[bi as usize];
            stack.extend_from_slice(self.landing_pads_of(b));
            match (self.conditional_branch(bi as usize), b.succs.as_slice()) {
                (Some(code), &[taken, fall]) => {
                    if is_canonical_condition(code) {
                        stack.push(taken);
                        stack.push(fall);
                    } else {
                        stack.push(fall);
                        stack.push(taken);
                    }
                }
                _ => stack.extend_from_slice(&b.succs),
            }
        }
        order
    }

    /// The conditional branch BOLT's `analyzeBranch` finds at the end of block `bi`: the last
    /// instruction, or the one before a final direct jump.
    fn conditional_branch(&self, bi: usize) -> Option<Code> {
        let b = &self.blocks[bi];
        let last = self.last_insn(bi)?;
        if last.flow() == Flow::CondJump && !last.tail_call() {
            return Some(last.code);
        }
        if last.flow() == Flow::Jump && !last.tail_call() && b.end_insn >= b.first_insn + 2 {
            let prev = &self.insns[b.end_insn as usize - 2];
            if prev.flow() == Flow::CondJump && !prev.tail_call() {
                return Some(prev.code);
            }
        }
        None
    }

    /// The block containing `offset` (within the function's size).
    pub fn block_containing(&self, offset: u64) -> Option<usize> {
        let i = self
            .blocks
            .partition_point(|b| u64::from(b.offset) <= offset);
        let b = self.blocks.get(i.checked_sub(1)?)?;
        (offset < u64::from(b.end)).then_some(i - 1)
    }

    /// The block starting exactly at `offset`.
    pub fn block_at(&self, offset: u64) -> Option<usize> {
        let i = self.block_containing(offset)?;
        (u64::from(self.blocks[i].offset) == offset).then_some(i)
    }

    /// The last instruction of a block.
    pub fn last_insn(&self, block: usize) -> Option<&Insn> {
        let b = &self.blocks[block];
        (b.end_insn > b.first_insn).then(|| &self.insns[b.end_insn as usize - 1])
    }

    /// Whether llvm-bolt can optimize this function when it runs outside strict mode (its
    /// default; perf2bolt aggregates in strict mode, which is how CFGs of relocation-mode
    /// binaries are built here): in a multi-block function, every indirect jump through no
    /// recognised jump table must be a tail call there too
    /// ([`Cfg::tail_call_outside_strict_mode`]); otherwise llvm-bolt fails to post-process the
    /// function's indirect branches and leaves it alone (it keeps the CFG in relocation mode).
    pub fn simple_outside_strict_mode(&self) -> bool {
        self.simple
            && self.blocks.iter().all(|b| {
                (b.first_insn as usize..b.end_insn as usize).all(|k| {
                    let i = &self.insns[k];
                    !(i.flow() == Flow::IndirectJump && i.tail_call())
                        || self.tail_call_outside_strict_mode(b, k)
                })
            })
    }

    /// Whether the indirect jump `insns[k]` of `block`, a tail call here (strict mode, see
    /// [`IndirectJump::TailCall`]), is one for llvm-bolt outside strict mode too: in a
    /// single-block function, or when its block has a memory location for the target and the
    /// jump loads it from a fixed place or follows epilogue code. Otherwise llvm-bolt keeps it a
    /// plain indirect jump (and does not optimize the function).
    pub fn tail_call_outside_strict_mode(&self, block: &Block, k: usize) -> bool {
        let prefix = &self.insns[block.first_insn as usize..=k];
        self.blocks.len() == 1
            || (!unanalyzable(prefix)
                && (self.insns[k].fixed_memory_target()
                    || prefix[..prefix.len() - 1].iter().any(|i| i.epilogue())))
    }

    /// The instruction starting exactly at `offset`.
    pub fn insn_at(&self, offset: u64) -> Option<&Insn> {
        let i = self
            .insns
            .binary_search_by_key(&offset, |x| u64::from(x.offset))
            .ok()?;
        Some(&self.insns[i])
    }
}

/// Whether an indirect jump ending `block_prefix` (its block's instructions up to and including
/// the jump) has no memory location for its target: outside strict mode, BOLT cannot
/// post-process it ([`IndirectJump::Unanalyzable`]).
fn unanalyzable(block_prefix: &[Insn]) -> bool {
    !block_prefix.iter().any(|i| i.has_mem())
}

fn classify(ins: &Instruction) -> Flow {
    match ins.flow_control() {
        FlowControl::Call | FlowControl::IndirectCall => Flow::Call,
        FlowControl::Return => Flow::Return,
        FlowControl::ConditionalBranch => Flow::CondJump,
        FlowControl::UnconditionalBranch => Flow::Jump,
        FlowControl::IndirectBranch => Flow::IndirectJump,
        _ if ins.code() == Code::Ud2 => Flow::Trap,
        _ => Flow::Next,
    }
}

/// The decoder bitness for the binary's code.
fn bitness(image: &BoltFunctions<'_, '_>) -> u32 {
    if image.binary().is_64() { 64 } else { 32 }
}

/// Decode one instruction at `addr` (used for return checks in functions without a CFG).
pub fn decode_one(image: &BoltFunctions<'_, '_>, addr: u64) -> Option<Flow> {
    let bytes = image.binary().code_bytes(addr, 15)?;
    let mut d = Decoder::with_ip(bitness(image), bytes, addr, DecoderOptions::NONE);
    let ins = d.decode();
    (!ins.is_invalid()).then(|| classify(&ins))
}

/// One function decoded (once): its instructions and in-function branch targets, before
/// blocks are formed (which needs the function's secondary entry points, i.e. the references of
/// every other function).
#[derive(Debug, Default)]
pub struct Decoded {
    pub(crate) insns: Vec<Insn>,
    /// Jump-table instruction index -> its table, in instruction order. The entries are read
    /// when the CFG is built ([`build_from`]): a table ends where the next table of the binary
    /// starts, and the other functions' tables are known only once every function is decoded.
    jump_tables: Vec<(u32, JumpTable)>,
    /// The addresses [`table_lea`] finds, sorted.
    table_leas: Vec<u64>,
    /// Every byte of the function decoded.
    simple: bool,
    /// No invalid instruction.
    complete: bool,
}

/// Decode `func` (see [`Decoded`]) and the addresses outside it that its instructions refer to,
/// for BOLT's secondary entry points (`pcmap_binary::bolt::references_out_of`; empty when it
/// does not decode). Only the compact [`Insn`]s are kept.
pub fn decode(image: &BoltFunctions<'_, '_>, func: &Function) -> (Decoded, Vec<u64>) {
    with_scratch(|decoded, _| {
        let d = decode_into(image, func, decoded, None);
        let refs = if d.complete {
            pcmap_binary::bolt::references_out_of(func, decoded.iter())
        } else {
            Vec::new()
        };
        (d, refs)
    })
}

/// Decode `func` (see [`Decoded`]) and hand `f` the decode with the instructions and their
/// operand offsets, in buffers reused from call to call on this thread: for a CFG that is
/// hashed as soon as it is built, so that no copy of the instructions is made or kept.
///
/// Only the instructions `wants_offsets` picks (asked in address order) get their offsets;
/// the others get empty ones. Block hashes read them only to find relocations, and finding
/// them costs about as much as decoding the instruction.
pub fn decode_with<R>(
    image: &BoltFunctions<'_, '_>,
    func: &Function,
    mut wants_offsets: impl FnMut(&Instruction) -> bool,
    f: impl FnOnce(Decoded, &[Instruction], &[ConstantOffsets]) -> R,
) -> R {
    with_scratch(|decoded, offsets| {
        let d = decode_into(image, func, decoded, Some((offsets, &mut wants_offsets)));
        f(d, decoded, offsets)
    })
}

/// Run `f` with this thread's instruction buffers (fresh ones when they are in use further up
/// the stack): no allocation churn while a parallel pass decodes thousands of functions.
fn with_scratch<R>(f: impl FnOnce(&mut Vec<Instruction>, &mut Vec<ConstantOffsets>) -> R) -> R {
    thread_local! {
        static SCRATCH: std::cell::RefCell<(Vec<Instruction>, Vec<ConstantOffsets>)> =
            const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
    }
    SCRATCH.with(|scratch| {
        let mut own = (Vec::new(), Vec::new());
        let mut borrowed = scratch.try_borrow_mut();
        let (decoded, offsets) = match borrowed.as_deref_mut() {
            Ok(scratch) => scratch,
            Err(_) => &mut own,
        };
        f(decoded, offsets)
    })
}

/// What one function's decode tells about the whole binary: BOLT's secondary entry points of
/// the other functions and the bounds of every jump table depend on all functions, profiled or
/// not ([`scan`], or [`Decoded::scan`] for a function decoded for its CFG).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct FunctionScan {
    /// Addresses outside the function its instructions refer to, in instruction order
    /// (`pcmap_binary::bolt::references_out_of`; empty when an instruction does not decode),
    /// that make secondary entry points ([`BoltFunctions::entry_point_at`]): the only ones
    /// [`BoltFunctions::entry_points`] keeps. Most references are calls to a function's start;
    /// a 200,000-function binary had megabytes of them to hold until every function was
    /// scanned.
    pub references: Vec<u64>,
    /// Starts of the jump tables it jumps through or loads the base of ([`Decoded::table_starts`]),
    /// sorted, without duplicates.
    pub table_starts: Vec<u64>,
    /// It has an indirect jump through no jump table ([`Decoded::has_tableless_indirect_jump`]).
    pub tableless_indirect_jump: bool,
}

/// [`FunctionScan`] of a function no CFG is built for: one pass of the decoder that keeps no
/// instruction (only the last few, for jump-table sequences), so that the functions a profile
/// does not touch cost a decode and nothing more. Equal to [`Decoded::scan`] of [`decode`].
pub fn scan(image: &BoltFunctions<'_, '_>, func: &Function) -> FunctionScan {
    let mut out = FunctionScan::default();
    let Some(bytes) = image.binary().code_bytes(func.address, func.size) else {
        return out;
    };
    let relocation_mode = image.relocation_mode();
    let mut decoder = Decoder::with_ip(bitness(image), bytes, func.address, DecoderOptions::NONE);
    let mut indirect = 0usize;
    let mut tables: Vec<JumpTable> = Vec::new();
    // Instructions decoded in place: instruction `n` is in slot `n % (2 * TABLE_WINDOW)`, so
    // the TABLE_WINDOW before the current one are still there.
    let mut ring = [Instruction::default(); 2 * TABLE_WINDOW];
    let mut n = 0usize;
    while decoder.can_decode() {
        let ins = &mut ring[n % (2 * TABLE_WINDOW)];
        decoder.decode_out(ins);
        let ins = *ins;
        if ins.is_invalid() {
            out.references.clear();
            break;
        }
        out.references
            .extend(pcmap_binary::bolt::reference_out_of(func, &ins));
        if ins.flow_control() == FlowControl::IndirectBranch {
            indirect += 1;
            // The instructions before this one, oldest first.
            let mut before = [Instruction::default(); TABLE_WINDOW];
            let first = n.saturating_sub(TABLE_WINDOW);
            for (slot, k) in before.iter_mut().zip(first..n) {
                *slot = ring[k % (2 * TABLE_WINDOW)];
            }
            tables.extend(jump_table_base(&ins, &before[..n - first]));
        }
        out.table_starts
            .extend(table_lea(image, relocation_mode, &ins));
        n += 1;
    }
    out.references = entry_references(image, out.references);
    out.tableless_indirect_jump =
        tableless_indirect_jump(image, func, indirect, tables.iter().copied());
    out.table_starts.extend(tables.iter().map(|t| t.base));
    out.table_starts.sort_unstable();
    out.table_starts.dedup();
    out
}

/// The `references` ([`FunctionScan::references`]) that make secondary entry points, in their
/// order.
fn entry_references(image: &BoltFunctions<'_, '_>, mut references: Vec<u64>) -> Vec<u64> {
    references.retain(|&a| image.entry_point_at(a).is_some());
    // Usually empty now: its buffer is freed.
    references.shrink_to_fit();
    references
}

/// How many instructions before an indirect jump its jump-table sequence is looked for in.
const TABLE_WINDOW: usize = 8;

/// In relocation mode (`relocation_mode`: [`BoltFunctions::relocation_mode`], asked once per
/// function), the address outside code a RIP-relative `lea` loads: the base of a
/// position-independent jump table whose indirect jump may be elsewhere (BOLT finds such tables
/// from the `lea`: "catch jump table references outside of the basic block containing the
/// indirect jump").
fn table_lea(
    image: &BoltFunctions<'_, '_>,
    relocation_mode: bool,
    ins: &Instruction,
) -> Option<u64> {
    (relocation_mode && ins.code() == Code::Lea_r64_m && ins.memory_base() == Register::RIP)
        .then(|| ins.ip_rel_memory_address())
        .filter(|&at| image.binary().code_section_at(at).is_none())
}

/// Whether a function with `indirect` indirect jumps, `tables` of them through recognised jump
/// tables, has one through no table: more jumps than tables, or a table whose first entry is not
/// in the function (a table is empty when its first entry is: the next table of the binary
/// starts after it).
fn tableless_indirect_jump(
    image: &BoltFunctions<'_, '_>,
    func: &Function,
    indirect: usize,
    mut tables: impl ExactSizeIterator<Item = JumpTable>,
) -> bool {
    indirect > tables.len()
        || tables.any(|table| {
            jump_table_targets(image, func, table, table.base.saturating_add(8)).is_empty()
        })
}

/// The list a decode puts operand offsets in, and which instructions get them (see
/// [`decode_with`]).
type OffsetsOf<'a> = (
    &'a mut Vec<ConstantOffsets>,
    &'a mut dyn FnMut(&Instruction) -> bool,
);

/// Decode `func` into `decoded` and, when given, the operand offsets block hashes need into
/// `offsets` (both cleared first); the returned [`Decoded`] has neither.
fn decode_into(
    image: &BoltFunctions<'_, '_>,
    func: &Function,
    decoded: &mut Vec<Instruction>,
    offsets: Option<OffsetsOf<'_>>,
) -> Decoded {
    let (mut offsets, mut wants_offsets) = offsets.unzip();
    decoded.clear();
    if let Some(o) = offsets.as_deref_mut() {
        o.clear();
    }
    let Some(bytes) = image.binary().code_bytes(func.address, func.size) else {
        return Decoded::default();
    };
    let size = func.size;
    let start = func.address;
    let mut decoder = Decoder::with_ip(bitness(image), bytes, start, DecoderOptions::NONE);
    // Room for one instruction in three bytes: compiled x86-64 code averages three to four
    // bytes an instruction (3.3 in the benchmark's program), so the list rarely grows, and the
    // slack is given back in place below. With room for one in four, nearly every function's
    // list was reallocated at twice the size and copied (a tenth of the decode's time, mostly
    // faults of fresh memory).
    let room = bytes.len() / 3 + 1;
    let mut insns = Vec::with_capacity(room);
    decoded.reserve(room);
    if let Some(o) = offsets.as_deref_mut() {
        o.reserve(room);
    }
    let mut simple = (bytes.len() as u64) == size;
    let mut complete = true;
    let mut tables: Vec<(u32, JumpTable)> = Vec::new(); // insn index -> jump table
    let mut table_leas: Vec<u64> = Vec::new();
    let relocation_mode = image.relocation_mode();
    let mut ins = Instruction::default();
    while decoder.can_decode() {
        decoder.decode_out(&mut ins);
        if ins.is_invalid() {
            simple = false;
            complete = false;
            break;
        }
        let flow = classify(&ins);
        let offset = (ins.ip() - start) as u32;
        let has_mem = (0..ins.op_count()).any(|i| ins.op_kind(i) == OpKind::Memory);
        let mut tail_call = false;
        let target = match flow {
            Flow::Call | Flow::CondJump | Flow::Jump
                if matches!(
                    ins.op0_kind(),
                    OpKind::NearBranch64 | OpKind::NearBranch32 | OpKind::NearBranch16
                ) =>
            {
                ins.near_branch_target()
            }
            _ => 0,
        };
        match flow {
            Flow::CondJump | Flow::Jump => {
                let t = ins.near_branch_target();
                if t < start || t - start >= size {
                    tail_call = true;
                }
            }
            // The last few instructions, to recognise position-independent jump-table sequences.
            Flow::IndirectJump => {
                match jump_table_base(&ins, &decoded[decoded.len().saturating_sub(TABLE_WINDOW)..])
                {
                    Some(t) => tables.push((insns.len() as u32, t)),
                    None => tail_call = true,
                }
            }
            _ => {}
        }
        table_leas.extend(table_lea(image, relocation_mode, &ins));
        insns.push(Insn::new(
            offset,
            ins.len() as u8,
            flow,
            ins.code(),
            target,
            has_mem,
            tail_call,
            matches!(
                ins.mnemonic(),
                iced_x86::Mnemonic::Pop | iced_x86::Mnemonic::Leave
            ),
            flow == Flow::IndirectJump && fixed_memory_target(&ins, decoded),
        ));
        if let (Some(o), Some(wants)) = (offsets.as_deref_mut(), wants_offsets.as_mut()) {
            o.push(if wants(&ins) {
                decoder.get_constant_offsets(&ins)
            } else {
                ConstantOffsets::default()
            });
        }
        decoded.push(ins);
    }
    table_leas.sort_unstable();
    table_leas.dedup();
    // Kept until the CFG is built (possibly for every profiled function at once): no slack.
    insns.shrink_to_fit();
    Decoded {
        insns,
        jump_tables: tables,
        table_leas,
        simple,
        complete,
    }
}

impl Decoded {
    /// Whether the function has an indirect jump through no jump table (none recognised, or
    /// one whose first entry is not in the function): the only jumps that can be unknown
    /// control flow ([`IndirectJump::Unknown`]) once the CFG is built.
    pub fn has_tableless_indirect_jump(
        &self,
        image: &BoltFunctions<'_, '_>,
        func: &Function,
    ) -> bool {
        // Each indirect jump with a recognised table has exactly one entry in `jump_tables`.
        let indirect = self
            .insns
            .iter()
            .filter(|i| i.flow() == Flow::IndirectJump)
            .count();
        tableless_indirect_jump(
            image,
            func,
            indirect,
            self.jump_tables.iter().map(|&(_, t)| t),
        )
    }

    /// This decode's [`FunctionScan`], with the `references` [`decode`] returned with it.
    pub fn scan(
        &self,
        image: &BoltFunctions<'_, '_>,
        func: &Function,
        references: Vec<u64>,
    ) -> FunctionScan {
        let mut table_starts: Vec<u64> = self.table_starts().collect();
        table_starts.sort_unstable();
        table_starts.dedup();
        FunctionScan {
            references: entry_references(image, references),
            table_starts,
            tableless_indirect_jump: self.has_tableless_indirect_jump(image, func),
        }
    }

    /// The start addresses of the jump tables this function uses or loads the base of: the
    /// bounds of every table of the binary ([`build_from`]'s `table_starts`).
    pub fn table_starts(&self) -> impl Iterator<Item = u64> + '_ {
        self.jump_tables
            .iter()
            .map(|t| t.1.base)
            .chain(self.table_leas.iter().copied())
    }

    /// Read the function's jump tables, each ending at the first of `table_starts` (sorted)
    /// after its own start, or at the first entry that does not point into the function:
    /// (jump instruction index -> in-function targets, sorted by index; the offsets data refers
    /// to). A jump whose table has no entry becomes a tail call.
    fn read_tables(
        &mut self,
        image: &BoltFunctions<'_, '_>,
        func: &Function,
        table_starts: &[u64],
    ) -> (Vec<(u32, Vec<u64>)>, Vec<u64>) {
        let limit = |base: u64| {
            let i = table_starts.partition_point(|&b| b <= base);
            table_starts.get(i).copied().unwrap_or(u64::MAX)
        };
        let mut targets: Vec<(u32, Vec<u64>)> = Vec::new();
        for &(idx, table) in &self.jump_tables {
            let jt = jump_table_targets(image, func, table, limit(table.base));
            if jt.is_empty() {
                self.insns[idx as usize].set_tail_call();
            } else {
                targets.push((idx, jt));
            }
        }
        targets.sort_by_key(|t| t.0);
        // Tables only a `lea` points at: BOLT takes data there for a PIC jump table of this
        // function when it has more than one entry into the function.
        let mut referenced_by_data = Vec::new();
        let mut jump_bases: Vec<u64> = self.jump_tables.iter().map(|t| t.1.base).collect();
        jump_bases.sort_unstable();
        for &base in &self.table_leas {
            if jump_bases.binary_search(&base).is_ok() {
                continue;
            }
            let table = JumpTable {
                base,
                absolute: false,
            };
            let jt = jump_table_targets(image, func, table, limit(base));
            if jt.len() > 1 {
                referenced_by_data.extend(jt);
            }
        }
        // Data relocations into the function (jump-table entries and the like; not at its
        // start).
        let (start, size) = (func.address, func.size);
        referenced_by_data.extend(
            image
                .data_references_in(start.saturating_add(1), start.saturating_add(size))
                .iter()
                .map(|&a| a - start),
        );
        referenced_by_data.sort_unstable();
        referenced_by_data.dedup();
        (targets, referenced_by_data)
    }
}

/// Form the blocks of a decoded function whose secondary entry points (offsets) are `entries`.
///
/// `table_starts`: the start of every jump table of the binary, sorted (see
/// [`Decoded::table_starts`]); a table ends where the next one starts. `None`: only this
/// function's own tables bound each other.
pub fn build_from(
    image: &BoltFunctions<'_, '_>,
    func: &Function,
    entries: &[u64],
    mut d: Decoded,
    table_starts: Option<&[u64]>,
) -> Cfg {
    let own: Vec<u64>;
    let table_starts = match table_starts {
        Some(t) => t,
        None => {
            let mut v: Vec<u64> = d.table_starts().collect();
            v.sort_unstable();
            v.dedup();
            own = v;
            &own
        }
    };
    let (tables, referenced_by_data) = d.read_tables(image, func, table_starts);
    let Decoded {
        mut insns, simple, ..
    } = d;
    // In-function target offset of a direct jump or conditional jump.
    let direct_target = |i: &Insn| -> Option<u64> {
        (matches!(i.flow(), Flow::CondJump | Flow::Jump) && !i.tail_call())
            .then(|| i.target - func.address)
    };
    let table_targets = |idx: u32| -> &[u64] {
        tables
            .binary_search_by_key(&idx, |t| t.0)
            .map_or(&[], |k| tables[k].1.as_slice())
    };
    let size = func.size;
    // A function BOLT ignores (a symbol in its middle, "symbol seen in the middle of the
    // function", or, in relocation mode, invalid padding after it) is not simple.
    if !simple || insns.is_empty() || image.is_ignored(func.address) {
        return Cfg::new(false, insns, Vec::new(), Vec::new(), None);
    }
    // One bit per byte of the function: whether an instruction starts there. Every branch
    // target is checked, and a search of the instructions for each was a fifth of this
    // function's time.
    let end = insns
        .last()
        .map_or(0, |i| u64::from(i.offset) + u64::from(i.len()));
    let mut starts = vec![0u64; end.div_ceil(64) as usize];
    for i in &insns {
        starts[i.offset as usize / 64] |= 1 << (i.offset % 64);
    }
    let is_boundary = |off: u64| off < end && starts[(off / 64) as usize] & (1 << (off % 64)) != 0;
    // Leaders. Room for one in two instructions, so that the list is allocated once: grown
    // from one, it was reallocated five to ten times a function (it lives only in this call).
    let mut leaders: Vec<u64> = Vec::with_capacity(insns.len() / 2 + entries.len() + 2);
    leaders.push(0);
    leaders.extend(entries.iter().copied().filter(|&o| is_boundary(o)));
    // Every branch target, jump-table entry and data reference must be an instruction.
    for t in insns
        .iter()
        .filter_map(direct_target)
        .chain(tables.iter().flat_map(|t| t.1.iter().copied()))
        .chain(referenced_by_data.iter().copied())
    {
        if !is_boundary(t) {
            return Cfg::new(false, insns, Vec::new(), Vec::new(), None);
        }
        leaders.push(t);
    }
    let Ok(eh) = exception_info(image, func, &insns) else {
        return Cfg::new(false, insns, Vec::new(), Vec::new(), None);
    };
    leaders.extend(eh.pads.iter().copied());
    for (k, i) in insns.iter().enumerate() {
        if !matches!(i.flow(), Flow::Next | Flow::Call) {
            let next = u64::from(i.offset) + u64::from(i.len());
            // BOLT keeps a jump that directly follows a conditional branch in the conditional
            // branch's block (the block then ends in `jcc; jmp`) unless something else makes
            // the jump a leader.
            let jcc_then_jmp = i.flow() == Flow::CondJump
                && !i.tail_call()
                && insns
                    .get(k + 1)
                    .is_some_and(|n| n.flow() == Flow::Jump && !n.tail_call());
            if next < size && !jcc_then_jmp {
                leaders.push(next);
            }
        }
    }
    leaders.sort_unstable();
    leaders.dedup();
    let mut blocks = Vec::with_capacity(leaders.len());
    let mut insn_idx = 0usize;
    for (bi, &lead) in leaders.iter().enumerate() {
        let end = leaders.get(bi + 1).copied().unwrap_or(size);
        let first = insn_idx;
        while insn_idx < insns.len() && u64::from(insns[insn_idx].offset) < end {
            insn_idx += 1;
        }
        blocks.push(Block {
            offset: lead as u32,
            end: end as u32,
            first_insn: first as u32,
            end_insn: insn_idx as u32,
            succs: Succs::new(),
            is_entry: lead == 0 || entries.contains(&lead),
            landing_pads: (0, 0),
            is_landing_pad: false,
            invokes: 0,
        });
    }
    // Throw edges (BOLT's `recomputeLandingPads`): (block, landing-pad block) in invoke order,
    // then grouped by block (stably: each block's pads in the order their first invoke
    // appears), without duplicates.
    let mut throws: Vec<(u32, u32)> = Vec::new();
    for &(k, pad) in &eh.invokes {
        let bi = blocks.partition_point(|b| b.end_insn <= k);
        let Ok(pb) = leaders.binary_search(&pad) else {
            continue;
        };
        if bi >= blocks.len() {
            continue;
        }
        blocks[bi].invokes += 1;
        throws.push((bi as u32, pb as u32));
    }
    throws.sort_by_key(|t| t.0);
    let mut landing_pads = Vec::with_capacity(throws.len());
    for run in throws.chunk_by(|a, b| a.0 == b.0) {
        let start = landing_pads.len();
        for &(_, pb) in run {
            if !landing_pads[start..].contains(&pb) {
                landing_pads.push(pb);
                blocks[pb as usize].is_landing_pad = true;
            }
        }
        blocks[run[0].0 as usize].landing_pads =
            (start as u32, (landing_pads.len() - start) as u32);
    }
    // Every indirect jump classified once (see `IndirectJump`); outside relocation mode (no
    // strict mode) BOLT rejects the CFG of a function with an unanalyzable one ("failed to
    // post-process indirect branches"). Measured against perf2bolt 22's YAML on PIE builds, the
    // memory-location rule (`Unanalyzable`), not the epilogue rule that decides a jump's opcode,
    // tells which functions keep a CFG.
    // BOLT's `hasInternalReference`: data (jump tables) refers into the function.
    let has_jump_table = !referenced_by_data.is_empty()
        || insns
            .iter()
            .any(|i| i.flow() == Flow::IndirectJump && !i.tail_call());
    let strict = image.relocation_mode();
    for b in &blocks {
        let first = b.first_insn as usize;
        for k in first..b.end_insn as usize {
            if insns[k].flow() != Flow::IndirectJump {
                continue;
            }
            let kind = if !insns[k].tail_call() {
                IndirectJump::JumpTable
            } else if blocks.len() == 1 || (strict && !has_jump_table) {
                IndirectJump::TailCall
            } else if !strict && unanalyzable(&insns[first..=k]) {
                IndirectJump::Unanalyzable
            } else if insns[k].fixed_memory_target() || insns[first..k].iter().any(|i| i.epilogue())
            {
                IndirectJump::TailCall
            } else {
                IndirectJump::Unknown
            };
            insns[k].set_indirect(kind);
        }
    }
    if insns
        .iter()
        .any(|i| i.indirect() == Some(IndirectJump::Unanalyzable))
    {
        return Cfg::new(false, insns, Vec::new(), Vec::new(), None);
    }
    let block_of = |off: u64| leaders.binary_search(&off).ok().map(|i| i as u32);
    let real_blocks = blocks.len();
    // Every offset data refers to, sorted: the successors of an unknown-control-flow jump,
    // gathered for the first one.
    let mut referenced: Option<Vec<u64>> = None;
    let mut returns = Vec::new();
    #[allow(clippy::needless_range_loop)] // blocks[bi].succs is assigned at the end
    for bi in 0..real_blocks {
        let b = &blocks[bi];
        let next_block = (bi + 1 < real_blocks).then_some(bi as u32 + 1);
        let mut succs = Succs::new();
        if b.end_insn > b.first_insn {
            let last_idx = b.end_insn - 1;
            let last = insns[last_idx as usize];
            let direct;
            let tgts: &[u64] = match direct_target(&last) {
                Some(t) => {
                    direct = [t];
                    &direct
                }
                None => table_targets(last_idx),
            };
            match last.flow() {
                Flow::CondJump => {
                    succs.extend(tgts.iter().filter_map(|&t| block_of(t)));
                    succs.extend(next_block);
                }
                Flow::Jump => {
                    // `jcc; jmp` at the end of a block: the conditional target comes first.
                    if last_idx > b.first_insn {
                        let prev = &insns[last_idx as usize - 1];
                        if prev.flow() == Flow::CondJump && !prev.tail_call() {
                            succs.extend(direct_target(prev).and_then(block_of));
                        }
                    }
                    succs.extend(tgts.iter().filter_map(|&t| block_of(t)));
                }
                // Unknown control flow in strict mode (`addUnknownControlFlow`): every offset
                // data refers to, in address order.
                Flow::IndirectJump if strict && last.indirect() == Some(IndirectJump::Unknown) => {
                    let referenced = referenced.get_or_insert_with(|| {
                        let mut v: Vec<u64> = tables
                            .iter()
                            .flat_map(|t| t.1.iter().copied())
                            .chain(referenced_by_data.iter().copied())
                            .collect();
                        v.sort_unstable();
                        v.dedup();
                        v
                    });
                    succs = referenced.iter().filter_map(|&t| block_of(t)).collect();
                }
                Flow::IndirectJump => {
                    let mut v: Succs = tgts.iter().filter_map(|&t| block_of(t)).collect();
                    v.sort_unstable();
                    v.dedup();
                    succs = v;
                }
                // A return ends its block (the next instruction is a leader).
                Flow::Return => returns.push(last.offset),
                Flow::Trap => {}
                Flow::Next | Flow::Call => succs.extend(next_block),
            }
        }
        let mut seen = Succs::with_capacity(succs.len());
        for s in succs {
            if !seen.contains(&s) {
                seen.push(s);
            }
        }
        blocks[bi].succs = seen;
    }
    Cfg::new(true, insns, blocks, landing_pads, Some(returns))
}

/// What a function's LSDA adds to its CFG.
#[derive(Debug, Default)]
struct ExceptionInfo {
    /// Landing-pad offsets that are instructions of the function (block leaders).
    pads: Vec<u64>,
    /// Invokes: (instruction index, landing-pad offset), in instruction order.
    invokes: Vec<(u32, u64)>,
}

/// Why BOLT builds no CFG for a function because of its LSDA.
#[derive(Debug)]
enum NoCfg {
    /// A landing pad outside the function (another fragment of it): BOLT skips the function.
    ForeignLandingPad,
    /// The LSDA cannot be read.
    BadLsda,
}

/// The landing pads and invokes of `func` from its LSDA (BOLT's `parseLSDA` on the
/// disassembled function, `insns` in address order).
fn exception_info(
    image: &BoltFunctions<'_, '_>,
    func: &Function,
    insns: &[Insn],
) -> Result<ExceptionInfo, NoCfg> {
    let mut info = ExceptionInfo::default();
    let Some(lsda) = image
        .function_at(func.address)
        .and_then(|index| image.lsda(index))
    else {
        return Ok(info);
    };
    let lsda = lsda.map_err(|_| NoCfg::BadLsda)?;
    let index_at = |off: u64| {
        insns
            .binary_search_by_key(&off, |x| u64::from(x.offset))
            .ok()
    };
    for site in &lsda.call_sites {
        let mut pad = None;
        if site.landing_pad != 0 {
            let lp = site.landing_pad;
            if lp < func.address || lp - func.address > func.size {
                return Err(NoCfg::ForeignLandingPad);
            }
            // A landing pad that is no instruction is ignored (BOLT warns at -v=1).
            let off = lp - func.address;
            if index_at(off).is_some() {
                info.pads.push(off);
                pad = Some(off);
            }
        }
        let (Some(pad), Some(first)) = (pad, index_at(site.start)) else {
            continue;
        };
        let end = site.start.saturating_add(site.length);
        let mut k = first;
        loop {
            let i = &insns[k];
            // BOLT's `isCall` at this point: calls, and jumps already made tail calls during
            // disassembly (direct ones leaving the function, indirect ones through a fixed
            // memory location); conditional tail calls are left out.
            let is_call = match i.flow() {
                Flow::Call => true,
                Flow::Jump => i.tail_call(),
                Flow::IndirectJump => i.tail_call() && i.fixed_memory_target(),
                _ => false,
            };
            if is_call {
                info.invokes.push((k as u32, pad));
            }
            k += 1;
            if k >= insns.len() || u64::from(insns[k].offset) >= end {
                break;
            }
        }
    }
    Ok(info)
}

/// A jump table: where it is and how its entries encode targets.
#[derive(Debug, Clone, Copy)]
struct JumpTable {
    base: u64,
    /// 8-byte absolute addresses (non-PIC), or 4-byte offsets from `base` (PIC).
    absolute: bool,
}

/// The jump table an indirect jump goes through: `jmp *table(,%reg,8)` (absolute entries), or
/// the position-independent sequence `lea table(%rip), %rB; movslq (%rB,%rI,4), %rX;
/// add %rB, %rX; jmp *%rX` (entries relative to the table).
fn jump_table_base(ins: &Instruction, recent: &[Instruction]) -> Option<JumpTable> {
    if ins.op0_kind() == OpKind::Memory
        && ins.memory_base() == Register::None
        && ins.memory_index() != Register::None
        && ins.memory_index_scale() == 8
    {
        return Some(JumpTable {
            base: ins.memory_displacement64(),
            absolute: true,
        });
    }
    if ins.op0_kind() != OpKind::Register {
        return None;
    }
    let target = ins.op0_register().full_register();
    let load = recent.iter().rev().find(|i| {
        i.code() == Code::Movsxd_r64_rm32
            && i.op0_register().full_register() == target
            && i.op1_kind() == OpKind::Memory
            && i.memory_index_scale() == 4
    })?;
    let table_reg = load.memory_base().full_register();
    let lea = recent.iter().rev().find(|i| {
        i.code() == Code::Lea_r64_m
            && i.op0_register().full_register() == table_reg
            && i.memory_base() == Register::RIP
    })?;
    Some(JumpTable {
        base: lea.ip_rel_memory_address(),
        absolute: false,
    })
}

/// Targets of a jump table: entries read while they point into the function and stay below
/// `limit` (the function's next table).
fn jump_table_targets(
    image: &BoltFunctions<'_, '_>,
    func: &Function,
    table: JumpTable,
    limit: u64,
) -> Vec<u64> {
    let width = if table.absolute { 8 } else { 4 };
    let mut out = Vec::new();
    // The table's section is found once and its entries read in a row, up to the section's
    // end (each entry looked up on its own was a scan of the section headers).
    let binary = image.binary();
    let Some(bytes) = binary.bytes_from(table.base) else {
        return out;
    };
    let mut words = Cursor::new(bytes, 0).with_endian(binary.endian());
    for i in 0..4096u64 {
        let Some(at) = table.base.checked_add(width * i) else {
            break;
        };
        if at >= limit {
            break;
        }
        let entry = if table.absolute {
            words.read_u64()
        } else {
            words
                .read_u32()
                .map(|rel| table.base.wrapping_add(rel as i32 as i64 as u64))
        };
        let Ok(entry) = entry else {
            break;
        };
        if entry < func.address || entry - func.address >= func.size {
            break;
        }
        out.push(entry - func.address);
    }
    out
}

/// Whether the indirect jump `jump` (after the instructions `before`, in address order) takes
/// its target from memory at a fixed place: BOLT converts such a jump that is no valid jump
/// table into a tail call during disassembly. Otherwise (`analyzeIndirectBranch` says UNKNOWN:
/// a base register, no load found, or a register set by something else than a load) it becomes
/// a tail call only in a block with epilogue code (`postProcessIndirectBranches`).
///
/// The memory location is the jump's own operand or, for a jump through a register, the plain
/// load that last writes the register before the jump in address order (BOLT has no blocks yet).
fn fixed_memory_target(jump: &Instruction, before: &[Instruction]) -> bool {
    let mem_loc = if jump.op0_kind() == OpKind::Memory {
        Some(jump)
    } else {
        let reg = jump.op0_register().full_register();
        let mut factory = InstructionInfoFactory::new();
        before
            .iter()
            .rev()
            .find(|i| {
                factory.info(i).used_registers().iter().any(|u| {
                    u.register().full_register() == reg
                        && matches!(
                            u.access(),
                            OpAccess::Write
                                | OpAccess::ReadWrite
                                | OpAccess::CondWrite
                                | OpAccess::ReadCondWrite
                        )
                })
            })
            .filter(|i| {
                matches!(
                    i.code(),
                    Code::Mov_r64_rm64 | Code::Mov_r32_rm32 | Code::Mov_r16_rm16
                ) && i.op1_kind() == OpKind::Memory
            })
    };
    mem_loc.is_some_and(|m| {
        let base = m.memory_base();
        (base == Register::None || base == Register::RIP) && m.segment_prefix() == Register::None
    })
}

/// Whether a conditional jump's condition is the one X86's `getCanonicalBranchCondCode` keeps
/// (of each pair of opposite conditions: e, l, g, b, a, s, p, o); forms without a condition
/// code (`jcxz`, `loop`) count as canonical, their invalid code mapping to itself.
fn is_canonical_condition(code: Code) -> bool {
    use iced_x86::Mnemonic as M;
    !matches!(
        code.mnemonic(),
        M::Jne | M::Jge | M::Jle | M::Jae | M::Jbe | M::Jns | M::Jnp | M::Jno
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every field of a packed instruction reads back as written, whatever the others hold.
    #[test]
    fn packed_instruction_fields_read_back() {
        assert_eq!(std::mem::size_of::<Insn>(), 16);
        for len in [1u8, 7, 15] {
            for flow in FLOWS {
                for flags in 0..16u8 {
                    let [has_mem, tail_call, epilogue, fixed] =
                        [0, 1, 2, 3].map(|bit| flags & (1 << bit) != 0);
                    let code = Code::Jmp_rm64;
                    let mut i = Insn::new(
                        0x1234_5678,
                        len,
                        flow,
                        code,
                        u64::MAX - 1,
                        has_mem,
                        tail_call,
                        epilogue,
                        fixed,
                    );
                    let check = |i: &Insn, tail_call: bool, indirect: Option<IndirectJump>| {
                        assert_eq!(
                            (i.offset, i.len(), i.flow(), i.code, i.target),
                            (0x1234_5678, len, flow, code, u64::MAX - 1)
                        );
                        assert_eq!(
                            (i.has_mem(), i.tail_call(), i.epilogue()),
                            (has_mem, tail_call, epilogue)
                        );
                        assert_eq!(i.fixed_memory_target(), fixed);
                        assert_eq!(i.indirect(), indirect);
                    };
                    check(&i, tail_call, None);
                    for kind in INDIRECT_JUMPS {
                        i.set_indirect(kind);
                        check(&i, tail_call, Some(kind));
                    }
                    i.set_tail_call();
                    check(&i, true, Some(IndirectJump::Unanalyzable));
                }
            }
        }
    }

    proptest::proptest! {
        /// `is_return_at` answers as the instruction `insn_at` finds does, at every offset:
        /// instruction starts, the middle of instructions and past the end.
        #[test]
        fn return_offsets_agree_with_the_instruction_list(
            insns in proptest::collection::vec((1u8..16, 0usize..FLOWS.len()), 0..40),
            simple in proptest::bool::ANY,
        ) {
            let mut offset = 0u32;
            let insns: Vec<Insn> = insns
                .into_iter()
                .map(|(len, flow)| {
                    let i = Insn::new(
                        offset, len, FLOWS[flow], Code::Nopd, 0, false, false, false, false,
                    );
                    offset += u32::from(len);
                    i
                })
                .collect();
            let cfg = Cfg::new(simple, insns, Vec::new(), Vec::new(), None);
            for at in 0..=u64::from(offset) + 1 {
                proptest::prop_assert_eq!(
                    cfg.is_return_at(at),
                    cfg.insn_at(at).is_some_and(|i| i.flow() == Flow::Return),
                    "offset {}", at
                );
            }
        }
    }
}
