//! The table of distinct traces that [`TraceSink`](crate::preagg::TraceSink) counts repetitive
//! input in (a perf.data file's branch stacks: tens of millions of entries, a few hundred
//! thousand distinct traces).
//!
//! Such a table is larger than a core's cache, so nearly every count is a cache miss, and a
//! general hash map looks its keys up one after the other: each miss waits for the one before.
//! This table takes the traces in batches, pipelined: when a batch is full, the processor is
//! asked to fetch each of its home slots (a prefetch, which waits for nothing), and the batch
//! before it, whose slots were fetched meanwhile, is counted from cache.
//! Open addressing with linear probing; a slot is one aligned half cache line (the key and two
//! 32-bit counts); counts that outgrow 32 bits continue in a side map, so totals are exact
//! (wrapping at 64 bits, as everywhere in the aggregator).

use rustc_hash::FxHashMap;

use crate::preagg::{Trace, TraceCounts};

/// One slot: a trace and its counts (the part that fits 32 bits).
#[derive(Clone, Copy, Debug)]
#[repr(C, align(32))]
struct Slot {
    key: [u64; 3],
    count: u32,
    mispreds: u32,
}

/// The key of an empty slot. A trace with this key (possible only in hostile input) is
/// counted in the side map.
const EMPTY: [u64; 3] = [u64::MAX; 3];

const EMPTY_SLOT: Slot = Slot {
    key: EMPTY,
    count: 0,
    mispreds: 0,
};

/// Traces taken per batch (a sample's branch stack is up to 32 entries).
const BATCH: usize = 32;

/// The first table: 4,096 slots (128 KiB).
const FIRST_BITS: u32 = 12;

/// Distinct traces with their counts.
#[derive(Debug, Default)]
pub(crate) struct TraceTable {
    /// A power of two of slots (none before the first trace).
    slots: Vec<Slot>,
    /// `64 - log2(slots.len())`: a hash's top bits are its home slot.
    shift: u32,
    /// Occupied slots.
    len: usize,
    /// Counts beyond a slot's 32 bits, and the trace whose key is [`EMPTY`].
    wide: FxHashMap<Trace, TraceCounts>,
    /// Traces not counted yet (at most [`BATCH`]).
    pending: Vec<(Trace, u64, u64)>,
    /// The batch before `pending`: its home slots are being fetched; counted at the next flush.
    fetching: Vec<(Trace, u64, u64)>,
}

fn key(t: &Trace) -> [u64; 3] {
    [t.branch, t.from, t.to]
}

/// A multiplicative hash whose top bits depend on every bit of the key.
fn hash(k: &[u64; 3]) -> u64 {
    const K1: u64 = 0x9e37_79b9_7f4a_7c15;
    const K2: u64 = 0xc2b2_ae3d_27d4_eb4f;
    const K3: u64 = 0x1656_67b1_9e37_79f9;
    ((k[0].wrapping_mul(K1) ^ k[1]).wrapping_mul(K2) ^ k[2]).wrapping_mul(K3)
}

impl TraceTable {
    /// About how many distinct traces the table holds (pending ones count as distinct).
    pub(crate) fn len(&self) -> usize {
        self.len
            + self.pending.len()
            + self.fetching.len()
            + usize::from(self.wide.contains_key(&empty_trace()))
    }

    /// The first slot to look for `k` in: the first of the two in its cache line, so that the
    /// first two probes cost one cache miss.
    fn home(&self, k: &[u64; 3]) -> usize {
        (hash(k) >> self.shift) as usize & !1
    }

    /// Count `count` executions and `mispreds` mispredictions of `t`.
    #[inline]
    pub(crate) fn add(&mut self, t: Trace, count: u64, mispreds: u64) {
        if self.pending.capacity() == 0 {
            self.pending.reserve_exact(BATCH);
        }
        // A loop whose body has one taken branch repeats the same trace entry after entry
        // of a branch stack: such runs are counted once.
        if let Some(last) = self.pending.last_mut()
            && last.0 == t
        {
            last.1 = last.1.wrapping_add(count);
            last.2 = last.2.wrapping_add(mispreds);
            return;
        }
        self.pending.push((t, count, mispreds));
        if self.pending.len() == BATCH {
            self.flush();
        }
    }

    /// Start fetching the pending traces' home slots, and count the batch fetched before.
    fn flush(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        self.reserve(self.pending.len() + self.fetching.len());
        for (t, _, _) in &self.pending {
            prefetch(&self.slots[self.home(&key(t))]);
        }
        let mut fetched = std::mem::take(&mut self.fetching);
        self.count_all(&fetched);
        fetched.clear();
        // The pending batch is being fetched; the emptied buffer takes the next one.
        self.fetching = std::mem::replace(&mut self.pending, fetched);
    }

    /// Count every trace not counted yet.
    fn flush_all(&mut self) {
        let (fetching, pending) = (
            std::mem::take(&mut self.fetching),
            std::mem::take(&mut self.pending),
        );
        self.reserve(fetching.len() + pending.len());
        self.count_all(&fetching);
        self.count_all(&pending);
    }

    /// Count `traces` (room made for them).
    fn count_all(&mut self, traces: &[(Trace, u64, u64)]) {
        for &(t, count, mispreds) in traces {
            let k = key(&t);
            self.count_at(self.home(&k), k, count, mispreds);
        }
    }

    /// Make room for `more` traces (at most three quarters of the slots used).
    fn reserve(&mut self, more: usize) {
        let need = self.len + more;
        if !self.slots.is_empty() && need * 4 <= self.slots.len() * 3 {
            return;
        }
        let mut bits = if self.slots.is_empty() {
            FIRST_BITS
        } else {
            64 - self.shift + 1
        };
        while need * 4 > (3usize << bits) {
            bits += 1;
        }
        let old = std::mem::replace(&mut self.slots, vec![EMPTY_SLOT; 1 << bits]);
        self.shift = 64 - bits;
        let mask = self.slots.len() - 1;
        for s in old.into_iter().filter(|s| s.key != EMPTY) {
            let mut i = self.home(&s.key);
            while self.slots[i].key != EMPTY {
                i = (i + 1) & mask;
            }
            self.slots[i] = s;
        }
    }

    /// Count a trace whose home slot is `i`.
    fn count_at(&mut self, mut i: usize, k: [u64; 3], count: u64, mispreds: u64) {
        if k == EMPTY {
            add(self.wide.entry(empty_trace()).or_default(), count, mispreds);
            return;
        }
        let mask = self.slots.len() - 1;
        loop {
            let s = &mut self.slots[i];
            if s.key == k {
                break;
            }
            if s.key == EMPTY {
                s.key = k;
                self.len += 1;
                break;
            }
            i = (i + 1) & mask;
        }
        let s = &mut self.slots[i];
        let narrow =
            |have: u32, add: u64| u32::try_from(add).ok().and_then(|a| have.checked_add(a));
        match (narrow(s.count, count), narrow(s.mispreds, mispreds)) {
            (Some(c), Some(m)) => (s.count, s.mispreds) = (c, m),
            _ => add(self.wide.entry(trace_of(&k)).or_default(), count, mispreds),
        }
    }

    /// Every distinct trace with its counts, in no particular order.
    pub(crate) fn into_entries(mut self) -> impl Iterator<Item = (Trace, TraceCounts)> {
        self.flush_all();
        let mut wide = std::mem::take(&mut self.wide);
        let mut out: Vec<(Trace, TraceCounts)> = Vec::with_capacity(self.len + wide.len());
        for s in self.slots.iter().filter(|s| s.key != EMPTY) {
            let t = trace_of(&s.key);
            let mut c = TraceCounts {
                count: u64::from(s.count),
                mispreds: u64::from(s.mispreds),
            };
            if let Some(w) = wide.remove(&t) {
                add(&mut c, w.count, w.mispreds);
            }
            out.push((t, c));
        }
        out.extend(wide);
        out.into_iter()
    }
}

/// Ask the processor to bring `slot` into the cache, without waiting for it.
#[inline(always)]
fn prefetch(slot: &Slot) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is only a hint: it never faults and changes no memory (the pointer
    // comes from a live reference anyway).
    unsafe {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        _mm_prefetch::<_MM_HINT_T0>((slot as *const Slot).cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    std::hint::black_box(slot.key[0]);
}

fn trace_of(k: &[u64; 3]) -> Trace {
    Trace {
        branch: k[0],
        from: k[1],
        to: k[2],
    }
}

fn empty_trace() -> Trace {
    trace_of(&EMPTY)
}

fn add(c: &mut TraceCounts, count: u64, mispreds: u64) {
    c.count = c.count.wrapping_add(count);
    c.mispreds = c.mispreds.wrapping_add(mispreds);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_like_a_map_with_wide_counts_and_the_empty_key() {
        let mut table = TraceTable::default();
        let mut want: std::collections::BTreeMap<[u64; 3], (u64, u64)> = Default::default();
        let mut add_both = |t: &mut TraceTable, k: [u64; 3], c: u64, m: u64| {
            t.add(trace_of(&k), c, m);
            let e = want.entry(k).or_default();
            e.0 = e.0.wrapping_add(c);
            e.1 = e.1.wrapping_add(m);
        };
        // Enough distinct keys to grow the table several times, each seen several times.
        for round in 0..3u64 {
            for i in 0..20_000u64 {
                add_both(
                    &mut table,
                    [0x1000 + i % 5000, 0x2000 + i, round % 2],
                    1,
                    i & 1,
                );
            }
        }
        add_both(&mut table, EMPTY, 3, 1);
        add_both(&mut table, EMPTY, 0, 0);
        add_both(&mut table, [1, 2, 3], u64::from(u32::MAX), 0);
        add_both(&mut table, [1, 2, 3], 5, u64::MAX);
        add_both(&mut table, [1, 2, 3], u64::MAX, 2);
        add_both(&mut table, [4, 5, 6], 0, 0);
        let mut got: Vec<([u64; 3], (u64, u64))> = table
            .into_entries()
            .map(|(t, c)| (key(&t), (c.count, c.mispreds)))
            .collect();
        got.sort();
        assert_eq!(got, want.into_iter().collect::<Vec<_>>());
    }
}
