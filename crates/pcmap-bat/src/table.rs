//! [`BatTable`]: a BAT section indexed for address translation (what perf2bolt does with it).

use crate::decode::{ColdHeader, HotHeader, Sink, decode_payload, note_payload};
use crate::error::{DecodeError, ModelError};
use crate::model::{Bat, Block, Entry, EntryKind};

/// A BAT section indexed for lookups: translate BOLTed-binary addresses to input-function
/// offsets, find a function's fragments, hashes and blocks.
///
/// Built in one pass over the bytes ([`BatTable::parse`]) into flat arrays; a lookup is an
/// address-bucket probe, a short binary search over fragment starts and one over the fragment's
/// output offsets, and never allocates. Immutable and `Sync`: share it across
/// threads.
#[derive(Debug, Default)]
pub struct BatTable {
    /// Start address of every fragment (hot and cold), sorted.
    fragment_addresses: Vec<u64>,
    /// Per fragment (parallel to `fragment_addresses`).
    fragments: Vec<FragmentRecord>,
    /// Per entry, grouped by fragment in section order: the output offset (dense, for the
    /// binary search).
    keys: Vec<u32>,
    /// Per entry (parallel to `keys`): everything a lookup returns, in one record so that a
    /// lookup touches one more cache line after the search.
    payload: Vec<EntryPayload>,
    /// Hot functions in address order.
    functions: Vec<FunctionRecord>,
    /// Secondary entry points of all functions (ranges in `FunctionRecord`).
    secondary_entry_points: Vec<u32>,
    /// Cold fragment addresses of all functions, grouped by function, in address order.
    cold_fragments: Vec<u64>,
    /// Per function, its blocks by input offset (built on first use by `block_at`).
    blocks_by_input: std::sync::OnceLock<BlocksByInput>,
    /// Page index narrowing the fragment search (see `fragment_index`).
    buckets: pcmap_bytes::StartIndex,
}

/// `(function, input offset) -> block`: sorted `(function index, input offset, block id)`.
#[derive(Debug, Default)]
struct BlocksByInput(Vec<(u32, u32, u32)>);

#[derive(Debug, Clone, Copy, Default)]
struct EntryPayload {
    /// The block the entry lies in: the nearest block entry at or before it in its fragment
    /// (itself for a block entry).
    block_hash: u64,
    block_index: u32,
    /// `(input_offset << 1) | BRANCHENTRY`.
    packed_input: u32,
    has_block: bool,
}

#[derive(Debug, Clone, Copy, Default)]
struct FragmentRecord {
    entries_start: u32,
    entries_end: u32,
    /// Output address of the function's hot fragment.
    function_address: u64,
    /// Index into `functions`.
    function: u32,
}

#[derive(Debug, Clone, Copy, Default)]
struct FunctionRecord {
    address: u64,
    hash: u64,
    num_blocks: u64,
    secondary: (u32, u32),
    cold: (u32, u32),
}

/// The result of translating an address of the BOLTed binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Translation {
    /// Output address of the function's hot fragment. The BOLTed binary's function symbol at this
    /// address is the input function's name (perf2bolt names profile records after it).
    pub function_address: u64,
    /// Start address of the fragment (hot or cold) that holds the translated address.
    pub fragment_address: u64,
    /// Offset in the input function. For a branch source this is the input offset of the
    /// governing entry itself (the branch instruction when BAT has an entry for it, else the start
    /// of its block); otherwise `address - entry_output + entry_input`. When the address lies
    /// before the fragment's first entry, perf2bolt keeps the fragment offset unchanged, and so
    /// does this.
    pub input_offset: u64,
    /// The input basic block the address lies in: the nearest block entry at or before the
    /// governing entry in the same fragment. `None` when there is none.
    pub block: Option<Block>,
}

/// A fragment of a BAT function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fragment {
    /// Output address of the fragment.
    pub address: u64,
    /// Output address of the function's hot fragment (equals `address` for a hot fragment).
    pub function_address: u64,
    /// True for split-off (cold) fragments.
    pub is_cold: bool,
}

/// What BAT records about one input function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Function<'a> {
    /// Output address of the hot fragment (where the BOLTed binary's symbol names the function).
    pub address: u64,
    /// `FuncHash` of the input function.
    pub hash: u64,
    /// Number of basic blocks of the input function.
    pub num_blocks: u64,
    /// Input offsets of secondary entry points; entry point `i` has discriminator `i + 1`.
    pub secondary_entry_points: &'a [u32],
    /// Output addresses of the cold fragments, in address order.
    pub cold_fragments: &'a [u64],
}

impl BatTable {
    /// Index the contents of a `.note.bolt_bat` section (ELF note header included).
    pub fn parse(section: &[u8]) -> Result<Self, DecodeError> {
        let (base, payload) = note_payload(section)?;
        Self::parse_payload_at(payload, base)
    }

    /// Index a bare BAT payload (the note's `desc`).
    pub fn parse_payload(payload: &[u8]) -> Result<Self, DecodeError> {
        Self::parse_payload_at(payload, 0)
    }

    fn parse_payload_at(payload: &[u8], base: usize) -> Result<Self, DecodeError> {
        let mut builder = Builder::default();
        decode_payload(payload, base, &mut builder)?;
        Ok(builder.finish())
    }

    /// Index a model (checked with [`Bat::validate`] first).
    pub fn from_model(bat: &Bat) -> Result<Self, ModelError> {
        bat.validate()?;
        let mut b = Builder::default();
        b.table_len(false, bat.hot.len());
        for h in &bat.hot {
            b.hot(&HotHeader {
                address: h.address,
                hash: h.hash,
                num_blocks: h.num_blocks,
                num_entries: h.entries.len() as u32,
                num_secondary_entry_points: h.secondary_entry_points.len() as u32,
            });
            h.entries.iter().for_each(|&e| b.entry(e));
            h.secondary_entry_points
                .iter()
                .for_each(|&s| b.secondary_entry_point(s));
        }
        b.table_len(true, bat.cold.len());
        for c in &bat.cold {
            b.cold(&ColdHeader {
                address: c.address,
                hot_index: c.hot_index,
                input_skew: c.input_skew,
                num_entries: c.entries.len() as u32,
            });
            c.entries.iter().for_each(|&e| b.entry(e));
        }
        Ok(b.finish())
    }

    /// Number of functions (hot fragments).
    pub fn num_functions(&self) -> usize {
        self.functions.len()
    }

    /// Number of fragments, hot and cold (llvm-bolt's "BAT maps").
    pub fn num_fragments(&self) -> usize {
        self.fragments.len()
    }

    /// True when `address` is the start of a BAT fragment (hot or cold): perf2bolt's
    /// `isBATFunction`. Addresses inside a function are not "BAT functions".
    pub fn is_bat_function(&self, address: u64) -> bool {
        self.fragment_addresses.binary_search(&address).is_ok()
    }

    /// The fragment starting exactly at `address`.
    pub fn fragment_at(&self, address: u64) -> Option<Fragment> {
        let i = self.fragment_addresses.binary_search(&address).ok()?;
        Some(self.fragment(i))
    }

    /// The fragment with the greatest start address `<= address`.
    ///
    /// BAT does not record fragment sizes: an address past the end of a fragment (in a function
    /// BOLT did not rewrite, in padding) is still attributed to the fragment before it. When you
    /// know the containing function from the binary's symbols, use [`BatTable::translate_in`].
    pub fn fragment_containing(&self, address: u64) -> Option<Fragment> {
        Some(self.fragment(self.fragment_index(address)?))
    }

    /// The hot-fragment address of the function owning the fragment that starts at
    /// `fragment_address` (itself for a hot fragment): perf2bolt's `fetchParentAddress`, except
    /// that a hot fragment maps to itself instead of 0.
    pub fn parent_of(&self, fragment_address: u64) -> Option<u64> {
        self.fragment_at(fragment_address)
            .map(|f| f.function_address)
    }

    /// Translate `address` of the BOLTed binary, attributing it to
    /// [`fragment_containing`](BatTable::fragment_containing). `is_branch_src` says the address
    /// is the source of a branch (the `from` of an LBR record), which maps to the governing entry's
    /// input offset itself.
    ///
    /// `None` when the address lies below every fragment. See
    /// [`translate_in`](BatTable::translate_in) for exact perf2bolt agreement.
    #[inline]
    pub fn translate(&self, address: u64, is_branch_src: bool) -> Option<Translation> {
        let i = self.fragment_index(address)?;
        Some(self.translate_at(i, address - self.fragment_addresses[i], is_branch_src))
    }

    /// Translate `address`, which the caller knows lies in the function (fragment) starting at
    /// `fragment_address` (typically from the BOLTed binary's symbol table, as perf2bolt does).
    ///
    /// `None` when `fragment_address` is not a BAT fragment (BOLT did not rewrite that function:
    /// its offsets need no translation) or `address < fragment_address`.
    #[inline]
    pub fn translate_in(
        &self,
        fragment_address: u64,
        address: u64,
        is_branch_src: bool,
    ) -> Option<Translation> {
        let i = self.fragment_index(fragment_address)?;
        if self.fragment_addresses[i] != fragment_address {
            return None;
        }
        let offset = address.checked_sub(fragment_address)?;
        Some(self.translate_at(i, offset, is_branch_src))
    }

    /// Index of the fragment with the greatest start `<= address`.
    #[inline]
    fn fragment_index(&self, address: u64) -> Option<usize> {
        self.buckets
            .upper_bound(&self.fragment_addresses, address, |&a| a)
            .checked_sub(1)
    }

    #[inline]
    fn translate_at(&self, i: usize, offset: u64, is_branch_src: bool) -> Translation {
        let f = self.fragments[i];
        let fragment_address = self.fragment_addresses[i];
        let function_address = f.function_address;
        let start = f.entries_start as usize;
        let keys = &self.keys[start..f.entries_end as usize];
        // upper_bound(offset) - 1: the last entry among equal keys wins, as in perf2bolt.
        let n = keys.partition_point(|&k| u64::from(k) <= offset);
        let Some(e) = n.checked_sub(1) else {
            return Translation {
                function_address,
                fragment_address,
                input_offset: offset,
                block: None,
            };
        };
        let key = u64::from(keys[e]);
        let p = self.payload[start + e];
        let input = u64::from(p.packed_input >> 1);
        let input_offset = if is_branch_src {
            input
        } else {
            // Unsigned arithmetic as in perf2bolt: an address far past the fragment (a hostile
            // or garbage sample) wraps instead of overflowing.
            (offset - key).wrapping_add(input)
        };
        let block = p.has_block.then_some(Block {
            index: p.block_index,
            hash: p.block_hash,
        });
        Translation {
            function_address,
            fragment_address,
            input_offset,
            block,
        }
    }

    /// The fall-throughs of a trace that runs, without taken branches, from `from` to `to`
    /// inside the fragment starting at `fragment_address`: perf2bolt's
    /// `BoltAddressTranslation::getFallthroughsInTrace`, used instead of the CFG for BAT functions.
    ///
    /// Returns `(source, destination)` pairs of *input offsets*: the input offset of each block
    /// entry passed, and of the next block entry after it (branch entries in between are
    /// skipped; the walk stops at the block containing `to`). `None` when `fragment_address` is
    /// not a BAT fragment; empty when `from >= to` or nothing is crossed. perf2bolt records each
    /// pair as a fall-through edge `(source, destination)` of the function owning the fragment.
    pub fn fallthroughs_in_trace(
        &self,
        fragment_address: u64,
        from: u64,
        to: u64,
    ) -> Option<Vec<(u32, u32)>> {
        let i = self
            .fragment_addresses
            .binary_search(&fragment_address)
            .ok()?;
        let mut out = Vec::new();
        if from >= to {
            return Some(out);
        }
        let (Some(from), Some(to)) = (
            from.checked_sub(fragment_address),
            to.checked_sub(fragment_address),
        ) else {
            return Some(out);
        };
        let f = self.fragments[i];
        let start = f.entries_start as usize;
        let keys = &self.keys[start..f.entries_end as usize];
        let payload = &self.payload[start..f.entries_end as usize];
        let is_branch = |e: usize| payload[e].packed_input & 1 == 1;
        // The block entry at or before `from`.
        let mut from_e = keys.partition_point(|&k| u64::from(k) <= from);
        loop {
            let Some(prev) = from_e.checked_sub(1) else {
                return Some(out);
            };
            from_e = prev;
            if !is_branch(from_e) {
                break;
            }
        }
        let Some(to_e) = keys.partition_point(|&k| u64::from(k) <= to).checked_sub(1) else {
            return Some(out);
        };
        if keys[from_e] >= keys[to_e] {
            return Some(out);
        }
        let mut e = from_e;
        while e != to_e {
            let src = payload[e].packed_input >> 1;
            if is_branch(e) {
                e += 1;
                continue;
            }
            e += 1;
            while is_branch(e) && e != to_e {
                e += 1;
            }
            if is_branch(e) {
                break;
            }
            out.push((src, payload[e].packed_input >> 1));
        }
        Some(out)
    }

    /// What BAT records about the function whose hot fragment starts at `address`.
    pub fn function(&self, address: u64) -> Option<Function<'_>> {
        let i = self
            .functions
            .binary_search_by_key(&address, |f| f.address)
            .ok()?;
        Some(self.function_record(i))
    }

    /// All functions, in address order.
    pub fn functions(&self) -> impl ExactSizeIterator<Item = Function<'_>> + '_ {
        (0..self.functions.len()).map(|i| self.function_record(i))
    }

    /// All fragments of the function whose hot fragment starts at `address`: the hot fragment
    /// first, then the cold ones in address order. Empty when it is not a BAT function.
    pub fn fragments_of(&self, address: u64) -> impl Iterator<Item = Fragment> + '_ {
        let function = self.function(address);
        let hot = function.map(|f| Fragment {
            address: f.address,
            function_address: f.address,
            is_cold: false,
        });
        let cold = function
            .map(|f| f.cold_fragments)
            .unwrap_or(&[])
            .iter()
            .map(move |&c| Fragment {
                address: c,
                function_address: address,
                is_cold: true,
            });
        hot.into_iter().chain(cold)
    }

    /// The input block starting at `input_offset` of the function whose hot fragment starts at
    /// `function_address` (perf2bolt's `getBBHashMap(..).getBBIndex/getBBHash`). When several
    /// entries name the same input offset, the first in the section wins, as in perf2bolt.
    ///
    /// The first call builds a per-function index of blocks (O(blocks log blocks)).
    pub fn block_at(&self, function_address: u64, input_offset: u32) -> Option<Block> {
        let function = self
            .functions
            .binary_search_by_key(&function_address, |f| f.address)
            .ok()? as u32;
        let index = self
            .blocks_by_input
            .get_or_init(|| self.index_blocks_by_input());
        let i = index
            .0
            .binary_search_by_key(&(function, input_offset), |b| (b.0, b.1))
            .ok()?;
        let p = self.payload.get(index.0[i].2 as usize)?;
        Some(Block {
            index: p.block_index,
            hash: p.block_hash,
        })
    }

    /// Every input block of the function whose hot fragment starts at `function_address`, as
    /// `(input offset, block)` in input-offset order (perf2bolt's `getBBHashMap`: when several
    /// entries name the same input offset, the first in the section wins). Empty when it is not
    /// a BAT function.
    pub fn blocks(&self, function_address: u64) -> Vec<(u32, Block)> {
        let Ok(function) = self
            .functions
            .binary_search_by_key(&function_address, |f| f.address)
        else {
            return Vec::new();
        };
        let function = function as u32;
        let index = self
            .blocks_by_input
            .get_or_init(|| self.index_blocks_by_input());
        let start = index.0.partition_point(|b| b.0 < function);
        let end = index.0.partition_point(|b| b.0 <= function);
        index.0[start..end]
            .iter()
            .filter_map(|&(_, input_offset, e)| {
                let p = self.payload.get(e as usize)?;
                Some((
                    input_offset,
                    Block {
                        index: p.block_index,
                        hash: p.block_hash,
                    },
                ))
            })
            .collect()
    }

    fn index_blocks_by_input(&self) -> BlocksByInput {
        // Walk fragments in section order (hot table, then cold table) so that among blocks with
        // equal input offsets the first in the section is kept.
        let mut order: Vec<usize> = (0..self.fragments.len()).collect();
        order.sort_by_key(|&i| {
            let is_cold = self.fragments[i].function_address != self.fragment_addresses[i];
            (is_cold, self.fragment_addresses[i])
        });
        let mut v = Vec::new();
        for i in order {
            let f = self.fragments[i];
            for e in f.entries_start..f.entries_end {
                let packed = self.payload[e as usize].packed_input;
                if packed & 1 == 0 {
                    v.push((f.function, packed >> 1, e));
                }
            }
        }
        // Stable: equal keys stay in section order, and dedup keeps the first.
        v.sort_by_key(|b| (b.0, b.1));
        v.dedup_by_key(|b| (b.0, b.1));
        BlocksByInput(v)
    }

    /// The entries of the fragment starting at `fragment_address`, in section order.
    pub fn entries(&self, fragment_address: u64) -> impl ExactSizeIterator<Item = Entry> + '_ {
        let range = self
            .fragment_addresses
            .binary_search(&fragment_address)
            .map(|i| {
                self.fragments[i].entries_start as usize..self.fragments[i].entries_end as usize
            })
            .unwrap_or(0..0);
        range.map(move |e| {
            let p = self.payload[e];
            let kind = if p.packed_input & 1 == 0 {
                EntryKind::Block(Block {
                    index: p.block_index,
                    hash: p.block_hash,
                })
            } else {
                EntryKind::Branch
            };
            Entry {
                output_offset: self.keys[e],
                input_offset: p.packed_input >> 1,
                kind,
            }
        })
    }

    fn fragment(&self, i: usize) -> Fragment {
        let f = self.fragments[i];
        let address = self.fragment_addresses[i];
        Fragment {
            address,
            function_address: f.function_address,
            is_cold: f.function_address != address,
        }
    }

    fn function_record(&self, i: usize) -> Function<'_> {
        let f = &self.functions[i];
        Function {
            address: f.address,
            hash: f.hash,
            num_blocks: f.num_blocks,
            secondary_entry_points: &self.secondary_entry_points
                [f.secondary.0 as usize..f.secondary.1 as usize],
            cold_fragments: &self.cold_fragments[f.cold.0 as usize..f.cold.1 as usize],
        }
    }
}

/// Builds a [`BatTable`] from the decoder's stream.
#[derive(Default)]
struct Builder {
    table: BatTable,
    /// Fragments in stream order (hot table then cold table), with their addresses.
    stream_fragments: Vec<(u64, FragmentRecord)>,
    /// The current fragment's last block entry.
    current_block: Option<Block>,
}

impl Builder {
    fn start_fragment(&mut self, address: u64, function: u32, num_entries: u32) {
        let t = &mut self.table;
        let at = t.keys.len() as u32;
        let function_address = t.functions.get(function as usize).map_or(0, |f| f.address);
        self.stream_fragments.push((
            address,
            FragmentRecord {
                entries_start: at,
                entries_end: at,
                function_address,
                function,
            },
        ));
        self.current_block = None;
        t.keys.reserve(num_entries as usize);
        t.payload.reserve(num_entries as usize);
    }

    fn finish(mut self) -> BatTable {
        let t = &mut self.table;
        // Cold fragments grouped by function (stream order is address order within the table).
        let mut cold: Vec<(u32, u64)> = self
            .stream_fragments
            .iter()
            .filter(|f| f.1.function_address != f.0)
            .map(|f| (f.1.function, f.0))
            .collect();
        cold.sort_unstable();
        t.cold_fragments = cold.iter().map(|c| c.1).collect();
        let mut at = 0usize;
        for (i, f) in t.functions.iter_mut().enumerate() {
            let start = at;
            while at < cold.len() && cold[at].0 == i as u32 {
                at += 1;
            }
            f.cold = (start as u32, at as u32);
        }
        // Fragments sorted by address: both tables are sorted, so this merges them.
        self.stream_fragments.sort_by_key(|f| f.0);
        t.fragment_addresses = self.stream_fragments.iter().map(|f| f.0).collect();
        t.fragments = self.stream_fragments.iter().map(|f| f.1).collect();
        t.buckets = pcmap_bytes::StartIndex::new(&t.fragment_addresses, |&a| a);
        self.table
    }
}

impl Sink for Builder {
    fn table_len(&mut self, cold: bool, len: usize) {
        if !cold {
            self.table.functions.reserve(len);
        }
        self.stream_fragments.reserve(len);
    }

    fn hot(&mut self, h: &HotHeader) {
        let function = self.table.functions.len() as u32;
        let sec = self.table.secondary_entry_points.len() as u32;
        self.table.functions.push(FunctionRecord {
            address: h.address,
            hash: h.hash,
            num_blocks: h.num_blocks,
            secondary: (sec, sec),
            cold: (0, 0),
        });
        self.start_fragment(h.address, function, h.num_entries);
    }

    fn cold(&mut self, c: &ColdHeader) {
        self.start_fragment(c.address, c.hot_index as u32, c.num_entries);
    }

    #[inline]
    fn entry(&mut self, e: Entry) {
        let t = &mut self.table;
        if let EntryKind::Block(b) = e.kind {
            self.current_block = Some(b);
        }
        let block = self.current_block.unwrap_or_default();
        t.keys.push(e.output_offset);
        t.payload.push(EntryPayload {
            block_hash: block.hash,
            block_index: block.index,
            packed_input: e.packed_input(),
            has_block: self.current_block.is_some(),
        });
        if let Some(last) = self.stream_fragments.last_mut() {
            last.1.entries_end += 1;
        }
    }

    fn secondary_entry_point(&mut self, offset: u32) {
        self.table.secondary_entry_points.push(offset);
        if let Some(f) = self.table.functions.last_mut() {
            f.secondary.1 += 1;
        }
    }
}
