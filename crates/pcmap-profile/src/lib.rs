//! BOLT profile formats: readers and writers for everything `perf2bolt` and `llvm-bolt` read or write.
//!
//! | module | format | reader | writer |
//! |---|---|---|---|
//! | [`preagg`] | pre-aggregated text (`perf2bolt --pa`: `E S T R B F f r` records) | serial iterator and parallel chunked fold over a memory map | canonical text |
//! | [`fdata`] | legacy fdata (LBR lines, `no_lbr`, `boltedcollection`, memory events `3/4/5`) | [`fdata::parse`] | [`fdata::write`] (file order) + [`fdata::sort_branches_like_perf2bolt`] |
//! | [`yaml`] | BOLT YAML profile (`ProfileYAMLMapping.h` schema) | schema-specific reader (any block/flow layout) | LLVM YAMLIO layout, byte-identical to `perf2bolt -w` |
//! | [`perfdata`] | `perf.data` (file mode) | header, attributes, feature sections (build-ids, event names), zero-copy record walker (samples with branch stacks, MMAP/MMAP2/COMM/FORK/EXIT/LOST, zstd-compressed records) | [`perfdata::writer`] (test files with branch stacks) |
//! | [`events`] | the branch-event pipeline: typed events (samples, traces, event names) from pre-aggregated text and perf.data (addresses translated for fixed-address, PIE and shared-object binaries) into a consumer's [`events::Sink`] | | |
//! | [`merge`] | merging of fdata (LLVM `merge-fdata` semantics), YAML and pre-aggregated profiles | | |
//!
//! The data model types are the contract for the aggregation layer (`pcmap-perf2bolt`):
//! * pre-aggregated: [`preagg::Record`] with [`preagg::Location`];
//! * fdata: [`fdata::Profile`], [`fdata::BranchRecord`], [`fdata::SampleRecord`], [`fdata::MemRecord`],
//!   [`fdata::Location`];
//! * YAML: [`yaml::Profile`], [`yaml::Header`], [`yaml::Function`], [`yaml::Block`], [`yaml::CallSite`],
//!   [`yaml::Successor`];
//! * perf.data: [`perfdata::PerfFile`], [`perfdata::Record`], [`perfdata::Sample`], [`perfdata::BranchEntry`],
//!   [`perfdata::MmapTable`];
//! * the branch-event pipeline every profile consumer reads through: [`events::Event`] ([`events::Sample`],
//!   [`events::Trace`] with [`events::TraceKind`], addresses as [`events::Loc`]), consumed by an
//!   [`events::Sink`] / [`events::ParallelSink`], produced by [`events::read_preaggregated`],
//!   [`events::read_preaggregated_parallel`] and [`events::read_perf_data`] (the binary described by
//!   [`events::BinaryDesc`]).
//!
//! ```
//! use pcmap_profile::{fdata, preagg, yaml};
//!
//! // Pre-aggregated: fold records in parallel (here: total branch count).
//! let text = b"E cycles\nB 401000 401010 5 1\nT 401020 401030 401040 2\n";
//! let total = preagg::fold_parallel(text, || 0u64, |a, r| *a += r.count(), |a, b| a + b).unwrap();
//! assert_eq!(total, 7);
//!
//! // fdata: build records from symbol names, order them like perf2bolt, write.
//! let mut branches = vec![fdata::BranchRecord {
//!     from: fdata::Location::symbol("main", 0x20),
//!     to: fdata::Location::symbol("work", 0),
//!     mispreds: 0,
//!     count: 1,
//! }];
//! fdata::sort_branches_like_perf2bolt(&mut branches);
//! let profile = fdata::Profile { lines: branches.into_iter().map(fdata::Line::Branch).collect(), ..Default::default() };
//! let mut out = Vec::new();
//! fdata::write(&mut out, &profile).unwrap();
//! assert_eq!(out, b"1 main 20 1 work 0 0 1\n");
//!
//! // YAML: the model round-trips through perf2bolt's exact layout.
//! let doc = yaml::Profile { header: yaml::Header { binary_name: "p1".into(), ..Default::default() }, ..Default::default() };
//! let mut out = Vec::new();
//! yaml::write(&mut out, &doc).unwrap();
//! assert_eq!(yaml::parse(&out).unwrap(), doc);
//! ```
//!
//! Readers borrow from the input bytes (`&'data [u8]`), never panic on malformed input and report
//! where they failed: text formats carry a [`TextPos`] (1-based line and column), binary formats a byte
//! offset. The crate depends on no other pcmap crate, so it can be fuzzed and published alone.
#![deny(missing_docs)]

pub mod events;
pub mod fdata;
pub mod merge;
pub mod perfdata;
pub mod preagg;
pub mod yaml;

mod text;

pub use text::{TextPos, write_in_parallel};
