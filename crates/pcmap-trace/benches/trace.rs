//! Ingest PCMTRACE and run the streaming super-block pass (pass 1 + pass 2 + loop detection),
//! and the in-memory HTR build, on a synthetic trace.
use std::io::Cursor;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use pcmap_trace::Record;
use pcmap_trace::format::binary::{BinaryWriter, PcmTrace};
use pcmap_trace::htr::streaming;
use pcmap_trace::htr::{BuildOptions, Htr};
use pcmap_trace::synthetic::SyntheticTrace;
use pcmap_trace::trace::Trace;

const N: u64 = 20_000_000;

fn synthetic(n: u64) -> Vec<u8> {
    let mut w = BinaryWriter::new(Cursor::new(Vec::new()), 62).unwrap();
    let mut g = SyntheticTrace::new(5000, 42);
    for _ in 0..n {
        w.write(&Record::Insn {
            addr: g.next_addr(),
        })
        .unwrap();
    }
    w.finish().unwrap().into_inner()
}

fn bench(c: &mut Criterion) {
    let bytes = synthetic(N);
    let mut g = c.benchmark_group("pcmtrace");
    g.sample_size(10);
    g.throughput(Throughput::Elements(N));
    g.bench_function("streaming super-block pass (20M insns)", |b| {
        b.iter(|| {
            let pt = PcmTrace::parse(&bytes, "bench").unwrap();
            streaming::summarize(&pt, 16).unwrap()
        })
    });
    let small = synthetic(2_000_000);
    g.throughput(Throughput::Elements(2_000_000));
    g.bench_function("in-memory read + HTR build (2M insns)", |b| {
        b.iter(|| {
            let t = Trace::read(&small, "bench").unwrap();
            Htr::build(&t.threads[0], &BuildOptions::default())
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
