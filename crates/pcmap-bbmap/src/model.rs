//! The decoded content of a basic-block address map, named as LLVM names it
//! (`BBAddrMap`, `BBRangeEntry`, `BBEntry`, `PGOAnalysisMap`) so the code can be read beside
//! `llvm/Object/ELFTypes.h` and `Extensions.rst`.

use std::fmt;

/// The per-function feature field (`BBAddrMap::Features`): a byte before version 5, a 16-bit
/// field in file byte order from version 5 on.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Features(pub u16);

impl Features {
    /// Bit 0: a ULEB function entry count follows the blocks.
    pub const FUNC_ENTRY_COUNT: u16 = 0x01;
    /// Bit 1: a ULEB block frequency per block.
    pub const BB_FREQ: u16 = 0x02;
    /// Bit 2: a successor list with branch probabilities per block.
    pub const BR_PROB: u16 = 0x04;
    /// Bit 3: the function has several address ranges (`-fbasic-block-sections`, split functions).
    pub const MULTI_BB_RANGE: u16 = 0x08;
    /// Bit 4: block counts are written but block records are omitted.
    pub const OMIT_BB_ENTRIES: u16 = 0x10;
    /// Bit 5 (version >= 3): every block lists its callsite end offsets.
    pub const CALLSITE_END_OFFSETS: u16 = 0x20;
    /// Bit 6 (version >= 4): every block carries a 64-bit hash.
    pub const BB_HASH: u16 = 0x40;
    /// Bit 7 (version >= 5): post-link block and edge counts in the PGO map.
    pub const POST_LINK_CFG: u16 = 0x80;
    /// All bits LLVM 22 defines.
    pub const ALL: u16 = 0xff;

    /// Whether every bit of `bits` is set.
    #[inline]
    pub fn has(self, bits: u16) -> bool {
        self.0 & bits == bits
    }
    /// `FuncEntryCount`.
    pub fn func_entry_count(self) -> bool {
        self.has(Self::FUNC_ENTRY_COUNT)
    }
    /// `BBFreq`.
    pub fn bb_freq(self) -> bool {
        self.has(Self::BB_FREQ)
    }
    /// `BrProb`.
    pub fn br_prob(self) -> bool {
        self.has(Self::BR_PROB)
    }
    /// `MultiBBRange`.
    pub fn multi_bb_range(self) -> bool {
        self.has(Self::MULTI_BB_RANGE)
    }
    /// `OmitBBEntries`.
    pub fn omit_bb_entries(self) -> bool {
        self.has(Self::OMIT_BB_ENTRIES)
    }
    /// `CallsiteEndOffsets`.
    pub fn callsite_end_offsets(self) -> bool {
        self.has(Self::CALLSITE_END_OFFSETS)
    }
    /// `BBHash`.
    pub fn bb_hash(self) -> bool {
        self.has(Self::BB_HASH)
    }
    /// `PostLinkCfg`.
    pub fn post_link_cfg(self) -> bool {
        self.has(Self::POST_LINK_CFG)
    }
    /// `hasPGOAnalysis()`: any of the three PGO bits, so a PGO record follows the blocks.
    pub fn has_pgo_analysis(self) -> bool {
        self.0 & (Self::FUNC_ENTRY_COUNT | Self::BB_FREQ | Self::BR_PROB) != 0
    }
    /// `hasPGOAnalysisBBData()`: per-block PGO records follow.
    pub fn has_pgo_analysis_bb_data(self) -> bool {
        self.0 & (Self::BB_FREQ | Self::BR_PROB) != 0
    }
    /// The lowest format version that may carry these features.
    pub fn min_version(self) -> u8 {
        if self.post_link_cfg() {
            5
        } else if self.bb_hash() {
            4
        } else if self.callsite_end_offsets() {
            3
        } else {
            2
        }
    }
}

impl fmt::Debug for Features {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Features({:#x})", self.0)
    }
}

/// The block metadata ULEB (`BBEntry::Metadata`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct BlockMetadata(pub u32);

impl BlockMetadata {
    /// The block ends in a return (or a tail call).
    pub const HAS_RETURN: u32 = 0x01;
    /// The block ends in a tail call.
    pub const HAS_TAIL_CALL: u32 = 0x02;
    /// The block is an exception landing pad.
    pub const IS_EH_PAD: u32 = 0x04;
    /// Control may fall through to the next block in layout.
    pub const CAN_FALL_THROUGH: u32 = 0x08;
    /// The block ends in an indirect branch (jump table, computed goto).
    pub const HAS_INDIRECT_BRANCH: u32 = 0x10;
    /// All bits LLVM 22 defines.
    pub const ALL: u32 = 0x1f;

    /// `HasReturn`.
    pub fn has_return(self) -> bool {
        self.0 & Self::HAS_RETURN != 0
    }
    /// `HasTailCall`.
    pub fn has_tail_call(self) -> bool {
        self.0 & Self::HAS_TAIL_CALL != 0
    }
    /// `IsEHPad`.
    pub fn is_eh_pad(self) -> bool {
        self.0 & Self::IS_EH_PAD != 0
    }
    /// `CanFallThrough`.
    pub fn can_fall_through(self) -> bool {
        self.0 & Self::CAN_FALL_THROUGH != 0
    }
    /// `HasIndirectBranch`.
    pub fn has_indirect_branch(self) -> bool {
        self.0 & Self::HAS_INDIRECT_BRANCH != 0
    }
}

impl fmt::Debug for BlockMetadata {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BlockMetadata({:#x})", self.0)
    }
}

/// One basic block (`BBEntry`). `offset` is relative to the base address of its range.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BbEntry {
    /// The block's `MachineBasicBlock` number (not unique: cloned blocks repeat their ID).
    pub id: u32,
    /// Start of the block relative to its range's base address.
    pub offset: u32,
    /// Size in bytes (may be zero).
    pub size: u32,
    /// `HasReturn`, `HasTailCall`, ... bits.
    pub metadata: BlockMetadata,
    /// With `CallsiteEndOffsets`: the end of every call (and tail call) relative to the block start,
    /// in increasing order.
    pub callsite_end_offsets: Vec<u32>,
    /// With `BBHash`: the block hash (0 otherwise).
    pub hash: u64,
}

/// One contiguous address range of a function (`BBRangeEntry`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BbRange {
    /// Address of the range (for relocatable objects: the offset in its text section).
    pub base_address: u64,
    /// `NumBlocks` as written; equals `entries.len()` unless the function has `OmitBBEntries`.
    pub num_blocks: u32,
    /// The block records (empty with `OmitBBEntries`).
    pub entries: Vec<BbEntry>,
}

/// One successor of a block in the PGO map.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PgoSuccessor {
    /// Block ID of the successor.
    pub id: u32,
    /// Branch probability numerator over 2^31 (`BranchProbability::getRaw`).
    pub probability: u32,
    /// With `PostLinkCfg`: post-link edge count.
    pub post_link_frequency: u32,
}

/// The PGO record of one block.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PgoBbEntry {
    /// With `BBFreq`: block frequency relative to the entry.
    pub frequency: u64,
    /// With `PostLinkCfg`: post-link block count.
    pub post_link_frequency: u32,
    /// With `BrProb`: successors with probabilities.
    pub successors: Vec<PgoSuccessor>,
}

/// The PGO analysis map of a function (`PGOAnalysisMap`), present when any PGO bit is set.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PgoAnalysis {
    /// With `FuncEntryCount`: the entry count.
    pub func_entry_count: u64,
    /// With `BBFreq` or `BrProb`: one record per decoded block, over all ranges in order.
    pub bb_entries: Vec<PgoBbEntry>,
}

/// How one function record was encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Layout {
    /// SHT_LLVM_BB_ADDR_MAP version 0-5 (a version byte and a feature field precede the record).
    Versioned(u8),
    /// The original unversioned LLVM 12 `.bb_addr_map` (type 0x6fff4c08): every block has
    /// `{offset from the function start, size, metadata}` and the block index is its ID.
    Unversioned,
    /// The `.bb_info` proposal as written: like [`Layout::Unversioned`] but the entry block's
    /// offset field is omitted ("as it is always zero").
    BbInfoProposal,
}

/// The map of one function (`BBAddrMap` plus its `PGOAnalysisMap`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionMap {
    /// Record layout and version.
    pub layout: Layout,
    /// Feature bits of this function (features are per function).
    pub features: Features,
    /// Address ranges; the first holds the entry block. Never empty.
    pub ranges: Vec<BbRange>,
    /// Present when `features.has_pgo_analysis()`.
    pub pgo: Option<PgoAnalysis>,
}

impl FunctionMap {
    /// The function address: the base address of the first range (`getFunctionAddress`).
    pub fn function_address(&self) -> u64 {
        self.ranges.first().map_or(0, |r| r.base_address)
    }
    /// Number of decoded block records over all ranges.
    pub fn num_entries(&self) -> usize {
        self.ranges.iter().map(|r| r.entries.len()).sum()
    }
    /// The format version (`None` for the unversioned layouts).
    pub fn version(&self) -> Option<u8> {
        match self.layout {
            Layout::Versioned(v) => Some(v),
            _ => None,
        }
    }
}
