//! Parameter locations: the [`Location`] model and the classification of DWARF location
//! expressions into it.

use gimli::{Operation, Reader, UnwindContext};
use serde::Serialize;

use crate::cfa::CfaIndex;
use crate::sections::Slice;

/// A register plus a signed byte offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct RegOffset {
    /// DWARF register number.
    pub reg: u16,
    /// Byte offset.
    pub offset: i64,
}

/// One part of a [`Location::Pieces`] composition.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct LocationPiece {
    /// Size of the piece in bits.
    pub size_bits: u64,
    /// Where the piece lives ([`Location::NoLocation`] for an optimised-out piece).
    pub location: Location,
}

/// Where a parameter's value is at an inline site's address.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Location {
    /// A known constant (`DW_AT_const_value`, literal ops, a folded register-free expression, or
    /// an `DW_OP_implicit_value` of at most 8 bytes), little-endian bits zero-extended to 64.
    Constant {
        /// The value's bits.
        value: u64,
    },
    /// A constant wider than 8 bytes.
    ConstantBytes {
        /// The bytes, in target order.
        bytes: Box<[u8]>,
    },
    /// The value is in memory at a fixed address (`DW_OP_addr`).
    Address {
        /// The address (as linked).
        address: u64,
    },
    /// The value is a link-time address, i.e. a pointer to a static object
    /// (`DW_OP_addr a; DW_OP_stack_value`); relocate it by the load base.
    AddressValue {
        /// The address (as linked).
        address: u64,
    },
    /// The value is in a register (`DW_OP_regN`).
    Register {
        /// DWARF register number.
        reg: u16,
    },
    /// The value is register + offset (`DW_OP_bregN off; DW_OP_stack_value`).
    RegisterOffsetValue {
        /// DWARF register number.
        reg: u16,
        /// Byte offset added to the register.
        offset: i64,
    },
    /// The value is in memory at register + offset (`DW_OP_bregN off`).
    Memory {
        /// DWARF register number.
        reg: u16,
        /// Byte offset from the register.
        offset: i64,
    },
    /// The value is frame base + offset, i.e. a pointer to a stack slot
    /// (`DW_OP_fbreg off; DW_OP_stack_value`).
    FrameBaseValue {
        /// Offset from the frame base.
        offset: i64,
        /// The frame base as register + offset at the site address (see [`Location::FrameBase`]).
        base: Option<RegOffset>,
    },
    /// The value is in memory at frame base + offset (`DW_OP_fbreg off`).
    FrameBase {
        /// Offset from the frame base.
        offset: i64,
        /// The frame base as register + offset at the site address (from `DW_AT_frame_base`,
        /// through CFI for `DW_OP_call_frame_cfa`); the value is then at `*(reg + offset + self.offset)`.
        base: Option<RegOffset>,
    },
    /// The value the register had at entry of the enclosing out-of-line function
    /// (`DW_OP_entry_value(DW_OP_regN); DW_OP_stack_value`) — not the register at the site.
    EntryValue {
        /// DWARF register number.
        reg: u16,
    },
    /// A composition of pieces (`DW_OP_piece`).
    Pieces {
        /// The pieces, lowest first.
        pieces: Vec<LocationPiece>,
    },
    /// A pointer to an object that does not exist in memory (`DW_OP_implicit_pointer`).
    ImplicitPointer {
        /// `.debug_info` offset of the DIE describing the pointed-to object.
        die: u64,
        /// Byte offset into that object.
        byte_offset: i64,
    },
    /// The value of a parameter of the enclosing function at its entry (`DW_OP_GNU_parameter_ref`).
    ParameterRef {
        /// `.debug_info` offset of the referenced parameter DIE.
        die: u64,
    },
    /// Any other expression (arithmetic on registers, dereferences, ...), kept raw.
    Computed {
        /// The DWARF expression bytes.
        expression: Box<[u8]>,
    },
    /// The parameter DIE exists but has no location (optimised out).
    NoLocation,
    /// The inline site has no DIE for this parameter (clang omits them when there is no location).
    Missing,
    /// The location list does not cover the site address.
    NotCovered,
}

/// The coarse classes used by the census.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LocationClass {
    /// [`Location::Register`].
    Register,
    /// [`Location::Constant`] / [`Location::ConstantBytes`].
    Constant,
    /// [`Location::Address`].
    Address,
    /// [`Location::Memory`].
    Memory,
    /// [`Location::RegisterOffsetValue`].
    RegisterOffsetValue,
    /// [`Location::FrameBase`].
    FrameBase,
    /// [`Location::EntryValue`].
    EntryValue,
    /// [`Location::Computed`].
    Computed,
    /// [`Location::ImplicitPointer`].
    ImplicitPointer,
    /// [`Location::Pieces`].
    Pieces,
    /// [`Location::ParameterRef`].
    ParameterRef,
    /// [`Location::Missing`].
    Missing,
    /// [`Location::NoLocation`].
    NoLocation,
    /// [`Location::NotCovered`].
    NotCovered,
}

impl LocationClass {
    /// All classes, in census order.
    pub const ALL: [LocationClass; 14] = [
        LocationClass::Register,
        LocationClass::Constant,
        LocationClass::Address,
        LocationClass::Memory,
        LocationClass::RegisterOffsetValue,
        LocationClass::FrameBase,
        LocationClass::EntryValue,
        LocationClass::Computed,
        LocationClass::ImplicitPointer,
        LocationClass::Pieces,
        LocationClass::ParameterRef,
        LocationClass::Missing,
        LocationClass::NoLocation,
        LocationClass::NotCovered,
    ];

    /// Short name (as in the census table).
    pub fn name(self) -> &'static str {
        match self {
            LocationClass::Register => "reg",
            LocationClass::Constant => "const",
            LocationClass::Address => "addr",
            LocationClass::Memory => "breg_mem",
            LocationClass::RegisterOffsetValue => "breg_value",
            LocationClass::FrameBase => "fbreg",
            LocationClass::EntryValue => "entry_value",
            LocationClass::Computed => "complex",
            LocationClass::ImplicitPointer => "implicit_ptr",
            LocationClass::Pieces => "pieces",
            LocationClass::ParameterRef => "param_ref",
            LocationClass::Missing => "missing",
            LocationClass::NoLocation => "none",
            LocationClass::NotCovered => "gap",
        }
    }
}

impl Location {
    /// The census class.
    pub fn class(&self) -> LocationClass {
        match self {
            Location::Constant { .. } | Location::ConstantBytes { .. } => LocationClass::Constant,
            Location::Address { .. } | Location::AddressValue { .. } => LocationClass::Address,
            Location::Register { .. } => LocationClass::Register,
            Location::RegisterOffsetValue { .. } => LocationClass::RegisterOffsetValue,
            Location::Memory { .. } => LocationClass::Memory,
            Location::FrameBase { .. } | Location::FrameBaseValue { .. } => {
                LocationClass::FrameBase
            }
            Location::EntryValue { .. } => LocationClass::EntryValue,
            Location::Pieces { .. } => LocationClass::Pieces,
            Location::ImplicitPointer { .. } => LocationClass::ImplicitPointer,
            Location::ParameterRef { .. } => LocationClass::ParameterRef,
            Location::Computed { .. } => LocationClass::Computed,
            Location::NoLocation => LocationClass::NoLocation,
            Location::Missing => LocationClass::Missing,
            Location::NotCovered => LocationClass::NotCovered,
        }
    }

    /// True when the value can be obtained at the site (everything except the three "no location" cases).
    pub fn is_available(&self) -> bool {
        !matches!(
            self,
            Location::NoLocation | Location::Missing | Location::NotCovered
        )
    }

    /// Human-readable form with x86-64 register names, e.g. `%rdi`, `8(%rsp)`, `%rdi+16`, `$42`.
    pub fn display_x86_64(&self) -> String {
        let r = |reg: u16| format!("%{}", x86_64_register_name(reg));
        match self {
            Location::Constant { value } => format!("${}", *value as i64),
            Location::ConstantBytes { bytes } => {
                let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
                format!("$0x{hex}")
            }
            Location::Address { address } => format!("@{address:#x}"),
            Location::AddressValue { address } => format!("${address:#x}"),
            Location::FrameBaseValue { offset, base } => match base {
                Some(b) => format!("{}{:+}", r(b.reg), b.offset.saturating_add(*offset)),
                None => format!("frame_base{offset:+}"),
            },
            Location::Register { reg } => r(*reg),
            Location::RegisterOffsetValue { reg, offset } => format!("{}{:+}", r(*reg), offset),
            Location::Memory { reg, offset } => format!("{}({})", offset, r(*reg)),
            Location::FrameBase { offset, base } => match base {
                Some(b) => format!("{}({})", b.offset.saturating_add(*offset), r(b.reg)),
                None => format!("{offset}(frame_base)"),
            },
            Location::EntryValue { reg } => format!("entry({})", r(*reg)),
            Location::Pieces { pieces } => {
                let parts: Vec<String> = pieces
                    .iter()
                    .map(|p| format!("{}:{}", p.location.display_x86_64(), p.size_bits))
                    .collect();
                format!("[{}]", parts.join(","))
            }
            Location::ImplicitPointer { die, byte_offset } => {
                format!("implicit_ptr({die:#x}{byte_offset:+})")
            }
            Location::ParameterRef { die } => format!("param_ref({die:#x})"),
            Location::Computed { expression } => {
                let hex: String = expression.iter().map(|b| format!("{b:02x}")).collect();
                format!("expr({hex})")
            }
            Location::NoLocation => "<optimised out>".into(),
            Location::Missing => "<no DIE>".into(),
            Location::NotCovered => "<not at site>".into(),
        }
    }
}

/// The x86-64 name of a DWARF register number (System V psABI numbering).
pub fn x86_64_register_name(reg: u16) -> &'static str {
    const NAMES: [&str; 17] = [
        "rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11", "r12",
        "r13", "r14", "r15", "rip",
    ];
    const XMM: [&str; 16] = [
        "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
        "xmm11", "xmm12", "xmm13", "xmm14", "xmm15",
    ];
    match reg {
        0..=16 => NAMES[reg as usize],
        17..=32 => XMM[reg as usize - 17],
        _ => "?",
    }
}

/// The frame base of the enclosing concrete function (`DW_AT_frame_base`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FrameBaseRule {
    /// No or unsupported frame base.
    Unknown,
    /// The frame base is the value of register + offset.
    Register(RegOffset),
    /// `DW_OP_call_frame_cfa`.
    Cfa,
}

impl FrameBaseRule {
    pub(crate) fn from_expression(
        expr: gimli::Expression<Slice<'_>>,
        encoding: gimli::Encoding,
    ) -> Self {
        let mut ops = expr.operations(encoding);
        let first = match ops.next() {
            Ok(Some(op)) => op,
            _ => return FrameBaseRule::Unknown,
        };
        if !matches!(ops.next(), Ok(None)) {
            return FrameBaseRule::Unknown;
        }
        match first {
            Operation::Register { register } => FrameBaseRule::Register(RegOffset {
                reg: register.0,
                offset: 0,
            }),
            Operation::RegisterOffset {
                register, offset, ..
            } => FrameBaseRule::Register(RegOffset {
                reg: register.0,
                offset,
            }),
            Operation::CallFrameCFA => FrameBaseRule::Cfa,
            _ => FrameBaseRule::Unknown,
        }
    }
}

/// What classification needs to know about the site.
pub(crate) struct ClassifyCtx<'a, 'u> {
    pub(crate) unit: gimli::UnitRef<'u, Slice<'a>>,
    pub(crate) frame_base: FrameBaseRule,
    pub(crate) site_addr: Option<u64>,
    pub(crate) cfa: &'u CfaIndex<'a>,
    pub(crate) unwind: &'u mut UnwindContext<usize>,
    pub(crate) endian: gimli::RunTimeEndian,
}

type Op<'a> = Operation<Slice<'a>>;

/// Classify one location expression.
pub(crate) fn classify(
    expr: gimli::Expression<Slice<'_>>,
    ctx: &mut ClassifyCtx<'_, '_>,
) -> Location {
    let bytes = expr.0.slice();
    let encoding = ctx.unit.encoding();
    // Parse all operations, remembering the byte span of each.
    let mut ops: Vec<(Op<'_>, usize, usize)> = Vec::new();
    let mut reader = expr.0;
    let total = bytes.len();
    while !reader.is_empty() {
        let start = total - reader.len();
        match Operation::parse(&mut reader, encoding) {
            Ok(op) => ops.push((op, start, total - reader.len())),
            Err(_) => return computed(bytes),
        }
    }
    if ops.is_empty() {
        return Location::NoLocation;
    }
    if ops
        .iter()
        .any(|(op, _, _)| matches!(op, Operation::Piece { .. }))
    {
        return classify_pieces(bytes, &ops, ctx);
    }
    classify_simple(bytes, &ops, ctx)
}

fn computed(bytes: &[u8]) -> Location {
    Location::Computed {
        expression: bytes.into(),
    }
}

fn classify_pieces(
    bytes: &[u8],
    ops: &[(Op<'_>, usize, usize)],
    ctx: &mut ClassifyCtx<'_, '_>,
) -> Location {
    let mut pieces = Vec::new();
    let mut start_idx = 0;
    for (i, (op, _, _)) in ops.iter().enumerate() {
        if let Operation::Piece {
            size_in_bits,
            bit_offset,
        } = op
        {
            if bit_offset.is_some() {
                return computed(bytes);
            }
            let part = &ops[start_idx..i];
            let location = if part.is_empty() {
                Location::NoLocation
            } else {
                let (b, e) = (part[0].1, part[part.len() - 1].2);
                classify_simple(&bytes[b..e], part, ctx)
            };
            pieces.push(LocationPiece {
                size_bits: *size_in_bits,
                location,
            });
            start_idx = i + 1;
        }
    }
    if start_idx != ops.len() {
        // Trailing operations after the last piece: not a valid composition.
        return computed(bytes);
    }
    Location::Pieces { pieces }
}

fn classify_simple(
    bytes: &[u8],
    ops: &[(Op<'_>, usize, usize)],
    ctx: &mut ClassifyCtx<'_, '_>,
) -> Location {
    use Operation as O;
    let only: Vec<&Op<'_>> = ops.iter().map(|(o, _, _)| o).collect();
    match only.as_slice() {
        [O::Register { register }] => return Location::Register { reg: register.0 },
        [
            O::RegisterOffset {
                register,
                offset,
                base_type,
            },
        ] if base_type.0 == 0 => {
            return Location::Memory {
                reg: register.0,
                offset: *offset,
            };
        }
        [
            O::RegisterOffset {
                register,
                offset,
                base_type,
            },
            O::StackValue,
        ] if base_type.0 == 0 => {
            return Location::RegisterOffsetValue {
                reg: register.0,
                offset: *offset,
            };
        }
        [O::FrameOffset { offset }] => {
            return Location::FrameBase {
                offset: *offset,
                base: frame_base(ctx),
            };
        }
        [O::FrameOffset { offset }, O::StackValue] => {
            return Location::FrameBaseValue {
                offset: *offset,
                base: frame_base(ctx),
            };
        }
        [O::Address { address }, O::StackValue] => {
            return Location::AddressValue { address: *address };
        }
        [O::AddressIndex { index }, O::StackValue] => {
            return match ctx.unit.address(*index) {
                Ok(address) => Location::AddressValue { address },
                Err(_) => computed(bytes),
            };
        }
        [O::EntryValue { expression }, O::StackValue] => {
            let mut r = *expression;
            if let Ok(O::Register { register }) = Operation::parse(&mut r, ctx.unit.encoding())
                && r.is_empty()
            {
                return Location::EntryValue { reg: register.0 };
            }
            return computed(bytes);
        }
        [O::ImplicitPointer { value, byte_offset }] => {
            return Location::ImplicitPointer {
                die: value.0 as u64,
                byte_offset: *byte_offset,
            };
        }
        [O::ParameterRef { offset }] | [O::ParameterRef { offset }, O::StackValue] => {
            let die = ctx.unit.header.debug_info_offset().map_or(0, |u| u.0) + offset.0;
            return Location::ParameterRef { die: die as u64 };
        }
        [O::Address { address }] => return Location::Address { address: *address },
        [O::AddressIndex { index }] => {
            return match ctx.unit.address(*index) {
                Ok(address) => Location::Address { address },
                Err(_) => computed(bytes),
            };
        }
        _ => {}
    }
    if only.iter().all(|op| register_free(op))
        && let Some(loc) = evaluate_constant(bytes, ctx)
    {
        return loc;
    }
    computed(bytes)
}

/// The frame base at the site address as register + offset, if it can be resolved.
fn frame_base(ctx: &mut ClassifyCtx<'_, '_>) -> Option<RegOffset> {
    match ctx.frame_base {
        FrameBaseRule::Register(r) => Some(r),
        FrameBaseRule::Cfa => ctx.site_addr.and_then(|a| ctx.cfa.cfa_at(ctx.unwind, a)),
        FrameBaseRule::Unknown => None,
    }
}

/// True for operations that need no machine state (registers, memory, frame, entry values, ...).
fn register_free(op: &Op<'_>) -> bool {
    use Operation as O;
    matches!(
        op,
        O::Drop
            | O::Pick { .. }
            | O::Swap
            | O::Rot
            | O::Abs
            | O::And
            | O::Div
            | O::Minus
            | O::Mod
            | O::Mul
            | O::Neg
            | O::Not
            | O::Or
            | O::Plus
            | O::PlusConstant { .. }
            | O::Shl
            | O::Shr
            | O::Shra
            | O::Xor
            | O::Bra { .. }
            | O::Eq
            | O::Ge
            | O::Gt
            | O::Le
            | O::Lt
            | O::Ne
            | O::Skip { .. }
            | O::UnsignedConstant { .. }
            | O::SignedConstant { .. }
            | O::Nop
            | O::StackValue
            | O::ImplicitValue { .. }
            | O::Address { .. }
            | O::AddressIndex { .. }
            | O::ConstantIndex { .. }
    )
}

/// Evaluate a register-free expression; `None` when it does not reduce to a constant or an address.
fn evaluate_constant(bytes: &[u8], ctx: &ClassifyCtx<'_, '_>) -> Option<Location> {
    let encoding = ctx.unit.encoding();
    let slice = gimli::EndianSlice::new(bytes, ctx.endian);
    let mut eval = gimli::Evaluation::new(slice, encoding);
    // Branches can loop: bound the work on untrusted expressions.
    eval.set_max_iterations(10_000);
    let mut result = eval.evaluate().ok()?;
    // Bounded: each resume consumes at least one operation.
    for _ in 0..=bytes.len() {
        match result {
            gimli::EvaluationResult::Complete => break,
            gimli::EvaluationResult::RequiresRelocatedAddress(a) => {
                result = eval.resume_with_relocated_address(a).ok()?;
            }
            gimli::EvaluationResult::RequiresIndexedAddress { index, .. } => {
                let a = ctx.unit.address(index).ok()?;
                result = eval.resume_with_indexed_address(a).ok()?;
            }
            _ => return None,
        }
    }
    if !matches!(result, gimli::EvaluationResult::Complete) {
        return None;
    }
    let pieces = eval.result();
    let [piece] = pieces.as_slice() else {
        return None;
    };
    match &piece.location {
        gimli::Location::Value { value } => Some(Location::Constant {
            value: value.to_u64(u64::MAX).ok()?,
        }),
        gimli::Location::Address { address } => Some(Location::Address { address: *address }),
        gimli::Location::Bytes { value } => Some(constant_bytes(value.slice())),
        gimli::Location::Empty => Some(Location::NoLocation),
        _ => None,
    }
}

/// A constant from raw bytes (little-endian up to 8 bytes, else kept as bytes).
pub(crate) fn constant_bytes(b: &[u8]) -> Location {
    if b.len() <= 8 {
        let mut v = [0u8; 8];
        v[..b.len()].copy_from_slice(b);
        Location::Constant {
            value: u64::from_le_bytes(v),
        }
    } else {
        Location::ConstantBytes { bytes: b.into() }
    }
}
