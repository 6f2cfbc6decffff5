//! The table of distinct traces that [`TraceSink`](crate::preagg::TraceSink) counts repetitive
//! input in (a perf.data file's branch stacks: tens of millions of entries, a few hundred
//! thousand distinct traces).
//!
//! Such a table is larger than a core's cache, so nearly every count is a cache miss, and a
//! general hash map looks its keys up one after the other: each miss waits for the one before.
//! This table takes the traces in batches, pipelined: when a batch is full, the processor is
//! asked to fetch each of its home slots (a prefetch, which waits for nothing), and the batch
//! before it, whose slots were fetched meanwhile, is counted from cache.
//! Open addressing with linear probing; a slot is a quarter of a cache line: the three
//! addresses as 32-bit offsets within the 4 GiB the table's first address lies in (one binary's
//! code always is), and both counts in 32 bits (24 for executions, 8 for mispredictions). A
//! trace with an address elsewhere, and counts that outgrow their bits, continue in a side map,
//! so totals are exact (wrapping at 64 bits, as everywhere in the aggregator).

use rustc_hash::FxHashMap;

use crate::preagg::{Trace, TraceCounts};

/// One slot: a trace ([`TraceTable::compact`]) and its counts (the part that fits its bits).
#[derive(Clone, Copy, Debug)]
#[repr(C, align(16))]
struct Slot {
    key: Key,
    /// Executions in the low [`COUNT_BITS`] bits, mispredictions above.
    counts: u32,
}

/// A trace's three addresses, each the low 32 bits of an address in the table's 4 GiB
/// ([`TraceTable::high`]) or of a magic value ([`MAGIC`]).
type Key = [u32; 3];

/// Low 32 bits from here up are the magic values (`FT_EXTERNAL_RETURN` to `u64::MAX`), never
/// an address of the table's 4 GiB.
const MAGIC: u32 = crate::preagg::FT_EXTERNAL_RETURN as u32;

/// Bits of [`Slot::counts`] for executions; the rest count mispredictions.
const COUNT_BITS: u32 = 24;
const COUNT_MAX: u64 = (1 << COUNT_BITS) - 1;
const MISPRED_MAX: u64 = (1 << (32 - COUNT_BITS)) - 1;

/// The key of an empty slot. A trace with this key (possible only in hostile input) is
/// counted in the side map.
const EMPTY: Key = [u32::MAX; 3];

const EMPTY_SLOT: Slot = Slot {
    key: EMPTY,
    counts: 0,
};

/// Traces taken per batch (a sample's branch stack is up to 32 entries).
const BATCH: usize = 32;

/// The first table: 4,096 slots (64 KiB).
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
    /// The top 32 bits of the addresses slots hold (those of the first address counted).
    high: Option<u32>,
    /// Counts beyond a slot's bits, traces with an address outside the slots' 4 GiB, and the
    /// trace whose key is [`EMPTY`].
    wide: FxHashMap<Trace, TraceCounts>,
    /// Traces not counted yet (at most [`BATCH`]).
    pending: Vec<Queued>,
    /// The batch before `pending`: its home slots are being fetched; counted at the next flush.
    fetching: Vec<Queued>,
}

/// A trace waiting to be counted: its slot key ([`TraceTable::compact`], made once) and counts,
/// packed as a slot's.
type Queued = Slot;

/// A multiplicative hash whose top bits depend on every bit of the key.
fn hash(k: &Key) -> u64 {
    const K1: u64 = 0x9e37_79b9_7f4a_7c15;
    const K2: u64 = 0xc2b2_ae3d_27d4_eb4f;
    let ab = (u64::from(k[0]) << 32) | u64::from(k[1]);
    (ab.wrapping_mul(K1) ^ u64::from(k[2])).wrapping_mul(K2)
}

impl TraceTable {
    /// About how many distinct traces the table holds (pending ones count as distinct; traces
    /// with counts in both a slot and the side map count twice).
    pub(crate) fn len(&self) -> usize {
        self.len + self.pending.len() + self.fetching.len() + self.wide.len()
    }

    /// The first slot to look for `k` in: the first of the four in its cache line, so that the
    /// first four probes cost one cache miss.
    fn home(&self, k: &Key) -> usize {
        (hash(k) >> self.shift) as usize & !3
    }

    /// `t` as a slot key, if its addresses are in the slots' 4 GiB (or magic values).
    #[inline]
    fn compact(&mut self, t: &Trace) -> Option<Key> {
        let mut key = [0u32; 3];
        for (k, a) in key.iter_mut().zip([t.branch, t.from, t.to]) {
            let low = a as u32;
            let high = (a >> 32) as u32;
            if a < crate::preagg::FT_EXTERNAL_RETURN
                && (low >= MAGIC || *self.high.get_or_insert(high) != high)
            {
                return None;
            }
            *k = low;
        }
        Some(key)
    }

    /// The trace a slot key stands for.
    fn trace_of(&self, k: &Key) -> Trace {
        let high = u64::from(self.high.unwrap_or(0)) << 32;
        let full = |low: u32| {
            if low >= MAGIC {
                u64::MAX - u64::from(u32::MAX - low)
            } else {
                high | u64::from(low)
            }
        };
        Trace {
            branch: full(k[0]),
            from: full(k[1]),
            to: full(k[2]),
        }
    }

    /// Count `count` executions and `mispreds` mispredictions of `t`.
    #[inline(always)]
    pub(crate) fn add(&mut self, t: Trace, count: u64, mispreds: u64) {
        if self.pending.capacity() == 0 {
            self.pending.reserve_exact(BATCH);
        }
        // A trace outside the slots' 4 GiB, the key of an empty slot, or counts beyond a
        // slot's bits: counted in the side map at once.
        let key = match self.compact(&t) {
            Some(k) if k != EMPTY && count <= COUNT_MAX && mispreds <= MISPRED_MAX => k,
            _ => return self.wide.entry(t).or_default().add(count, mispreds),
        };
        // A loop whose body has one taken branch repeats the same trace entry after entry
        // of a branch stack: such runs are counted once.
        if let Some(last) = self.pending.last_mut()
            && last.key == key
            && let Some(sum) = add_packed(last.counts, count, mispreds)
        {
            last.counts = sum;
            return;
        }
        self.pending.push(Slot {
            key,
            counts: pack(count, mispreds),
        });
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
        for q in &self.pending {
            prefetch(&self.slots[self.home(&q.key)]);
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
    fn count_all(&mut self, traces: &[Queued]) {
        for q in traces {
            self.count_at(self.home(&q.key), q.key, q.counts);
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

    /// Add packed `counts` to the trace whose key `k` has home slot `i`.
    fn count_at(&mut self, mut i: usize, k: Key, counts: u32) {
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
        let (count, mispreds) = unpack(counts);
        match add_packed(self.slots[i].counts, count, mispreds) {
            Some(sum) => self.slots[i].counts = sum,
            None => {
                // The slot's counts and these move to the side map; the slot counts on from 0.
                let (have, have_mispreds) = unpack(std::mem::take(&mut self.slots[i].counts));
                let w = self.wide.entry(self.trace_of(&k)).or_default();
                w.add(have, have_mispreds);
                w.add(count, mispreds);
            }
        }
    }

    /// Every distinct trace with its counts, in no particular order.
    pub(crate) fn into_entries(mut self) -> impl Iterator<Item = (Trace, TraceCounts)> {
        self.flush_all();
        let mut wide = std::mem::take(&mut self.wide);
        let mut out: Vec<(Trace, TraceCounts)> = Vec::with_capacity(self.len + wide.len());
        for s in self.slots.iter().filter(|s| s.key != EMPTY) {
            let t = self.trace_of(&s.key);
            let (count, mispreds) = unpack(s.counts);
            let mut c = TraceCounts { count, mispreds };
            if let Some(w) = wide.remove(&t) {
                c.add(w.count, w.mispreds);
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

/// `count` executions and `mispreds` mispredictions packed as [`Slot::counts`]; they must fit
/// their bits (at most [`COUNT_MAX`] and [`MISPRED_MAX`]).
#[inline]
fn pack(count: u64, mispreds: u64) -> u32 {
    (count | (mispreds << COUNT_BITS)) as u32
}

/// The executions and mispredictions packed in `packed` ([`pack`]).
#[inline]
fn unpack(packed: u32) -> (u64, u64) {
    (
        u64::from(packed & COUNT_MAX as u32),
        u64::from(packed >> COUNT_BITS),
    )
}

/// Packed counts `packed` plus `count` and `mispreds`, if the sums fit their bits.
#[inline]
fn add_packed(packed: u32, count: u64, mispreds: u64) -> Option<u32> {
    let (have, have_mispreds) = unpack(packed);
    (count <= COUNT_MAX - have && mispreds <= MISPRED_MAX - have_mispreds)
        .then(|| pack(have + count, have_mispreds + mispreds))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::preagg::{BR_ONLY, FT_EXTERNAL_ORIGIN, FT_EXTERNAL_RETURN, FT_ONLY};
    use proptest::prelude::*;

    fn trace(k: [u64; 3]) -> Trace {
        Trace {
            branch: k[0],
            from: k[1],
            to: k[2],
        }
    }

    /// Count `adds` in a table and in a map; both give the same totals.
    fn check(adds: &[([u64; 3], u64, u64)]) {
        let mut table = TraceTable::default();
        let mut want: std::collections::BTreeMap<[u64; 3], (u64, u64)> = Default::default();
        for &(k, c, m) in adds {
            table.add(trace(k), c, m);
            let e = want.entry(k).or_default();
            e.0 = e.0.wrapping_add(c);
            e.1 = e.1.wrapping_add(m);
        }
        let mut got: Vec<([u64; 3], (u64, u64))> = table
            .into_entries()
            .map(|(t, c)| ([t.branch, t.from, t.to], (c.count, c.mispreds)))
            .collect();
        got.sort();
        assert_eq!(got, want.into_iter().collect::<Vec<_>>());
    }

    #[test]
    fn counts_like_a_map_with_wide_counts_and_odd_keys() {
        let mut adds = Vec::new();
        // Enough distinct keys to grow the table several times, each seen several times.
        for round in 0..3u64 {
            for i in 0..20_000u64 {
                adds.push(([0x1000 + i % 5000, 0x2000 + i, round % 2], 1, i & 1));
            }
        }
        let far = 0x7f00_0000_1000; // another 4 GiB than the first trace's
        adds.extend([
            // The key of an empty slot, and magic values.
            ([u64::MAX; 3], 3, 1),
            ([u64::MAX; 3], 0, 0),
            ([FT_ONLY, 0x1000, 0x1010], 2, 0),
            ([FT_EXTERNAL_ORIGIN, 0x1000, 0x1010], 2, 0),
            ([FT_EXTERNAL_RETURN, 0x1000, 0x1010], 2, 0),
            ([0x1000, 0x1010, BR_ONLY], 2, 1),
            // Addresses outside the slots' 4 GiB, or whose low bits look magic.
            ([far, 0x2000, 0x2010], 4, 1),
            ([0x1000, far, far + 8], 4, 0),
            ([0x1000, 0xffff_fffe, 0x2000], 1, 0),
            // Counts beyond a slot's bits, once and repeatedly.
            ([1, 2, 3], u64::from(u32::MAX), 0),
            ([1, 2, 3], 5, u64::MAX),
            ([1, 2, 3], u64::MAX, 2),
            ([4, 5, 6], 0, 0),
        ]);
        for _ in 0..300 {
            adds.push(([7, 8, 9], 1 << 20, 1));
        }
        check(&adds);
    }

    proptest! {
        /// Any mix of keys (few distinct addresses, several 4 GiB regions, magic values) and
        /// counts (small, near the slot limits, huge) totals like a map.
        #[test]
        fn totals_equal_a_map(
            adds in proptest::collection::vec(
                (
                    proptest::array::uniform3(prop_oneof![
                        0u64..64,
                        (0u64..64).prop_map(|a| a | (3 << 32)),
                        (FT_EXTERNAL_RETURN..=u64::MAX),
                        (0xffff_fff0u64..=0xffff_ffff),
                    ]),
                    prop_oneof![0u64..4, (COUNT_MAX - 2)..=(COUNT_MAX + 2), any::<u64>()],
                    prop_oneof![0u64..4, (MISPRED_MAX - 2)..=(MISPRED_MAX + 2), any::<u64>()],
                ),
                0..400,
            )
        ) {
            check(&adds);
        }
    }
}
