//! Decode throughput (MB/s of section data), lookups per second, and branch-record attribution.
//!
//! The map is synthetic but shaped like clang's output: 50k functions of 1-40 blocks, callsite
//! offsets on a third of the blocks, a few multi-range functions.

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use pcmap_bbmap::decode::{DecodeOptions, StoredAddress, decode_section, visit_section};
use pcmap_bbmap::encode::{EncodeOptions, encode_section};
use pcmap_bbmap::index::{BlockIndex, BlockIndexBuilder};
use pcmap_bbmap::model::{BbEntry, BbRange, BlockMetadata, Features, FunctionMap, Layout};
use pcmap_bbmap::profile::{BlockProfile, Branch};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Synthetic functions laid out back to back from 0x200000.
pub fn synthetic(n: usize) -> Vec<FunctionMap> {
    let mut r = Rng(0x1234_5678_9abc_def1);
    let mut addr = 0x20_0000u64;
    (0..n)
        .map(|_| {
            let nblocks = 1 + (r.next() % 40) as u32;
            let features = Features(Features::CALLSITE_END_OFFSETS);
            let mut off = 0u32;
            let entries: Vec<BbEntry> = (0..nblocks)
                .map(|id| {
                    let size = (r.next() % 60) as u32;
                    let cs = if r.next().is_multiple_of(3) && size > 5 {
                        vec![size - 3]
                    } else {
                        vec![]
                    };
                    let e = BbEntry {
                        id,
                        offset: off,
                        size,
                        metadata: BlockMetadata((r.next() % 16) as u32),
                        callsite_end_offsets: cs,
                        hash: 0,
                    };
                    off += size;
                    e
                })
                .collect();
            let f = FunctionMap {
                layout: Layout::Versioned(5),
                features,
                ranges: vec![BbRange {
                    base_address: addr,
                    num_blocks: nblocks,
                    entries,
                }],
                pgo: None,
            };
            addr += u64::from(off) + 16;
            f
        })
        .collect()
}

fn benches(c: &mut Criterion) {
    let fs = synthetic(50_000);
    let (bytes, _) = encode_section(&fs, EncodeOptions::ELF64LE).unwrap();
    let mut g = c.benchmark_group("decode");
    g.throughput(Throughput::Bytes(bytes.len() as u64));
    g.bench_function("visit_section_index_builder", |b| {
        b.iter(|| {
            let mut builder = BlockIndexBuilder::default();
            visit_section(&bytes, DecodeOptions::ELF64LE, &StoredAddress, &mut builder).unwrap();
            builder.finish()
        })
    });
    g.bench_function("decode_section", |b| {
        b.iter(|| decode_section(&bytes, DecodeOptions::ELF64LE, &StoredAddress).unwrap())
    });
    g.finish();

    let index = BlockIndex::new(&fs);
    let lo = index.blocks()[0].start;
    let hi = index.blocks().last().unwrap().end;
    let mut r = Rng(7);
    let pcs: Vec<u64> = (0..1 << 20).map(|_| lo + r.next() % (hi - lo)).collect();
    let mut g = c.benchmark_group("lookup");
    g.throughput(Throughput::Elements(pcs.len() as u64));
    g.bench_function("lookup_random_pcs", |b| {
        b.iter(|| pcs.iter().filter_map(|&pc| index.lookup(pc)).count())
    });
    g.bench_function("lookup_branch_target", |b| {
        b.iter(|| {
            pcs.iter()
                .filter_map(|&pc| index.lookup_branch_target(pc))
                .count()
        })
    });
    g.finish();

    let branches: Vec<Branch> = (0..4_000_000)
        .map(|_| {
            let from = lo + r.next() % (hi - lo);
            Branch {
                from,
                to: if r.next().is_multiple_of(4) {
                    lo + r.next() % (hi - lo)
                } else {
                    from + r.next() % 64
                },
                count: 1,
                mispredicts: 0,
            }
        })
        .collect();
    let mut g = c.benchmark_group("attribute");
    g.sample_size(10);
    g.throughput(Throughput::Elements(branches.len() as u64));
    g.bench_function("branches_4M", |b| {
        b.iter_batched(
            BlockProfile::default,
            |mut p| {
                p.add_branches(&index, &branches);
                p
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

criterion_group!(bbmap, benches);
criterion_main!(bbmap);
