//! Throughput of the profile readers and writers on synthetic inputs shaped like real ones:
//! pre-aggregated parsing (parallel), the perf.data sample walk over branch-stack samples, YAML and fdata
//! writing and reading.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use pcmap_profile::perfdata::{BranchEntry, PerfFile, writer};
use pcmap_profile::{fdata, preagg, yaml};

struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
}

/// ~`bytes` of pre-aggregated text with perf2bolt-like record mix (T 55%, B/F/R/S 11% each).
fn preagg_text(bytes: usize) -> Vec<u8> {
    use std::io::Write;
    let mut r = Lcg(1);
    let mut out = Vec::with_capacity(bytes + 64);
    out.extend_from_slice(b"E cycles\n");
    while out.len() < bytes {
        let a = 0x401000 + r.next() % 0x7a0000;
        let b = 0x401000 + r.next() % 0x7a0000;
        let n = 1 + r.next() % 500;
        match r.next() % 9 {
            0..=4 => writeln!(out, "T {a:x} {b:x} {:x} {n}", b + 0x20),
            5 => writeln!(out, "B {a:x} {b:x} {n} {}", n / 10),
            6 => writeln!(out, "F {a:x} {:x} {n}", a + 0x10),
            7 => writeln!(out, "R {a:x} {b:x} {:x} {n}", b + 0x8),
            _ => writeln!(out, "S {a:x} {n}"),
        }
        .unwrap();
    }
    out
}

/// A perf.data file of roughly `bytes` with 32-entry branch stacks (the LBR depth of recent Intel cores).
fn perf_data(bytes: usize) -> Vec<u8> {
    let mut w = writer::Writer::new(writer::Options {
        hw_idx: true,
        ..Default::default()
    });
    w.comm(1, 1, b"bench", 0);
    w.mmap2(1, 1, 0x400000, 0x800000, 0, b"/bench", 0);
    let mut r = Lcg(2);
    let per = 8 + 40 + 16 + 32 * 24;
    for i in 0..(bytes / per) as u64 {
        let branches = (0..32)
            .map(|_| BranchEntry {
                from: 0x400000 + r.next() % 0x800000,
                to: 0x400000 + r.next() % 0x800000,
                flags: r.next() & 3,
            })
            .collect();
        w.sample(&writer::SampleSpec {
            ip: 0x400000 + r.next() % 0x800000,
            pid: 1,
            tid: 1,
            time: i,
            period: 1,
            branches,
            hw_idx: 31,
        });
    }
    w.finish()
}

/// A YAML profile shaped like perf2bolt's: `functions` × 10 blocks with successors and some calls.
fn yaml_profile(functions: u32) -> yaml::Profile {
    let mut r = Lcg(3);
    yaml::Profile {
        header: yaml::Header {
            binary_name: "big".into(),
            build_id: "5185bee5d6df85064a57d411591c5c312237e0c7".into(),
            flags: yaml::PF_LBR,
            origin: "perf data aggregator".into(),
            events: "cycles".into(),
            dfs_order: false,
            hash_func: yaml::HashFunction::Xxh3,
            ..Default::default()
        },
        functions: (0..functions)
            .map(|i| yaml::Function {
                name: format!("f{i}"),
                id: i + 1,
                hash: r.next() << 32 | r.next(),
                exec_count: r.next() % 1000,
                num_basic_blocks: 10,
                blocks: (0..10)
                    .map(|b| yaml::Block {
                        index: b,
                        num_instructions: (r.next() % 20) as u32,
                        hash: r.next() << 32 | r.next(),
                        calls: if b % 3 == 0 {
                            vec![yaml::CallSite {
                                offset: 4,
                                dest_id: (r.next() % 20000) as u32,
                                count: r.next() % 100,
                                ..Default::default()
                            }]
                        } else {
                            vec![]
                        },
                        successors: vec![
                            yaml::Successor {
                                index: (b + 1) % 10,
                                count: r.next() % 1000,
                                mispreds: 0,
                            },
                            yaml::Successor {
                                index: (b + 2) % 10,
                                count: r.next() % 100,
                                mispreds: 1,
                            },
                        ],
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
            .collect(),
        pseudo_probe_desc: Default::default(),
    }
}

fn benches(c: &mut Criterion) {
    let text = preagg_text(64 << 20);
    let mut g = c.benchmark_group("preagg");
    g.sample_size(10)
        .throughput(Throughput::Bytes(text.len() as u64));
    g.bench_function("fold_parallel_64MB", |b| {
        b.iter(|| {
            preagg::fold_parallel(
                black_box(&text),
                || 0u64,
                |a, r| *a += r.count(),
                |a, b| a + b,
            )
            .unwrap()
        })
    });
    g.bench_function("serial_64MB", |b| {
        b.iter(|| {
            preagg::parse(black_box(&text))
                .map(|r| r.unwrap().count())
                .sum::<u64>()
        })
    });
    g.finish();

    let pd = perf_data(256 << 20);
    let mut g = c.benchmark_group("perfdata");
    g.sample_size(10)
        .throughput(Throughput::Bytes(pd.len() as u64));
    g.bench_function("sample_walk_branch_stacks_256MB", |b| {
        b.iter(|| {
            let f = PerfFile::parse(black_box(&pd)).unwrap();
            let mut acc = 0u64;
            f.for_each_sample(|s| {
                if let Some(bs) = s.branch_stack {
                    for e in bs.iter() {
                        acc = acc.wrapping_add(e.from ^ e.to);
                    }
                }
            })
            .unwrap();
            acc
        })
    });
    g.finish();

    let p = yaml_profile(20_000);
    let mut out = Vec::new();
    yaml::write(&mut out, &p).unwrap();
    let mut g = c.benchmark_group("yaml");
    g.sample_size(10)
        .throughput(Throughput::Bytes(out.len() as u64));
    g.bench_function("write_20k_functions", |b| {
        b.iter(|| {
            let mut o = Vec::with_capacity(out.len());
            yaml::write(&mut o, black_box(&p)).unwrap();
            o
        })
    });
    g.bench_function("read_20k_functions", |b| {
        b.iter(|| yaml::parse(black_box(&out)).unwrap().functions.len())
    });
    g.finish();

    let mut fd = fdata::Profile::default();
    let mut r = Lcg(4);
    let names: Vec<String> = (0..20_000).map(|i| format!("f{i}")).collect();
    for _ in 0..400_000 {
        let a = &names[(r.next() % 20_000) as usize];
        let b = &names[(r.next() % 20_000) as usize];
        fd.lines.push(fdata::Line::Branch(fdata::BranchRecord {
            from: fdata::Location::symbol(a, r.next() % 0x400),
            to: fdata::Location::symbol(b, r.next() % 0x400),
            mispreds: r.next() % 4,
            count: r.next() % 10_000,
        }));
    }
    let mut fout = Vec::new();
    fdata::write(&mut fout, &fd).unwrap();
    let mut g = c.benchmark_group("fdata");
    g.sample_size(10)
        .throughput(Throughput::Bytes(fout.len() as u64));
    g.bench_function("write_400k_lines", |b| {
        b.iter(|| {
            let mut o = Vec::with_capacity(fout.len());
            fdata::write(&mut o, black_box(&fd)).unwrap();
            o
        })
    });
    g.bench_function("read_400k_lines", |b| {
        b.iter(|| fdata::parse(black_box(&fout)).unwrap().lines.len())
    });
    g.finish();
}

criterion_group!(profile, benches);
criterion_main!(profile);
