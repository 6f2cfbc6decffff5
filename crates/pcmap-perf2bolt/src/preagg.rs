//! Parallel reader of perf2bolt's pre-aggregated profile format (`--pa`), merging duplicate
//! records while it reads.
//!
//! The input is split at line boundaries into chunks parsed on rayon's threads; the records
//! (keyed like perf2bolt's `Trace`: branch, from, to) are then sorted in parallel by address and
//! duplicates merged, so what is kept is proportional to distinct records. Syntax follows perf2bolt 22 strictly: fields separated by
//! spaces, hexadecimal addresses without `0x`, an optional `<id>:` prefix on locations (ignored),
//! decimal counts, and every line ending in `\n`.
//!
//! Hand-written rather than using `pcmap-profile`'s reader because aggregation needs the
//! chunked, merging, parallel form to stay within the time and memory budget.

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

/// One chunk's records.
#[derive(Default)]
struct ChunkRecords {
    /// Records in file order; duplicates are merged after the global sort.
    traces: Vec<(Trace, TraceCounts)>,
    samples: FxHashMap<u64, u64>,
    returns: FxHashSet<u64>,
    events: Vec<String>,
    entries: u64,
    total_samples: u64,
}

impl PreAggregated {
    fn merge(mut self, other: ChunkRecords) -> PreAggregated {
        self.traces.extend(other.traces);
        for (k, v) in other.samples {
            let e = self.samples.entry(k).or_default();
            *e = e.wrapping_add(v);
        }
        self.returns.extend(other.returns);
        for e in other.events {
            if !self.events.contains(&e) {
                self.events.push(e);
            }
        }
        self.entries += other.entries;
        self.total_samples = self.total_samples.wrapping_add(other.total_samples);
        self
    }
}

/// Parse a whole pre-aggregated file in parallel. `progress` is called with byte counts as
/// chunks finish.
pub fn parse(data: &[u8], progress: &(dyn Fn(u64) + Sync)) -> Result<PreAggregated, Error> {
    let chunks = split_chunks(data, 1 << 20);
    let results: Vec<Result<ChunkRecords, (usize, u64, usize, String)>> = chunks
        .par_iter()
        .enumerate()
        .map(|(ci, &(start, end))| {
            let r = parse_chunk(&data[start..end]).map_err(|(line, col, msg)| (ci, line, col, msg));
            progress((end - start) as u64);
            r
        })
        .collect();
    let mut out = PreAggregated::default();
    let mut parts = Vec::with_capacity(results.len());
    for r in results {
        match r {
            Ok(p) => parts.push(p),
            Err((ci, line, column, message)) => {
                let before = memchr::memchr_iter(b'\n', &data[..chunks[ci].0]).count() as u64;
                return Err(Error::Parse {
                    line: before + line,
                    column,
                    message,
                });
            }
        }
    }
    out.traces
        .reserve_exact(parts.iter().map(|p| p.traces.len()).sum());
    for p in parts {
        out = out.merge(p);
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
    Ok(out)
}

/// Chunks of about `target` bytes ending just after a newline (the last one at the end).
fn split_chunks(data: &[u8], target: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < data.len() {
        let mut end = (start + target).min(data.len());
        if end < data.len() {
            end = match memchr::memchr(b'\n', &data[end..]) {
                Some(i) => end + i + 1,
                None => data.len(),
            };
        }
        out.push((start, end));
        start = end;
    }
    out
}

type LineError = (u64, usize, String);

struct Cursor<'a> {
    line: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn skip_spaces(&mut self) {
        while self.line.get(self.pos) == Some(&b' ') {
            self.pos += 1;
        }
    }
    /// The next field (up to a space or the end of the line).
    fn field(&mut self) -> Option<(usize, &'a [u8])> {
        self.skip_spaces();
        let start = self.pos;
        while self.pos < self.line.len() && self.line[self.pos] != b' ' {
            self.pos += 1;
        }
        (self.pos > start).then(|| (start, &self.line[start..self.pos]))
    }
}

fn parse_hex(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 16 {
        return None;
    }
    let mut v = 0u64;
    for &c in s {
        let d = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            b'A'..=b'F' => c - b'A' + 10,
            _ => return None,
        };
        v = (v << 4) | u64::from(d);
    }
    Some(v)
}

fn parse_count(s: &[u8]) -> Option<u64> {
    let (neg, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, s),
    };
    if digits.is_empty() {
        return None;
    }
    let mut v: i64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(i64::from(c - b'0'))?;
    }
    Some(if neg {
        v.wrapping_neg() as u64
    } else {
        v as u64
    })
}

fn parse_chunk(chunk: &[u8]) -> Result<ChunkRecords, LineError> {
    let mut out = ChunkRecords::default();
    // About 23 bytes per record line in practice.
    out.traces.reserve(chunk.len() / 24);
    let mut line_no = 0u64;
    let mut rest = chunk;
    while !rest.is_empty() {
        line_no += 1;
        let Some(nl) = memchr::memchr(b'\n', rest) else {
            return Err((
                line_no,
                rest.len() + 1,
                "malformed field: missing end of line".into(),
            ));
        };
        let line = &rest[..nl];
        rest = &rest[nl + 1..];
        parse_line(line, &mut out).map_err(|(col, msg)| (line_no, col + 1, msg))?;
        out.entries += 1;
    }
    Ok(out)
}

fn parse_line(line: &[u8], out: &mut ChunkRecords) -> Result<(), (usize, String)> {
    let mut c = Cursor { line, pos: 0 };
    let Some((tpos, kind)) = c.field() else {
        return Err((0, "expected T, R, S, E, B, F, f or r".into()));
    };
    let (addrs, counters) = match kind {
        b"T" | b"R" => (3, 1),
        b"S" => (1, 1),
        b"E" => (0, 0),
        b"B" => (2, 2),
        b"F" | b"f" | b"r" => (2, 1),
        _ => return Err((tpos, "expected T, R, S, E, B, F, f or r".into())),
    };
    if kind == b"E" {
        let Some((_, name)) = c.field() else {
            return Err((c.pos, "expected event name".into()));
        };
        c.skip_spaces();
        if c.pos != line.len() {
            return Err((c.pos, "expected end of line".into()));
        }
        let name = String::from_utf8_lossy(name).into_owned();
        if !out.events.contains(&name) {
            out.events.push(name);
        }
        return Ok(());
    }
    let mut a = [0u64; 3];
    for slot in a.iter_mut().take(addrs) {
        let Some((pos, f)) = c.field() else {
            return Err((c.pos, "expected hexadecimal number".into()));
        };
        let hex = match memchr::memchr(b':', f) {
            Some(i) => &f[i + 1..],
            None => f,
        };
        *slot = parse_hex(hex).ok_or((pos, "expected hexadecimal number".to_string()))?;
    }
    let mut n = [0u64; 2];
    for slot in n.iter_mut().take(counters) {
        let Some((pos, f)) = c.field() else {
            return Err((c.pos, "expected decimal number".into()));
        };
        *slot = parse_count(f).ok_or((pos, "expected decimal number".to_string()))?;
    }
    if c.pos != line.len() {
        return Err((c.pos, "expected end of line".into()));
    }
    let (count, mispreds) = (n[0], n[1]);
    out.total_samples = out.total_samples.wrapping_add(count);
    let trace = match kind {
        b"S" => {
            let e = out.samples.entry(a[0]).or_default();
            *e = e.wrapping_add(count);
            return Ok(());
        }
        b"T" => Trace {
            branch: a[0],
            from: a[1],
            to: a[2],
        },
        b"R" => {
            let branch = if a[0] == 0 {
                FT_EXTERNAL_RETURN
            } else {
                out.returns.insert(a[0]);
                a[0]
            };
            Trace {
                branch,
                from: a[1],
                to: a[2],
            }
        }
        b"B" => Trace {
            branch: a[0],
            from: a[1],
            to: BR_ONLY,
        },
        b"F" => Trace {
            branch: FT_ONLY,
            from: a[0],
            to: a[1],
        },
        b"f" => Trace {
            branch: FT_EXTERNAL_ORIGIN,
            from: a[0],
            to: a[1],
        },
        _ => Trace {
            branch: FT_EXTERNAL_RETURN,
            from: a[0],
            to: a[1],
        },
    };
    out.traces.push((trace, TraceCounts { count, mispreds }));
    Ok(())
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
            Err(Error::Parse { line, .. }) => assert_eq!(line, 3),
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
