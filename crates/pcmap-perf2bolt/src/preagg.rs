//! The aggregator's input: perf2bolt's merged trace records, built by a
//! [`pcmap_profile::events::Sink`] of `pcmap-profile`'s branch-event pipeline from either
//! input (pre-aggregated text read in parallel chunks, or perf.data).
//!
//! Each chunk's sink collects its records, merging duplicates as its list grows (or in a hash
//! table, for repetitive input); the chunks' sinks are merged in input order and sorted by
//! address once, so what is kept is proportional to distinct records. Location prefixes
//! (`<id>:`) are ignored, as perf2bolt ignores them.

use pcmap_profile::events::{self, Event, ParallelSink, Sink, TraceKind};
use pcmap_profile::perfdata::PerfFile;
use rayon::prelude::*;
use rustc_hash::{FxHashMap, FxHashSet};

use crate::Error;
use crate::trace_table::TraceTable;

/// `Trace::BR_ONLY`: the trace has no fall-through part (`B` records).
pub const BR_ONLY: u64 = u64::MAX;
/// `Trace::FT_ONLY`: fall-through without a branch (`F` records).
pub const FT_ONLY: u64 = u64::MAX;
/// `Trace::FT_EXTERNAL_ORIGIN`: fall-through whose origin is external (`f` records).
pub const FT_EXTERNAL_ORIGIN: u64 = u64::MAX - 1;
/// `Trace::FT_EXTERNAL_RETURN`: fall-through starting at an external return (`r`, `R 0 ...`).
pub const FT_EXTERNAL_RETURN: u64 = u64::MAX - 2;

/// A trace as perf2bolt keys it: a taken branch `branch -> from`, then a fall-through
/// `from -> to`, with the magic values above for missing parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Trace {
    /// Branch source (or a magic value).
    pub branch: u64,
    /// Branch target = fall-through start.
    pub from: u64,
    /// Fall-through end (or [`BR_ONLY`]).
    pub to: u64,
}

/// Taken count and mispredictions of a trace.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TraceCounts {
    /// Times taken.
    pub count: u64,
    /// Mispredictions.
    pub mispreds: u64,
}

impl TraceCounts {
    /// Add `count` and `mispreds` to these counts (wrapping, as perf2bolt's do).
    #[inline]
    pub(crate) fn add(&mut self, count: u64, mispreds: u64) {
        self.count = self.count.wrapping_add(count);
        self.mispreds = self.mispreds.wrapping_add(mispreds);
    }
}

/// Everything read from a pre-aggregated file, duplicates merged.
#[derive(Debug, Default)]
pub struct PreAggregated {
    /// Distinct traces with summed counts, sorted by (from, branch, to).
    pub traces: Vec<(Trace, TraceCounts)>,
    /// Basic samples (`S`): address -> count.
    pub samples: FxHashMap<u64, u64>,
    /// Branch addresses of `R` records (treated as returns wherever they appear).
    pub returns: FxHashSet<u64>,
    /// Event names (`E`), first occurrence order.
    pub events: Vec<String>,
    /// Number of lines (perf2bolt's "aggregated brstack entries").
    pub entries: u64,
    /// Sum of the counts of all non-`E` records.
    pub total_samples: u64,
}

/// A [`Sink`] that collects events into [`PreAggregated`] (one per chunk when reading in
/// parallel); [`TraceSink::finish`] merges duplicates.
///
/// Traces are appended as they come, and duplicates are merged whenever the list has doubled
/// since the last merge (at least [`COMPACT_AT`] traces): memory follows the distinct traces,
/// not the input (a perf.data of gigabytes repeats the same branches millions of times). When a
/// merge finds at least half of the list duplicated, the sink switches to a hash table (cheaper
/// than sorting again and again for such input); a pre-aggregated file, mostly distinct
/// records, stays a list, sorted once when the chunks' lists have been concatenated.
#[derive(Debug, Default)]
pub struct TraceSink {
    out: PreAggregated,
    /// Distinct traces in the list at its last merge of duplicates (counted without merging
    /// them, at the first look).
    compacted: usize,
    /// The traces, once the input proved repetitive (then `out.traces` is empty until
    /// [`TraceSink::finish`]).
    table: Option<TraceTable>,
    /// The first [`PROBE_AT`] traces were checked for duplicates.
    probed: bool,
    /// `out.traces` is sorted by (from, branch, to) with duplicates merged.
    sorted: bool,
    /// The last merge of duplicates shrank the list by at least an eighth.
    repetitive: bool,
    /// Lists of mostly distinct traces from merged sinks, concatenated once by
    /// [`TraceSink::finish`] (merging them one into another would copy them again and again).
    pieces: Vec<Vec<(Trace, TraceCounts)>>,
}

/// The first allocation of a trace list: a chunk's traces or more (a chunk of a pre-aggregated
/// file is a sixteenth of it, at most 16 MB: 75,000 traces of the benchmark's 27.7 MB), so that
/// a list grows rarely. At 5 MB it is also large enough for the allocator's huge-page advice: its
/// pages fault in 2 MB at a time (with 65,536, every list outgrew its first block, and 7,700 of
/// the run's 49,000 page faults were the lists'). Pages never written cost nothing.
const FIRST_CAPACITY: usize = 1 << 17;

/// After this many traces a [`TraceSink`] checks once how repetitive its input is.
const PROBE_AT: usize = 1 << 14;

/// The fewest traces a [`TraceSink`] merges duplicates of before [`TraceSink::finish`].
pub const COMPACT_AT: usize = 1 << 20;

impl Sink for TraceSink {
    #[inline]
    fn event(&mut self, e: &Event<'_>) {
        let out = &mut self.out;
        out.entries += 1;
        let t = match *e {
            Event::Name(name) => {
                if !out.events.iter().any(|n| n.as_bytes() == name) {
                    out.events.push(String::from_utf8_lossy(name).into_owned());
                }
                return;
            }
            Event::Sample(s) => {
                out.total_samples = out.total_samples.wrapping_add(s.count);
                let e = out.samples.entry(s.at.addr).or_default();
                *e = e.wrapping_add(s.count);
                return;
            }
            Event::Trace(t) => t,
        };
        out.total_samples = out.total_samples.wrapping_add(t.count);
        let (branch, from, to) = (t.branch.addr, t.from.addr, t.to.addr);
        let trace = match t.kind {
            TraceKind::Taken => Trace { branch, from, to },
            TraceKind::Return => {
                let branch = if branch == 0 {
                    FT_EXTERNAL_RETURN
                } else {
                    out.returns.insert(branch);
                    branch
                };
                Trace { branch, from, to }
            }
            TraceKind::BranchOnly => Trace {
                branch,
                from,
                to: BR_ONLY,
            },
            TraceKind::FallThrough => Trace {
                branch: FT_ONLY,
                from,
                to,
            },
            TraceKind::ExternalOrigin => Trace {
                branch: FT_EXTERNAL_ORIGIN,
                from,
                to,
            },
            TraceKind::ExternalReturn => Trace {
                branch: FT_EXTERNAL_RETURN,
                from,
                to,
            },
        };
        if let Some(table) = &mut self.table {
            table.add(trace, t.count, t.mispreds);
            return;
        }
        if out.traces.capacity() == 0 {
            out.traces.reserve(FIRST_CAPACITY);
        }
        out.traces.push((
            trace,
            TraceCounts {
                count: t.count,
                mispreds: t.mispreds,
            },
        ));
        self.sorted = false;
        self.compact_if_grown();
    }
}

impl ParallelSink for TraceSink {
    /// Traces and samples are counted (event names keep their first-seen order, and come
    /// in input order).
    const ORDER_FREE: bool = true;

    fn merge(mut self, mut later: Self) -> Self {
        // Traces: into the larger hash table when either side has one, else one list.
        match (self.table.take(), later.table.take()) {
            (None, None) => {
                self.sorted = false;
                self.repetitive |= later.repetitive;
                self.pieces.append(&mut later.pieces);
                let b = std::mem::take(&mut later.out.traces);
                if self.repetitive {
                    // Concatenated, and duplicates merged when the list has grown.
                    self.out.traces.extend(b);
                    self.compact_if_grown();
                } else {
                    // Lists of mostly distinct traces (a pre-aggregated file's) are kept apart
                    // and sorted once, by `finish`: merging their duplicates now would not
                    // shrink them.
                    let a = std::mem::take(&mut self.out.traces);
                    self.pieces
                        .extend([a, b].into_iter().filter(|l| !l.is_empty()));
                }
            }
            (x, y) => {
                let (mut table, other) = match (x, y) {
                    (Some(x), Some(y)) if y.len() > x.len() => (y, Some(x)),
                    (Some(x), y) => (x, y),
                    (None, Some(y)) => (y, None),
                    (None, None) => unreachable!("handled above"),
                };
                let lists = [
                    std::mem::take(&mut self.out.traces),
                    std::mem::take(&mut later.out.traces),
                ];
                let pieces = std::mem::take(&mut self.pieces)
                    .into_iter()
                    .chain(std::mem::take(&mut later.pieces));
                for (t, c) in lists
                    .into_iter()
                    .chain(pieces)
                    .flatten()
                    .chain(other.into_iter().flat_map(TraceTable::into_entries))
                {
                    table.add(t, c.count, c.mispreds);
                }
                self.table = Some(table);
            }
        }
        let (a, b) = (&mut self.out, later.out);
        for (k, v) in b.samples {
            let e = a.samples.entry(k).or_default();
            *e = e.wrapping_add(v);
        }
        a.returns.extend(b.returns);
        for e in b.events {
            if !a.events.contains(&e) {
                a.events.push(e);
            }
        }
        a.entries += b.entries;
        a.total_samples = a.total_samples.wrapping_add(b.total_samples);
        self.compacted = self.compacted.max(later.compacted);
        self
    }
}

impl TraceSink {
    /// A sink for input known to repeat its traces many times (perf.data branch stacks): it
    /// counts them in its table from the first one, without first collecting and sorting a list.
    pub fn repetitive() -> Self {
        TraceSink {
            table: Some(TraceTable::default()),
            probed: true,
            repetitive: true,
            ..TraceSink::default()
        }
    }

    /// Sort the traces by (from, branch, to) and merge duplicates.
    pub fn finish(mut self) -> PreAggregated {
        if !self.pieces.is_empty() {
            let mut pieces = std::mem::take(&mut self.pieces);
            pieces.push(std::mem::take(&mut self.out.traces));
            self.out.traces = crate::concat(&pieces);
            self.sorted = false;
        }
        if let Some(table) = self.table.take() {
            self.out.traces.extend(table.into_entries());
            self.sorted = false;
        }
        self.sort();
        self.out.traces.shrink_to_fit();
        self.out
    }

    /// Sort the list and merge its duplicates, unless it is already.
    fn sort(&mut self) {
        if !self.sorted {
            sort_and_merge(&mut self.out.traces);
            self.sorted = true;
        }
    }

    fn compact_if_grown(&mut self) {
        let len = self.out.traces.len();
        let probe = !self.probed && len >= PROBE_AT;
        if probe || (len >= COMPACT_AT && len >= 2 * self.compacted) {
            if probe {
                // The first traces are only counted, not sorted: a pre-aggregated file's, mostly
                // distinct, are sorted once with the others by `finish` (sorting them here too
                // cost every chunk of the file a sort of its first 16,384 traces).
                self.probed = true;
                let mut distinct =
                    FxHashSet::with_capacity_and_hasher(len, rustc_hash::FxBuildHasher);
                distinct.extend(self.out.traces.iter().map(|(t, _)| *t));
                self.compacted = distinct.len();
            } else {
                self.sort();
                self.compacted = self.out.traces.len();
            }
            self.repetitive = self.compacted <= len - len / 8;
            if self.compacted * 2 <= len {
                let mut table = TraceTable::default();
                for (t, c) in std::mem::take(&mut self.out.traces) {
                    table.add(t, c.count, c.mispreds);
                }
                self.table = Some(table);
            }
        }
    }
}

/// The order of [`PreAggregated::traces`].
fn trace_key(t: &Trace) -> (u64, u64, u64) {
    (t.from, t.branch, t.to)
}

/// A run of traces with one start longer than this is sorted on every thread.
const LONG_RUN: usize = 1 << 16;

/// Sort traces by (from, branch, to), the order of [`PreAggregated::traces`], and merge
/// duplicates in place (counts summed).
pub(crate) fn sort_and_merge(traces: &mut Vec<(Trace, TraceCounts)>) {
    // By start address first, then each run of one start by the rest: comparing one word
    // sorted a pre-aggregated file's 1.2 million traces in 23-27 ms instead of 28-38 ms (most
    // runs are of one or two traces). A long run is sorted on every thread.
    traces.par_sort_unstable_by_key(|(t, _)| t.from);
    traces
        .par_chunk_by_mut(|a, b| a.0.from == b.0.from)
        .for_each(|run| match run.len() {
            0 | 1 => {}
            n if n > LONG_RUN => run.par_sort_unstable_by_key(|(t, _)| trace_key(t)),
            _ => run.sort_unstable_by_key(|(t, _)| trace_key(t)),
        });
    // Mostly distinct input (a pre-aggregated file's) has no equal neighbours: checked on
    // every thread, which spares the serial pass below.
    if !traces.par_windows(2).any(|w| w[0].0 == w[1].0) {
        return;
    }
    let kept = crate::merge_equal_neighbours(traces);
    traces.truncate(kept);
}

impl PreAggregated {
    /// perf2bolt's `--impute-trace-fall-through`: each trace without a fall-through part (a `B`
    /// record, the newest branch-stack entry) gets the count-weighted average fall-through length
    /// of the traces with the same branch and target (ignoring unknown ends), or, without such
    /// traces, 0 bytes after an unconditional control transfer (`unconditional(address)` of the
    /// branch target) and 1 byte otherwise. Traces starting outside the binary are left alone.
    /// Returns how many traces were imputed.
    pub fn impute_fall_throughs(&mut self, unconditional: impl Fn(u64) -> bool) -> u64 {
        let mut order: Vec<usize> = (0..self.traces.len()).collect();
        order.sort_unstable_by_key(|&i| {
            let t = self.traces[i].0;
            (t.branch, t.from, t.to)
        });
        let mut group = None;
        let (mut count, mut bytes) = (0u64, 0u64);
        let mut imputed = 0;
        for i in order {
            let (t, c) = self.traces[i];
            if t.from == 0 {
                continue;
            }
            if group != Some((t.branch, t.from)) {
                group = Some((t.branch, t.from));
                (count, bytes) = (0, 0);
            }
            if t.to == BR_ONLY {
                let length = match bytes.checked_div(count) {
                    Some(avg) if bytes != 0 => avg,
                    _ => u64::from(!unconditional(t.from)),
                };
                self.traces[i].0.to = t.from.wrapping_add(length);
                imputed += 1;
            } else {
                if t.to != 0 {
                    bytes = bytes.wrapping_add(t.to.wrapping_sub(t.from).wrapping_mul(c.count));
                }
                count = count.wrapping_add(c.count);
            }
        }
        sort_and_merge(&mut self.traces);
        imputed
    }

    /// Merge several inputs (in the given order) into one, as if their records had been read
    /// from one file: counts summed per distinct trace and sample, event names in first-seen
    /// order, `R` branch addresses united.
    pub fn merge(parts: impl IntoIterator<Item = PreAggregated>) -> PreAggregated {
        let mut parts = parts.into_iter();
        let Some(first) = parts.next() else {
            return PreAggregated::default();
        };
        // Each part's traces are sorted and distinct (the type's invariant): one part comes
        // back as it is, without sorting its list again.
        let sorted = |out| TraceSink {
            out,
            sorted: true,
            ..TraceSink::default()
        };
        let mut sink = sorted(first);
        for p in parts {
            sink = sink.merge(sorted(p));
        }
        sink.finish()
    }

    /// Push the records back into a [`Sink`] of the event pipeline: `E` names, samples in
    /// address order, then one event per distinct trace with its summed counts and
    /// mispredictions (`R` for branches recorded as returns) — the records
    /// [`PreAggregated::write`] writes as text. Lets a
    /// consumer other than the aggregator (e.g. Propeller's CFG builder) take several inputs
    /// merged by [`PreAggregated::merge`]. Addresses are the binary's (locations outside it were
    /// kept as perf2bolt keeps them).
    pub fn replay(&self, sink: &mut impl Sink) {
        for e in &self.events {
            sink.event(&Event::Name(e.as_bytes()));
        }
        let mut samples: Vec<(u64, u64)> = self.samples.iter().map(|(&a, &c)| (a, c)).collect();
        samples.sort_unstable();
        for (a, count) in samples {
            sink.event(&Event::Sample(events::Sample {
                pid: None,
                at: events::Loc::inside(a),
                count,
            }));
        }
        for (t, c) in &self.traces {
            let kind = if t.to == BR_ONLY {
                TraceKind::BranchOnly
            } else {
                match t.branch {
                    FT_ONLY => TraceKind::FallThrough,
                    FT_EXTERNAL_ORIGIN => TraceKind::ExternalOrigin,
                    FT_EXTERNAL_RETURN => TraceKind::ExternalReturn,
                    b if self.returns.contains(&b) => TraceKind::Return,
                    _ => TraceKind::Taken,
                }
            };
            sink.event(&Event::Trace(events::Trace {
                pid: None,
                kind,
                branch: events::Loc::inside(t.branch),
                from: events::Loc::inside(t.from),
                to: events::Loc::inside(t.to),
                count: c.count,
                mispreds: c.mispreds,
            }));
        }
    }

    /// Write the records in perf2bolt 22's pre-aggregated format, so that reading them back
    /// (`--pa`) gives the same profile: `E` event names, `S` samples, and one record per trace
    /// with the sentinels mapped back to their letters (`B` branch only, `F`/`f`/`r`
    /// fall-throughs, `R` for branches recorded as returns, else `T`). `T` and `R` records carry
    /// no misprediction count, so a trace with mispredictions is followed by a `B` record of the
    /// same branch with count 0 and those mispredictions (the branch record it adds to is the one
    /// the trace's branch makes). Samples are written in address order. Returns the number of
    /// records written.
    pub fn write(&self, w: &mut (impl std::io::Write + ?Sized)) -> std::io::Result<u64> {
        let mut n = 0u64;
        for e in &self.events {
            writeln!(w, "E {e}")?;
            n += 1;
        }
        let mut samples: Vec<(u64, u64)> = self.samples.iter().map(|(&a, &c)| (a, c)).collect();
        samples.sort_unstable();
        for (a, c) in samples {
            writeln!(w, "S {a:x} {c}")?;
            n += 1;
        }
        for (t, c) in &self.traces {
            let (branch, from, to) = (t.branch, t.from, t.to);
            if to == BR_ONLY {
                writeln!(w, "B {branch:x} {from:x} {} {}", c.count, c.mispreds)?;
                n += 1;
                continue;
            }
            let letter = match branch {
                FT_ONLY => 'F',
                FT_EXTERNAL_ORIGIN => 'f',
                FT_EXTERNAL_RETURN => 'r',
                _ => {
                    let letter = if self.returns.contains(&branch) {
                        'R'
                    } else {
                        'T'
                    };
                    writeln!(w, "{letter} {branch:x} {from:x} {to:x} {}", c.count)?;
                    n += 1;
                    if c.mispreds > 0 {
                        writeln!(w, "B {branch:x} {from:x} 0 {}", c.mispreds)?;
                        n += 1;
                    }
                    continue;
                }
            };
            writeln!(w, "{letter} {from:x} {to:x} {}", c.count)?;
            n += 1;
        }
        Ok(n)
    }
}

/// Read a whole pre-aggregated file in parallel. `progress` is called with byte counts as
/// chunks finish.
pub fn parse(data: &[u8], progress: &(dyn Fn(u64) + Sync)) -> Result<PreAggregated, Error> {
    let sink = events::read_preaggregated_parallel(data, TraceSink::default, progress)?;
    Ok(sink.finish())
}

/// Read the samples of the binary described by `bin` from perf.data bytes (perf2bolt's rules, see
/// [`events::read_perf_data`]). The counts perf2bolt prints come back with the records.
///
/// The file is read in parallel pieces; `done` is called with each piece's byte range once it
/// has been read (see [`events::read_perf_data_parallel`]).
pub fn read_perf_data(
    data: &[u8],
    bin: &events::BinaryDesc<'_>,
    opts: &events::PerfOptions,
    done: &(dyn Fn(std::ops::Range<usize>) + Sync),
) -> Result<(PreAggregated, events::PerfStats), Error> {
    let file = PerfFile::parse(data).map_err(events::PerfError::from)?;
    let (sink, stats) =
        events::read_perf_data_parallel(&file, bin, opts, TraceSink::repetitive, done)?;
    let mut out = sink.finish();
    out.total_samples = stats.total_samples;
    out.entries = stats.samples;
    Ok((out, stats))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Repetitive input (the sink switches to its hash table, in some chunks and not others;
    /// one sink counts in its table from the start) and distinct input give the same traces as
    /// counting them one by one.
    #[test]
    fn trace_sink_counts_alike_in_list_and_table_modes() {
        use pcmap_profile::events::{Loc, Trace as Ev};
        let ev = |k: u64, distinct: u64| {
            let a = (k * 7919) % distinct;
            Ev {
                pid: None,
                kind: if a.is_multiple_of(5) {
                    TraceKind::BranchOnly
                } else {
                    TraceKind::Taken
                },
                branch: Loc::inside(0x1000 + a),
                from: Loc::inside(0x2000 + a % 31),
                to: Loc::inside(0x3000 + a % 17),
                count: 1 + k % 3,
                mispreds: k % 2,
            }
        };
        for (n, distinct) in [(300_000u64, 1_000u64), (200_000, 199_999)] {
            let mut expected: std::collections::BTreeMap<(u64, u64, u64), (u64, u64)> =
                Default::default();
            let mut parts: Vec<TraceSink> = Vec::new();
            for chunk in 0..4u64 {
                // The last chunk's sink is made for repetitive input (counts in its table from
                // the start).
                let mut sink = if chunk == 3 {
                    TraceSink::repetitive()
                } else {
                    TraceSink::default()
                };
                // Chunks of different sizes: one below the probe, two above it.
                let len = if chunk == 0 { PROBE_AT as u64 / 2 } else { n };
                for k in 0..len {
                    let e = ev(k + chunk * 11, distinct);
                    sink.event(&Event::Trace(e));
                    let to = if e.kind == TraceKind::BranchOnly {
                        BR_ONLY
                    } else {
                        e.to.addr
                    };
                    let x = expected
                        .entry((e.from.addr, e.branch.addr, to))
                        .or_default();
                    x.0 += e.count;
                    x.1 += e.mispreds;
                }
                parts.push(sink);
            }
            let merged = parts
                .into_iter()
                .reduce(|a, b| a.merge(b))
                .unwrap()
                .finish();
            let got: Vec<_> = merged
                .traces
                .iter()
                .map(|(t, c)| ((t.from, t.branch, t.to), (c.count, c.mispreds)))
                .collect();
            let want: Vec<_> = expected.into_iter().collect();
            assert_eq!(got, want);
        }
    }

    #[test]
    fn parses_every_record_type_and_merges() {
        let text = b"E cycles\nT 10 20 30 5\nT 10 20 30 2\nR 0 20 30 1\nR 40 20 30 1\nB X:10 20 3 1\nF 1 2 4\nf 1 2 4\nr 1 2 4\nS 5 9\n";
        let p = parse(text, &|_| {}).unwrap();
        assert_eq!(p.entries, 10);
        assert_eq!(p.events, vec!["cycles".to_string()]);
        let find = |t: Trace| p.traces.iter().find(|x| x.0 == t).map(|x| x.1).unwrap();
        assert_eq!(
            find(Trace {
                branch: 0x10,
                from: 0x20,
                to: 0x30
            })
            .count,
            7
        );
        assert!(p.returns.contains(&0x40));
        assert_eq!(p.samples[&5], 9);
        assert_eq!(
            find(Trace {
                branch: 0x10,
                from: 0x20,
                to: BR_ONLY
            })
            .mispreds,
            1
        );
    }

    #[test]
    fn written_records_read_back_to_the_same_profile() {
        let text = b"E cycles\nT 10 20 30 5\nR 0 20 30 1\nR 40 20 30 1\nB 10 20 3 1\nF 1 2 4\nf 1 2 4\nr 1 2 4\nS 5 9\n";
        let p = parse(text, &|_| {}).unwrap();
        let mut out = Vec::new();
        p.write(&mut out).unwrap();
        let q = parse(&out, &|_| {}).unwrap();
        assert_eq!(p.traces, q.traces);
        assert_eq!(p.samples, q.samples);
        assert_eq!(p.returns, q.returns);
        assert_eq!(p.events, q.events);
        assert_eq!(p.total_samples, q.total_samples);
    }

    proptest::proptest! {
        /// Any profile written and read again is the same profile.
        #[test]
        fn write_then_parse_is_identity(
            records in proptest::collection::vec(
                (0u8..9, 1u64..0x1_0000, 1u64..0x1_0000, 1u64..0x1_0000, 0u64..1000, 0u64..10),
                0..60,
            )
        ) {
            let mut text = String::new();
            for (kind, a, b, c, n, m) in records {
                let line = match kind {
                    0 => format!("T {a:x} {b:x} {c:x} {n}"),
                    1 => format!("R {a:x} {b:x} {c:x} {n}"),
                    2 => format!("R 0 {b:x} {c:x} {n}"),
                    3 => format!("B {a:x} {b:x} {n} {m}"),
                    4 => format!("F {a:x} {b:x} {n}"),
                    5 => format!("f {a:x} {b:x} {n}"),
                    6 => format!("r {a:x} {b:x} {n}"),
                    7 => format!("S {a:x} {n}"),
                    _ => format!("E ev{}", a % 3),
                };
                text.push_str(&line);
                text.push('\n');
            }
            let p = parse(text.as_bytes(), &|_| {}).unwrap();
            let mut out = Vec::new();
            p.write(&mut out).unwrap();
            let q = parse(&out, &|_| {}).unwrap();
            proptest::prop_assert_eq!(&p.traces, &q.traces);
            proptest::prop_assert_eq!(&p.samples, &q.samples);
            proptest::prop_assert_eq!(&p.returns, &q.returns);
            proptest::prop_assert_eq!(&p.events, &q.events);
        }
    }

    #[test]
    fn merging_equals_reading_the_concatenation() {
        let a = b"E cycles\nT 10 20 30 5\nB 10 20 3 1\nS 5 9\n";
        let b = b"E instructions\nE cycles\nT 10 20 30 2\nR 40 20 30 1\nS 5 1\nS 6 1\n";
        let merged = PreAggregated::merge([parse(a, &|_| {}).unwrap(), parse(b, &|_| {}).unwrap()]);
        let whole = parse(&[&a[..], &b[..]].concat(), &|_| {}).unwrap();
        assert_eq!(merged.traces, whole.traces);
        assert_eq!(merged.samples, whole.samples);
        assert_eq!(merged.returns, whole.returns);
        assert_eq!(merged.events, whole.events);
        assert_eq!(merged.entries, whole.entries);
        assert_eq!(merged.total_samples, whole.total_samples);
    }

    #[test]
    fn rejects_bad_syntax_with_line_numbers() {
        for bad in [
            &b"T 10 20 30 5"[..],
            b"B 0x10 20 1 0\n",
            b"Q 1\n",
            b"T\t10 20 30 5\n",
            b"B 10 20 1\n",
        ] {
            assert!(
                parse(bad, &|_| {}).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        match parse(b"E x\nB 1 2 3 4\nB 1 zz 3 4\n", &|_| {}) {
            Err(Error::Preagg(e)) => assert_eq!(e.pos.line, 3),
            other => panic!("{other:?}"),
        }
    }

    /// Sorting and merging equals counting each distinct trace: one run of a start longer than
    /// [`LONG_RUN`] (sorted on every thread) and short runs of other starts.
    #[test]
    fn sort_and_merge_sums_each_distinct_trace() {
        let mut traces = Vec::new();
        let mut want: std::collections::BTreeMap<(u64, u64, u64), (u64, u64)> =
            std::collections::BTreeMap::new();
        for k in 0..(2 * LONG_RUN as u64) {
            // Start 7 for most traces: one long run; a few other starts.
            let from = if k % 10 == 0 { k % 13 } else { 7 };
            let t = Trace {
                branch: (k * 7919) % 97,
                from,
                to: (k * 104_729) % 31,
            };
            let c = TraceCounts {
                count: k % 5 + 1,
                mispreds: k % 2,
            };
            traces.push((t, c));
            let e = want.entry(trace_key(&t)).or_default();
            e.0 += c.count;
            e.1 += c.mispreds;
        }
        sort_and_merge(&mut traces);
        type Counted = ((u64, u64, u64), (u64, u64));
        let got: Vec<Counted> = traces
            .iter()
            .map(|(t, c)| (trace_key(t), (c.count, c.mispreds)))
            .collect();
        let want: Vec<_> = want.into_iter().collect();
        assert_eq!(got, want);
    }

    proptest::proptest! {
        #[test]
        fn never_panics(data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200)) {
            let _ = parse(&data, &|_| {});
        }
    }
}
