//! x86 and x86-64 instruction decoding with `iced-x86`: boundaries, lengths, a branch
//! classification and direct branch targets.

use iced_x86::{Decoder, DecoderOptions, FlowControl, OpKind};

/// What an instruction does to control flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BranchKind {
    /// Conditional direct jump (`jcc`, `loop*`, `jrcxz`).
    ConditionalJump,
    /// Unconditional direct jump (`jmp rel`).
    Jump,
    /// Indirect jump (`jmp reg/mem`), e.g. a jump table or a tail call through a pointer.
    IndirectJump,
    /// Direct call.
    Call,
    /// Indirect call.
    IndirectCall,
    /// Return (`ret`, `retf`, `iret`, ...).
    Return,
    /// Anything else, including traps (`ud2`, `int3`) and invalid bytes.
    Other,
}

impl BranchKind {
    /// True for every kind that transfers control (everything but [`BranchKind::Other`]).
    pub fn is_branch(self) -> bool {
        self != BranchKind::Other
    }
}

/// A prefix that LLVM's disassembler (and so `llvm-objdump` and BOLT) decodes as an instruction
/// of its own: `lock` when it is the first byte of an instruction, and `xacquire`/`xrelease`
/// (`f2`/`f3`) directly before such a `lock`. pcmap follows LLVM so that instruction boundaries
/// and BOLT's opcode sequences agree with LLVM's tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StandalonePrefix {
    /// `f0`: LLVM's `LOCK_PREFIX`.
    Lock,
    /// `f2` before `lock`: LLVM's `XACQUIRE_PREFIX`.
    Xacquire,
    /// `f3` before `lock`: LLVM's `XRELEASE_PREFIX`.
    Xrelease,
}

/// One decoded instruction.
#[derive(Debug, Clone, Copy)]
pub struct Instruction {
    inner: iced_x86::Instruction,
    kind: BranchKind,
    prefix: Option<StandalonePrefix>,
}

impl Instruction {
    /// Virtual address.
    pub fn address(&self) -> u64 {
        self.inner.ip()
    }

    /// Length in bytes (1 for undecodable bytes, which are skipped one at a time like objdump does).
    pub fn len(&self) -> usize {
        self.inner.len()
    }

    /// Always false: a decoded instruction has at least one byte (clippy wants `is_empty` beside `len`).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Address of the next instruction.
    pub fn next_address(&self) -> u64 {
        self.inner.next_ip()
    }

    /// Branch classification.
    pub fn kind(&self) -> BranchKind {
        self.kind
    }

    /// True if the bytes did not decode to a valid instruction (standalone prefixes are valid).
    pub fn is_invalid(&self) -> bool {
        self.prefix.is_none() && self.inner.is_invalid()
    }

    /// `Some` if this one-byte "instruction" is a prefix LLVM decodes on its own.
    pub fn standalone_prefix(&self) -> Option<StandalonePrefix> {
        self.prefix
    }

    /// The direct target of a branch or call (also `xbegin`'s abort target): `None` for
    /// indirect branches and for non-branches.
    pub fn target(&self) -> Option<u64> {
        match self.inner.op0_kind() {
            OpKind::NearBranch16 | OpKind::NearBranch32 | OpKind::NearBranch64 => {
                Some(self.inner.near_branch_target())
            }
            _ => None,
        }
    }

    /// The full `iced-x86` instruction (operands, mnemonic, opcode `Code`), for analyses that
    /// need more than the classification. For a standalone prefix this is an invalid
    /// instruction of length 1; see [`Instruction::standalone_prefix`].
    pub fn iced(&self) -> &iced_x86::Instruction {
        &self.inner
    }
}

/// Classify an `iced-x86` instruction.
fn classify(i: &iced_x86::Instruction) -> BranchKind {
    if i.is_invalid() {
        return BranchKind::Other;
    }
    match i.flow_control() {
        FlowControl::ConditionalBranch => BranchKind::ConditionalJump,
        FlowControl::UnconditionalBranch => BranchKind::Jump,
        FlowControl::IndirectBranch => BranchKind::IndirectJump,
        FlowControl::Call => BranchKind::Call,
        FlowControl::IndirectCall => BranchKind::IndirectCall,
        FlowControl::Return => BranchKind::Return,
        FlowControl::Next
        | FlowControl::Interrupt
        | FlowControl::XbeginXabortXend
        | FlowControl::Exception => BranchKind::Other,
    }
}

/// Decodes a run of code bytes at a virtual address, one [`Instruction`] at a time.
///
/// Undecodable bytes come out as one-byte invalid instructions and decoding resumes at the next
/// byte, as `llvm-objdump -d` does.
pub struct InstructionIter<'a> {
    decoder: Decoder<'a>,
    bytes: &'a [u8],
    start: u64,
}

impl<'a> InstructionIter<'a> {
    /// Decode `bytes` placed at `address`; `bitness` is 64 for x86-64, 32 for i386.
    pub fn new(bitness: u32, bytes: &'a [u8], address: u64) -> Self {
        InstructionIter {
            decoder: Decoder::with_ip(bitness, bytes, address, DecoderOptions::NONE),
            bytes,
            start: address,
        }
    }
}

impl Iterator for InstructionIter<'_> {
    type Item = Instruction;

    fn next(&mut self) -> Option<Instruction> {
        if !self.decoder.can_decode() {
            return None;
        }
        let pos = self.decoder.position();
        let here = &self.bytes[pos..];
        let prefix = match here {
            [0xf0, _, ..] => Some(StandalonePrefix::Lock),
            [0xf2, 0xf0, _, ..] => Some(StandalonePrefix::Xacquire),
            [0xf3, 0xf0, _, ..] => Some(StandalonePrefix::Xrelease),
            _ => None,
        };
        if prefix.is_some() {
            let next = pos + 1;
            let _ = self.decoder.set_position(next);
            self.decoder.set_ip(self.start + next as u64);
            let mut inner = iced_x86::Instruction::default();
            inner.set_len(1);
            inner.set_next_ip(self.start + next as u64);
            return Some(Instruction {
                inner,
                kind: BranchKind::Other,
                prefix,
            });
        }
        let mut inner = iced_x86::Instruction::default();
        self.decoder.decode_out(&mut inner);
        if inner.is_invalid() {
            // Resynchronise one byte later; report a one-byte invalid instruction.
            let next = pos + 1;
            if next <= self.bytes.len() {
                // Positions within the slice are always valid; ignore the impossible error.
                let _ = self.decoder.set_position(next);
                self.decoder.set_ip(self.start + next as u64);
            }
            inner.set_len(1);
            inner.set_next_ip(self.start + next as u64);
        }
        let kind = classify(&inner);
        Some(Instruction {
            inner,
            kind,
            prefix: None,
        })
    }
}
