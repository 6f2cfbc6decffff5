//! One-shot throughput measurement on synthetic data, reporting both wall time and CPU time
//! (CPU time stays meaningful on a loaded machine): decode MB/s, lookups per second on one core,
//! and attribution of 100 million branch records on all cores.
//!
//! `cargo run --release -p pcmap-bbmap --example throughput`

use std::time::Instant;

use pcmap_bbmap::decode::{
    BlockRecord, DecodeOptions, MapVisitor, StoredAddress, decode_section, visit_section,
};
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

/// CPU time of the whole process (all threads), in seconds, from /proc/self/stat.
fn process_cpu() -> f64 {
    let s = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let rest = s.rsplit_once(')').map(|x| x.1).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11).and_then(|x| x.parse().ok()).unwrap_or(0.0)
        + f.get(12).and_then(|x| x.parse().ok()).unwrap_or(0.0);
    ticks / 100.0
}

/// CPU time of the calling thread in seconds (/proc/thread-self/schedstat, nanoseconds).
fn thread_cpu() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .next()
                .and_then(|x| x.parse::<f64>().ok())
        })
        .unwrap_or(0.0)
        / 1e9
}

fn synthetic(n: usize) -> Vec<FunctionMap> {
    let mut r = Rng(0x1234_5678_9abc_def1);
    let mut addr = 0x20_0000u64;
    (0..n)
        .map(|_| {
            let nblocks = 1 + (r.next() % 40) as u32;
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
                features: Features(Features::CALLSITE_END_OFFSETS),
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

fn main() {
    let fs = synthetic(200_000);
    let (bytes, _) = encode_section(&fs, EncodeOptions::ELF64LE).unwrap();
    let rounds = 10;
    let (w, c) = (Instant::now(), thread_cpu());
    for _ in 0..rounds {
        let d = decode_section(&bytes, DecodeOptions::ELF64LE, &StoredAddress).unwrap();
        assert_eq!(d.len(), fs.len());
    }
    let (wall, cpu) = (w.elapsed().as_secs_f64(), thread_cpu() - c);
    let mb = (bytes.len() * rounds) as f64 / 1e6;
    println!(
        "decode: {:.1} MB section x{rounds}: {:.0} MB/s wall, {:.0} MB/s per CPU-second",
        bytes.len() as f64 / 1e6,
        mb / wall,
        mb / cpu
    );

    struct Count(u64);
    impl MapVisitor for Count {
        fn function(&mut self, _: Layout, _: Features) {}
        fn range(&mut self, _: u64, _: u32) {}
        fn block(&mut self, b: &BlockRecord<'_>) {
            self.0 += u64::from(b.size);
        }
    }
    let (w, c) = (Instant::now(), thread_cpu());
    for _ in 0..rounds {
        let mut v = Count(0);
        visit_section(&bytes, DecodeOptions::ELF64LE, &StoredAddress, &mut v).unwrap();
        assert!(v.0 > 0);
    }
    let (wall, cpu) = (w.elapsed().as_secs_f64(), thread_cpu() - c);
    println!(
        "visit (no allocation): {:.0} MB/s wall, {:.0} MB/s per CPU-second",
        mb / wall,
        mb / cpu
    );
    let (w, c) = (Instant::now(), thread_cpu());
    for _ in 0..rounds {
        let mut b = BlockIndexBuilder::default();
        visit_section(&bytes, DecodeOptions::ELF64LE, &StoredAddress, &mut b).unwrap();
        assert!(!b.finish().is_empty());
    }
    let (wall, cpu) = (w.elapsed().as_secs_f64(), thread_cpu() - c);
    println!(
        "decode + build index: {:.0} MB/s wall, {:.0} MB/s per CPU-second",
        mb / wall,
        mb / cpu
    );
    if std::env::var_os("ONLY_DECODE").is_some() {
        return;
    }
    let index = BlockIndex::new(&fs);
    let lo = index.blocks()[0].start;
    let hi = index.blocks().last().unwrap().end;
    let mut r = Rng(7);
    let pcs: Vec<u64> = (0..1 << 22).map(|_| lo + r.next() % (hi - lo)).collect();
    let (w, c) = (Instant::now(), thread_cpu());
    let mut hits = 0usize;
    // Profile-like PCs: 90% of them in a hot set of 20k blocks.
    let hot: Vec<u64> = (0..20_000)
        .map(|_| pcs[(r.next() % pcs.len() as u64) as usize])
        .collect();
    let skewed: Vec<u64> = pcs
        .iter()
        .map(|&pc| {
            if r.next().is_multiple_of(10) {
                pc
            } else {
                hot[(r.next() % hot.len() as u64) as usize]
            }
        })
        .collect();
    let (w2, c2) = (Instant::now(), thread_cpu());
    for _ in 0..10 {
        hits += skewed.iter().filter_map(|&pc| index.lookup(pc)).count();
    }
    let (wall2, cpu2) = (w2.elapsed().as_secs_f64(), thread_cpu() - c2);
    let n2 = (skewed.len() * 10) as f64;
    println!(
        "lookup (90% in 20k hot blocks): {:.1}M/s wall, {:.1}M per CPU-second",
        n2 / wall2 / 1e6,
        n2 / cpu2 / 1e6
    );
    for _ in 0..10 {
        hits += pcs.iter().filter_map(|&pc| index.lookup(pc)).count();
    }
    let (wall, cpu) = (w.elapsed().as_secs_f64(), thread_cpu() - c);
    let n = (pcs.len() * 10) as f64;
    println!(
        "lookup: {} blocks, {:.1}M random PCs ({hits} hits): {:.1}M/s wall, {:.1}M per CPU-second",
        index.len(),
        n / 1e6,
        n / wall / 1e6,
        n / cpu / 1e6
    );

    // 100M branch records drawn from 500k distinct branch sites (a large real profile has
    // 10^5-10^6 distinct branches), skewed as LBR data is: 90% of the records come from the
    // hottest 5% of the sites. Fed in chunks of 4M as `pcmap bbmap profile` does.
    let sites: Vec<(u64, u64)> = (0..500_000)
        .map(|_| {
            let from = lo + r.next() % (hi - lo);
            let to = if r.next().is_multiple_of(4) {
                lo + r.next() % (hi - lo)
            } else {
                from + r.next() % 64
            };
            (from, to)
        })
        .collect();
    let chunk: Vec<Branch> = (0..4_000_000)
        .map(|_| {
            let n = sites.len() as u64;
            let i = if r.next().is_multiple_of(10) {
                r.next() % n
            } else {
                r.next() % (n / 20)
            };
            let (from, to) = sites[i as usize];
            Branch {
                from,
                to,
                count: 1,
                mispredicts: 0,
            }
        })
        .collect();
    let (w, c) = (Instant::now(), process_cpu());
    let mut prof = BlockProfile::default();
    for _ in 0..25 {
        prof.add_branches(&index, &chunk);
    }
    let (wall, cpu) = (w.elapsed().as_secs_f64(), process_cpu() - c);
    println!(
        "attribute: 100M branch records on {} threads: {wall:.2} s wall, {cpu:.2} CPU-s ({} edges, {} unmapped)",
        rayon::current_num_threads(),
        prof.branch_edge_count(),
        prof.unmapped_branches
    );
}
