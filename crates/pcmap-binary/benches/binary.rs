//! Benchmarks on a large binary from the Debian packages (`llvm-bolt`, about 27 MB of .text, or
//! `PCMAP_BENCH_BINARY`): opening and indexing functions, and decoding + classifying every
//! instruction of .text on one core and on all cores (rayon over chunks).

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use pcmap_binary::{Binary, BranchKind, MappedFile};
use rayon::prelude::*;

fn bench_binary() -> String {
    std::env::var("PCMAP_BENCH_BINARY").unwrap_or_else(|_| "/usr/lib/llvm-22/bin/llvm-bolt".into())
}

fn count_branches(bin: &Binary<'_>, bytes: &[u8], address: u64) -> usize {
    bin.decode(bytes, address)
        .unwrap()
        .filter(|i| i.kind() != BranchKind::Other)
        .count()
}

fn benches(c: &mut Criterion) {
    let path = bench_binary();
    let Ok(file) = MappedFile::open(&path) else {
        eprintln!(
            "skipping: {path} not found (apt-get install -y bolt-22, or set PCMAP_BENCH_BINARY)"
        );
        return;
    };
    let mut g = c.benchmark_group("binary");
    g.sample_size(10);
    g.bench_function("open_and_index", |b| {
        b.iter(|| {
            let bin = Binary::parse(black_box(file.bytes())).unwrap();
            black_box(bin.function_at(bin.entry()).is_some())
        })
    });
    let bin = Binary::parse(file.bytes()).unwrap();
    let text = bin.section_by_name(".text").unwrap();
    g.throughput(Throughput::Bytes(text.raw.len() as u64));
    g.bench_function("decode_text_1_core", |b| {
        b.iter(|| count_branches(&bin, text.raw, text.address))
    });
    // Chunks of 1 MiB decoded in parallel; a chunk boundary can split an instruction, which only
    // shifts where that chunk's decoder synchronises (a few instructions), not the throughput.
    g.bench_function("decode_text_all_cores", |b| {
        b.iter(|| {
            text.raw
                .par_chunks(1 << 20)
                .enumerate()
                .map(|(i, chunk)| {
                    count_branches(&bin, chunk, text.address + (i as u64) * (1 << 20))
                })
                .sum::<usize>()
        })
    });
    g.finish();
}

criterion_group!(group, benches);
criterion_main!(group);
