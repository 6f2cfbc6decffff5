//! Throughput of the whole library pipeline on the scale: a synthetic map of 20,000
//! functions (10 blocks each) and 10 million branch + fall-through records, folded in parallel,
//! turned into CFGs, laid out and written.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use pcmap_propeller::builder::{Accumulator, CfgBuilder, MapBlock, MapFunction};
use pcmap_propeller::{PropellerOptions, generate};
use rayon::prelude::*;

const FUNCTIONS: usize = 20_000;
const BLOCKS: usize = 10;
const RECORDS: usize = 10_000_000;

fn map() -> Vec<MapFunction> {
    (0..FUNCTIONS)
        .map(|f| {
            let base = 0x40_0000 + (f as u64) * 0x200;
            MapFunction {
                name: format!("fn{f}"),
                aliases: vec![],
                ranges: vec![
                    (0..BLOCKS)
                        .map(|b| MapBlock {
                            bb_id: b as u32,
                            address: base + (b as u64) * 16,
                            size: 16,
                            can_fall_through: b % 3 != 2,
                            has_return: b == BLOCKS - 1,
                            hash: None,
                        })
                        .collect(),
                ],
            }
        })
        .collect()
}

/// Deterministic pseudo-random records: (from, to, ft_end, count).
fn records() -> Vec<(u64, u64, u64, u64)> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    (0..RECORDS)
        .map(|i| {
            let r = next();
            let f = (r % 64 * (r >> 8) % FUNCTIONS as u64) % FUNCTIONS as u64; // skewed towards low numbers
            let base = 0x40_0000 + f * 0x200;
            let (sb, tb) = ((r >> 20) % BLOCKS as u64, (r >> 30) % BLOCKS as u64);
            let from = base + sb * 16 + 15;
            let to = if i % 10 == 0 {
                0x40_0000 + ((r >> 40) % FUNCTIONS as u64) * 0x200
            } else {
                base + tb * 16
            };
            (from, to, to + 15, 1 + (r >> 58))
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let functions = map();
    let recs = records();
    let builder = CfgBuilder::new(&functions).unwrap();
    let mut g = c.benchmark_group("propeller");
    g.sample_size(10);
    g.bench_function("fold 10M records + CFGs + layout (20k functions)", |b| {
        b.iter(|| {
            let acc = recs
                .par_chunks(1 << 16)
                .map(|chunk| {
                    let mut acc = Accumulator::default();
                    for &(from, to, ft, n) in chunk {
                        builder.add_branch(&mut acc, from, to, n);
                        builder.add_fall_through(&mut acc, to, ft, n);
                    }
                    acc
                })
                .reduce(Accumulator::default, Accumulator::merge);
            let program = builder.finish(acc);
            let result = generate(&program, &PropellerOptions::default());
            let mut cc = Vec::new();
            pcmap_propeller::write_cc_profile(&result.cc_profile(&program, false, false), &mut cc)
                .unwrap();
            black_box((cc.len(), result.ld_symbols(&program).len()))
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
