//! The neutral input model of the encoders: inline sites, the callee's prototype, and where each
//! parameter's value is at the site. Independent of any DWARF reader; the CLI converts the
//! extractor's model into this one.

/// Register number meaning "the frame base" (`BTF_LOC_PARAM_FBREG` of the 2026 revision).
pub const FRAME_BASE_REG: u32 = 0xffff_ffff;

/// Where a parameter's value is at a site. Register numbers are DWARF numbers of the target ABI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Loc {
    /// A known constant (low `size` bytes are meaningful).
    Const(u64),
    /// A link-time address (a pointer constant that moves with the load base).
    Addr(u64),
    /// The value is in a register.
    Reg(u32),
    /// The value is split over two registers (low part first), e.g. a 16-byte struct.
    RegPair(u32, u32),
    /// The value is `reg + offset` (no memory access).
    RegOffset {
        /// Register.
        reg: u32,
        /// Added offset.
        offset: i32,
    },
    /// The value is in memory at `reg + offset`.
    Deref {
        /// Register (or [`FRAME_BASE_REG`]).
        reg: u32,
        /// Offset from the register's value.
        offset: i32,
    },
}

/// One located parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ParamLoc {
    /// Byte size of the parameter's type.
    pub size: u32,
    /// Whether the type is signed.
    pub signed: bool,
    /// Where the value is.
    pub loc: Loc,
}

impl ParamLoc {
    /// The canonical form: constants truncated to `size` bytes, `reg + 0` written as `reg`.
    pub fn canonical(mut self) -> ParamLoc {
        match &mut self.loc {
            Loc::Const(v) if self.size > 0 && self.size < 8 => *v &= (1u64 << (self.size * 8)) - 1,
            Loc::RegOffset { reg, offset: 0 } => self.loc = Loc::Reg(*reg),
            _ => {}
        }
        self
    }
}

/// A C type as the encoder needs it to find (or make) a BTF id.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TypeDesc {
    /// `void` (id 0).
    Void,
    /// A base type.
    Int {
        /// Name, e.g. `unsigned int`.
        name: String,
        /// Byte size.
        size: u32,
        /// Signed.
        signed: bool,
        /// A character type.
        char: bool,
        /// `_Bool`.
        bool: bool,
    },
    /// A floating-point type.
    Float {
        /// Name.
        name: String,
        /// Byte size.
        size: u32,
    },
    /// `struct NAME` (looked up by name; unnamed or unknown ones become opaque types).
    Struct {
        /// Tag name.
        name: Option<String>,
        /// Byte size.
        size: u32,
    },
    /// `union NAME`.
    Union {
        /// Tag name.
        name: Option<String>,
        /// Byte size.
        size: u32,
    },
    /// `enum NAME`.
    Enum {
        /// Tag name.
        name: Option<String>,
        /// Byte size.
        size: u32,
        /// Signed enumerators.
        signed: bool,
    },
    /// `typedef TARGET NAME`.
    Typedef {
        /// Name.
        name: String,
        /// Target type.
        target: Box<TypeDesc>,
    },
    /// `T *`.
    Pointer(Box<TypeDesc>),
    /// `const T`.
    Const(Box<TypeDesc>),
    /// `volatile T`.
    Volatile(Box<TypeDesc>),
    /// `restrict T`.
    Restrict(Box<TypeDesc>),
    /// `T[len]`.
    Array {
        /// Element type.
        elem: Box<TypeDesc>,
        /// Number of elements (0 for flexible).
        len: u32,
    },
    /// A function type (behind a pointer).
    Function {
        /// Return type.
        ret: Box<TypeDesc>,
        /// Parameter types.
        params: Vec<TypeDesc>,
        /// `...`.
        varargs: bool,
    },
}

/// One parameter of an inlined function's source prototype.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FuncParam {
    /// Name (may be empty).
    pub name: String,
    /// Type.
    pub ty: TypeDesc,
}

/// An inlined function (the abstract origin).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct InlineFunc {
    /// Name.
    pub name: String,
    /// Return type.
    pub ret: TypeDesc,
    /// Parameters in declaration order.
    pub params: Vec<FuncParam>,
    /// Takes `...`.
    pub varargs: bool,
}

/// An ELF section holding code; site offsets are relative to its address.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CodeSection {
    /// Section name, e.g. `.text`.
    pub name: String,
    /// Link-time address.
    pub address: u64,
    /// Size in bytes.
    pub size: u64,
}

/// One inline site.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Site {
    /// Link-time address of the site's entry.
    pub address: u64,
    /// Index into [`SiteSet::funcs`].
    pub func: usize,
    /// One entry per parameter of the callee: `None` when the value is not available.
    pub params: Vec<Option<ParamLoc>>,
}

/// Everything the encoders need.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SiteSet {
    /// Code sections (sites are assigned to the section containing their address).
    pub sections: Vec<CodeSection>,
    /// Inlined functions.
    pub funcs: Vec<InlineFunc>,
    /// Sites.
    pub sites: Vec<Site>,
}

/// A site as decoded from any encoding.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DecodedSite {
    /// Section name (empty for the RFC layout, which stores absolute addresses).
    pub section: String,
    /// Offset in the section, or the absolute address when `section` is empty.
    pub offset: u64,
    /// Callee name.
    pub func: String,
    /// Parameter locations as the encoding stores them.
    pub params: Vec<Option<ParamLoc>>,
}

impl DecodedSite {
    /// The absolute address, given the sections of the binary.
    pub fn address(&self, sections: &[CodeSection]) -> Option<u64> {
        if self.section.is_empty() {
            return Some(self.offset);
        }
        sections
            .iter()
            .find(|s| s.name == self.section)
            .map(|s| s.address.wrapping_add(self.offset))
    }
}
