//! The block attributor: how a taken branch and a fall-through range map onto the blocks of an
//! address map, with Propeller's rules (after its `BinaryAddressMapper`). `pcmap bbmap profile`
//! ([`BlockProfile`](crate::profile::BlockProfile)) and the Propeller CFG builder both classify
//! through here, so they count the same edges from the same input.
//!
//! Lookups (provided by the index, see [`BlockLookup`]): a branch *source* (and the end of a
//! fall-through) maps to the non-empty block containing it; a branch *target* (and the start of a
//! fall-through) maps to the first block starting exactly there (a zero-sized block wins over the
//! non-empty block at the same address), else to the block containing it.
//!
//! A taken branch `from -> to` is
//! * a **call** when the target is the exact start of a function's entry block (tail calls and
//!   recursion included);
//! * a **return** when the target is not a block start, or the source block ends in a return
//!   (`HasReturn`);
//! * an intra-function **branch** when both ends are in the same function;
//! * otherwise an **inter-function** jump.
//!
//! A fall-through range `start ..= end` is valid only when both ends are in the same address range
//! of the same function, `start <= end`, and every block it runs through except the last
//! `CanFallThrough`.

/// What the attributor needs to know about a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockFacts {
    /// First address.
    pub start: u64,
    /// Function number.
    pub function: u32,
    /// Address range within the function.
    pub range: u32,
    /// The function's entry block.
    pub entry: bool,
    /// `HasReturn`.
    pub has_return: bool,
    /// `CanFallThrough`.
    pub can_fall_through: bool,
}

/// An index over the blocks of an address map. Block numbers must be consecutive within an
/// address range of a function, in address order.
pub trait BlockLookup {
    /// The non-empty block containing `addr`.
    fn source_block(&self, addr: u64) -> Option<usize>;
    /// The first block starting at `addr`, else the block containing it.
    fn target_block(&self, addr: u64) -> Option<usize>;
    /// Facts about block `b`.
    fn facts(&self, b: usize) -> BlockFacts;
}

/// How a taken branch relates two blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EdgeKind {
    /// Within a function, landing at a block start.
    Branch,
    /// Landing exactly at a function's entry block.
    Call,
    /// Landing inside a block, or leaving a block that returns.
    Return,
    /// Between functions, neither call nor return.
    InterFunction,
}

/// A classified taken branch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BranchClass {
    /// Both ends are in blocks.
    Edge {
        /// Source block.
        from: usize,
        /// Target block.
        to: usize,
        /// The kind.
        kind: EdgeKind,
    },
    /// Neither end is in a block.
    Unmapped,
    /// The source is outside every block, the target inside one.
    FromOutside,
    /// The source is inside a block, the target outside.
    ToOutside,
}

/// A classified fall-through range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FallThroughClass {
    /// The range runs through blocks `first ..= last` (consecutive numbers).
    Valid {
        /// First block.
        first: usize,
        /// Last block.
        last: usize,
        /// The range starts at the first block's start (it enters that block; a range starting
        /// in the middle of a block — after a return — does not).
        enters_first: bool,
    },
    /// An end is outside every block.
    Unmapped,
    /// The range cannot happen on this binary (backwards, across functions or ranges, or through
    /// a block that cannot fall through).
    Invalid,
}

/// Classify a taken branch `from -> to`.
#[inline]
pub fn classify_branch<L: BlockLookup + ?Sized>(map: &L, from: u64, to: u64) -> BranchClass {
    let (s, t) = match (map.source_block(from), map.target_block(to)) {
        (None, None) => return BranchClass::Unmapped,
        (None, Some(_)) => return BranchClass::FromOutside,
        (Some(_), None) => return BranchClass::ToOutside,
        (Some(s), Some(t)) => (s, t),
    };
    let (src, dst) = (map.facts(s), map.facts(t));
    let kind = if dst.entry && to == dst.start {
        EdgeKind::Call
    } else if to != dst.start || src.has_return {
        EdgeKind::Return
    } else if src.function == dst.function {
        EdgeKind::Branch
    } else {
        EdgeKind::InterFunction
    };
    BranchClass::Edge {
        from: s,
        to: t,
        kind,
    }
}

/// Classify a fall-through range `start ..= end`.
#[inline]
pub fn classify_fall_through<L: BlockLookup + ?Sized>(
    map: &L,
    start: u64,
    end: u64,
) -> FallThroughClass {
    let (Some(sb), Some(eb)) = (map.target_block(start), map.source_block(end)) else {
        return FallThroughClass::Unmapped;
    };
    if start > end || sb > eb {
        return FallThroughClass::Invalid;
    }
    let (s, e) = (map.facts(sb), map.facts(eb));
    if s.function != e.function || s.range != e.range {
        return FallThroughClass::Invalid;
    }
    if (sb..eb).any(|b| !map.facts(b).can_fall_through) {
        return FallThroughClass::Invalid;
    }
    FallThroughClass::Valid {
        first: sb,
        last: eb,
        enters_first: start == s.start,
    }
}
