//! Benchmarks of the pre-aggregated reader and of trace aggregation on the C fixture (built by
//! clang-22) with a generated profile of every record type (see `tests/support`).

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use pcmap_binary::bolt::BoltFunctions;
use pcmap_perf2bolt::{aggregate::Aggregator, preagg};

#[path = "../tests/support/mod.rs"]
mod support;

fn bench(c: &mut Criterion) {
    let bin = pcmap_testkit::build(
        "perf2bolt-p1",
        &["perf2bolt/p1.c"],
        &["-O2", "-fno-pie", "-no-pie", "-Wl,--emit-relocs"],
    );
    let data = std::fs::read(&bin).expect("read fixture");
    let binary = pcmap_binary::Binary::parse(&data).expect("parse fixture");
    let image = BoltFunctions::discover(&binary).expect("discover functions");
    let funcs = support::disassemble(&bin);
    let profile = support::generate(&funcs, 200_000, 1, true).into_bytes();
    let mut g = c.benchmark_group("perf2bolt");
    g.throughput(Throughput::Bytes(profile.len() as u64));
    g.bench_function("preagg_parse_200k", |b| {
        b.iter(|| preagg::parse(&profile, &|_| {}).expect("parse"))
    });
    let parsed = preagg::parse(&profile, &|_| {}).expect("parse");
    g.throughput(Throughput::Elements(parsed.traces.len() as u64));
    g.bench_function("aggregate_200k", |b| {
        b.iter(|| Aggregator::new(&image).aggregate_traces(&parsed, &|_| {}))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
