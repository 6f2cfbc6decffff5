//! [`StartIndex`]: one page directory over sorted start addresses (of functions, BAT fragments,
//! basic blocks), so a "which item contains this address" lookup binary-searches the few starts
//! of one page instead of all of them.

/// A page directory over sorted start addresses: page `k` covers
/// `[base + (k << shift), base + ((k + 1) << shift))`, and `dir[k]` is the number of starts below
/// its first address. There are about as many pages as starts (at most 2^24 + 2), so the
/// directory is the size of a `u32` per start.
///
/// The index does not own the starts: [`StartIndex::upper_bound`] takes the same slice (and key)
/// it was built from, so each caller keeps its own layout (plain addresses, `[start, end)`
/// spans, ...).
#[derive(Debug, Clone, Default)]
pub struct StartIndex {
    base: u64,
    shift: u32,
    dir: Vec<u32>,
}

impl StartIndex {
    /// Index `items`, sorted by `key` (their start addresses). An empty index (no items, or more
    /// than `u32::MAX`) makes every lookup a plain binary search.
    pub fn new<T>(items: &[T], key: impl Fn(&T) -> u64) -> Self {
        let (Some(first), Some(last)) = (items.first(), items.last()) else {
            return Self::default();
        };
        if u32::try_from(items.len()).is_err() {
            return Self::default();
        }
        let (first, last) = (key(first), key(last));
        let span = last.saturating_sub(first).saturating_add(1);
        let mut shift = 0u32;
        while shift < 63 && ((span >> shift) > items.len() as u64 || (span >> shift) > (1 << 24)) {
            shift += 1;
        }
        let pages = (span >> shift) + 2;
        let mut dir = Vec::with_capacity(pages as usize);
        let mut pos = 0usize;
        for k in 0..pages {
            // In 128 bits: near the top of the address space a page boundary passes 2^64 (and
            // then every start lies below it).
            let boundary = u128::from(first) + (u128::from(k) << shift);
            while pos < items.len() && u128::from(key(&items[pos])) < boundary {
                pos += 1;
            }
            dir.push(pos as u32);
        }
        Self {
            base: first,
            shift,
            dir,
        }
    }

    /// The number of `items` whose start is `<= address` (what
    /// `items.partition_point(|i| key(i) <= address)` answers); `items` and `key` are those the
    /// index was built from.
    #[inline]
    pub fn upper_bound<T>(&self, items: &[T], address: u64, key: impl Fn(&T) -> u64) -> usize {
        let (lo, hi) = if self.dir.is_empty() {
            (0, items.len())
        } else if address < self.base {
            return 0;
        } else {
            let k = (address - self.base) >> self.shift;
            let last = self.dir.len() - 1;
            if k < last as u64 {
                (
                    self.dir[k as usize] as usize,
                    self.dir[k as usize + 1] as usize,
                )
            } else {
                (self.dir[last] as usize, items.len())
            }
        };
        lo + items[lo..hi].partition_point(|i| key(i) <= address)
    }
}

#[cfg(test)]
mod tests {
    use super::StartIndex;

    /// A small deterministic generator (no dependency for one test).
    fn xorshift(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    #[test]
    fn upper_bound_equals_partition_point() {
        let mut rng = 0x9E37_79B9_7F4A_7C15u64;
        for round in 0..400 {
            let n = (xorshift(&mut rng) % 200) as usize;
            let spread = round % 40;
            let mut starts: Vec<u64> = (0..n)
                .map(|_| (xorshift(&mut rng) % (1 << 20)).wrapping_shl(spread % 20) + 0x40_0000)
                .collect();
            if round % 3 == 0 {
                // Far-apart clusters, a start at 0 and one near the top of the address space.
                starts.extend([0, u64::MAX - 5, 1 << 40]);
            }
            starts.sort_unstable();
            let index = StartIndex::new(&starts, |&s| s);
            let near = starts
                .iter()
                .flat_map(|&s| [s.wrapping_sub(1), s, s.wrapping_add(1)]);
            let random = (0..50).map(|_| {
                let a = xorshift(&mut rng);
                if spread % 2 == 0 { a % (1 << 28) } else { a }
            });
            for a in near.chain(random).chain([0, u64::MAX]) {
                assert_eq!(
                    index.upper_bound(&starts, a, |&s| s),
                    starts.partition_point(|&s| s <= a),
                    "address {a:#x}, starts {starts:x?}"
                );
            }
        }
    }
}
