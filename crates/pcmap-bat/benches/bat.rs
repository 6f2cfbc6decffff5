//! Decode throughput (MB/s) and translation rate (lookups/s) on a synthetic BAT of 12,000
//! functions shaped like llvm-bolt output (~20 entries per function, 1 in 4 split).

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use pcmap_bat::{Bat, BatTable, Block, ColdFragment, Entry, EntryKind, HotFunction};
use std::hint::black_box;

/// A small deterministic PRNG (xorshift64*), so the bench needs no extra crates.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn entries(rng: &mut Rng, count: usize, skew: u32) -> (Vec<Entry>, u32) {
    let mut out = Vec::with_capacity(count);
    let mut output = 0u32;
    let mut input = skew;
    for i in 0..count {
        let kind = if i == 0 || rng.below(3) == 0 {
            EntryKind::Block(Block {
                index: rng.below(64) as u32,
                hash: rng.next(),
            })
        } else {
            EntryKind::Branch
        };
        // Mostly moving forward, sometimes blocks moved around by reordering.
        let input_offset = if rng.below(4) == 0 {
            skew + rng.below(400) as u32
        } else {
            input
        };
        out.push(Entry {
            output_offset: output,
            input_offset,
            kind,
        });
        let step = 2 + rng.below(14) as u32;
        output += step;
        input = input_offset + step;
    }
    (out, output)
}

fn synthetic(functions: usize) -> Bat {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut bat = Bat::default();
    let mut address = 0x80_0000u64;
    for _ in 0..functions {
        let n = 4 + rng.below(32) as usize;
        let (e, size) = entries(&mut rng, n, 0);
        bat.hot.push(HotFunction {
            address,
            hash: rng.next(),
            num_blocks: 3 + rng.below(40),
            entries: e,
            secondary_entry_points: if rng.below(50) == 0 {
                vec![0x10]
            } else {
                vec![]
            },
        });
        address += u64::from(size) + 16;
    }
    address = (address + 0xfff) & !0xfff;
    for hot_index in 0..functions {
        if rng.below(4) != 0 {
            continue;
        }
        let skew = 0x40 + rng.below(200) as u32;
        let count = 2 + rng.below(6) as usize;
        let (e, size) = entries(&mut rng, count, skew);
        bat.cold.push(ColdFragment {
            address,
            hot_index,
            input_skew: skew,
            entries: e,
        });
        address += u64::from(size) + 8;
    }
    bat
}

fn bench(c: &mut Criterion) {
    let bat = synthetic(12_000);
    let section = bat.encode_note().expect("valid model");
    let table = BatTable::parse(&section).expect("decodes");
    eprintln!(
        "synthetic BAT: {} functions, {} fragments, {} bytes",
        table.num_functions(),
        table.num_fragments(),
        section.len()
    );

    let mut g = c.benchmark_group("decode");
    g.throughput(Throughput::Bytes(section.len() as u64));
    g.bench_function(BenchmarkId::new("BatTable::parse", section.len()), |b| {
        b.iter(|| BatTable::parse(black_box(&section)).unwrap())
    });
    g.bench_function(BenchmarkId::new("Bat::decode_note", section.len()), |b| {
        b.iter(|| Bat::decode_note(black_box(&section)).unwrap())
    });
    g.bench_function(BenchmarkId::new("Bat::encode_note", section.len()), |b| {
        b.iter(|| black_box(&bat).encode_note().unwrap())
    });
    g.finish();

    // Random addresses inside the fragments (uniform over the code, the worst case for caches).
    let first = bat.hot[0].address;
    let last = bat.cold.last().map(|c| c.address).unwrap_or(first) + 64;
    let mut rng = Rng(42);
    let addresses: Vec<u64> = (0..1 << 16)
        .map(|_| first + rng.below(last - first))
        .collect();
    let mut g = c.benchmark_group("translate");
    g.throughput(Throughput::Elements(addresses.len() as u64));
    g.bench_function("translate(random address)", |b| {
        b.iter(|| {
            let mut sum = 0u64;
            for (i, &a) in addresses.iter().enumerate() {
                if let Some(t) = table.translate(a, i & 1 == 0) {
                    sum = sum.wrapping_add(t.input_offset);
                }
            }
            sum
        })
    });
    let fragment_of: Vec<(u64, u64)> = addresses
        .iter()
        .map(|&a| (table.fragment_containing(a).unwrap().address, a))
        .collect();
    g.bench_function("translate_in(fragment, random address)", |b| {
        b.iter(|| {
            let mut sum = 0u64;
            for (i, &(f, a)) in fragment_of.iter().enumerate() {
                if let Some(t) = table.translate_in(f, a, i & 1 == 0) {
                    sum = sum.wrapping_add(t.input_offset);
                }
            }
            sum
        })
    });
    // Profile-like: 90% of the addresses in the hottest 2% of functions (what sampled profiles
    // look like), the rest uniform.
    let hot: Vec<u64> = bat.hot.iter().step_by(50).map(|h| h.address).collect();
    let skewed: Vec<u64> = (0..1 << 16)
        .map(|_| {
            if rng.below(10) == 0 {
                first + rng.below(last - first)
            } else {
                hot[rng.below(hot.len() as u64) as usize] + rng.below(200)
            }
        })
        .collect();
    g.bench_function("translate(profile-like address)", |b| {
        b.iter(|| {
            let mut sum = 0u64;
            for (i, &a) in skewed.iter().enumerate() {
                if let Some(t) = table.translate(a, i & 1 == 0) {
                    sum = sum.wrapping_add(t.input_offset);
                }
            }
            sum
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
