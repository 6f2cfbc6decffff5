//! BOLT's YAML profile (`perf2bolt -w x.yaml`, `--profile-format=yaml`, `llvm-bolt -w`).
//!
//! The model follows `ProfileYAMLMapping.h` field by field ([`Profile`], [`Header`], [`Function`],
//! [`Block`], [`CallSite`], [`Successor`]). [`write()`] produces LLVM YAMLIO's exact layout (keys padded
//! to 16 columns, flow sequences of flow mappings for `calls`/`succ`, `0x%X` upper-case hex, YAMLIO's
//! quoting rules, optional keys omitted at their defaults), so a profile read from a perf2bolt file is
//! written back byte for byte. [`parse`] is a schema-specific reader: it accepts block and flow layouts,
//! comments, quoted and plain scalars and unknown keys, and streams the `functions` sequence one function
//! at a time (see [`parse_with`]) so 100 MB profiles need no document tree.
//!
//! Pseudo-probe fields (`probes`, `probe`, `inline_tree`, `ppit`, `pseudo_probe_desc`) are read and
//! written, but no fixture here exercises them against llvm-bolt (pseudo probes need a CSSPGO build).

mod read;
mod write;

pub use read::{Error, ErrorKind, parse, parse_with};
pub use write::{
    WriteOptions, write, write_block, write_document, write_function, write_function_head,
    write_function_with, write_header, write_with,
};

/// `profile-flags` bit: LBR (branch) profile (`lbr`).
pub const PF_LBR: u16 = 1;
/// `profile-flags` bit: basic sample profile (`sample`).
pub const PF_SAMPLE: u16 = 2;
/// `profile-flags` bit: memory events (`memevent`).
pub const PF_MEMEVENT: u16 = 4;

/// The hash function used for function and block hashes (`hash-func`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum HashFunction {
    /// `std-hash`: legacy `std::hash` (YAMLIO default: the key is omitted when written).
    #[default]
    StdHash,
    /// `xxh3`: XXH3-64 (perf2bolt 22's choice).
    Xxh3,
}

/// The `header` mapping.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// `profile-version` (1).
    pub version: u32,
    /// `binary-name`.
    pub binary_name: String,
    /// `binary-build-id` (empty string when unknown; always written).
    pub build_id: String,
    /// `profile-flags` bit set ([`PF_LBR`], [`PF_SAMPLE`], [`PF_MEMEVENT`]).
    pub flags: u16,
    /// `profile-origin`, e.g. `perf data aggregator`.
    pub origin: String,
    /// `profile-events`, e.g. `cycles` or `cpu-clock:`.
    pub events: String,
    /// `dfs-order` (YAMLIO default `true`; always written).
    pub dfs_order: bool,
    /// `hash-func`.
    pub hash_func: HashFunction,
}

impl Header {
    /// The sampled event names of `profile-events` (comma-separated; empty names dropped).
    pub fn event_names(&self) -> Vec<String> {
        self.events
            .split(',')
            .filter(|e| !e.is_empty())
            .map(str::to_string)
            .collect()
    }
}

impl Default for Header {
    fn default() -> Self {
        Header {
            version: 1,
            binary_name: String::new(),
            build_id: String::new(),
            flags: 0,
            origin: String::new(),
            events: String::new(),
            dfs_order: true,
            hash_func: HashFunction::StdHash,
        }
    }
}

/// One entry of a block's `calls` flow sequence.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct CallSite {
    /// `off`: call instruction offset from the block start (written as hex).
    pub offset: u32,
    /// `fid`: callee function id (0 = unknown callee).
    pub dest_id: u32,
    /// `disc`: entry discriminator (secondary entry point), default 0.
    pub entry_discriminator: u32,
    /// `cnt`.
    pub count: u64,
    /// `mis`, default 0.
    pub mispreds: u64,
    /// `pp`: pseudo probe id, default 0.
    pub probe: u32,
    /// `ppn`: inline tree node, default 0.
    pub inline_tree_node: u32,
    /// `ind`: indirect call, default false.
    pub indirect: bool,
}

/// One entry of a block's `succ` flow sequence.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Successor {
    /// `bid`: successor block index.
    pub index: u32,
    /// `cnt`.
    pub count: u64,
    /// `mis`, default 0.
    pub mispreds: u64,
}

/// One entry of a block's `probes` flow sequence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PseudoProbeInfo {
    /// `blk`, default `[ 1 ]`.
    pub block_probes: Vec<u64>,
    /// `ids`, default `[ 0 ]`.
    pub inline_tree_nodes: Vec<u32>,
}

/// A basic block profile (one item of `blocks`).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Block {
    /// `bid`.
    pub index: u32,
    /// `insns`: number of instructions (0 for blocks of BAT functions).
    pub num_instructions: u32,
    /// `hash`, default 0.
    pub hash: u64,
    /// `exec`, default 0.
    pub exec_count: u64,
    /// `events`, default 0.
    pub event_count: u64,
    /// `calls`.
    pub calls: Vec<CallSite>,
    /// `succ`.
    pub successors: Vec<Successor>,
    /// `probes`.
    pub pseudo_probes: Vec<PseudoProbeInfo>,
    /// `probe` (encoded pseudo probes), default empty.
    pub pseudo_probes_str: String,
}

impl Block {
    /// The block with its sequences borrowed (what [`write_block`] writes).
    pub fn view(&self) -> BlockRef<'_> {
        BlockRef {
            index: self.index,
            num_instructions: self.num_instructions,
            hash: self.hash,
            exec_count: self.exec_count,
            event_count: self.event_count,
            calls: &self.calls,
            successors: &self.successors,
            pseudo_probes: &self.pseudo_probes,
            pseudo_probes_str: &self.pseudo_probes_str,
        }
    }
}

/// A [`Block`] whose sequences are borrowed: a writer of large profiles writes blocks from its
/// own buffers ([`write_block`]) without building a [`Block`] for each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct BlockRef<'a> {
    /// `bid`.
    pub index: u32,
    /// `insns`.
    pub num_instructions: u32,
    /// `hash`, default 0.
    pub hash: u64,
    /// `exec`, default 0.
    pub exec_count: u64,
    /// `events`, default 0.
    pub event_count: u64,
    /// `calls`.
    pub calls: &'a [CallSite],
    /// `succ`.
    pub successors: &'a [Successor],
    /// `probes`.
    pub pseudo_probes: &'a [PseudoProbeInfo],
    /// `probe`, default empty.
    pub pseudo_probes_str: &'a str,
}

/// The keys of a [`Function`] before its blocks (what [`write_function_head`] writes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct FunctionHead<'a> {
    /// `name`.
    pub name: &'a str,
    /// `fid`.
    pub id: u32,
    /// `hash`.
    pub hash: u64,
    /// `exec`.
    pub exec_count: u64,
    /// `extern`, default 0.
    pub extern_entry_count: u64,
    /// `nblocks`.
    pub num_basic_blocks: u32,
}

/// One entry of a function's `inline_tree` flow sequence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InlineTreeNode {
    /// `g`: GUID index, default `u32::MAX` (= same as previous).
    pub guid_index: u32,
    /// `p`: parent index delta, default 0.
    pub parent_index_delta: u32,
    /// `cs`: call site probe, default 0.
    pub call_site_probe: u32,
}

/// A function profile (one item of `functions`).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Function {
    /// `name`.
    pub name: String,
    /// `fid`.
    pub id: u32,
    /// `hash`.
    pub hash: u64,
    /// `exec`.
    pub exec_count: u64,
    /// `extern`: entries from unknown code, default 0.
    pub extern_entry_count: u64,
    /// `nblocks`.
    pub num_basic_blocks: u32,
    /// `blocks`.
    pub blocks: Vec<Block>,
    /// `inline_tree`.
    pub inline_tree: Vec<InlineTreeNode>,
    /// `ppit` (encoded inline tree), default empty.
    pub inline_tree_str: String,
}

impl Function {
    /// The keys before the blocks.
    pub fn head(&self) -> FunctionHead<'_> {
        FunctionHead {
            name: &self.name,
            id: self.id,
            hash: self.hash,
            exec_count: self.exec_count,
            extern_entry_count: self.extern_entry_count,
            num_basic_blocks: self.num_basic_blocks,
        }
    }
}

/// The optional `pseudo_probe_desc` mapping.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct PseudoProbeDesc {
    /// `gs`: GUIDs.
    pub guids: Vec<u64>,
    /// `gh`: index of each GUID's hash in `hs`.
    pub guid_hash_index: Vec<u32>,
    /// `hs`: hashes.
    pub hashes: Vec<u64>,
}

impl PseudoProbeDesc {
    /// Whether nothing is recorded (then the mapping is not written).
    pub fn is_empty(&self) -> bool {
        self.guids.is_empty() && self.guid_hash_index.is_empty() && self.hashes.is_empty()
    }
}

/// A whole YAML profile document.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Profile {
    /// `header`.
    pub header: Header,
    /// `functions`.
    pub functions: Vec<Function>,
    /// `pseudo_probe_desc` (written only when non-empty).
    pub pseudo_probe_desc: PseudoProbeDesc,
}
