//! Basic-block address maps: LLVM's `SHT_LLVM_BB_ADDR_MAP` (versions 2-5 with every feature bit,
//! as llvm-readobj 22 reads them) and the legacy layouts (versions 0/1, the unversioned LLVM 12
//! map and the `.bb_info` proposal) behind an explicit option.
//!
//! * [`decode`]: the section decoder, exactly as strict as llvm-readobj 22.
//! * [`encode`]: the matching encoder.
//! * [`elf`] (feature `elf`): finds and decodes the map sections of linked files and relocatable
//!   objects (RELA, REL, CREL), compressed sections, ELF32/64, both byte orders.
//! * [`index`]: one address-sorted table of all blocks with O(log n) lookups and Propeller's rules
//!   for zero-sized blocks and branch sources versus targets.
//! * [`attribute`]: the one block attributor (Propeller's rules for calls, returns, branches and
//!   fall-throughs), used by [`profile`] and by the Propeller CFG builder.
//! * [`profile`]: attribution of IP samples and branch records to blocks, fed by
//!   `pcmap-profile`'s branch-event pipeline ([`profile::ProfileSink`]).
//!
//! Of pcmap's crates this one depends on `pcmap-profile` (the event types) and, with the `elf`
//! feature, `pcmap-binary` (to describe a binary to the perf.data reader).
//!
//! # Using the block index (read-only API for the Propeller capability)
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use pcmap_bbmap::elf::{read_elf, ReadOptions};
//! use pcmap_bbmap::index::BlockIndex;
//! let data = std::fs::read("a.out")?;
//! let maps = read_elf(&data, ReadOptions::default())?;
//! // Functions of all map sections, numbered in section order: BlockHandle::function indexes
//! // this list (and `names` resolved like llvm-readobj).
//! let functions: Vec<_> = maps.sections.iter().flat_map(|s| &s.functions).collect();
//! let index = BlockIndex::new(functions.iter().copied());
//! if let Some(pos) = index.lookup(0x201700) {            // a sample / instruction address
//!     let b = index.block(pos);                          // start, end, handle, id, metadata
//!     let _calls = index.callsite_position(pos, 0x201700);
//!     println!("function {} range {} index {} BB{}", b.handle.function, b.handle.range, b.handle.index, b.id);
//! }
//! let _from = index.lookup_branch_source(0x201710);     // branch sources: the non-empty block
//! let _to = index.lookup_branch_target(0x201720);       // targets: first zero-sized block, or a block end
//! # Ok(()) }
//! ```
//!
//! Positions (`usize`) index the address-sorted table and are stable for one index;
//! [`BlockHandle`] `(function, range, index)` is the durable key ([`BlockIndex::position`]
//! maps it back). For decoding without building [`FunctionMap`]s use
//! [`decode::visit_section`] with a [`decode::MapVisitor`] such as [`index::BlockIndexBuilder`].
//! [`profile::BlockProfile`] attributes samples, branches and fall-throughs with the same rules.
#![deny(missing_docs)]

pub mod attribute;
pub mod decode;
#[cfg(feature = "elf")]
pub mod elf;
pub mod encode;
pub mod index;
pub mod model;
pub mod profile;
#[cfg(feature = "elf")]
pub mod readobj;
#[cfg(feature = "elf")]
pub mod report;

pub use decode::{
    AddressResolver, BbAddrMapReader, BlockRecord, DecodeError, DecodeErrorKind, DecodeOptions,
    Endian, Field, LegacyMode, MapVisitor, StoredAddress, decode_section, visit_section,
};
pub use encode::{EncodeError, EncodeOptions, encode_function, encode_section};
pub use index::{BlockHandle, BlockIndex, BlockIndexBuilder, IndexedBlock};
pub use model::{
    BbEntry, BbRange, BlockMetadata, Features, FunctionMap, Layout, PgoAnalysis, PgoBbEntry,
    PgoSuccessor,
};
