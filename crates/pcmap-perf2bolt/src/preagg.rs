//! The aggregator's input: perf2bolt's merged trace records, built by a
//! [`pcmap_profile::events::Sink`] of `pcmap-profile`'s branch-event pipeline from either
//! input (pre-aggregated text read in parallel chunks, or perf.data).
//!
//! Each chunk's sink collects its records; the chunks are concatenated in input order, then sorted
//! in parallel by address and duplicates merged, so what is kept is proportional to distinct
//! records. Location prefixes (`<id>:`) are ignored, as perf2bolt ignores them.

use pcmap_profile::events::{self, Event, ParallelSink, Sink, TraceKind};
use pcmap_profile::perfdata::PerfFile;
use rayon::prelude::*;
use rustc_hash::{FxHashMap, FxHashSet};

use crate::Error;

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
#[derive(Debug, Default)]
pub struct TraceSink {
    out: PreAggregated,
    /// Traces of later chunks, concatenated once in [`TraceSink::finish`] (one exact allocation).
    later: Vec<Vec<(Trace, TraceCounts)>>,
}

impl Sink for TraceSink {
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
        out.traces.push((
            trace,
            TraceCounts {
                count: t.count,
                mispreds: t.mispreds,
            },
        ));
    }
}

impl ParallelSink for TraceSink {
    fn merge(mut self, later: Self) -> Self {
        let (a, b) = (&mut self.out, later.out);
        self.later.push(b.traces);
        self.later.extend(later.later);
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
        self
    }
}

impl TraceSink {
    /// Sort the traces by (from, branch, to) and merge duplicates.
    pub fn finish(self) -> PreAggregated {
        let mut out = self.out;
        out.traces
            .reserve_exact(self.later.iter().map(Vec::len).sum());
        for part in self.later {
            out.traces.extend(part);
        }
        out.traces
            .par_sort_unstable_by_key(|(t, _)| (t.from, t.branch, t.to));
        // Merge duplicates in place (`dedup_by` hands over the later element first).
        out.traces.dedup_by(|(t, c), (kt, kc)| {
            if t != kt {
                return false;
            }
            kc.count = kc.count.wrapping_add(c.count);
            kc.mispreds = kc.mispreds.wrapping_add(c.mispreds);
            true
        });
        out.traces.shrink_to_fit();
        out
    }
}

impl PreAggregated {
    /// Merge several inputs (in the given order) into one, as if their records had been read
    /// from one file: counts summed per distinct trace and sample, event names in first-seen
    /// order, `R` branch addresses united.
    pub fn merge(parts: impl IntoIterator<Item = PreAggregated>) -> PreAggregated {
        let mut parts = parts.into_iter();
        let Some(first) = parts.next() else {
            return PreAggregated::default();
        };
        let mut sink = TraceSink {
            out: first,
            later: Vec::new(),
        };
        for p in parts {
            sink = sink.merge(TraceSink {
                out: p,
                later: Vec::new(),
            });
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
pub fn read_perf_data(
    data: &[u8],
    bin: &events::BinaryDesc<'_>,
    opts: &events::PerfOptions,
) -> Result<(PreAggregated, events::PerfStats), Error> {
    let file = PerfFile::parse(data).map_err(events::PerfError::from)?;
    let mut sink = TraceSink::default();
    let stats = events::read_perf_data(&file, bin, opts, &mut sink)?;
    let mut out = sink.finish();
    out.total_samples = stats.total_samples;
    out.entries = stats.samples;
    Ok((out, stats))
}

#[cfg(test)]
mod tests {
    use super::*;

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

    proptest::proptest! {
        #[test]
        fn never_panics(data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200)) {
            let _ = parse(&data, &|_| {});
        }
    }
}
