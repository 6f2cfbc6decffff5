//! Census throughput: DWARF load + site extraction + census on the inline fixture (clang and gcc),
//! and on `$PCMAP_INLINE_BENCH_BINARY` when set (e.g. the library `bench/inline.sh` builds).

use criterion::{Criterion, Throughput, criterion_group, criterion_main};

fn census(bytes: &[u8]) -> u64 {
    let data = pcmap_inline::DebugData::load(bytes).expect("ELF with DWARF");
    let info = pcmap_inline::extract_sites(&data).expect("inline sites");
    pcmap_inline::census::Census::new(&info).sites
}

fn bench(c: &mut Criterion) {
    let mut inputs = vec![
        (
            "fixture-clang".to_string(),
            pcmap_testkit::build_with(
                "clang",
                "inline-clang-d5",
                &["inline/inline.c"],
                &["-O2", "-g", "-gdwarf-5"],
            ),
        ),
        (
            "fixture-gcc".to_string(),
            pcmap_testkit::build_with(
                "gcc",
                "inline-gcc-d5",
                &["inline/inline.c"],
                &["-O2", "-g", "-gdwarf-5"],
            ),
        ),
    ];
    if let Some(p) = std::env::var_os("PCMAP_INLINE_BENCH_BINARY") {
        inputs.push(("external".to_string(), p.into()));
    }
    let mut group = c.benchmark_group("inline-census");
    group.sample_size(10);
    for (name, path) in inputs {
        let bytes = std::fs::read(&path).expect("read benchmark input");
        group.throughput(Throughput::Bytes(bytes.len() as u64));
        group.bench_function(name, |b| b.iter(|| census(&bytes)));
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
