//! Inputs from files: the address map of an ELF executable (through `pcmap-bbmap`, with
//! symbol names and aliases from `pcmap-binary`) and pre-aggregated branch profiles (through
//! `pcmap-profile`), folded into a [`CfgBuilder`].

use pcmap_binary::Binary;
use pcmap_profile::preagg::{self, Location, Record, TraceKind};

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
    Perf(#[from] pcmap_profile::perfdata::Error),
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

fn addr(l: &Location<'_>) -> u64 {
    // `X:` marks an address outside the binary; map it to one no block can contain.
    if l.is_external() { u64::MAX } else { l.offset }
}

/// Fold one pre-aggregated record (perf2bolt's meaning: `T`/`R` = branch + fall-through,
/// `B` = branch, `F`/`f`/`r` = fall-through; a return's branch part is classified as a return).
pub fn fold_record(builder: &CfgBuilder<'_>, fold: &mut PreaggregatedFold, r: Record<'_>) {
    match r {
        Record::Event { .. } => fold.ignored.events += 1,
        Record::Sample { .. } => fold.ignored.samples += 1,
        Record::Trace {
            kind,
            branch,
            ft_start,
            ft_end,
            count,
        } => {
            let from = if kind == TraceKind::Return && branch.offset == 0 {
                u64::MAX
            } else {
                addr(&branch)
            };
            builder.add_branch(&mut fold.acc, from, addr(&ft_start), count);
            builder.add_fall_through(&mut fold.acc, addr(&ft_start), addr(&ft_end), count);
        }
        Record::Branch {
            from, to, count, ..
        } => builder.add_branch(&mut fold.acc, addr(&from), addr(&to), count),
        Record::FallThrough {
            from, to, count, ..
        } => builder.add_fall_through(&mut fold.acc, addr(&from), addr(&to), count),
    }
}

/// Parse a whole pre-aggregated profile (in parallel chunks) into the builder's accumulator.
pub fn fold_preaggregated(
    builder: &CfgBuilder<'_>,
    data: &[u8],
) -> Result<PreaggregatedFold, preagg::Error> {
    preagg::fold_parallel(
        data,
        PreaggregatedFold::default,
        |f, r| fold_record(builder, f, r),
        |a, b| PreaggregatedFold {
            acc: a.acc.merge(b.acc),
            ignored: IgnoredRecords {
                samples: a.ignored.samples + b.ignored.samples,
                events: a.ignored.events + b.ignored.events,
            },
        },
    )
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
    /// Mappings of the binary found in the file.
    pub mappings: usize,
}

/// Fold the branch stacks (`PERF_SAMPLE_BRANCH_STACK`, e.g. `perf record -b` / `-j any,u`) of a
/// perf.data file. The binary's mappings are found by build-id, else by file name
/// (`binary_name`), and run-time addresses are translated to the binary's virtual addresses
/// through the mapping's file offset. Each entry `i` of a stack (newest first) is a taken branch;
/// the code between the target of entry `i` and the source of the newer entry `i - 1` ran straight
/// through, which gives a fall-through range (the LBR convention perf2bolt uses).
pub fn fold_perf_data(
    builder: &CfgBuilder<'_>,
    bin: &Binary<'_>,
    binary_name: &[u8],
    data: &[u8],
) -> Result<PerfFold, InputError> {
    use pcmap_profile::perfdata::{MmapTable, PerfFile};
    let file = PerfFile::parse(data)?;
    let table = MmapTable::from_file(&file)?;
    let maps: Vec<(u32, u64, u64, u64)> = table
        .mappings_of(&file, bin.build_id(), binary_name)
        .into_iter()
        .map(|m| (m.pid, m.start, m.len, m.pgoff))
        .collect();
    if maps.is_empty() {
        return Err(InputError::NotMapped {
            build_id: bin.build_id_hex().unwrap_or_else(|| "none".into()),
            name: String::from_utf8_lossy(binary_name).into_owned(),
        });
    }
    let mut fold = PerfFold {
        mappings: maps.len(),
        ..PerfFold::default()
    };
    let translate = |pid: Option<u32>, a: u64| -> u64 {
        maps.iter()
            .filter(|m| pid.is_none_or(|p| p == m.0))
            .find(|m| a >= m.1 && a - m.1 < m.2)
            .and_then(|m| bin.offset_to_vaddr(a - m.1 + m.3))
            .unwrap_or(u64::MAX)
    };
    file.for_each_sample(|s| {
        fold.samples += 1;
        let Some(stack) = &s.branch_stack else {
            fold.samples_without_branch_stack += 1;
            return;
        };
        let mut newer_from: Option<u64> = None;
        for e in stack.iter() {
            let (from, to) = (translate(s.pid, e.from), translate(s.pid, e.to));
            builder.add_branch(&mut fold.acc, from, to, 1);
            if let Some(end) = newer_from {
                builder.add_fall_through(&mut fold.acc, to, end, 1);
            }
            newer_from = Some(from);
        }
    })?;
    Ok(fold)
}
