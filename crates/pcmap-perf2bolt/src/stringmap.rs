//! Iteration order of LLVM's `StringMap`/`StringSet` (perf2bolt prints event names in it):
//! open addressing over a power-of-two table (16 buckets to start, doubled when more than 3/4
//! full), bucket = low bits of the 32-bit xxh3 hash of the key, quadratic probing; iteration walks
//! the buckets in index order.

fn hash(key: &str) -> u32 {
    xxhash_rust::xxh3::xxh3_64(key.as_bytes()) as u32
}

fn insert(table: &mut [Option<(u32, usize)>], h: u32, item: usize) {
    let mask = table.len() - 1;
    let mut bucket = h as usize & mask;
    let mut probe = 1;
    while table[bucket].is_some() {
        bucket = (bucket + probe) & mask;
        probe += 1;
    }
    table[bucket] = Some((h, item));
}

/// `keys` (distinct, in insertion order) in the order a `StringSet` built by inserting them
/// one by one iterates them.
pub fn string_set_order<S: AsRef<str>>(keys: &[S]) -> Vec<&str> {
    let mut table: Vec<Option<(u32, usize)>> = vec![None; 16];
    let mut items = 0usize;
    for (i, k) in keys.iter().enumerate() {
        insert(&mut table, hash(k.as_ref()), i);
        items += 1;
        if items * 4 > table.len() * 3 {
            let old = std::mem::replace(&mut table, vec![None; 0]);
            table = vec![None; old.len() * 2];
            for (h, item) in old.into_iter().flatten() {
                insert(&mut table, h, item);
            }
        }
    }
    table
        .into_iter()
        .flatten()
        .map(|(_, i)| keys[i].as_ref())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_every_key_once() {
        let keys: Vec<String> = (0..100).map(|i| format!("event{i}")).collect();
        let mut order: Vec<&str> = string_set_order(&keys);
        assert_eq!(order.len(), 100);
        order.sort_unstable();
        order.dedup();
        assert_eq!(order.len(), 100);
    }
}
