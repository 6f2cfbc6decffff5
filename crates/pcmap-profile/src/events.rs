//! The branch-event pipeline: every profile input (pre-aggregated text, perf.data) becomes one stream
//! of typed [`Event`]s handed to a [`Sink`] that the consumer implements (as ripgrep's `Sink`): the
//! perf2bolt aggregator, the bbmap block profile and the Propeller CFG builder all read through here.
//!
//! * Events: an event name ([`Event::Name`]), a basic [`Sample`] and a [`Trace`] — a taken branch
//!   followed by a fall-through range, in perf2bolt's kinds ([`TraceKind`]: `T`, `R`, `B`, `F`, `f`,
//!   `r`). Each carries the process id when the input knows it, and each address says whether it
//!   belongs to the profiled binary ([`Loc::outside`]).
//! * Producers: [`read_preaggregated`] / [`read_preaggregated_parallel`] (perf2bolt 22's `--pa`
//!   dialect, see [`crate::preagg`]) and [`read_perf_data`] (branch stacks or basic samples
//!   of the processes that mapped the binary, addresses translated to the binary's link-time
//!   addresses by perf2bolt's rules for fixed-address executables, PIE executables and shared
//!   objects). Several inputs may feed one sink: call the producers one after the other.
//! * The one LBR-stack → trace conversion: entries are newest first; entry `i` is the taken branch
//!   `from -> to`, and its fall-through ends at the source of the next-newer entry `i - 1` (the newest
//!   entry has none: a [`TraceKind::BranchOnly`] trace).
//!
//! The binary is described by the caller with a plain [`BinaryDesc`] (this crate depends on no
//! other pcmap crate).

use std::collections::HashMap;

use crate::perfdata::{self, PerfFile, Record};
use crate::preagg::{self, FallThroughKind, Location, Record as PaRecord, TraceKind as PaKind};
use rayon::prelude::*;

/// An address in an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Loc {
    /// The address as perf2bolt sees it: the binary's link-time address for addresses inside the
    /// binary; for others, what perf2bolt makes of them (the run-time address, or `u64::MAX` for a
    /// small address that would alias the binary).
    pub addr: u64,
    /// The address is not in the profiled binary: `X:` in pre-aggregated text, or outside every
    /// mapping of the binary in perf.data.
    pub outside: bool,
}

impl Loc {
    /// An address inside the binary.
    pub const fn inside(addr: u64) -> Self {
        Loc {
            addr,
            outside: false,
        }
    }

    /// The address if it is inside the binary.
    pub fn binary_addr(&self) -> Option<u64> {
        (!self.outside).then_some(self.addr)
    }
}

/// perf2bolt's trace kinds (the pre-aggregated record letters).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TraceKind {
    /// `T`: taken branch `branch -> from`, then fall-through `from .. to`.
    Taken,
    /// `R`: like `T`, the branch is a return (`branch.addr == 0`: a return from outside the binary).
    Return,
    /// `B`: taken branch `branch -> from` without fall-through (`to` is unused).
    BranchOnly,
    /// `F`: fall-through `from .. to` without branch (`branch` is unused).
    FallThrough,
    /// `f`: fall-through whose origin is outside the binary.
    ExternalOrigin,
    /// `r`: fall-through starting at a return from outside the binary.
    ExternalReturn,
}

impl TraceKind {
    /// Whether the trace has a taken-branch part.
    pub fn has_branch(self) -> bool {
        matches!(
            self,
            TraceKind::Taken | TraceKind::Return | TraceKind::BranchOnly
        )
    }

    /// Whether the trace has a fall-through part.
    pub fn has_fall_through(self) -> bool {
        self != TraceKind::BranchOnly
    }
}

/// A basic sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    /// Process id, when known.
    pub pid: Option<u32>,
    /// Sampled address.
    pub at: Loc,
    /// Number of samples.
    pub count: u64,
}

/// A taken branch and the fall-through after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Trace {
    /// Process id, when known.
    pub pid: Option<u32>,
    /// Which parts the trace has.
    pub kind: TraceKind,
    /// Branch source.
    pub branch: Loc,
    /// Branch target = fall-through start.
    pub from: Loc,
    /// Fall-through end (the source of the next taken branch).
    pub to: Loc,
    /// Times executed.
    pub count: u64,
    /// Times the branch was mispredicted.
    pub mispreds: u64,
}

/// One event of a profile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event<'a> {
    /// The name of the event the following samples belong to (`E` records; perf.data event names as
    /// `perf script` prints them, with a trailing `:`).
    Name(&'a [u8]),
    /// A basic sample.
    Sample(Sample),
    /// A branch and/or fall-through.
    Trace(Trace),
}

/// A consumer of events.
pub trait Sink {
    /// Take one event.
    fn event(&mut self, event: &Event<'_>);
}

impl<S: Sink + ?Sized> Sink for &mut S {
    fn event(&mut self, event: &Event<'_>) {
        (**self).event(event)
    }
}

/// A sink that parallel producers split into one sink per chunk of input and merge afterwards,
/// in input order.
pub trait ParallelSink: Sink + Send + Sized {
    /// Merging gives the same result whatever the order of chunks of traces and samples (a
    /// sink that only counts them). Producers may then hand such chunks to sinks in any order,
    /// as threads become free ([`read_perf_data_parallel`] streams the branch stacks of a
    /// perf.data file so); chunks with [`Event::Name`]s are still merged in input order.
    const ORDER_FREE: bool = false;

    /// Merge the sink of a later chunk into this one.
    fn merge(self, later: Self) -> Self;
}

fn loc(l: &Location<'_>) -> Loc {
    Loc {
        addr: l.offset,
        outside: l.is_external(),
    }
}

/// The event of one pre-aggregated record.
pub fn preaggregated_event<'a>(r: &PaRecord<'a>) -> Event<'a> {
    let none = Loc::default();
    let trace = |kind, branch, from, to, count, mispreds| {
        Event::Trace(Trace {
            pid: None,
            kind,
            branch,
            from,
            to,
            count,
            mispreds,
        })
    };
    match *r {
        PaRecord::Event { name } => Event::Name(name),
        PaRecord::Sample { addr, count } => Event::Sample(Sample {
            pid: None,
            at: loc(&addr),
            count,
        }),
        PaRecord::Trace {
            kind,
            branch,
            ft_start,
            ft_end,
            count,
        } => trace(
            match kind {
                PaKind::Branch => TraceKind::Taken,
                PaKind::Return => TraceKind::Return,
            },
            loc(&branch),
            loc(&ft_start),
            loc(&ft_end),
            count,
            0,
        ),
        PaRecord::Branch {
            from,
            to,
            count,
            mispreds,
        } => trace(
            TraceKind::BranchOnly,
            loc(&from),
            loc(&to),
            none,
            count,
            mispreds,
        ),
        PaRecord::FallThrough {
            kind,
            from,
            to,
            count,
        } => trace(
            match kind {
                FallThroughKind::Internal => TraceKind::FallThrough,
                FallThroughKind::ExternalOrigin => TraceKind::ExternalOrigin,
                FallThroughKind::ExternalReturn => TraceKind::ExternalReturn,
            },
            none,
            loc(&from),
            loc(&to),
            count,
            0,
        ),
    }
}

/// Read pre-aggregated text serially into `sink`.
pub fn read_preaggregated<S: Sink>(data: &[u8], sink: &mut S) -> Result<(), preagg::Error> {
    for r in preagg::parse(data) {
        sink.event(&preaggregated_event(&r?));
    }
    Ok(())
}

/// Read pre-aggregated text in parallel: one sink per newline-aligned chunk (`init`), merged in
/// input order. `progress` is called with the byte count of each finished chunk. On a parse error
/// the first failing line in input order is reported, with its global line number.
pub fn read_preaggregated_parallel<S: ParallelSink>(
    data: &[u8],
    init: impl Fn() -> S + Sync,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<S, preagg::Error> {
    preagg::fold_chunks(
        data,
        &init,
        |s: &mut S, r| s.event(&preaggregated_event(&r)),
        |a, b| a.merge(b),
        progress,
    )
}

/// One loadable segment of the profiled binary (a `PT_LOAD` program header).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// `p_vaddr`.
    pub vaddr: u64,
    /// `p_offset`.
    pub offset: u64,
    /// `p_filesz`.
    pub file_size: u64,
    /// `p_memsz`.
    pub mem_size: u64,
    /// `p_align`.
    pub align: u64,
    /// `PF_X` is set.
    pub executable: bool,
}

/// What the perf.data producer needs to know about the profiled binary.
#[derive(Clone, Debug, Default)]
pub struct BinaryDesc<'a> {
    /// The GNU build-id bytes, if the binary has one.
    pub build_id: Option<&'a [u8]>,
    /// The binary's file name (a path; its last component is matched against mappings).
    pub file_name: &'a [u8],
    /// The `PT_LOAD` segments.
    pub segments: Vec<Segment>,
    /// An executable linked at a fixed address (`ET_EXEC`): its mappings are kept even when no
    /// executable segment matches their file offset (no translation). Addresses of every binary
    /// are translated through the mapping's base address (0 for a fixed-address executable at its
    /// link address).
    pub fixed_address: bool,
}

/// How to read a perf.data file.
#[derive(Clone, Copy, Debug, Default)]
pub struct PerfOptions {
    /// Basic samples (the sample ip) instead of branch stacks.
    pub basic: bool,
    /// Only this process (perf2bolt's `--pid`).
    pub pid: Option<u32>,
    /// Accept a file whose build-id list does not include the binary's.
    pub ignore_build_id: bool,
    /// In branch mode, also send each sample's ip as a [`Sample`] (block profiles count both).
    pub sample_ips: bool,
    /// In branch mode, stop after this many samples of the file, counting those of every
    /// process (perf2bolt's `--max-samples`). The file is then read in one piece.
    pub max_samples: Option<u64>,
}

/// Counts perf2bolt prints while reading perf.data.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PerfStats {
    /// All samples in the file (branch mode) or samples of the binary's processes (basic mode).
    pub total_samples: u64,
    /// Samples of the binary's processes (branch mode).
    pub samples: u64,
    /// Branch-stack entries of those samples (kernel entries excluded).
    pub entries: u64,
    /// Samples of those processes without branch stack entries (branch mode).
    pub samples_without_branch_stack: u64,
    /// Whether the file's build-id list names the binary.
    pub build_id_matched: bool,
    /// Processes whose samples were used.
    pub pids: usize,
    /// A branch-stack entry of those samples carries neither the mispredicted nor the predicted
    /// flag (perf script's `-`; perf2bolt warns "misprediction bit is missing in profile").
    pub missing_mispred_bit: bool,
}

/// Why a perf.data file cannot be read for the binary.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PerfError {
    /// The file does not decode.
    #[error(transparent)]
    Decode(#[from] perfdata::Error),
    /// The file lists build-ids, none of them the binary's.
    #[error(
        "failed to match build-id from perf data: the binary is not the one that was profiled (use --ignore-build-id to override)"
    )]
    BuildIdMismatch,
    /// No process mapped the binary.
    #[error("could not find a profile matching binary {name:?} in perf data")]
    NotMapped {
        /// The file name looked for.
        name: String,
    },
    /// `--pid` names a process that did not map the binary.
    #[error("could not find a profile matching PID {pid} for the binary")]
    PidNotFound {
        /// The requested process id.
        pid: u32,
    },
}

/// perf2bolt's `KernelBaseAddr`: branch entries from or to at or above it are dropped.
pub const KERNEL_BASE: u64 = 0xffff_8000_0000_0000;

/// The binary's mapping in one process, as perf2bolt keeps it (`MMapInfo`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mapping {
    /// Process id.
    pub pid: u32,
    /// Start of the first mapping of the binary in this process.
    pub start: u64,
    /// Size covered from `start` (grows with later segment mappings).
    pub size: u64,
    /// Run-time address of link-time address 0 (0 for fixed-address executables).
    pub base: u64,
    /// Inherited from a parent by `FORK`.
    pub forked: bool,
}

impl Mapping {
    /// perf2bolt's `adjustAddress`: a run-time address to the binary's address, and whether it lies
    /// in the mapping.
    pub fn translate(&self, addr: u64) -> Loc {
        if addr >= self.start && addr - self.start < self.size {
            // perf2bolt subtracts in unsigned arithmetic; a hostile mapping can put the base
            // above the start, and the result then wraps as it does there.
            Loc::inside(addr.wrapping_sub(self.base))
        } else if addr < self.size {
            // Must not be taken for an address of the binary.
            Loc {
                addr: u64::MAX,
                outside: true,
            }
        } else {
            Loc {
                addr,
                outside: true,
            }
        }
    }
}

pub(crate) fn basename(p: &[u8]) -> &[u8] {
    match memchr::memrchr(b'/', p) {
        Some(i) => &p[i + 1..],
        None => p,
    }
}

/// The binary's file name as perf2bolt matches it against mapping file names (`names`, last path
/// components): its own name, or, when no mapping has that name, the name the file's build-id
/// list gives the binary's build-id.
pub(crate) fn name_to_use(
    file: &PerfFile<'_>,
    build_id: Option<&[u8]>,
    file_name: &[u8],
    names: &[&[u8]],
) -> Option<Vec<u8>> {
    let own = basename(file_name);
    if names.contains(&own) {
        return Some(own.to_vec());
    }
    let id = build_id?;
    file.build_ids
        .iter()
        .find(|e| {
            e.build_id.starts_with(id) || (!e.build_id.is_empty() && id.starts_with(&e.build_id))
        })
        .map(|e| basename(&e.filename).to_vec())
        .or(Some(own.to_vec()))
}

/// Where the binary is mapped, per process: perf2bolt's rules over `MMAP2` records (pid -1,
/// anonymous `//…`, `[…]` and `(deleted)` mappings ignored), by file name (or the build-id list's
/// name for the binary's build-id); the base address comes from the executable segment whose file
/// offset matches the mapping's page offset; the first mapping of a process gives the start, later
/// ones (more executable segments) extend the size. Then `FORK` (after the start of recording)
/// gives the child its parent's mapping, `COMM exec` removes such an inherited mapping. `EXIT`
/// records change nothing (perf2bolt ignores them too: a process's samples all precede its exit).
pub fn binary_mappings(
    file: &PerfFile<'_>,
    bin: &BinaryDesc<'_>,
) -> Result<Vec<Mapping>, perfdata::Error> {
    let (tasks, _) = task_records(file, 1, &|_| {})?;
    Ok(mappings_from(file, bin, &tasks))
}

/// The task records of the file ([`TaskRecord`]), in file order, from one pass over the record
/// headers that also cuts the data section into about `parts` pieces ([`PerfFile::split`]; `done`
/// gets each piece). A file with compressed records is read in full instead (pieces `None`).
fn task_records(
    file: &PerfFile<'_>,
    parts: usize,
    done: &dyn Fn(std::ops::Range<usize>),
) -> Result<(Vec<TaskRecord>, Option<Pieces>), perfdata::Error> {
    let mut tasks = Vec::new();
    let pieces = file.split(
        parts,
        &TASK_RECORD_TYPES,
        |r| tasks.extend(TaskRecord::of(r)),
        done,
    )?;
    if pieces.is_none() {
        tasks.clear();
        file.for_each_record(|r| {
            tasks.extend(TaskRecord::of(r));
            true
        })?;
    }
    Ok((tasks, pieces))
}

/// The record types [`TaskRecord::of`] keeps.
const TASK_RECORD_TYPES: [u32; 4] = [
    perfdata::record_type::MMAP,
    perfdata::record_type::MMAP2,
    perfdata::record_type::COMM,
    perfdata::record_type::FORK,
];

/// What [`binary_mappings`] needs of a record: the mappings, `COMM exec` and `FORK`.
enum TaskRecord {
    Mmap {
        pid: u32,
        start: u64,
        len: u64,
        pgoff: u64,
        name: Vec<u8>,
    },
    CommExec {
        pid: u32,
    },
    Fork {
        pid: u32,
        ppid: u32,
        time: u64,
    },
}

impl TaskRecord {
    fn of(r: &Record<'_>) -> Option<TaskRecord> {
        match r {
            Record::Mmap(m)
                if m.is_mmap2
                    && m.pid != u32::MAX
                    && !m.filename.starts_with(b"//")
                    && !m.filename.starts_with(b"[")
                    && !m.filename.ends_with(b" (deleted)") =>
            {
                Some(TaskRecord::Mmap {
                    pid: m.pid,
                    start: m.start,
                    len: m.len,
                    pgoff: m.pgoff,
                    name: basename(m.filename).to_vec(),
                })
            }
            Record::Comm {
                pid, exec: true, ..
            } => Some(TaskRecord::CommExec { pid: *pid }),
            Record::Fork(t) if t.pid != t.ppid => Some(TaskRecord::Fork {
                pid: t.pid,
                ppid: t.ppid,
                time: t.sample_id.time.unwrap_or(t.time),
            }),
            _ => None,
        }
    }
}

/// [`binary_mappings`] from the file's task records, in file order.
fn mappings_from(file: &PerfFile<'_>, bin: &BinaryDesc<'_>, tasks: &[TaskRecord]) -> Vec<Mapping> {
    struct Raw<'t> {
        pid: u32,
        start: u64,
        len: u64,
        pgoff: u64,
        name: &'t [u8],
    }
    let raw: Vec<Raw<'_>> = tasks
        .iter()
        .filter_map(|t| match t {
            TaskRecord::Mmap {
                pid,
                start,
                len,
                pgoff,
                name,
            } => Some(Raw {
                pid: *pid,
                start: *start,
                len: *len,
                pgoff: *pgoff,
                name,
            }),
            _ => None,
        })
        .collect();
    let names: Vec<&[u8]> = raw.iter().map(|r| r.name).collect();
    let Some(name) = name_to_use(file, bin.build_id, bin.file_name, &names) else {
        return Vec::new();
    };
    let mut by_pid: Vec<Mapping> = Vec::new();
    let mut slot: HashMap<u32, usize> = HashMap::new();
    // perf2bolt keeps the mappings in a multimap keyed by name: same-name entries in file order.
    for m in raw.iter().filter(|r| r.name == name) {
        // The base address from the executable segment whose file offset matches the mapping's
        // page offset (perf2bolt's `getBaseAddressForMapping`). A fixed-address executable mapped
        // at its link address gets base 0 (no translation); perf2bolt keeps its mappings even
        // without such a segment, and so do we (base 0). Unlike perf2bolt, a fixed-address
        // executable found mapped away from its link address is translated rather than ignored
        // (perf2bolt then finds no profile at all).
        let found = bin.segments.iter().find(|s| {
            let a = s.align.max(1);
            s.executable && s.offset / a * a == m.pgoff / a * a
        });
        let base = match found {
            Some(s) => m
                .start
                .wrapping_sub(s.vaddr.wrapping_sub(s.offset).wrapping_add(m.pgoff)),
            None if bin.fixed_address => 0,
            None => continue,
        };
        let i = *slot.entry(m.pid).or_insert_with(|| {
            by_pid.push(Mapping {
                pid: m.pid,
                start: m.start,
                size: m.len,
                base,
                forked: false,
            });
            by_pid.len() - 1
        });
        let e = &mut by_pid[i];
        let size = m.start.wrapping_add(m.len).wrapping_sub(e.base);
        if size > e.size {
            e.size = size;
        }
    }
    if by_pid.is_empty() {
        return by_pid;
    }
    // Task events.
    for t in tasks {
        match *t {
            TaskRecord::CommExec { pid } => {
                if let Some(&i) = slot.get(&pid)
                    && by_pid[i].forked
                {
                    by_pid.swap_remove(i);
                    slot.clear();
                    for (k, m) in by_pid.iter().enumerate() {
                        slot.insert(m.pid, k);
                    }
                }
            }
            TaskRecord::Fork { pid, ppid, time } => {
                // perf2bolt reads the time `perf script` prints (seconds and microseconds): a
                // fork in the first microsecond counts as "before recording" and is skipped
                // (the child then needs its own mappings).
                if time / 1000 != 0
                    && !slot.contains_key(&pid)
                    && let Some(&p) = slot.get(&ppid)
                {
                    let mut child = by_pid[p];
                    child.pid = pid;
                    child.forked = true;
                    slot.insert(pid, by_pid.len());
                    by_pid.push(child);
                }
            }
            TaskRecord::Mmap { .. } => {}
        }
    }
    by_pid.sort_by_key(|m| m.pid);
    by_pid
}

/// Whether any event of `file` records branch stacks (else only basic samples can be read).
pub fn has_branch_stacks(file: &PerfFile<'_>) -> bool {
    file.attrs
        .iter()
        .any(|a| a.sample_type & perfdata::sample_type::BRANCH_STACK != 0)
}

/// Read the samples of the binary from a parsed perf.data file into `sink`, with perf2bolt 22's
/// rules: only processes that mapped the binary (optionally one, [`PerfOptions::pid`]); branch
/// stacks become traces (kernel entries dropped) and basic samples one count at their ip;
/// addresses are translated by [`Mapping::translate`] (the identity inside a fixed-address
/// executable's mapping).
/// Before each run of samples of one event, an [`Event::Name`] with its name (`perf script`'s form,
/// `name:`) is sent.
pub fn read_perf_data<S: Sink>(
    file: &PerfFile<'_>,
    bin: &BinaryDesc<'_>,
    opts: &PerfOptions,
    sink: &mut S,
) -> Result<PerfStats, PerfError> {
    let (reader, mut stats, _) = SampleReader::new(file, bin, opts, 1, &|_| {})?;
    reader.read(file.data_range()?, sink, &mut stats)?;
    Ok(stats)
}

/// [`read_perf_data`] in parallel: the data section is cut at record boundaries into pieces of
/// a few megabytes; runs of consecutive pieces are read into sinks from `init` (a few per
/// thread), merged in file order
/// (so the result equals the sequential read's). `done` is called with each piece's byte range
/// once it has been read (a caller with a memory map releases those pages: a file of gigabytes
/// does not stay resident). Files with compressed records are read in one piece.
pub fn read_perf_data_parallel<S: ParallelSink>(
    file: &PerfFile<'_>,
    bin: &BinaryDesc<'_>,
    opts: &PerfOptions,
    init: impl Fn() -> S + Sync,
    done: &(dyn Fn(std::ops::Range<usize>) + Sync),
) -> Result<(S, PerfStats), PerfError> {
    let whole = file.data_range()?;
    let threads = rayon::current_num_threads().max(1);
    if S::ORDER_FREE
        && !opts.basic
        && opts.max_samples.is_none()
        && let Some(read) = read_streaming(file, bin, opts, threads, &init, done)?
    {
        return Ok(read);
    }
    let parts = whole.len().div_ceil(32 << 20).max(threads * 4);
    let (reader, stats, pieces) = SampleReader::new(file, bin, opts, parts, done)?;
    // A sample limit counts from the start of the file: read it in order, in one piece.
    let pieces = pieces.filter(|_| opts.max_samples.is_none());
    let Some(pieces) = pieces else {
        let mut sink = init();
        let mut stats = stats;
        reader.read(whole.clone(), &mut sink, &mut stats)?;
        done(whole);
        return Ok((sink, stats));
    };
    // Each task reads a run of consecutive pieces into one sink (few sinks to merge: merging
    // costs about as much as a sink's distinct traces), releasing each piece once read.
    let run = pieces.len().div_ceil(threads * 2).max(1);
    let read = |run: &[std::ops::Range<usize>]| -> Result<(S, PerfStats), PerfError> {
        let mut sink = init();
        let mut st = PerfStats::default();
        for range in run {
            reader.read(range.clone(), &mut sink, &mut st)?;
            done(range.clone());
        }
        Ok((sink, st))
    };
    let (sink, counts) = pieces
        .par_chunks(run)
        .map(read)
        .try_reduce_with(|(a, sa), (b, sb)| Ok((a.merge(b), sa.plus(&sb))))
        .unwrap_or_else(|| Ok((init(), PerfStats::default())))?;
    Ok((sink, stats.plus(&counts)))
}

impl PerfStats {
    /// The counts of two pieces of one file together (the per-file facts from `self`).
    fn plus(&self, o: &PerfStats) -> PerfStats {
        PerfStats {
            total_samples: self.total_samples + o.total_samples,
            samples: self.samples + o.samples,
            entries: self.entries + o.entries,
            samples_without_branch_stack: self.samples_without_branch_stack
                + o.samples_without_branch_stack,
            build_id_matched: self.build_id_matched,
            pids: self.pids,
            missing_mispred_bit: self.missing_mispred_bit || o.missing_mispred_bit,
        }
    }
}

/// Byte ranges of a perf.data's data section, at record boundaries.
type Pieces = Vec<std::ops::Range<usize>>;

/// What reading the samples of a perf.data needs, prepared once per file: the binary's
/// mappings per process and the event names.
struct SampleReader<'f, 'data> {
    file: &'f PerfFile<'data>,
    opts: &'f PerfOptions,
    maps: Vec<Mapping>,
    names: Vec<Vec<u8>>,
}

impl<'f, 'data> SampleReader<'f, 'data> {
    /// Check the build-id, find the binary's mappings (per `--pid`), and the per-file
    /// statistics; with them, the file cut into about `parts` pieces ([`PerfFile::split`],
    /// `None` for a file that must be read in one piece). One pass over the record headers
    /// (`done` gets each piece after it), or two for a compressed file.
    fn new(
        file: &'f PerfFile<'data>,
        bin: &BinaryDesc<'_>,
        opts: &'f PerfOptions,
        parts: usize,
        done: &dyn Fn(std::ops::Range<usize>),
    ) -> Result<(Self, PerfStats, Option<Pieces>), PerfError> {
        let mut stats = PerfStats {
            build_id_matched: check_build_id(file, bin, opts)?,
            ..PerfStats::default()
        };
        let (tasks, pieces) = task_records(file, parts, done)?;
        let maps = checked_mappings(file, bin, opts, &tasks)?;
        stats.pids = maps.len();
        let names = event_names(file);
        Ok((
            SampleReader {
                file,
                opts,
                maps,
                names,
            },
            stats,
            pieces,
        ))
    }

    /// The events of the samples in `range` (record boundaries) into `sink`, counted in `stats`.
    fn read<S: Sink>(
        &self,
        range: std::ops::Range<usize>,
        sink: &mut S,
        stats: &mut PerfStats,
    ) -> Result<(), PerfError> {
        read_samples(
            self.file,
            range,
            &self.maps,
            &self.names,
            self.opts,
            sink,
            stats,
            &mut Vec::new(),
        )
    }
}

/// Whether the file's build-id list names the binary; an error when it names others only
/// (unless told to ignore build-ids).
fn check_build_id(
    file: &PerfFile<'_>,
    bin: &BinaryDesc<'_>,
    opts: &PerfOptions,
) -> Result<bool, PerfError> {
    let Some(id) = bin.build_id else {
        return Ok(false);
    };
    let matched = file
        .build_ids
        .iter()
        .any(|e| e.build_id.starts_with(id) || id.starts_with(&e.build_id));
    if !matched && !file.build_ids.is_empty() && !opts.ignore_build_id {
        return Err(PerfError::BuildIdMismatch);
    }
    Ok(matched)
}

/// The binary's mappings from the task records, kept to `--pid`; an error when none is left.
fn checked_mappings(
    file: &PerfFile<'_>,
    bin: &BinaryDesc<'_>,
    opts: &PerfOptions,
    tasks: &[TaskRecord],
) -> Result<Vec<Mapping>, PerfError> {
    let mut maps = mappings_from(file, bin, tasks);
    if maps.is_empty() {
        return Err(PerfError::NotMapped {
            name: String::from_utf8_lossy(basename(bin.file_name)).into_owned(),
        });
    }
    if let Some(p) = opts.pid {
        maps.retain(|m| m.pid == p);
        if maps.is_empty() {
            return Err(PerfError::PidNotFound { pid: p });
        }
    }
    Ok(maps)
}

/// The event names as `perf script` prints them (`name:`), by attribute.
fn event_names(file: &PerfFile<'_>) -> Vec<Vec<u8>> {
    (0..file.attrs.len())
        .map(|i| format!("{}:", file.event_name(i)).into_bytes())
        .collect()
}

/// The events of the samples in `range` (record boundaries) into `sink`, counted in `stats`,
/// translated by `maps`; `pids` gets each process id whose samples were looked up.
#[allow(clippy::too_many_arguments)]
fn read_samples<S: Sink>(
    file: &PerfFile<'_>,
    range: std::ops::Range<usize>,
    maps: &[Mapping],
    names: &[Vec<u8>],
    opts: &PerfOptions,
    sink: &mut S,
    stats: &mut PerfStats,
    pids: &mut Vec<u32>,
) -> Result<(), PerfError> {
    let mut last_attr = usize::MAX;
    let mut last_pid = None;
    let limit = opts.max_samples.filter(|_| !opts.basic);
    file.for_each_record_in(range, None, |r| {
        let Record::Sample(s) = r else {
            return true;
        };
        if limit.is_some_and(|m| stats.total_samples >= m) {
            return false;
        }
        if s.pid != last_pid {
            last_pid = s.pid;
            if let Some(p) = s.pid
                && !pids.contains(&p)
            {
                pids.push(p);
            }
        }
        read_sample(s, maps, names, opts, &mut last_attr, sink, stats);
        true
    })?;
    Ok(())
}

/// A piece of the data section for a reader thread of [`read_streaming`], with the binary's
/// mappings as the records before its end give them.
type StreamPiece = (std::ops::Range<usize>, std::sync::Arc<Vec<Mapping>>);

/// What a reader thread of [`read_streaming`] read: its sink, counts, and per piece the
/// mappings used and the processes looked up in them.
type StreamRead<S> = (S, PerfStats, Vec<(std::sync::Arc<Vec<Mapping>>, Vec<u32>)>);

/// [`read_perf_data_parallel`] for sinks whose merge order does not matter, in one pass: this
/// thread cuts the data section into pieces (reading record headers and the task records),
/// while `threads` reader threads already read the pieces it has cut, each translated with
/// the mappings of the task records seen so far. The file is then read once rather than
/// twice, and the cutting overlaps the reading. A bounded queue keeps the cutter a few pieces
/// ahead, so at most a few pieces of the file are resident (each is released once read).
///
/// The mappings of the whole file decide (perf2bolt reads all task records first): when the
/// final mapping of a process whose samples a piece held differs from the one that piece
/// used (a mapping recorded after samples it applies to), `None` is returned and the caller
/// reads the file the two-pass way; also `None` for a file with compressed records.
fn read_streaming<S: ParallelSink>(
    file: &PerfFile<'_>,
    bin: &BinaryDesc<'_>,
    opts: &PerfOptions,
    threads: usize,
    init: &(impl Fn() -> S + Sync),
    done: &(dyn Fn(std::ops::Range<usize>) + Sync),
) -> Result<Option<(S, PerfStats)>, PerfError> {
    use std::cell::RefCell;
    use std::sync::{Arc, Mutex, mpsc};
    let build_id_matched = check_build_id(file, bin, opts)?;
    let whole = file.data_range()?;
    let parts = whole.len().div_ceil(8 << 20).max(threads * 4);
    let names = event_names(file);
    let (tx, rx) = mpsc::sync_channel::<StreamPiece>(threads);
    let rx = Mutex::new(rx);
    let next = || match rx.lock() {
        Ok(r) => r.recv().ok(),
        Err(poisoned) => poisoned.into_inner().recv().ok(),
    };
    let reader = || -> Result<StreamRead<S>, PerfError> {
        let mut sink = init();
        let mut stats = PerfStats::default();
        let mut used = Vec::new();
        let mut failed = None;
        while let Some((range, maps)) = next() {
            // After an error, keep taking pieces so that the cutter never waits on a full queue.
            if failed.is_none() {
                let mut pids = Vec::new();
                let r = read_samples(
                    file,
                    range.clone(),
                    &maps,
                    &names,
                    opts,
                    &mut sink,
                    &mut stats,
                    &mut pids,
                );
                match r {
                    Ok(()) => used.push((maps, pids)),
                    Err(e) => failed = Some(e),
                }
            }
            done(range);
        }
        match failed {
            Some(e) => Err(e),
            None => Ok((sink, stats, used)),
        }
    };
    let tasks = RefCell::new(Vec::new());
    let (split, reads) = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads).map(|_| scope.spawn(reader)).collect();
        let current: RefCell<(usize, Arc<Vec<Mapping>>)> = RefCell::new((0, Arc::default()));
        let cut = |range: std::ops::Range<usize>| {
            let tasks = tasks.borrow();
            let mut current = current.borrow_mut();
            if current.0 != tasks.len() {
                let mut maps = mappings_from(file, bin, &tasks);
                if let Some(p) = opts.pid {
                    maps.retain(|m| m.pid == p);
                }
                *current = (tasks.len(), Arc::new(maps));
            }
            // The readers outlive the queue's sender: a send cannot fail.
            let _ = tx.send((range, current.1.clone()));
        };
        let split = file.split(
            parts,
            &TASK_RECORD_TYPES,
            |r| tasks.borrow_mut().extend(TaskRecord::of(r)),
            &cut,
        );
        drop(tx);
        let reads: Vec<_> = handles.into_iter().map(|h| h.join()).collect();
        (split, reads)
    });
    let Some(_) = split? else {
        return Ok(None);
    };
    let maps = checked_mappings(file, bin, opts, &tasks.into_inner())?;
    let mut out: Option<(S, PerfStats)> = None;
    for read in reads {
        // A reader thread panicked: read the file the other way (which reports the problem).
        let Ok(read) = read else {
            return Ok(None);
        };
        let (sink, stats, used) = read?;
        let find = |maps: &[Mapping], p: u32| {
            maps.binary_search_by_key(&p, |m| m.pid)
                .ok()
                .map(|i| (maps[i].start, maps[i].size, maps[i].base))
        };
        let same = used
            .iter()
            .all(|(seen, pids)| pids.iter().all(|&p| find(seen, p) == find(&maps, p)));
        if !same {
            return Ok(None);
        }
        out = Some(match out {
            None => (sink, stats),
            Some((a, sa)) => (a.merge(sink), sa.plus(&stats)),
        });
    }
    let (sink, counts) = out.unwrap_or_else(|| (init(), PerfStats::default()));
    let stats = PerfStats {
        build_id_matched,
        pids: maps.len(),
        ..PerfStats::default()
    };
    Ok(Some((sink, stats.plus(&counts))))
}

/// One sample's events.
fn read_sample<S: Sink>(
    s: &perfdata::Sample<'_>,
    maps: &[Mapping],
    names: &[Vec<u8>],
    opts: &PerfOptions,
    last_attr: &mut usize,
    sink: &mut S,
    stats: &mut PerfStats,
) {
    let map = s
        .pid
        .and_then(|p| maps.binary_search_by_key(&p, |m| m.pid).ok())
        .map(|i| maps[i]);
    let tr = |a: u64| match &map {
        Some(m) => m.translate(a),
        None => Loc::inside(a),
    };
    if opts.basic {
        let Some(ip) = s.ip.filter(|&ip| ip != 0) else {
            return;
        };
        if map.is_none() {
            return;
        }
        stats.total_samples += 1;
        if s.attr_index != *last_attr {
            *last_attr = s.attr_index;
            if let Some(n) = names.get(s.attr_index) {
                sink.event(&Event::Name(n));
            }
        }
        sink.event(&Event::Sample(Sample {
            pid: s.pid,
            at: tr(ip),
            count: 1,
        }));
        return;
    }
    stats.total_samples += 1;
    if map.is_none() {
        return;
    }
    stats.samples += 1;
    if opts.sample_ips
        && let Some(ip) = s.ip
    {
        sink.event(&Event::Sample(Sample {
            pid: s.pid,
            at: tr(ip),
            count: 1,
        }));
    }
    let Some(stack) = s.branch_stack.filter(|b| !b.is_empty()) else {
        stats.samples_without_branch_stack += 1;
        return;
    };
    let mut next_from: Option<Loc> = None;
    for e in stack.iter() {
        stats.missing_mispred_bit |= !e.mispredicted() && !e.predicted();
        if e.from >= KERNEL_BASE || e.to >= KERNEL_BASE {
            continue;
        }
        stats.entries += 1;
        let branch = tr(e.from);
        let (kind, to) = match next_from {
            Some(t) => (TraceKind::Taken, t),
            None => (TraceKind::BranchOnly, Loc::default()),
        };
        next_from = Some(branch);
        sink.event(&Event::Trace(Trace {
            pid: s.pid,
            kind,
            branch,
            from: tr(e.to),
            to,
            count: 1,
            mispreds: u64::from(e.mispredicted()),
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Collect(Vec<String>);
    impl Sink for Collect {
        fn event(&mut self, e: &Event<'_>) {
            self.0.push(format!("{e:?}"));
        }
    }
    impl ParallelSink for Collect {
        fn merge(mut self, later: Self) -> Self {
            self.0.extend(later.0);
            self
        }
    }

    #[test]
    fn preaggregated_records_become_events() {
        let text = b"E cycles\nT 1 2 3 4\nR 0 2 3 1\nB X:5 6 7 8\nf 1 2 3\n";
        let mut c = Collect::default();
        read_preaggregated(text, &mut c).unwrap();
        assert_eq!(c.0.len(), 5);
        let par = read_preaggregated_parallel(text, Collect::default, &|_| {}).unwrap();
        assert_eq!(par.0, c.0);
        assert!(c.0[3].contains("BranchOnly") && c.0[3].contains("outside: true"));
    }

    #[test]
    fn pie_mapping_translates_by_segment() {
        let seg = Segment {
            vaddr: 0x1000,
            offset: 0x1000,
            file_size: 0x500,
            mem_size: 0x500,
            align: 0x1000,
            executable: true,
        };
        let m = Mapping {
            pid: 1,
            start: 0x5555_5555_5000,
            size: 0x1000,
            base: 0x5555_5555_5000 - (seg.vaddr - seg.offset + 0x1000),
            forked: false,
        };
        assert_eq!(m.translate(0x5555_5555_5123), Loc::inside(0x1123));
        assert!(m.translate(0x10).outside);
        assert_eq!(m.translate(0x10).addr, u64::MAX);
        assert!(m.translate(0x7fff_0000_0000).outside);
    }

    fn desc(fixed: bool) -> BinaryDesc<'static> {
        BinaryDesc {
            build_id: None,
            file_name: b"/opt/prog",
            segments: vec![Segment {
                vaddr: 0x1000,
                offset: 0x1000,
                file_size: 0x2000,
                mem_size: 0x2000,
                align: 0x1000,
                executable: true,
            }],
            fixed_address: fixed,
        }
    }

    #[test]
    fn perf_data_processes_forks_execs_and_kernel_entries() {
        use crate::perfdata::writer::{Options, SampleSpec, Writer};
        use crate::perfdata::{BranchEntry, PerfFile};
        let base = 0x5555_0000_0000u64;
        let mut w = Writer::new(Options::default());
        w.comm(1, 1, b"prog", 1);
        w.mmap2(1, 1, base + 0x1000, 0x2000, 0x1000, b"/opt/prog", 2);
        w.mmap2(1, 1, 0x7f00_0000_0000, 0x1000, 0, b"[vdso]", 2);
        // 2 inherits the mapping; 3 inherits it and then runs another program.
        w.task(false, 2, 1, 2, 1, 5_000_000);
        w.task(false, 3, 1, 3, 1, 5_000_000);
        w.comm(3, 3, b"other", 6_000_000);
        let stack = |a: u64, b: u64| {
            vec![
                BranchEntry {
                    from: base + a,
                    to: base + b,
                    flags: 1,
                },
                BranchEntry {
                    from: 0xffff_ffff_8100_0000,
                    to: base + a - 4,
                    flags: 0,
                },
                BranchEntry {
                    from: base + 0x1800,
                    to: base + 0x1700,
                    flags: 0,
                },
            ]
        };
        for pid in [1, 2, 3, 4] {
            w.sample(&SampleSpec {
                ip: base + 0x1100,
                pid,
                tid: pid,
                time: 10_000_000,
                period: 1,
                branches: stack(0x1200, 0x1300),
                hw_idx: 0,
            });
        }
        let data = w.finish();
        let file = PerfFile::parse(&data).unwrap();
        let maps = binary_mappings(&file, &desc(false)).unwrap();
        assert_eq!(maps.iter().map(|m| m.pid).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(maps[0].base, base);
        let mut c = Collect::default();
        let stats = read_perf_data(&file, &desc(false), &PerfOptions::default(), &mut c).unwrap();
        assert_eq!((stats.total_samples, stats.samples, stats.pids), (4, 2, 2));
        // Two entries per sample (the kernel one is dropped): a branch-only trace (the newest),
        // then a trace whose fall-through ends at the newest entry's source.
        assert_eq!(stats.entries, 4);
        assert_eq!(c.0.len(), 4);
        assert!(c.0[0].contains("BranchOnly") && c.0[0].contains("addr: 4608"));
        assert!(c.0[1].contains("Taken") && c.0[1].contains("addr: 6144"));
        // Several inputs feed one sink; --pid keeps one process.
        let opts = PerfOptions {
            pid: Some(2),
            ..Default::default()
        };
        let stats = read_perf_data(&file, &desc(false), &opts, &mut c).unwrap();
        assert_eq!((stats.samples, stats.pids, c.0.len()), (1, 1, 6));
        let opts = PerfOptions {
            pid: Some(3),
            ..Default::default()
        };
        assert!(matches!(
            read_perf_data(&file, &desc(false), &opts, &mut c),
            Err(PerfError::PidNotFound { pid: 3 })
        ));
        let other = BinaryDesc {
            file_name: b"/opt/else",
            ..desc(false)
        };
        assert!(matches!(
            read_perf_data(&file, &other, &PerfOptions::default(), &mut c),
            Err(PerfError::NotMapped { .. })
        ));
        // Basic samples: one per sample of the binary's processes, after the event's name.
        let opts = PerfOptions {
            basic: true,
            ..Default::default()
        };
        let mut c = Collect::default();
        let stats = read_perf_data(&file, &desc(false), &opts, &mut c).unwrap();
        assert_eq!(stats.total_samples, 2);
        assert_eq!(c.0.len(), 3);
        assert!(c.0[0].starts_with("Name") && c.0[1].contains("addr: 4352"));
    }

    /// A sink whose merge order does not matter: event counts.
    #[derive(Default, Debug, PartialEq)]
    struct Counted(std::collections::BTreeMap<String, u64>);
    impl Sink for Counted {
        fn event(&mut self, e: &Event<'_>) {
            *self.0.entry(format!("{e:?}")).or_default() += 1;
        }
    }
    impl ParallelSink for Counted {
        const ORDER_FREE: bool = true;
        fn merge(mut self, later: Self) -> Self {
            for (k, v) in later.0 {
                *self.0.entry(k).or_default() += v;
            }
            self
        }
    }

    /// The one-pass read for order-free sinks counts what the sequential read sends, also when
    /// a process's mapping is recorded only after some of its samples (then the file is read
    /// again with the mappings of the whole file).
    /// The branch stack of sample `k` of the parallel-read tests: addresses vary with `k`, so
    /// that a change of order or a lost sample shows in the counts.
    fn two_branches(base: u64, k: u64) -> Vec<crate::perfdata::BranchEntry> {
        use crate::perfdata::BranchEntry;
        vec![
            BranchEntry {
                from: base + 0x1200 + k % 97,
                to: base + 0x1300,
                flags: k & 1,
            },
            BranchEntry {
                from: base + 0x1180,
                to: base + 0x1100 + k % 13,
                flags: 0,
            },
        ]
    }

    #[test]
    fn streamed_perf_data_read_counts_like_the_sequential_one() {
        use crate::perfdata::PerfFile;
        use crate::perfdata::writer::{Options, SampleSpec, Writer};
        use std::sync::Mutex;
        let base = 0x5555_0000_0000u64;
        for late in [false, true] {
            let mut w = Writer::new(Options::default());
            w.comm(1, 1, b"prog", 1);
            w.mmap2(1, 1, base + 0x1000, 0x2000, 0x1000, b"/opt/prog", 2);
            w.task(false, 2, 1, 2, 1, 5_000_000);
            for k in 0..3000u64 {
                // Process 4 maps the binary only after half its samples when `late`.
                if k == 1500 {
                    w.mmap2(4, 4, base + 0x1000, 0x2000, 0x1000, b"/opt/prog", 2);
                }
                let pid = if late {
                    1 + (k % 4) as u32
                } else {
                    1 + (k % 2) as u32
                };
                w.sample(&SampleSpec {
                    ip: base + 0x1100,
                    pid,
                    tid: pid,
                    time: 10_000_000 + k,
                    period: 1,
                    branches: two_branches(base, k),
                    hw_idx: 0,
                });
            }
            let data = w.finish();
            let file = PerfFile::parse(&data).unwrap();
            let mut seq = Counted::default();
            let seq_stats =
                read_perf_data(&file, &desc(false), &PerfOptions::default(), &mut seq).unwrap();
            let released = Mutex::new(Vec::new());
            let (par, par_stats) = read_perf_data_parallel(
                &file,
                &desc(false),
                &PerfOptions::default(),
                Counted::default,
                &|r| released.lock().unwrap().push(r),
            )
            .unwrap();
            assert_eq!(par, seq, "late mapping: {late}");
            assert_eq!(par_stats, seq_stats);
            assert_eq!(seq_stats.pids, 3);
            // Every byte of the data section was released.
            let mut r = released.into_inner().unwrap();
            r.sort_by_key(|r| r.start);
            r.dedup();
            assert_eq!(r.first().unwrap().start, file.data_range().unwrap().start);
            assert_eq!(r.last().unwrap().end, file.data_range().unwrap().end);
            assert!(r.windows(2).all(|w| w[0].end <= w[1].start));
        }
    }

    #[test]
    fn parallel_perf_data_read_equals_the_sequential_one() {
        use crate::perfdata::PerfFile;
        use crate::perfdata::writer::{Options, SampleSpec, Writer};
        use std::sync::Mutex;
        let base = 0x5555_0000_0000u64;
        let mut w = Writer::new(Options::default());
        w.comm(1, 1, b"prog", 1);
        w.mmap2(1, 1, base + 0x1000, 0x2000, 0x1000, b"/opt/prog", 2);
        w.task(false, 2, 1, 2, 1, 5_000_000);
        // Enough samples for many pieces; addresses vary so that order would show.
        for k in 0..3000u64 {
            w.sample(&SampleSpec {
                ip: base + 0x1100,
                pid: 1 + (k % 3) as u32,
                tid: 1,
                time: 10_000_000 + k,
                period: 1,
                branches: two_branches(base, k),
                hw_idx: 0,
            });
        }
        let data = w.finish();
        let file = PerfFile::parse(&data).unwrap();
        let mut seq = Collect::default();
        let seq_stats =
            read_perf_data(&file, &desc(false), &PerfOptions::default(), &mut seq).unwrap();
        let released = Mutex::new(Vec::new());
        let (par, par_stats) = read_perf_data_parallel(
            &file,
            &desc(false),
            &PerfOptions::default(),
            Collect::default,
            &|r| released.lock().unwrap().push(r),
        )
        .unwrap();
        assert_eq!(par.0, seq.0);
        assert_eq!(par_stats, seq_stats);
        assert_eq!(seq_stats.samples, 2000);
        // Every byte of the data section was handed back, in more than one piece.
        let mut r = released.into_inner().unwrap();
        r.sort_by_key(|r| r.start);
        r.dedup();
        assert!(r.len() > 1);
        assert_eq!(r.first().unwrap().start, file.data_range().unwrap().start);
        assert_eq!(r.last().unwrap().end, file.data_range().unwrap().end);
        assert!(r.windows(2).all(|w| w[0].end == w[1].start));
    }
}
