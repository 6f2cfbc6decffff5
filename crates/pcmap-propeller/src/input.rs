//! Inputs from files: the address map of an ELF executable (through `pcmap-bbmap`, with
//! symbol names and aliases from `pcmap-binary`) and branch profiles — pre-aggregated text or
//! perf.data — read through `pcmap-profile`'s branch-event pipeline into a [`CfgBuilder`].

use pcmap_binary::Binary;
use pcmap_profile::events::{self, Event, Loc, ParallelSink, PerfError, Sink, TraceKind};
use pcmap_profile::perfdata::PerfFile;
use pcmap_profile::preagg;

use crate::builder::{Accumulator, CfgBuilder, MapBlock, MapFunction};

/// Why the address map of a binary cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// The ELF file could not be read.
    #[error("reading the ELF file: {0}")]
    Binary(#[from] pcmap_binary::Error),
    /// The map sections could not be decoded.
    #[error("decoding .llvm_bb_addr_map: {0}")]
    Map(#[from] pcmap_bbmap::elf::ElfError),
    /// The file has no map at all.
    #[error(
        "the binary has no .llvm_bb_addr_map section: build it with clang -fbasic-block-address-map"
    )]
    NoMap,
    /// A relocatable object (addresses are section offsets; profiles name linked addresses).
    #[error("the binary is a relocatable object: give the linked executable or shared object")]
    Relocatable,
    /// The map decodes but describes no block.
    #[error(
        "the .llvm_bb_addr_map section describes no blocks (maps written with skipped block entries cannot be used)"
    )]
    NoBlocks,
    /// The perf.data file could not be read.
    #[error("reading perf.data: {0}")]
    Perf(#[source] PerfError),
    /// No process in the perf.data mapped the binary.
    #[error(
        "no mapping of the binary in perf.data (build-id {build_id}, file name {name}): recorded on another binary?"
    )]
    NotMapped {
        /// The binary's build-id in hex (or `none`).
        build_id: String,
        /// The file name looked for.
        name: String,
    },
}

/// What [`map_functions`] found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct MapSummary {
    /// Functions in the map.
    pub functions: usize,
    /// Blocks in the map.
    pub blocks: usize,
    /// Functions whose name could not be found in the symbol table (left out).
    pub unnamed: usize,
}

/// The address map of a linked ELF file as [`MapFunction`]s, named from the symbol table: the
/// name llvm-readobj prints first, then every other function symbol at the same address as an
/// alias.
pub fn map_functions(data: &[u8]) -> Result<(Vec<MapFunction>, MapSummary), InputError> {
    let bin = Binary::parse(data)?;
    let maps = pcmap_bbmap::elf::read_elf(data, pcmap_bbmap::elf::ReadOptions::default())?;
    if maps.sections.is_empty() {
        return Err(InputError::NoMap);
    }
    if matches!(maps.kind, pcmap_bbmap::elf::ElfKind::Relocatable) {
        return Err(InputError::Relocatable);
    }
    let table = bin.function_table();
    let funcs = table.functions();
    let mut out = Vec::new();
    let mut summary = MapSummary::default();
    for section in &maps.sections {
        for (i, fm) in section.functions.iter().enumerate() {
            summary.functions += 1;
            let addr = fm.function_address();
            let mut names: Vec<String> = Vec::new();
            if let Some(Some(n)) = section.names.get(i) {
                names.push(n.clone());
            }
            let k = funcs.partition_point(|f| f.address < addr);
            for f in funcs[k..].iter().take_while(|f| f.address == addr) {
                for s in table.names_of(f) {
                    if !names.iter().any(|n| n == s.name) {
                        names.push(s.name.to_string());
                    }
                }
            }
            if names.is_empty() {
                summary.unnamed += 1;
                continue;
            }
            let ranges: Vec<Vec<MapBlock>> = fm
                .ranges
                .iter()
                .map(|r| {
                    r.entries
                        .iter()
                        .map(|e| MapBlock {
                            bb_id: e.id,
                            address: r.base_address.wrapping_add(u64::from(e.offset)),
                            size: u64::from(e.size),
                            can_fall_through: e.metadata.can_fall_through(),
                            has_return: e.metadata.has_return(),
                            hash: fm.features.bb_hash().then_some(e.hash),
                        })
                        .collect()
                })
                .collect();
            let nblocks: usize = ranges.iter().map(Vec::len).sum();
            if nblocks == 0 {
                continue;
            }
            summary.blocks += nblocks;
            let name = names.remove(0);
            out.push(MapFunction {
                name,
                aliases: names,
                ranges,
            });
        }
    }
    if summary.blocks == 0 {
        return Err(InputError::NoBlocks);
    }
    Ok((out, summary))
}

/// Counts of pre-aggregated records that carry no branch information.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct IgnoredRecords {
    /// `S` (basic sample) records.
    pub samples: u64,
    /// `E` (event name) records.
    pub events: u64,
}

/// Accumulator plus the records the builder cannot use.
#[derive(Debug, Default)]
pub struct PreaggregatedFold {
    /// Branch and fall-through aggregation.
    pub acc: Accumulator,
    /// Records without branch information.
    pub ignored: IgnoredRecords,
}

fn addr(l: &Loc) -> u64 {
    // An address outside the binary maps to one no block can contain.
    if l.outside { u64::MAX } else { l.addr }
}

/// Fold one event (perf2bolt's meaning: `T`/`R` = branch + fall-through, `B` = branch,
/// `F`/`f`/`r` = fall-through; a return from outside the binary, `R 0`, has a branch source no
/// block contains).
pub fn fold_event(builder: &CfgBuilder<'_>, fold: &mut PreaggregatedFold, e: &Event<'_>) {
    let t = match e {
        Event::Name(_) => return fold.ignored.events += 1,
        Event::Sample(_) => return fold.ignored.samples += 1,
        Event::Trace(t) => t,
    };
    match t.kind {
        TraceKind::Taken | TraceKind::Return => {
            let from = if t.kind == TraceKind::Return && t.branch.addr == 0 {
                u64::MAX
            } else {
                addr(&t.branch)
            };
            builder.add_branch(&mut fold.acc, from, addr(&t.from), t.count);
            builder.add_fall_through(&mut fold.acc, addr(&t.from), addr(&t.to), t.count);
        }
        TraceKind::BranchOnly => {
            builder.add_branch(&mut fold.acc, addr(&t.branch), addr(&t.from), t.count)
        }
        TraceKind::FallThrough | TraceKind::ExternalOrigin | TraceKind::ExternalReturn => {
            builder.add_fall_through(&mut fold.acc, addr(&t.from), addr(&t.to), t.count)
        }
    }
}

/// A [`Sink`] folding events into a builder's accumulator (any producer of the event pipeline,
/// e.g. several profiles merged before layout).
pub struct BuilderSink<'b, 'm> {
    builder: &'b CfgBuilder<'m>,
    fold: PreaggregatedFold,
}

impl<'b, 'm> BuilderSink<'b, 'm> {
    /// A sink adding to an empty accumulator of `builder`.
    pub fn new(builder: &'b CfgBuilder<'m>) -> Self {
        BuilderSink {
            builder,
            fold: PreaggregatedFold::default(),
        }
    }

    /// What was folded.
    pub fn finish(self) -> PreaggregatedFold {
        self.fold
    }
}

impl Sink for BuilderSink<'_, '_> {
    fn event(&mut self, e: &Event<'_>) {
        fold_event(self.builder, &mut self.fold, e);
    }
}

impl ParallelSink for BuilderSink<'_, '_> {
    fn merge(self, later: Self) -> Self {
        let (a, b) = (self.fold, later.fold);
        BuilderSink {
            builder: self.builder,
            fold: PreaggregatedFold {
                acc: a.acc.merge(b.acc),
                ignored: IgnoredRecords {
                    samples: a.ignored.samples + b.ignored.samples,
                    events: a.ignored.events + b.ignored.events,
                },
            },
        }
    }
}

/// Parse a whole pre-aggregated profile (in parallel chunks) into the builder's accumulator.
pub fn fold_preaggregated(
    builder: &CfgBuilder<'_>,
    data: &[u8],
) -> Result<PreaggregatedFold, preagg::Error> {
    let sink = events::read_preaggregated_parallel(
        data,
        || BuilderSink {
            builder,
            fold: PreaggregatedFold::default(),
        },
        &|_| {},
    )?;
    Ok(sink.fold)
}

/// What [`fold_perf_data`] found besides the branch records.
#[derive(Debug, Default)]
pub struct PerfFold {
    /// Branch and fall-through aggregation.
    pub acc: Accumulator,
    /// Samples read.
    pub samples: u64,
    /// Samples without a branch stack (they carry no edges).
    pub samples_without_branch_stack: u64,
    /// Processes that mapped the binary.
    pub mappings: usize,
}

/// Fold the branch stacks (`PERF_SAMPLE_BRANCH_STACK`, e.g. `perf record -b` / `-j any,u`) of a
/// perf.data file through `pcmap-profile`'s pipeline: the binary's mappings are found by file name
/// (`binary_name`) or build-id and run-time addresses translated to the binary's addresses as
/// perf2bolt does (fixed-address, PIE and shared-object binaries); each stack entry is a taken
/// branch followed by the fall-through to the next-newer entry's source.
pub fn fold_perf_data(
    builder: &CfgBuilder<'_>,
    bin: &Binary<'_>,
    binary_name: &[u8],
    data: &[u8],
) -> Result<PerfFold, InputError> {
    let file = PerfFile::parse(data).map_err(|e| InputError::Perf(e.into()))?;
    let desc = pcmap_bbmap::profile::binary_desc(bin, binary_name);
    let opts = events::PerfOptions {
        ignore_build_id: true,
        ..Default::default()
    };
    let mut sink = BuilderSink {
        builder,
        fold: PreaggregatedFold::default(),
    };
    let stats = events::read_perf_data(&file, &desc, &opts, &mut sink).map_err(|e| match e {
        PerfError::NotMapped { .. } => InputError::NotMapped {
            build_id: bin.build_id_hex().unwrap_or_else(|| "none".into()),
            name: String::from_utf8_lossy(binary_name).into_owned(),
        },
        e => InputError::Perf(e),
    })?;
    Ok(PerfFold {
        acc: sink.fold.acc,
        samples: stats.total_samples,
        samples_without_branch_stack: stats.samples_without_branch_stack,
        mappings: stats.pids,
    })
}
