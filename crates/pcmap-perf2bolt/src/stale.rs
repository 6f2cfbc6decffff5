//! Stale-profile block matching, as llvm-bolt 22 matches the YAML profile of a function whose
//! code changed to the blocks of the new build (`--infer-stale-profile`, `matchWeights` in
//! BOLT's `StaleProfileMatching.cpp`), and the matching statistics it prints
//! (`inference found an exact match for X% of basic blocks (A out of B stale) responsible for
//! Y% samples (C out of D stale)`, then the same for call and loose matches).
//!
//! A profile is stale for a function of the new build when its function hash or its block count
//! differs (the same test llvm-bolt makes before reading it). Each profiled block (one item of
//! the YAML function's `blocks`) carries its packed [`BlendedHash`]; matching runs in BOLT's
//! order and a binary block keeps the first profile block matched to it:
//!
//! 1. **exact**: among the new blocks with the same `OpcodeHash`, the one nearest by
//!    [`BlendedHash::distance`] (first in block order on ties), when its `InstrHash` is equal;
//! 2. **call**: the block's profiled callees (names without BOLT's `/N` suffix, sorted,
//!    concatenated, xxh3) equal to a new block's callees (the same), nearest by
//!    `OpcodeHash` difference; else **loose**: the nearest block with the same `OpcodeHash`,
//!    whatever its `InstrHash`; a profile entry block (index 0) left unmatched takes the new
//!    entry block as a loose match.
//!
//! Pseudo-probe matching (off by default in llvm-bolt) is not modelled. What llvm-bolt then does
//! with the matches (flow inference, `profi`) is not either: this module answers how much of a
//! stale profile can be carried over to the new build, block by block.

use std::collections::HashMap;

use pcmap_binary::bolt::{BoltFunction as Function, BoltFunctions};
use pcmap_profile::yaml;

use crate::cfg::Cfg;

/// The fields of BOLT's packed block hash (`BlendedBlockHash`; see [`crate::block_hash`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BlendedHash {
    /// The block's offset in its function (low 16 bits).
    pub offset: u16,
    /// Hash of the block's mnemonics without operands.
    pub opcode: u16,
    /// Hash of the block's instructions with operands.
    pub instr: u16,
    /// Hash of the predecessors' opcode hashes.
    pub pred: u8,
    /// Hash of the successors' opcode hashes.
    pub succ: u8,
}

impl BlendedHash {
    /// The fields of a packed hash.
    pub fn unpack(packed: u64) -> Self {
        Self {
            offset: packed as u16,
            opcode: (packed >> 16) as u16,
            instr: (packed >> 32) as u16,
            pred: (packed >> 48) as u8,
            succ: (packed >> 56) as u8,
        }
    }

    /// BOLT's distance between two hashes of equal `opcode`: neighbours first (one per differing
    /// predecessor or successor hash), then the instruction hash, then the offset difference.
    pub fn distance(&self, other: &Self) -> u64 {
        let neighbours = u64::from(self.succ != other.succ) + u64::from(self.pred != other.pred);
        let instr = u64::from(self.instr != other.instr);
        (neighbours << 32) + (instr << 16) + u64::from(self.offset.abs_diff(other.offset))
    }
}

/// The call hash of a block from its callees' names (`hashBlockCalls`): 0 when it has none.
fn call_hash(mut names: Vec<&str>) -> u64 {
    if names.is_empty() {
        return 0;
    }
    names.sort_unstable();
    xxhash_rust::xxh3::xxh3_64(names.concat().as_bytes())
}

/// A function name without the `/N` (or `/file/N`) BOLT appends to local names
/// (`NameResolver::dropNumNames`).
fn drop_num_names(name: &str) -> &str {
    name.split('/').next().unwrap_or(name)
}

/// The call hash of every block of `func` in the new build: the names of the functions its
/// direct calls and tail calls target (the function's own for a call into itself), without
/// BOLT's `/N` suffix: a call's target is the callee's symbol (measured against llvm-bolt 22 on
/// zstd, whose static functions only match by callees this way).
pub fn binary_call_hashes(image: &BoltFunctions<'_, '_>, func: &Function, cfg: &Cfg) -> Vec<u64> {
    let funcs = image.functions();
    cfg.blocks
        .iter()
        .map(|b| {
            let names = cfg.insns[b.first_insn as usize..b.end_insn as usize]
                .iter()
                .filter(|i| i.is_call() && i.target != 0)
                .filter_map(|i| {
                    if i.target >= func.address && i.target - func.address < func.size {
                        return Some(func.name());
                    }
                    image.function_at(i.target).map(|fi| funcs[fi].name())
                })
                .map(drop_num_names)
                .collect();
            call_hash(names)
        })
        .collect()
}

/// The call hash of a profiled block: the names of its call sites' callees among the profile's
/// functions (`fid`), each without BOLT's `/N` suffix (`NameResolver::dropNumNames`).
pub fn profile_call_hash(block: &yaml::Block, names_by_id: &HashMap<u32, &str>) -> u64 {
    let names = block
        .calls
        .iter()
        .filter_map(|c| names_by_id.get(&c.dest_id))
        .map(|n| drop_num_names(n))
        .collect();
    call_hash(names)
}

/// How a profiled block was matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// Same opcodes and instructions.
    Exact,
    /// Same callees.
    Call,
    /// Same opcodes only (or the entry block).
    Loose,
}

/// A number of profiled blocks and the sum of their `exec` counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct BlockCount {
    /// Profiled blocks.
    pub blocks: u64,
    /// Their execution counts (llvm-bolt's "samples").
    pub samples: u64,
}

impl BlockCount {
    fn add(&mut self, samples: u64) {
        self.blocks += 1;
        self.samples = self.samples.wrapping_add(samples);
    }

    fn merge(&mut self, other: &Self) {
        self.blocks += other.blocks;
        self.samples = self.samples.wrapping_add(other.samples);
    }
}

/// What matching found for stale profiles (one function, or a sum).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct MatchStats {
    /// Every profiled block of the stale profiles.
    pub stale: BlockCount,
    /// Blocks matched exactly.
    pub exact: BlockCount,
    /// Blocks matched by their callees.
    pub call: BlockCount,
    /// Blocks matched loosely (opcodes only).
    pub loose: BlockCount,
}

impl MatchStats {
    /// Add another function's statistics.
    pub fn merge(&mut self, other: &Self) {
        self.stale.merge(&other.stale);
        self.exact.merge(&other.exact);
        self.call.merge(&other.call);
        self.loose.merge(&other.loose);
    }

    /// Profiled blocks matched by any method.
    pub fn matched(&self) -> BlockCount {
        let mut m = self.exact;
        m.merge(&self.call);
        m.merge(&self.loose);
        m
    }
}

/// The new build's blocks of one function: index `i` is block `i` in BOLT's layout order (the
/// order of the YAML `bid`s outside `--profile-use-dfs`).
struct Matcher {
    hashes: Vec<BlendedHash>,
    by_opcode: HashMap<u16, Vec<usize>>,
    by_calls: HashMap<u64, Vec<usize>>,
}

impl Matcher {
    fn new(packed: &[u64], calls: &[u64]) -> Self {
        let hashes: Vec<BlendedHash> = packed.iter().map(|&h| BlendedHash::unpack(h)).collect();
        let mut by_opcode: HashMap<u16, Vec<usize>> = HashMap::new();
        let mut by_calls: HashMap<u64, Vec<usize>> = HashMap::new();
        for (i, h) in hashes.iter().enumerate() {
            by_opcode.entry(h.opcode).or_default().push(i);
            if let Some(&c) = calls.get(i).filter(|&&c| c != 0) {
                by_calls.entry(c).or_default().push(i);
            }
        }
        Self {
            hashes,
            by_opcode,
            by_calls,
        }
    }

    /// The nearest block with the same opcode hash, and whether its instruction hash is equal.
    fn with_opcodes(&self, h: &BlendedHash) -> Option<(usize, bool)> {
        let best = self
            .by_opcode
            .get(&h.opcode)?
            .iter()
            .copied()
            .min_by_key(|&i| self.hashes[i].distance(h))?;
        Some((best, self.hashes[best].instr == h.instr))
    }

    /// The block with the same callees nearest by opcode hash.
    fn with_calls(&self, h: &BlendedHash, call_hash: u64) -> Option<usize> {
        if call_hash == 0 {
            return None;
        }
        self.by_calls
            .get(&call_hash)?
            .iter()
            .copied()
            .min_by_key(|&i| self.hashes[i].opcode.abs_diff(h.opcode))
    }
}

/// Match a stale function profile to the blocks of the new build: `new_hashes` and `new_calls`
/// are the new function's packed block hashes ([`crate::block_hash::block_hashes`]) and call
/// hashes ([`binary_call_hashes`]); `profile_calls[k]` is the call hash of `profile.blocks[k]`
/// ([`profile_call_hash`]). Returns the statistics llvm-bolt adds up for this function.
pub fn match_function(
    profile: &yaml::Function,
    profile_calls: &[u64],
    new_hashes: &[u64],
    new_calls: &[u64],
) -> MatchStats {
    let mut stats = MatchStats::default();
    if new_hashes.is_empty() {
        return stats;
    }
    let matcher = Matcher::new(new_hashes, new_calls);
    // New block -> how it was first matched; profile block index -> (new block, profile block).
    let mut method_of: HashMap<usize, Method> = HashMap::new();
    let mut matched: HashMap<u32, (usize, usize)> = HashMap::new();
    let mut add = |block: Option<usize>, method: Method, k: usize| {
        let Some(block) = block else { return };
        if method_of.contains_key(&block) {
            return;
        }
        method_of.insert(block, method);
        matched.insert(profile.blocks[k].index, (block, k));
    };
    for (k, b) in profile.blocks.iter().enumerate() {
        stats.stale.add(b.exec_count);
        let h = BlendedHash::unpack(b.hash);
        if let Some((block, true)) = matcher.with_opcodes(&h) {
            add(Some(block), Method::Exact, k);
        }
    }
    for (k, b) in profile.blocks.iter().enumerate() {
        let h = BlendedHash::unpack(b.hash);
        let call = profile_calls.get(k).copied().unwrap_or(0);
        let found = match matcher.with_calls(&h, call) {
            Some(block) => Some((block, Method::Call)),
            None => matcher
                .with_opcodes(&h)
                .map(|(block, _)| (block, Method::Loose)),
        };
        match found {
            Some((block, method)) => add(Some(block), method, k),
            None if b.index == 0 => add(Some(0), Method::Loose, k),
            None => {}
        }
    }
    for &(block, k) in matched.values() {
        let samples = profile.blocks[k].exec_count;
        match method_of[&block] {
            Method::Exact => stats.exact.add(samples),
            Method::Call => stats.call.add(samples),
            Method::Loose => stats.loose.add(samples),
        }
    }
    stats
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pack(offset: u16, opcode: u16, instr: u16, pred: u8, succ: u8) -> u64 {
        u64::from(offset)
            | u64::from(opcode) << 16
            | u64::from(instr) << 32
            | u64::from(pred) << 48
            | u64::from(succ) << 56
    }

    fn block(index: u32, hash: u64, exec: u64) -> yaml::Block {
        yaml::Block {
            index,
            hash,
            exec_count: exec,
            ..Default::default()
        }
    }

    #[test]
    fn unpack_reads_the_fields_pack_wrote() {
        let h = BlendedHash::unpack(pack(0x1234, 0xabcd, 0x5678, 0x9a, 0xbc));
        assert_eq!(
            h,
            BlendedHash {
                offset: 0x1234,
                opcode: 0xabcd,
                instr: 0x5678,
                pred: 0x9a,
                succ: 0xbc
            }
        );
    }

    #[test]
    fn neighbours_weigh_more_than_instructions_and_instructions_more_than_offsets() {
        let a = BlendedHash::unpack(pack(0, 1, 1, 1, 1));
        let same_neighbours = BlendedHash::unpack(pack(4000, 1, 2, 1, 1));
        let same_instr = BlendedHash::unpack(pack(0, 1, 1, 2, 1));
        assert!(a.distance(&same_neighbours) < a.distance(&same_instr));
        assert_eq!(a.distance(&a), 0);
    }

    #[test]
    fn exact_matches_come_first_and_a_block_keeps_its_first_match() {
        // New blocks: 0 = entry, 1 = same opcodes as profile block 1 but other operands.
        let new = [pack(0, 10, 100, 0, 1), pack(8, 20, 201, 1, 0)];
        let profile = yaml::Function {
            blocks: vec![
                block(0, pack(0, 10, 100, 0, 1), 50),
                block(1, pack(8, 20, 200, 1, 0), 30),
                // The same opcodes again: its nearest block is taken already.
                block(2, pack(12, 20, 200, 1, 0), 7),
                // Nothing with these opcodes.
                block(3, pack(16, 30, 300, 1, 0), 5),
            ],
            ..Default::default()
        };
        let stats = match_function(&profile, &[0; 4], &new, &[0, 0]);
        assert_eq!(
            stats.stale,
            BlockCount {
                blocks: 4,
                samples: 92
            }
        );
        assert_eq!(
            stats.exact,
            BlockCount {
                blocks: 1,
                samples: 50
            }
        );
        assert_eq!(
            stats.loose,
            BlockCount {
                blocks: 1,
                samples: 30
            }
        );
        assert_eq!(stats.call, BlockCount::default());
    }

    #[test]
    fn callees_match_before_opcodes_and_the_entry_falls_back_to_block_zero() {
        let new = [pack(0, 10, 100, 0, 1), pack(8, 21, 201, 1, 0)];
        let calls = [0, call_hash(vec!["g"])];
        let profile = yaml::Function {
            blocks: vec![
                block(0, pack(0, 11, 100, 0, 1), 9),
                block(1, pack(8, 22, 200, 1, 0), 4),
            ],
            ..Default::default()
        };
        let profile_calls = [0, call_hash(vec!["g"])];
        let stats = match_function(&profile, &profile_calls, &new, &calls);
        assert_eq!(
            stats.call,
            BlockCount {
                blocks: 1,
                samples: 4
            }
        );
        assert_eq!(
            stats.loose,
            BlockCount {
                blocks: 1,
                samples: 9
            }
        );
        assert_eq!(stats.exact, BlockCount::default());
    }

    #[test]
    fn profile_callees_drop_the_local_suffix() {
        let names: HashMap<u32, &str> = [(3, "helper/1"), (4, "g")].into_iter().collect();
        let b = yaml::Block {
            calls: vec![
                yaml::CallSite {
                    dest_id: 4,
                    ..Default::default()
                },
                yaml::CallSite {
                    dest_id: 3,
                    ..Default::default()
                },
                yaml::CallSite {
                    dest_id: 99,
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        assert_eq!(profile_call_hash(&b, &names), call_hash(vec!["ghelper"]));
        assert_eq!(profile_call_hash(&yaml::Block::default(), &names), 0);
    }
}
