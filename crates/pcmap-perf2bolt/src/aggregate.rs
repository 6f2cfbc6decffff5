//! perf2bolt 22's aggregation of traces and samples into per-function branch records.
//!
//! For every distinct trace `branch -> from ... to`: the taken branch is recorded unless its
//! source is a return (an `R` record's source anywhere in the profile, or an instruction that
//! disassembles to `ret`) or the trace has no branch (`F`, `f`); then, if the trace has a
//! fall-through part, the fall-through is validated against the function's CFG and each
//! block-to-block step is recorded. Invalid fall-throughs are counted and dropped, their branch
//! is kept. Traces are processed in parallel; results are merged per function.
//!
//! For a BOLT-optimized binary with address translation ([`Aggregator::with_bat`]), perf2bolt's
//! BAT mode: both ends of a taken branch are translated to input-function offsets (a branch source
//! maps to its BAT entry, or to the start of its input block when it has none) and attributed to
//! the function owning the fragment (the hot part, for a cold fragment); fall-throughs in a BAT
//! fragment come from the BAT table instead of the CFG (no validation), and a trace that starts at
//! a return is walked from one byte before its start (perf2bolt's `From - IsReturn`). Functions
//! BOLT left alone keep the plain CFG rules. Basic samples go to the owning function at
//! `address - owner address` translated through the owner's hot fragment, as perf2bolt's
//! `doBasicSample` does (for a cold fragment this differs from the branch translation).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use pcmap_bat::BatTable;
use rayon::prelude::*;
use rustc_hash::FxHashMap;

use crate::cfg::{self, Cfg, Flow};
use crate::preagg::{BR_ONLY, FT_EXTERNAL_ORIGIN, FT_ONLY, PreAggregated, Trace, TraceCounts};
use crate::scan_index::ScanIndex;
use pcmap_binary::bolt::{BoltFunctions, FunctionKind};

/// One end of a recorded branch: a function and an offset, or an unknown location.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Loc {
    /// Outside every function (printed `0 [unknown] 0`).
    Unknown,
    /// Function index (into [`BoltFunctions::functions`]) and offset.
    Func(u32, u64),
}

/// Identity of one fdata record of a function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RecordKey {
    /// The function the record belongs to (source function; target function for entries).
    pub func: u32,
    /// An entry from unknown code (written after the function's other records).
    pub external_entry: bool,
    /// Source offset (0 for external entries).
    pub from: u64,
    /// Destination.
    pub to: Loc,
}

/// perf2bolt's statistics for branch aggregation.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TraceStats {
    /// Sum of counts of traces with a fall-through part.
    pub traces: u64,
    /// Traces whose fall-through does not match the disassembly.
    pub mismatching: u64,
    /// Traces with an end outside every function.
    pub out_of_range: u64,
}

/// Result of branch aggregation.
#[derive(Debug, Default)]
pub struct BranchProfile {
    /// Records in perf2bolt's fdata order (functions by name, then source offset and
    /// destination, external entries last).
    pub records: Vec<(RecordKey, TraceCounts)>,
    /// Statistics.
    pub stats: TraceStats,
    /// Bytes executed in each function (function index -> sum of count x (to - from), wrapping,
    /// over the traces with both ends in it, on the owning function in BAT mode): BOLT's
    /// `SampleCountInBytes`, the numerator of the profile density.
    pub executed_bytes: FxHashMap<u32, u64>,
}

#[derive(Default)]
struct Partial {
    records: FxHashMap<RecordKey, TraceCounts>,
    stats: TraceStats,
    executed_bytes: FxHashMap<u32, u64>,
}

impl Partial {
    fn bump(&mut self, key: RecordKey, count: u64, mispreds: u64) {
        self.records.entry(key).or_default().add(count, mispreds);
    }
}

/// Result of basic-sample aggregation.
#[derive(Debug, Default)]
pub struct SampleProfile {
    /// (function index, offset) -> count.
    pub samples: FxHashMap<(u32, u64), u64>,
    /// Samples outside every function.
    pub out_of_range: u64,
    /// Bytes executed in each function: count x size of the sampled block (BOLT's
    /// `SampleCountInBytes` in basic mode), on the owning function in BAT mode.
    pub executed_bytes: FxHashMap<u32, u64>,
}

impl BranchProfile {
    /// Which functions (indexed like [`BoltFunctions::functions`]) a record starts or ends in: the
    /// functions perf2bolt marks as profiled.
    pub fn profiled_functions(&self, num_functions: usize) -> Vec<bool> {
        let mut profiled = vec![false; num_functions];
        for (k, _) in &self.records {
            profiled[k.func as usize] = true;
            if let Loc::Func(t, _) = k.to {
                profiled[t as usize] = true;
            }
        }
        profiled
    }
}

impl BranchProfile {
    /// The sample count BOLT's density report weighs each function with: the sum of the counts
    /// of the records leaving it (branches, fall-throughs and calls; not the entries into it),
    /// for the functions with executed bytes; functions whose traces all leave them count 0 (as
    /// measured against perf2bolt 22 on pre-aggregated and perf.data profiles).
    pub fn sample_counts(&self) -> FxHashMap<u32, u64> {
        let mut out: FxHashMap<u32, u64> = FxHashMap::default();
        for (k, c) in &self.records {
            if !k.external_entry && self.executed_bytes.get(&k.func).is_some_and(|&b| b != 0) {
                let e = out.entry(k.func).or_default();
                *e = e.wrapping_add(c.count);
            }
        }
        out
    }
}

impl SampleProfile {
    /// The sample count BOLT's density report weighs each function with: the sum of its sample
    /// counts, for the functions with executed bytes (as for [`BranchProfile::sample_counts`]).
    pub fn sample_counts(&self) -> FxHashMap<u32, u64> {
        let mut out: FxHashMap<u32, u64> = FxHashMap::default();
        for (&(f, _), &c) in &self.samples {
            if self.executed_bytes.get(&f).is_none_or(|&b| b == 0) {
                continue;
            }
            let e = out.entry(f).or_default();
            *e = e.wrapping_add(c);
        }
        out
    }

    /// Which functions (indexed like [`BoltFunctions::functions`]) have samples.
    pub fn profiled_functions(&self, num_functions: usize) -> Vec<bool> {
        let mut profiled = vec![false; num_functions];
        for &(f, _) in self.samples.keys() {
            profiled[f as usize] = true;
        }
        profiled
    }
}

/// How many functions got a profile, as BOLT's program statistics count them (the
/// `BOLT-INFO: N out of M functions in the binary ...` lines perf2bolt prints at the end).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct FunctionStats {
    /// Functions in the binary, PLT entries excluded (the PLT header's pseudo function counts).
    pub functions: u64,
    /// Profiled functions BOLT could optimize (simple ones, and in BAT mode the hot fragment
    /// of a function BOLT split, whose original is known to be simple).
    pub profiled: u64,
    /// Profiled functions BOLT could not optimize (no CFG).
    pub not_optimizable: u64,
    /// In relocation mode, the functions BOLT optimizes, profiled or not, with an indirect jump
    /// it reads neither as a jump table nor as a tail call ([`cfg::IndirectJump::Unknown`]).
    pub unknown_control_flow: u64,
}

impl FunctionStats {
    /// perf2bolt's wording of these counts: the `N out of M functions` line, and the
    /// `could not be optimized` line when there are such functions.
    pub fn report_lines(&self) -> Vec<String> {
        let mut lines = vec![format!(
            "BOLT-INFO: {} out of {} functions in the binary ({:.1}%) have non-empty execution profile",
            self.profiled,
            self.functions,
            // BOLT computes the ratio in single precision.
            f64::from(self.profiled as f32 / self.functions as f32 * 100.0f32)
        )];
        if self.not_optimizable > 0 {
            lines.push(format!(
                "BOLT-INFO: {} function{} with profile could not be optimized",
                self.not_optimizable,
                if self.not_optimizable == 1 { "" } else { "s" }
            ));
        }
        if self.unknown_control_flow > 0 {
            lines.push(format!(
                "BOLT-INFO: {} functions have instructions with unknown control flow. Use \
                 -print-unknown to see the list.",
                self.unknown_control_flow
            ));
        }
        lines
    }
}

/// How BOLT's statistics see one function.
enum Class {
    /// A PLT entry: not counted.
    PltEntry,
    Unprofiled,
    Optimizable,
    NotOptimizable,
}

/// BOLT's profile density (`--show-density`, on in perf2bolt): the `Functions with density >= X
/// account for Y% total sample counts.` line and its warnings.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Density {
    /// For each profiled function BOLT can optimize, in address order: executed bytes per byte
    /// of code, and its raw sample count.
    pub functions: Vec<(f64, u64)>,
    /// Sum of the sample counts.
    pub total_samples: u64,
}

/// perf2bolt's density report: lines for standard output and warnings for standard error.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct DensityReport {
    /// The `BOLT-INFO: Functions with density >= ...` line.
    pub info: String,
    /// The `BOLT-WARNING: ...` line, when the profile is empty or sparse.
    pub warning: Option<String>,
}

impl Density {
    /// The density of the functions that hold `cutoff_hot` (parts per million) of the samples,
    /// densest first, and perf2bolt's lines about it; `threshold` is
    /// `--profile-density-threshold`.
    pub fn report(&self, cutoff_hot: i32, threshold: f64) -> DensityReport {
        let mut list = self.functions.clone();
        // Densest first, then fewer samples first (a stable sort, like BOLT's).
        list.sort_by(|a, b| {
            if a.0 != b.0 {
                b.0.partial_cmp(&a.0).unwrap_or(std::cmp::Ordering::Equal)
            } else {
                a.1.cmp(&b.1)
            }
        });
        // perf2bolt 22's cutoff is whole samples, in signed arithmetic: samples times the
        // option, divided by 1000000, truncated. Measured with perf2bolt 22 on a one-trace
        // profile of count 1: a 100% cutoff takes the function, 99% and 50% take none (the
        // density is 0, "the output profile is empty"); a negative option takes none either.
        let limit = (self.total_samples as i64).wrapping_mul(i64::from(cutoff_hot)) / 1_000_000;
        let mut accumulated = 0u64;
        let mut density = 0.0f64;
        for &(d, samples) in &list {
            if accumulated as i64 >= limit {
                break;
            }
            accumulated = accumulated.wrapping_add(samples);
            density = d;
        }
        let warning = if density == 0.0 {
            Some(
                "BOLT-WARNING: the output profile is empty or the --profile-density-cutoff-hot \
                 option is set too low. Please check your command."
                    .to_string(),
            )
        } else if density < threshold {
            Some(format!(
                "BOLT-WARNING: BOLT is estimated to optimize better with {:.1}x more samples. \
                 Please consider increasing sampling rate or profiling for longer duration to \
                 get more samples.",
                threshold / density
            ))
        } else {
            None
        };
        DensityReport {
            info: format!(
                "BOLT-INFO: Functions with density >= {density:.1} account for {:.2}% total sample counts.",
                f64::from(cutoff_hot) / 10000.0
            ),
            warning,
        }
    }
}

/// The binary with lazily built CFGs.
///
/// When the profile is known ([`Self::aggregate_traces`], [`Self::aggregate_samples`]), one
/// parallel pass decodes every function for BOLT's interprocedural references (secondary entry
/// points). Without hashing, the functions the profile touches keep that decode for their CFG:
/// every function is decoded once per run. With hashing ([`Self::with_hashing`]), a touched
/// function is decoded a second time when its CFG is built, and hashed from that decode at
/// once: keeping every touched function's full decode (iced instructions and operand offsets)
/// until the CFGs are built held about 100 MB more on a 20,000-function profile and took
/// longer than decoding again.
pub struct Aggregator<'a, 'data> {
    image: &'a BoltFunctions<'a, 'data>,
    /// Boxed: one slot per function of the binary, most of them never filled (a `Cfg` inline
    /// is a few hundred bytes; 100,000 functions made that 30 MB).
    cfgs: Vec<OnceLock<Box<Cfg>>>,
    /// Secondary entry points of every function (offsets), from every function's references.
    entries: OnceLock<pcmap_binary::bolt::EntryPoints>,
    /// What the decoding pass over every function found ([`Self::prepare`]), or was given
    /// ([`Self::take_scan_index`]): the references that make `entries`, the start of every
    /// jump table of the binary (each table ends where the next one starts, whichever function
    /// it belongs to: BOLT's `populateJumpTables`), and the functions with an indirect jump
    /// through no jump table (the only ones that can have unknown control flow).
    scan: OnceLock<ScanIndex>,
    /// Decodes made for the references of functions the profile touches, by function index,
    /// until their CFG takes them. A map: one slot per function was 3.6 MB on 200,000
    /// functions, for the few a profile touches.
    pending: Mutex<FxHashMap<usize, cfg::Decoded>>,
    /// How many function decodes this aggregator made.
    decodes: AtomicUsize,
    /// CFGs are hashed when built ([`Self::with_hashing`]).
    hashing: bool,
    /// Hash in llvm-bolt's view ([`Self::with_llvm_bolt_hashing`]).
    llvm_bolt_view: bool,
    /// Also the depth-first function hashes ([`Self::with_dfs_function_hashes`]).
    dfs_hashes: bool,
    /// The binary-wide part of the hashing context, made on first use.
    hash_tables: OnceLock<Arc<crate::block_hash::Tables>>,
    /// Every function's rank in the order records are written in, made on first use (reading a
    /// profile back, YAML in BAT mode); aggregation ranks only the functions its records name.
    name_ranks: OnceLock<NameRanks>,
    /// The binary's BAT table: profile of a BOLT-optimized binary.
    bat: Option<&'a BatTable>,
}

/// What [`Aggregator::prepare`] keeps of every function's [`cfg::FunctionScan`], flattened:
/// one list per kind rather than one scan per function (200,000 functions held 20 MB of
/// mostly empty scans).
#[derive(Debug, Default)]
struct Scans {
    /// Every scan's references (the ones that make secondary entry points), in no order.
    references: Vec<u64>,
    /// Every scan's jump-table starts, in no order, with duplicates.
    table_starts: Vec<u64>,
    /// The functions (indices) with an indirect jump through no jump table.
    tableless_indirect_jumps: Vec<u32>,
    /// How many functions were scanned (counted here, not in the aggregator's shared counter:
    /// one atomic add per function on a line both cores write cost more than the count is worth).
    scanned: usize,
}

impl Scans {
    fn add(mut self, (index, scan): (usize, cfg::FunctionScan)) -> Self {
        self.references.extend(scan.references);
        self.table_starts.extend(scan.table_starts);
        if scan.tableless_indirect_jump {
            self.tableless_indirect_jumps.push(index as u32);
        }
        self.scanned += 1;
        self
    }

    fn merge(mut self, mut later: Self) -> Self {
        self.scanned += later.scanned;
        self.references.append(&mut later.references);
        self.table_starts.append(&mut later.table_starts);
        self.tableless_indirect_jumps
            .append(&mut later.tableless_indirect_jumps);
        self
    }
}

/// Functions' ranks in the byte order of their names (equal names in index order): the order
/// perf2bolt writes records in (its `std::map` of function names). Over every function of the
/// binary, or over only the functions an aggregation's records name: ranking every function of
/// a large binary cost a run on 200,000 functions 12-17 ms of its 0.25 s (a slow hour), for the
/// few thousand functions its profile touched.
#[derive(Debug)]
struct NameRanks {
    /// By function index: its rank, or [`Self::UNRANKED`].
    by_function: Vec<u32>,
    /// How many functions are ranked (ranks are `0..ranked`).
    ranked: u32,
}

impl NameRanks {
    const UNRANKED: u32 = u32::MAX;

    /// Rank the functions `which` (indices into `funcs`, each once) by `name`.
    fn new<'f>(
        funcs: &'f [pcmap_binary::bolt::BoltFunction<'_>],
        which: impl ParallelIterator<Item = u32>,
        name: impl Fn(&'f pcmap_binary::bolt::BoltFunction<'_>) -> &'f str + Sync,
    ) -> Self {
        // The names are sorted beside the indices, each led by its first 16 bytes as one
        // number: most comparisons end there, without following the two names' pointers (a
        // large binary has hundreds of thousands, all over memory). The number orders names as
        // their bytes do (a short name's zero padding puts it before the longer names it
        // starts); equal numbers fall back to the names.
        let prefix = |name: &[u8]| {
            let mut p = [0u8; 16];
            let n = name.len().min(16);
            p[..n].copy_from_slice(&name[..n]);
            u128::from_be_bytes(p)
        };
        let mut order: Vec<(u128, &[u8], u32)> = which
            .map(|i| {
                let name = name(&funcs[i as usize]).as_bytes();
                (prefix(name), name, i)
            })
            .collect();
        order.par_sort_unstable();
        let mut by_function = vec![Self::UNRANKED; funcs.len()];
        for (r, &(_, _, f)) in order.iter().enumerate() {
            by_function[f as usize] = r as u32;
        }
        Self {
            by_function,
            ranked: order.len() as u32,
        }
    }

    /// The rank of function `f` ([`Self::UNRANKED`] if it is not ranked).
    fn of(&self, f: u32) -> u32 {
        self.by_function
            .get(f as usize)
            .copied()
            .unwrap_or(Self::UNRANKED)
    }

    /// How fdata orders a function's records by destination: unknown code first, then by the
    /// destination function's name rank and offset.
    fn destination_order(&self, to: Loc) -> (u8, u32, u64) {
        match to {
            Loc::Unknown => (0, 0, 0),
            Loc::Func(f, o) => (1, self.of(f), o),
        }
    }
}

impl<'a, 'data> Aggregator<'a, 'data> {
    /// Prepare aggregation against `image`.
    pub fn new(image: &'a BoltFunctions<'a, 'data>) -> Self {
        let funcs = image.functions();
        Self {
            image,
            cfgs: (0..funcs.len()).map(|_| OnceLock::new()).collect(),
            entries: OnceLock::new(),
            scan: OnceLock::new(),
            pending: Mutex::default(),
            decodes: AtomicUsize::new(0),
            hashing: false,
            llvm_bolt_view: false,
            dfs_hashes: false,
            hash_tables: OnceLock::new(),
            name_ranks: OnceLock::new(),
            bat: None,
        }
    }

    /// Aggregate in perf2bolt's BAT mode: `image` is a BOLT-optimized binary and `bat` its
    /// `.note.bolt_bat` table. Records are translated to the input binary's function offsets and
    /// ordered by the names perf2bolt prints in that mode ([`pcmap_binary::bolt::BoltFunction::profile_name`]).
    pub fn with_bat(mut self, bat: &'a BatTable) -> Self {
        self.bat = Some(bat);
        self
    }

    /// BOLT's count of profiled functions, `profiled` being indexed like [`BoltFunctions::functions`]
    /// (see [`BranchProfile::profiled_functions`]). Builds the CFG of every profiled function.
    pub fn function_stats(&self, profiled: &[bool]) -> FunctionStats {
        let mut stats = FunctionStats::default();
        for c in self.classes(profiled) {
            match c {
                Class::PltEntry => continue,
                Class::Unprofiled => {}
                Class::Optimizable => stats.profiled += 1,
                Class::NotOptimizable => stats.not_optimizable += 1,
            }
            stats.functions += 1;
        }
        stats.unknown_control_flow = self.unknown_control_flow_functions();
        stats
    }

    /// How many functions BOLT optimizes (simple, not in the PLT) have an indirect jump of
    /// unknown control flow, profiled or not, in relocation mode (outside it BOLT does not
    /// optimize such functions). Only functions with an indirect jump through no jump table
    /// (noted by [`Self::prepare`]) get a CFG for this.
    fn unknown_control_flow_functions(&self) -> u64 {
        if !self.image.relocation_mode() {
            return 0;
        }
        let funcs = self.image.functions();
        self.prepare(None);
        let indirect = self
            .scan
            .get()
            .map_or(&[][..], |s| s.tableless_indirect_jumps.as_slice());
        indirect
            .par_iter()
            .map(|&i| i as usize)
            .filter(|&i| {
                // Only a function with an indirect jump through no table needs its CFG here.
                if funcs.get(i).is_none_or(|f| f.kind != FunctionKind::Regular) {
                    return false;
                }
                let cfg = self.cfg(i);
                cfg.simple
                    && cfg
                        .insns
                        .iter()
                        .any(|k| k.indirect() == Some(cfg::IndirectJump::Unknown))
            })
            .count() as u64
    }

    /// How BOLT's program statistics see each function (`profiled` as in
    /// [`Self::function_stats`]). Builds the CFG of every profiled function.
    fn classes(&self, profiled: &[bool]) -> Vec<Class> {
        let funcs = self.image.functions();
        self.prepare(Some(profiled));
        (0..funcs.len())
            .into_par_iter()
            .map(|i| {
                let f = &funcs[i];
                // The PLT header's pseudo function is not a PLT function for BOLT: counted,
                // never optimizable.
                if f.kind == FunctionKind::Plt && !f.is_plt_header() {
                    return Class::PltEntry;
                }
                if !profiled.get(i).copied().unwrap_or(false) {
                    return Class::Unprofiled;
                }
                if !f.is_plt_header() && (self.is_hot_split_parent(i) || self.cfg(i).simple) {
                    Class::Optimizable
                } else {
                    Class::NotOptimizable
                }
            })
            .collect()
    }

    /// In BAT mode, whether function `i` is the hot part of a function BOLT split (its
    /// profile covers the cold fragments too).
    fn is_hot_split_parent(&self, i: usize) -> bool {
        let f = &self.image.functions()[i];
        self.bat.is_some_and(|b| {
            b.function(f.address)
                .is_some_and(|bf| !bf.cold_fragments.is_empty())
        })
    }

    /// BOLT's profile density inputs (`PrintProgramStats`): for each profiled function it could
    /// optimize, executed bytes per byte of code and its raw sample count. `executed_bytes` and
    /// `sample_counts` come from [`BranchProfile`] or [`SampleProfile`].
    pub fn density(
        &self,
        profiled: &[bool],
        executed_bytes: &FxHashMap<u32, u64>,
        sample_counts: &FxHashMap<u32, u64>,
    ) -> Density {
        let funcs = self.image.functions();
        let mut out = Density::default();
        for (i, c) in self.classes(profiled).into_iter().enumerate() {
            if !matches!(c, Class::Optimizable) {
                continue;
            }
            let samples = sample_counts.get(&(i as u32)).copied().unwrap_or(0);
            out.total_samples = out.total_samples.wrapping_add(samples);
            let mut size = funcs[i].size;
            // A split function's executed bytes are all on its hot part: BOLT divides by the
            // size of every fragment.
            if self.is_hot_split_parent(i)
                && let Some(bf) = self.bat.and_then(|b| b.function(funcs[i].address))
            {
                for &frag in bf.cold_fragments {
                    if let Some(fi) = self.image.function_at(frag) {
                        size = size.wrapping_add(funcs[fi].size);
                    }
                }
            }
            let bytes = executed_bytes.get(&(i as u32)).copied().unwrap_or(0);
            out.functions.push((bytes as f64 / size as f64, samples));
        }
        out
    }

    /// The function that owns function `fi`'s profile: in BAT mode the function a fragment
    /// belongs to (a cold fragment's hot parent), otherwise `fi` itself.
    pub fn owner(&self, fi: usize) -> usize {
        self.bat
            .and_then(|b| b.parent_of(self.image.functions()[fi].address))
            .and_then(|p| self.image.function_at(p))
            .unwrap_or(fi)
    }

    /// Whether aggregation runs in BAT mode.
    pub fn is_bat(&self) -> bool {
        self.bat.is_some()
    }

    /// The BAT table of a BOLT-optimized binary (BAT mode only).
    pub fn bat(&self) -> Option<&'a BatTable> {
        self.bat
    }

    /// Rank of function `index` in the order perf2bolt writes profiles by name (its `std::map`
    /// of function names).
    pub fn name_rank(&self, index: usize) -> u32 {
        self.all_name_ranks().of(index as u32)
    }

    /// How fdata orders a function's records by destination: unknown code first, then by the
    /// destination function's name rank and offset.
    pub(crate) fn destination_order(&self, to: Loc) -> (u8, u32, u64) {
        self.all_name_ranks().destination_order(to)
    }

    /// Every function's name rank.
    fn all_name_ranks(&self) -> &NameRanks {
        self.name_ranks.get_or_init(|| {
            let n = self.image.functions().len() as u32;
            self.rank_names((0..n).into_par_iter())
        })
    }

    /// The name ranks of functions `which`, by the names perf2bolt writes: in BAT mode the input
    /// binary's ([`pcmap_binary::bolt::BoltFunction::profile_name`]).
    fn rank_names(&self, which: impl ParallelIterator<Item = u32>) -> NameRanks {
        let funcs = self.image.functions();
        if self.bat.is_some() {
            NameRanks::new(funcs, which, |f| f.profile_name(true))
        } else {
            NameRanks::new(funcs, which, |f| f.name())
        }
    }

    /// The image.
    pub fn image(&self) -> &'a BoltFunctions<'a, 'data> {
        self.image
    }

    /// Hash each CFG when it is built (YAML profiles): BOLT's function and block hashes
    /// ([`crate::block_hash::Hashes`], perf2bolt's view) from the decode the CFG is built from,
    /// kept in the CFG. Without this, hashing a function decodes it again.
    pub fn with_hashing(mut self) -> Self {
        self.hashing = true;
        self
    }

    /// [`Self::with_hashing`] in llvm-bolt's view ([`crate::block_hash::Context::llvm_bolt_view`]):
    /// the hashes llvm-bolt computes for a build it reads a profile for.
    pub fn with_llvm_bolt_hashing(mut self) -> Self {
        self.hashing = true;
        self.llvm_bolt_view = true;
        self
    }

    /// With [`Self::with_hashing`], also the function hashes over BOLT's depth-first block order
    /// (`--profile-use-dfs`).
    pub fn with_dfs_function_hashes(mut self) -> Self {
        self.dfs_hashes = true;
        self
    }

    /// Whether CFGs are hashed when built ([`Self::with_hashing`]).
    pub fn is_hashing(&self) -> bool {
        self.hashing
    }

    /// The hashing context.
    fn hash_context(&self) -> crate::block_hash::Context<'a, 'data> {
        let tables = self
            .hash_tables
            .get_or_init(|| Arc::new(crate::block_hash::Tables::new(self.image)));
        let ctx = crate::block_hash::Context::with_tables(self.image, tables.clone());
        if self.llvm_bolt_view {
            ctx.llvm_bolt_view()
        } else {
            ctx
        }
    }

    /// BOLT's function and block hashes of function `index` (a simple CFG's; `dfs`: with the
    /// depth-first function hash): those its CFG keeps ([`Self::with_hashing`]), else computed
    /// now (which decodes the function again).
    pub fn hashes(
        &self,
        index: usize,
        dfs: bool,
    ) -> std::borrow::Cow<'_, crate::block_hash::Hashes> {
        let f = &self.image.functions()[index];
        crate::block_hash::cfg_hashes(&self.hash_context(), f, self.cfg(index), dfs)
    }

    /// Hash a CFG just built from `decoded` ([`Self::with_hashing`]).
    fn keep_hashes(
        &self,
        ctx: &crate::block_hash::Context<'_, '_>,
        f: &pcmap_binary::bolt::BoltFunction,
        cfg: &mut Cfg,
        decoded: crate::block_hash::Instructions<'_>,
    ) {
        if cfg.simple && !cfg.blocks.is_empty() {
            let hashes = crate::block_hash::Hashes::compute_from(
                ctx,
                f,
                cfg,
                Some(decoded),
                self.dfs_hashes,
            );
            cfg.hashes = Some(Box::new(hashes));
        }
    }

    /// Decode every function once for BOLT's secondary entry points, keeping the decodes of
    /// the functions marked in `touched` (indexed like [`BoltFunctions::functions`]) for their
    /// CFGs. Does nothing after the first call. Runs before any parallel use of [`Self::cfg`]
    /// (so that no CFG waits for it inside a parallel job).
    pub fn prepare(&self, touched: Option<&[bool]>) {
        self.entries.get_or_init(|| {
            let scan = match self.scan.get() {
                // Given: only the relocations and the profiled code remain to be read before
                // any CFG is built.
                Some(scan) => {
                    rayon::join(
                        || self.image.data_references(),
                        || self.decode_touched(touched),
                    );
                    scan
                }
                None => {
                    // The binary's data references into code (its relocations, read once and
                    // serially) are read beside the decoding pass, not by the first CFG built:
                    // every CFG build needs them and would wait for that one.
                    let (_, scans) =
                        rayon::join(|| self.image.data_references(), || self.scan_all(touched));
                    let Scans {
                        references,
                        table_starts,
                        tableless_indirect_jumps,
                        scanned: _,
                    } = scans;
                    self.scan.get_or_init(|| {
                        ScanIndex::new(
                            0,
                            self.image,
                            references,
                            table_starts,
                            tableless_indirect_jumps,
                        )
                    })
                }
            };
            self.image.entry_points(scan.references.iter().copied())
        });
    }

    /// Take the findings of the decoding pass over every function from `index` (made on this
    /// binary by an earlier run, [`Self::scan_index`]) instead of making that pass. `false`, and
    /// nothing taken, when the index was made on another model of the binary
    /// ([`ScanIndex::fits`]) or this aggregator has already made the pass.
    pub fn take_scan_index(&mut self, index: ScanIndex) -> bool {
        if !index.fits(self.image) || self.scan.get().is_some() {
            return false;
        }
        self.scan.set(index).is_ok()
    }

    /// The findings of the decoding pass over every function, once made or given (after any
    /// aggregation): what a later run on the same binary can take ([`Self::take_scan_index`]).
    /// Its `key` is 0 when the pass was made here.
    pub fn scan_index(&self) -> Option<&ScanIndex> {
        self.scan.get()
    }

    /// [`Self::prepare`]'s decoding pass: every function's [`cfg::FunctionScan`], in stretches of
    /// about [`pcmap_binary::bolt::CODE_STRETCH`] bytes of code, each released once decoded
    /// ([`pcmap_binary::Binary::release`]): only the profiled code is read again, so a large
    /// binary's text need not stay resident.
    fn scan_all(&self, touched: Option<&[bool]>) -> Scans {
        let funcs = self.image.functions();
        let scan = |i: usize| {
            // A hashing aggregator decodes a touched function again for its CFG (see the
            // type's doc).
            let keep = !self.hashing && touched.is_some_and(|t| self.wants_cfg(t, i));
            if !keep {
                // Not profiled, its CFG already built, or a BAT fragment: nothing of it is
                // kept.
                return (i, cfg::scan(self.image, &funcs[i]));
            }
            let (d, references) = cfg::decode(self.image, &funcs[i]);
            let scan = d.scan(self.image, &funcs[i], references);
            if let Ok(mut pending) = self.pending.lock() {
                pending.insert(i, d);
            }
            (i, scan)
        };
        let regular = |i: &usize| funcs[*i].kind == FunctionKind::Regular;
        let binary = self.image.binary();
        let mut out = Scans::default();
        for stretch in
            pcmap_binary::bolt::code_stretches(binary, funcs, pcmap_binary::bolt::CODE_STRETCH)
        {
            let part = stretch
                .clone()
                .into_par_iter()
                .filter(regular)
                .map(scan)
                .fold(Scans::default, Scans::add)
                .reduce(Scans::default, Scans::merge);
            out = out.merge(part);
            pcmap_binary::bolt::release_stretch(binary, &funcs[stretch]);
        }
        self.decodes.fetch_add(out.scanned, Ordering::Relaxed);
        out
    }

    /// [`Self::prepare`]'s pass when the findings of [`Self::scan_all`] were given: decode the
    /// functions marked in `touched` for their CFGs ([`Self::each_touched`]). A hashing
    /// aggregator decodes them when it builds their CFGs (see the type's doc).
    fn decode_touched(&self, touched: Option<&[bool]>) {
        let Some(touched) = touched.filter(|_| !self.hashing) else {
            return;
        };
        let funcs = self.image.functions();
        self.each_touched(touched, |i| {
            self.decodes.fetch_add(1, Ordering::Relaxed);
            let d = cfg::decode(self.image, &funcs[i]).0;
            if let Ok(mut pending) = self.pending.lock() {
                pending.insert(i, d);
            }
        });
    }

    /// For a hashing aggregator, build the CFGs of the functions marked in `touched` (after
    /// [`Self::prepare`], [`Self::each_touched`]); an aggregator that does not hash has their
    /// decodes from [`Self::prepare`] and reads no code again. Only when the touched functions
    /// hold less than half of the code: when most of it is profiled, its pages are read anyway,
    /// and a CFG built just before its traces are aggregated is still in cache.
    fn build_touched_cfgs(&self, touched: &[bool]) {
        if !self.hashing {
            return;
        }
        let funcs = self.image.functions();
        let (mut wanted_bytes, mut all_bytes) = (0u64, 0u64);
        for (i, f) in funcs.iter().enumerate() {
            all_bytes = all_bytes.saturating_add(f.size);
            if self.wants_cfg(touched, i) {
                wanted_bytes = wanted_bytes.saturating_add(f.size);
            }
        }
        if wanted_bytes.saturating_mul(2) < all_bytes {
            self.each_touched(touched, |i| {
                self.cfg(i);
            });
        }
    }

    /// Whether function `i` is marked in `touched` and its CFG is still to be built (BAT
    /// fragments never get one: their traces decode single instructions).
    fn wants_cfg(&self, touched: &[bool], i: usize) -> bool {
        let f = &self.image.functions()[i];
        touched.get(i).copied().unwrap_or(false)
            && f.kind == FunctionKind::Regular
            && self.cfgs[i].get().is_none()
            && !self.bat.is_some_and(|b| b.is_bat_function(f.address))
    }

    /// Run `each` on the functions [`Self::wants_cfg`] picks, in parallel, in the same stretches
    /// of code as the passes over the whole binary, releasing each stretch once done. Read one
    /// by one as traces ask for their CFGs, the profiled functions scattered over a large binary
    /// mapped most of its text (the kernel maps the pages around each page read) and kept it.
    fn each_touched(&self, touched: &[bool], each: impl Fn(usize) + Sync) {
        let funcs = self.image.functions();
        let binary = self.image.binary();
        let wanted = |i: &usize| self.wants_cfg(touched, *i);
        for stretch in
            pcmap_binary::bolt::code_stretches(binary, funcs, pcmap_binary::bolt::CODE_STRETCH)
        {
            if !stretch.clone().any(|i| wanted(&i)) {
                continue;
            }
            stretch
                .clone()
                .into_par_iter()
                .filter(wanted)
                .for_each(&each);
            pcmap_binary::bolt::release_stretch(binary, &funcs[stretch]);
        }
    }

    /// How many times this aggregator decoded a function: once per function when the profile
    /// was known before any CFG was asked for, and once more per CFG when it hashes.
    pub fn decoded_functions(&self) -> usize {
        self.decodes.load(Ordering::Relaxed)
    }

    /// How many CFGs of functions that are not PLT entries this aggregator built.
    pub fn built_cfgs(&self) -> usize {
        let funcs = self.image.functions();
        self.cfgs
            .iter()
            .zip(funcs)
            .filter(|(c, f)| f.kind == FunctionKind::Regular && c.get().is_some())
            .count()
    }

    /// The CFG of function `index`, built on first use.
    pub fn cfg(&self, index: usize) -> &Cfg {
        self.cfgs[index].get_or_init(|| {
            let f = &self.image.functions()[index];
            match f.kind {
                FunctionKind::Regular => {
                    self.prepare(None);
                    let entries = self.entries.get().map_or(&[][..], |e| e.of(index));
                    let starts = self.scan.get().map(|s| s.table_starts.as_slice());
                    let pending = self.pending.lock().ok().and_then(|mut p| p.remove(&index));
                    if let Some(d) = pending {
                        return Box::new(cfg::build_from(self.image, f, entries, d, starts));
                    }
                    self.decodes.fetch_add(1, Ordering::Relaxed);
                    if !self.hashing {
                        let d = cfg::decode(self.image, f).0;
                        return Box::new(cfg::build_from(self.image, f, entries, d, starts));
                    }
                    let ctx = self.hash_context();
                    crate::block_hash::decode_for_hashes(&ctx, f, |d, decoded, offsets| {
                        let mut cfg = cfg::build_from(self.image, f, entries, d, starts);
                        self.keep_hashes(&ctx, f, &mut cfg, (decoded, offsets));
                        Box::new(cfg)
                    })
                }
                FunctionKind::Plt => Box::default(),
            }
        })
    }

    /// The functions containing any of `addresses` (indexed like [`BoltFunctions::functions`]);
    /// each parallel part looks addresses up near its previous answer (addresses mostly come
    /// in order).
    fn touched(&self, addresses: impl ParallelIterator<Item = u64>) -> Vec<bool> {
        let functions = addresses.map_with(0usize, |hint, a| {
            let f = self.image.function_containing_near(a, *hint);
            if let Some(i) = f {
                *hint = i;
            }
            f
        });
        marked(self.image.functions().len(), functions.flat_map_iter(|f| f))
    }

    /// Whether the instruction at `addr` (in function `fi`, if any) is a return.
    fn is_return(&self, addr: u64, fi: Option<usize>) -> bool {
        let Some(fi) = fi else {
            return false;
        };
        let f = &self.image.functions()[fi];
        // perf2bolt does not disassemble BAT fragments into a CFG: it decodes the one
        // instruction at the address (mid-instruction addresses included).
        let is_bat = self.bat.is_some_and(|b| b.is_bat_function(f.address));
        if f.kind == FunctionKind::Regular && !is_bat {
            let c = self.cfg(fi);
            if c.simple {
                return c.is_return_at(addr - f.address);
            }
        }
        cfg::decode_one(self.image, addr) == Some(Flow::Return)
    }

    /// Aggregate all traces of `profile` (branch mode).
    pub fn aggregate_traces(
        &self,
        profile: &PreAggregated,
        progress: &(dyn Fn(u64) + Sync),
    ) -> BranchProfile {
        // The traces come in address order: each function's CFG and records stay hot in cache
        // while its traces are processed, and the parallel chunks touch mostly disjoint functions.
        let traces = &profile.traces;
        let touched = self.touched(traces.par_iter().flat_map_iter(|(t, _)| {
            [t.branch, t.from, t.to]
                .into_iter()
                .filter(|&a| a < crate::preagg::FT_EXTERNAL_RETURN && a != BR_ONLY)
        }));
        self.prepare(Some(&touched));
        self.build_touched_cfgs(&touched);
        // About 32 chunks a thread: with 8, the last chunk kept one thread busy while the
        // other waited (tens of milliseconds on 1.2 million traces).
        let chunk = (traces.len() / (rayon::current_num_threads() * 32)).clamp(1024, 1 << 16);
        // Each chunk merges its own duplicates (in its table of records), then keeps them as a
        // list, to be grouped in place once the ranks are known.
        type Chunk = (
            Vec<(RecordKey, TraceCounts)>,
            TraceStats,
            FxHashMap<u32, u64>,
        );
        let chunks: Vec<Chunk> = traces
            .par_chunks(chunk)
            .map(|chunk| {
                let mut out = Partial::default();
                out.records.reserve(chunk.len() / 4);
                let mut hint = 0;
                for (t, c) in chunk {
                    self.process_trace(t, c, profile, &mut hint, &mut out);
                }
                progress(chunk.len() as u64);
                (
                    out.records.into_iter().collect(),
                    out.stats,
                    out.executed_bytes,
                )
            })
            .collect();
        // fdata order: functions by name rank, then (external entry, source, destination). Only
        // the functions the records name are ranked: each record's own and its destination's.
        let named = marked(
            self.image.functions().len(),
            chunks.par_iter().flat_map_iter(|(records, _, _)| {
                records.iter().flat_map(|(k, _)| {
                    let to = match k.to {
                        Loc::Func(f, _) => Some(f as usize),
                        Loc::Unknown => None,
                    };
                    std::iter::once(k.func as usize).chain(to)
                })
            }),
        );
        let ranks = self.rank_names(
            named
                .par_iter()
                .enumerate()
                .filter(|&(_, &n)| n)
                .map(|(i, _)| i as u32),
        );
        // The records are put in that order one window of name ranks at a time, in parallel:
        // each chunk groups its records by window, and each window counts its records from every
        // chunk into rank order, then sorts each function's few records. Sorting each chunk
        // and merging the sorted runs with a heap cost twice as much: every record went through
        // a comparison sort and a heap of all the chunks. The order within a group does not
        // matter: a function's records are sorted by their whole key, and equal keys merged.
        let rank = |f: u32| ranks.of(f);
        let functions = u64::from(ranks.ranked);
        let pieces = (rayon::current_num_threads() as u64 * 16).clamp(1, functions.max(1));
        let bounds: Vec<u32> = (0..=pieces)
            .map(|i| (functions * i / pieces) as u32)
            .collect();
        // Indexed by rank.
        let window_of: Vec<u32> = (0..ranks.ranked)
            .map(|r| (bounds.partition_point(|&b| b <= r) - 1) as u32)
            .collect();
        type Part = (
            (Vec<(RecordKey, TraceCounts)>, Vec<usize>),
            TraceStats,
            FxHashMap<u32, u64>,
        );
        let parts: Vec<Part> = chunks
            .into_par_iter()
            .map(|(mut records, stats, executed_bytes)| {
                let starts = group_in_place(&mut records, pieces as usize, |(k, _)| {
                    window_of[rank(k.func) as usize] as usize
                });
                ((records, starts), stats, executed_bytes)
            })
            .collect();
        let mut stats = TraceStats::default();
        let mut executed_bytes: FxHashMap<u32, u64> = FxHashMap::default();
        for (_, s, bytes) in &parts {
            for (&f, &b) in bytes {
                let e = executed_bytes.entry(f).or_default();
                *e = e.wrapping_add(b);
            }
            stats.traces = stats.traces.wrapping_add(s.traces);
            stats.mismatching = stats.mismatching.wrapping_add(s.mismatching);
            stats.out_of_range = stats.out_of_range.wrapping_add(s.out_of_range);
        }
        // Each window's records go into its own stretch of the final list (sized to every
        // chunk's records of the window), are sorted and merged there, and the stretches are
        // then closed up: one list of records, not one per window and a copy of them all.
        let sizes: Vec<usize> = (0..pieces as usize)
            .map(|w| {
                parts
                    .iter()
                    .map(|((_, starts), _, _)| starts[w + 1] - starts[w])
                    .sum()
            })
            .collect();
        let total = sizes.iter().sum();
        let Some(&first) = parts
            .iter()
            .find_map(|((records, _), _, _)| records.first())
        else {
            return BranchProfile {
                records: Vec::new(),
                stats,
                executed_bytes,
            };
        };
        let mut records = vec![first; total];
        let stretches = crate::split_lengths(&mut records, sizes.iter().copied());
        let kept: Vec<usize> = bounds
            .par_windows(2)
            .zip(stretches)
            .enumerate()
            .map(|(w, (range, stretch))| {
                let in_window = parts.iter().flat_map(|((records, starts), _, _)| {
                    records[starts[w]..starts[w + 1]].iter().copied()
                });
                let functions = (range[1] - range[0]) as usize;
                let of = |(k, _): &(RecordKey, TraceCounts)| (rank(k.func) - range[0]) as usize;
                let starts = group_starts(in_window.clone(), functions, of);
                place_groups(in_window, &starts, of, stretch);
                for f in starts.windows(2) {
                    stretch[f[0]..f[1]].sort_unstable_by_key(|(k, _)| {
                        (k.external_entry, k.from, ranks.destination_order(k.to))
                    });
                }
                // The same record from two chunks is counted once, with both counts (equal
                // records are neighbours now: one function, one sort key).
                crate::merge_equal_neighbours(stretch)
            })
            .collect();
        let mut end = 0;
        let mut at = 0;
        for (&size, &kept) in sizes.iter().zip(&kept) {
            records.copy_within(at..at + kept, end);
            end += kept;
            at += size;
        }
        records.truncate(end);
        BranchProfile {
            records,
            stats,
            executed_bytes,
        }
    }

    /// One trace; `hint`: the function of the previous trace's start (traces come sorted by it).
    fn process_trace(
        &self,
        t: &Trace,
        c: &TraceCounts,
        p: &PreAggregated,
        hint: &mut usize,
        out: &mut Partial,
    ) {
        // Each end's function is looked up once per trace, near the previous trace's.
        let real = |a: u64| a < crate::preagg::FT_EXTERNAL_RETURN;
        let from_fn = self.image.function_containing_near(t.from, *hint);
        if let Some(f) = from_fn {
            *hint = f;
        }
        let branch_fn = real(t.branch)
            .then(|| self.image.function_containing_near(t.branch, *hint))
            .flatten();
        let is_return = p.returns.contains(&t.branch)
            || (real(t.branch) && self.is_return(t.branch, branch_fn));
        let is_return = is_return || t.branch == crate::preagg::FT_EXTERNAL_RETURN;
        if !is_return && t.branch != FT_ONLY && t.branch != FT_EXTERNAL_ORIGIN {
            self.do_branch(
                (t.branch, branch_fn),
                (t.from, from_fn),
                c.count,
                c.mispreds,
                out,
            );
        }
        if t.to != BR_ONLY {
            let to_fn = self.image.function_containing_near(t.to, *hint);
            self.do_trace(t, (from_fn, to_fn), c.count, is_return, out);
        }
    }

    fn locate(&self, addr: u64) -> Option<(u32, u64)> {
        let fi = self.image.function_containing(addr)?;
        Some((fi as u32, addr - self.image.functions()[fi].address))
    }

    /// [`Self::locate`], then in BAT mode the translation to the input function's offset and the
    /// owning (parent) function, as perf2bolt's `doBranch` does for both ends. `fi`: the function
    /// containing `addr`, already looked up.
    fn locate_translated(
        &self,
        addr: u64,
        fi: Option<usize>,
        is_branch_src: bool,
    ) -> Option<(u32, u64)> {
        let fi = fi? as u32;
        let off = addr - self.image.functions()[fi as usize].address;
        let Some(bat) = self.bat else {
            return Some((fi, off));
        };
        let start = self.image.functions()[fi as usize].address;
        match bat.translate_in(start, addr, is_branch_src) {
            Some(t) => {
                let parent = self
                    .image
                    .function_at(t.function_address)
                    .map_or(fi, |p| p as u32);
                Some((parent, t.input_offset))
            }
            None => Some((fi, off)),
        }
    }

    /// Where perf2bolt's `doBasicSample` puts a sample: in BAT mode, in the function owning the
    /// fragment, at `address - owner address` translated through the owner's (hot) fragment
    /// table — for a cold fragment that is not the cold fragment's own translation.
    fn locate_sample(&self, addr: u64) -> Option<(u32, u64)> {
        let (fi, off) = self.locate(addr)?;
        let Some(bat) = self.bat else {
            return Some((fi, off));
        };
        let owner = self.owner(fi as usize) as u32;
        let owner_address = self.image.functions()[owner as usize].address;
        let offset = match bat.translate_in(owner_address, addr, false) {
            Some(t) => t.input_offset,
            None => addr.wrapping_sub(owner_address),
        };
        Some((owner, offset))
    }

    /// A taken branch; each end with the function containing it.
    fn do_branch(
        &self,
        (from, from_fn): (u64, Option<usize>),
        (to, to_fn): (u64, Option<usize>),
        count: u64,
        mispreds: u64,
        out: &mut Partial,
    ) {
        let src = self.locate_translated(from, from_fn, true);
        let dst = self.locate_translated(to, to_fn, false);
        match (src, dst) {
            (None, None) => {}
            (Some((func, from)), dst) => {
                let to = dst.map_or(Loc::Unknown, |(t, to)| Loc::Func(t, to));
                let key = RecordKey {
                    func,
                    external_entry: false,
                    from,
                    to,
                };
                out.bump(key, count, mispreds);
            }
            (None, Some((func, to))) => {
                let key = RecordKey {
                    func,
                    external_entry: true,
                    from: 0,
                    to: Loc::Func(func, to),
                };
                out.bump(key, count, mispreds);
            }
        }
    }

    /// The fall-through part of a trace; `fns`: the functions containing its start and end.
    fn do_trace(
        &self,
        t: &Trace,
        fns: (Option<usize>, Option<usize>),
        count: u64,
        is_return: bool,
        out: &mut Partial,
    ) {
        out.stats.traces = out.stats.traces.wrapping_add(count);
        let (Some(ff), Some(tf)) = fns else {
            out.stats.out_of_range = out.stats.out_of_range.wrapping_add(count);
            return;
        };
        if ff != tf {
            out.stats.mismatching = out.stats.mismatching.wrapping_add(count);
            return;
        }
        let start = self.image.functions()[ff].address;
        // Executed bytes go to the owning function of a BAT fragment, whether or not the
        // fall-through turns out valid.
        let owner = self.owner(ff) as u32;
        let bytes = out.executed_bytes.entry(owner).or_default();
        *bytes = bytes.wrapping_add(count.wrapping_mul(t.to.wrapping_sub(t.from)));
        if let Some(bat) = self.bat.filter(|b| b.is_bat_function(start)) {
            // BAT replaces the CFG: no validation, records on the owning function.
            let from = t.from.saturating_sub(u64::from(is_return));
            for (src, dst) in bat
                .fallthroughs_in_trace(start, from, t.to)
                .unwrap_or_default()
            {
                let key = RecordKey {
                    func: owner,
                    external_entry: false,
                    from: u64::from(src),
                    to: Loc::Func(owner, u64::from(dst)),
                };
                out.bump(key, count, 0);
            }
            return;
        }
        match self.fallthroughs(ff, t, is_return) {
            None => out.stats.mismatching = out.stats.mismatching.wrapping_add(count),
            Some(fts) => {
                if fts.is_empty() {
                    return;
                }
                let func = ff as u32;
                for (from, to) in fts {
                    let key = RecordKey {
                        func,
                        external_entry: false,
                        from,
                        to: Loc::Func(func, to),
                    };
                    out.bump(key, count, 0);
                }
            }
        }
    }

    /// perf2bolt's `getFallthroughsInTrace`: the (last instruction, next block) offset pairs a
    /// fall-through from `t.from` to `t.to` walks through, or `None` when it is invalid.
    pub fn fallthroughs(&self, fi: usize, t: &Trace, is_return: bool) -> Option<Vec<(u64, u64)>> {
        let f = &self.image.functions()[fi];
        let from = t.from - f.address;
        let to = t.to - f.address;
        if from > to {
            return None;
        }
        if f.kind == FunctionKind::Plt {
            return Some(Vec::new());
        }
        let cfg = self.cfg(fi);
        if !cfg.simple {
            return None;
        }
        let mut from_bb = cfg.block_containing(from)?;
        let to_bb = cfg.block_containing(to)?;
        let branch_outside = t.branch < f.address || t.branch - f.address >= f.size;
        if t.branch != FT_ONLY
            && branch_outside
            && from == u64::from(cfg.blocks[from_bb].offset)
            && (if is_return {
                from != 0
            } else {
                !(cfg.blocks[from_bb].is_entry || cfg.blocks[from_bb].is_landing_pad)
            })
            && from_bb > 0
        {
            let prev = from_bb - 1;
            if cfg.blocks[prev].succs.contains(&(from_bb as u32))
                && cfg.last_insn(prev).is_some_and(|i| i.is_call())
            {
                from_bb = prev;
            }
        }
        let mut out = Vec::new();
        let mut bb = from_bb;
        while bb != to_bb {
            let next = bb + 1;
            if next >= cfg.blocks.len() || !cfg.blocks[bb].succs.contains(&(next as u32)) {
                return None;
            }
            let off = cfg
                .last_insn(bb)
                .map_or(u64::from(cfg.blocks[bb].offset), |i| u64::from(i.offset));
            out.push((off, u64::from(cfg.blocks[next].offset)));
            bb = next;
        }
        Some(out)
    }

    /// perf2bolt's `--impute-trace-fall-through` on `profile` (see
    /// [`PreAggregated::impute_fall_throughs`]), with BOLT's unconditional control transfers:
    /// calls (tail calls included), returns and direct jumps, and any address that is not an
    /// instruction of a function. Returns how many traces were imputed.
    pub fn impute_fall_throughs(&self, profile: &mut PreAggregated) -> u64 {
        profile.impute_fall_throughs(|addr| match cfg::decode_one(self.image, addr) {
            None | Some(Flow::Call | Flow::Return | Flow::Jump) => true,
            Some(Flow::IndirectJump) => self.locate(addr).is_some_and(|(fi, off)| {
                self.cfg(fi as usize).insn_at(off).is_some_and(|i| {
                    i.is_call() || i.indirect() == Some(cfg::IndirectJump::TailCall)
                })
            }),
            Some(Flow::CondJump | Flow::Next | Flow::Trap) => false,
        })
    }

    /// Aggregate basic samples (`--ba`).
    pub fn aggregate_samples(&self, profile: &PreAggregated) -> SampleProfile {
        let touched = self.touched(profile.samples.par_iter().map(|(&a, _)| a));
        self.prepare(Some(&touched));
        let mut out = SampleProfile::default();
        for (&addr, &count) in &profile.samples {
            match self.locate_sample(addr) {
                Some(k) => {
                    let e = out.samples.entry(k).or_default();
                    *e = e.wrapping_add(count);
                    // Executed bytes: the size of the sampled block of the function containing
                    // the address (0 without a CFG), on the owning function.
                    let block_size = self.locate(addr).map_or(0, |(fi, off)| {
                        let cfg = self.cfg(fi as usize);
                        if !cfg.simple {
                            return 0;
                        }
                        cfg.block_containing(off)
                            .map_or(0, |b| u64::from(cfg.blocks[b].end - cfg.blocks[b].offset))
                    });
                    let bytes = out.executed_bytes.entry(k.0).or_default();
                    *bytes = bytes.wrapping_add(count.wrapping_mul(block_size));
                }
                None => out.out_of_range = out.out_of_range.wrapping_add(count),
            }
        }
        out
    }
}

/// Which of `n` items `marks` names (each below `n`), marked from parallel work.
fn marked(n: usize, marks: impl ParallelIterator<Item = usize>) -> Vec<bool> {
    let marked: Vec<AtomicBool> = (0..n).map(|_| AtomicBool::new(false)).collect();
    marks.for_each(|i| marked[i].store(true, Ordering::Relaxed));
    marked.into_iter().map(AtomicBool::into_inner).collect()
}

/// `items` grouped by `group` (each below `groups`) in place, with no order within a group: a
/// counting sort that swaps each item into its group's next free slot (the "American flag"
/// sort). Group `g` is then `items[starts[g]..starts[g + 1]]`; returns `starts`. In place, so a
/// chunk's records are grouped without a second list of them.
fn group_in_place<T>(items: &mut [T], groups: usize, group: impl Fn(&T) -> usize) -> Vec<usize> {
    let starts = group_starts(items.iter(), groups, |t| group(t));
    let mut next = starts[..groups].to_vec();
    for g in 0..groups {
        while next[g] < starts[g + 1] {
            let i = next[g];
            let h = group(&items[i]);
            if h == g {
                next[g] += 1;
            } else {
                // `h > g`: every slot of the groups before `g` is final.
                items.swap(i, next[h]);
                next[h] += 1;
            }
        }
    }
    starts
}

/// Where each group of `items` starts in their grouped order (`groups + 1` entries, the last
/// one the number of items).
fn group_starts<T>(
    items: impl Iterator<Item = T>,
    groups: usize,
    group: impl Fn(&T) -> usize,
) -> Vec<usize> {
    let mut starts = vec![0usize; groups + 1];
    for item in items {
        starts[group(&item) + 1] += 1;
    }
    for g in 1..starts.len() {
        starts[g] += starts[g - 1];
    }
    starts
}

/// Write `items` into `out` grouped ([`group_starts`] of the same items), each group in input
/// order. An item whose group is already full (only if `items` differs from what was counted)
/// is left out rather than written out of place.
fn place_groups<T>(
    items: impl Iterator<Item = T>,
    starts: &[usize],
    group: impl Fn(&T) -> usize,
    out: &mut [T],
) {
    let mut next = starts.to_vec();
    for item in items {
        let g = group(&item);
        if next[g] < starts[g + 1]
            && let Some(slot) = out.get_mut(next[g])
        {
            *slot = item;
            next[g] += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Density, NameRanks, group_in_place};
    use crate::merge_equal_neighbours;
    use proptest::prelude::*;
    use rayon::prelude::*;

    /// One one-byte function per name, at addresses 0, 1, ...
    fn functions_named(names: &[String]) -> Vec<pcmap_binary::bolt::BoltFunction<'_>> {
        names
            .iter()
            .enumerate()
            .map(|(i, n)| pcmap_binary::bolt::BoltFunction {
                names: pcmap_binary::bolt::Names::One(std::borrow::Cow::Borrowed(n.as_str())),
                address: i as u64,
                size: 1,
                max_size: 1,
                kind: pcmap_binary::bolt::FunctionKind::Regular,
            })
            .collect()
    }

    proptest! {
        /// Ranks follow the names' byte order, equal names in index order, whatever the names
        /// share beyond the 16 bytes compared first (NUL bytes included).
        #[test]
        fn name_ranks_follow_the_byte_order(
            names in proptest::collection::vec("(a{14,18}|b?)[ab\\x00]{0,3}", 0..60),
        ) {
            let funcs = functions_named(&names);
            let ranks = NameRanks::new(&funcs, (0..funcs.len() as u32).into_par_iter(), |f| f.name());
            let mut expected: Vec<usize> = (0..names.len()).collect();
            expected.sort_by(|&a, &b| names[a].as_bytes().cmp(names[b].as_bytes()).then(a.cmp(&b)));
            prop_assert_eq!(ranks.ranked as usize, names.len());
            for (r, &i) in expected.iter().enumerate() {
                prop_assert_eq!(ranks.of(i as u32) as usize, r, "name {:?}", names[i]);
            }
        }

        /// Ranking some of the functions orders them as ranking all of them does, with ranks
        /// `0..` the number ranked, and leaves the others unranked.
        #[test]
        fn name_ranks_of_some_functions_keep_their_order(
            names in proptest::collection::vec("[ab]{0,3}", 0..40),
            pick in proptest::collection::vec(any::<bool>(), 40),
        ) {
            let funcs = functions_named(&names);
            let all = NameRanks::new(&funcs, (0..funcs.len() as u32).into_par_iter(), |f| f.name());
            let some: Vec<u32> = (0..funcs.len() as u32).filter(|&i| pick[i as usize]).collect();
            let ranks = NameRanks::new(&funcs, some.par_iter().copied(), |f| f.name());
            prop_assert_eq!(ranks.ranked as usize, some.len());
            let mut by_rank = some.clone();
            by_rank.sort_by_key(|&i| ranks.of(i));
            let mut by_all = some.clone();
            by_all.sort_by_key(|&i| all.of(i));
            prop_assert_eq!(&by_rank, &by_all);
            for (r, &i) in by_rank.iter().enumerate() {
                prop_assert_eq!(ranks.of(i) as usize, r);
            }
            for i in 0..funcs.len() as u32 {
                if !pick[i as usize] {
                    prop_assert_eq!(ranks.of(i), NameRanks::UNRANKED);
                }
            }
        }
    }

    #[test]
    fn density_cutoff_is_integer_arithmetic() {
        // What perf2bolt 22 prints for one trace of count 1 (5 bytes executed in a 37-byte
        // function), and for the same trace counted twice.
        let one = Density {
            functions: vec![(5.0 / 37.0, 1)],
            total_samples: 1,
        };
        let r = one.report(990_000, 60.0);
        assert_eq!(
            r.info,
            "BOLT-INFO: Functions with density >= 0.0 account for 99.00% total sample counts."
        );
        assert!(
            r.warning
                .is_some_and(|w| w.contains("the output profile is empty"))
        );
        let two = Density {
            functions: vec![(10.0 / 37.0, 2)],
            total_samples: 2,
        };
        assert_eq!(
            two.report(990_000, 60.0).info,
            "BOLT-INFO: Functions with density >= 0.3 account for 99.00% total sample counts."
        );
        assert_eq!(
            one.report(1_000_000, 60.0).info,
            "BOLT-INFO: Functions with density >= 0.1 account for 100.00% total sample counts."
        );
        assert_eq!(
            one.report(500_000, 60.0).info,
            "BOLT-INFO: Functions with density >= 0.0 account for 50.00% total sample counts."
        );
    }

    proptest! {
        /// Merging equal neighbours in place keeps the first record of each run of one key,
        /// with the run's counts summed, in order: what `Vec::dedup_by` with summing gives.
        #[test]
        fn merging_equal_neighbours_sums_each_run(
            records in proptest::collection::vec((0u32..3, 0u64..3, 0u64..1000, 0u64..10), 0..60),
        ) {
            use super::{Loc, RecordKey};
            use crate::preagg::TraceCounts;
            let mut records: Vec<(RecordKey, TraceCounts)> = records
                .into_iter()
                .map(|(f, from, count, mispreds)| {
                    let key = RecordKey { func: f, external_entry: false, from, to: Loc::Unknown };
                    (key, TraceCounts { count, mispreds })
                })
                .collect();
            let mut want = records.clone();
            want.dedup_by(|(k, c), (kept, into)| {
                let same = k == kept;
                if same {
                    into.count += c.count;
                    into.mispreds += c.mispreds;
                }
                same
            });
            let kept = merge_equal_neighbours(&mut records);
            prop_assert_eq!(&records[..kept], &want[..]);
        }

        /// Grouping in place puts every item in its group, the groups in order, and keeps the
        /// items (the same multiset).
        #[test]
        fn grouping_in_place_is_a_sort_by_group(
            items in proptest::collection::vec((0usize..12, 0u32..1000), 0..200),
        ) {
            let mut grouped = items.clone();
            let starts = group_in_place(&mut grouped, 12, |t| t.0);
            prop_assert_eq!(starts.len(), 13);
            prop_assert_eq!(starts[0], 0);
            prop_assert_eq!(starts[12], items.len());
            for g in 0..12 {
                prop_assert!(grouped[starts[g]..starts[g + 1]].iter().all(|t| t.0 == g));
            }
            let (mut a, mut b) = (items.clone(), grouped.clone());
            a.sort_unstable();
            b.sort_unstable();
            prop_assert_eq!(a, b);
        }
    }
}
