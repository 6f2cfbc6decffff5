//! File inputs: the address map read from a clang-22 binary (checked against llvm-readobj-22) and
//! perf.data branch stacks folded the same way as the equivalent pre-aggregated records.

use std::process::Command;

use pcmap_binary::Binary;
use pcmap_profile::perfdata::BranchEntry;
use pcmap_profile::perfdata::writer::{Options, SampleSpec, Writer};
use pcmap_propeller::builder::CfgBuilder;
use pcmap_propeller::input::{InputError, fold_perf_data, fold_preaggregated, map_functions};
use pcmap_testkit::{build, run_ok, tool};

fn fixture() -> std::path::PathBuf {
    build(
        "propeller-bench",
        &["propeller/bench.c"],
        &[
            "-O2",
            "-fno-pie",
            "-no-pie",
            "-fbasic-block-address-map",
            "-Wl,--emit-relocs",
        ],
    )
}

#[test]
fn map_matches_llvm_readobj() {
    let exe = fixture();
    let data = std::fs::read(&exe).unwrap();
    let (funcs, summary) = map_functions(&data).unwrap();
    let out = run_ok(
        Command::new(tool("llvm-readobj"))
            .args(["--bb-addr-map", "--elf-output-style=JSON"])
            .arg(&exe),
    );
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let oracle = v[0]["BBAddrMap"].as_array().unwrap();
    assert_eq!(summary.functions, oracle.len());
    assert_eq!(funcs.len(), oracle.len());
    for (f, o) in funcs.iter().zip(oracle) {
        let o = &o["Function"];
        assert_eq!(f.name, o["Name"].as_str().unwrap());
        let ranges = o["BB Ranges"].as_array().unwrap();
        assert_eq!(f.ranges.len(), ranges.len());
        for (r, or) in f.ranges.iter().zip(ranges) {
            let base = or["Base Address"].as_u64().unwrap();
            let entries = or["BB Entries"].as_array().unwrap();
            assert_eq!(r.len(), entries.len());
            for (b, e) in r.iter().zip(entries) {
                assert_eq!(u64::from(b.bb_id), e["ID"].as_u64().unwrap());
                assert_eq!(b.address, base + e["Offset"].as_u64().unwrap());
                assert_eq!(b.size, e["Size"].as_u64().unwrap());
                assert_eq!(b.can_fall_through, e["CanFallThrough"].as_bool().unwrap());
                assert_eq!(b.has_return, e["HasReturn"].as_bool().unwrap());
            }
        }
    }
}

#[test]
fn binary_without_map_is_rejected() {
    let exe = build(
        "propeller-bench-nomap",
        &["propeller/bench.c"],
        &["-O2", "-fno-pie", "-no-pie"],
    );
    let data = std::fs::read(&exe).unwrap();
    assert!(matches!(map_functions(&data), Err(InputError::NoMap)));
}

#[test]
fn perf_branch_stacks_fold_like_preaggregated_records() {
    let exe = fixture();
    let data = std::fs::read(&exe).unwrap();
    let bin = Binary::parse(&data).unwrap();
    let (funcs, _) = map_functions(&data).unwrap();
    let builder = CfgBuilder::new(&funcs).unwrap();
    // Synthetic LBR stacks over real blocks of `process` and `classify`: (from, to) pairs, oldest first.
    let process = funcs.iter().find(|f| f.name == "process").unwrap();
    let classify = funcs.iter().find(|f| f.name == "classify").unwrap();
    let p = &process.ranges[0];
    let c = &classify.ranges[0];
    let last = |b: &pcmap_propeller::builder::MapBlock| b.address + b.size - 1;
    let stacks: Vec<Vec<(u64, u64)>> = vec![
        vec![
            (last(&p[1]), p[3].address),
            (last(&p[3]), c[0].address),
            (last(&c[0]), c[1].address),
        ],
        vec![(last(&p[2]), p[4].address), (last(&p[4]), p[5].address)],
        vec![(last(&p[1]), p[3].address), (last(&p[3]), c[0].address)],
    ];
    // The binary mapped 0x10000000 above its link address (as a PIE would be), to exercise translation.
    let bias = 0x1000_0000u64;
    let text = bin
        .segments()
        .iter()
        .find(|s| s.p_type == pcmap_binary::PT_LOAD && s.flags & 1 != 0)
        .expect("executable segment");
    let mut w = Writer::new(Options::default());
    let name = exe.to_string_lossy().into_owned();
    w.mmap2(
        42,
        42,
        text.vaddr + bias,
        text.mem_size,
        text.offset,
        name.as_bytes(),
        1,
    );
    let mut pa = String::new();
    for (i, st) in stacks.iter().enumerate() {
        let branches: Vec<BranchEntry> = st
            .iter()
            .rev()
            .map(|&(from, to)| BranchEntry {
                from: from + bias,
                to: to + bias,
                flags: 0,
            })
            .collect();
        w.sample(&SampleSpec {
            ip: st[0].0 + bias,
            pid: 42,
            tid: 42,
            time: 10 + i as u64,
            period: 1,
            branches,
            hw_idx: 0,
        });
        for (k, &(from, to)) in st.iter().enumerate() {
            pa.push_str(&format!("B {from:x} {to:x} 1 0\n"));
            if let Some(&(next_from, _)) = st.get(k + 1) {
                pa.push_str(&format!("F {to:x} {next_from:x} 1\n"));
            }
        }
    }
    let perf = w.finish();
    let from_perf = fold_perf_data(&builder, &bin, name.as_bytes(), &perf).unwrap();
    assert_eq!(from_perf.samples, 3);
    assert_eq!(from_perf.mappings, 1);
    let from_pa = fold_preaggregated(&builder, pa.as_bytes()).unwrap();
    assert_eq!(from_perf.acc.stats, from_pa.acc.stats);
    assert_eq!(from_perf.acc.stats.calls, 2);
    assert_eq!(from_perf.acc.stats.intra_branches, 5);
    let (a, b) = (builder.finish(from_perf.acc), builder.finish(from_pa.acc));
    assert_eq!(a, b);
    assert!(
        a.functions
            .iter()
            .any(|f| f.name == "process" && f.blocks.iter().any(|b| b.count > 0))
    );

    // A perf.data of another program: a clear error.
    let mut w = Writer::new(Options::default());
    w.mmap2(1, 1, 0x400000, 0x1000, 0, b"/usr/bin/other", 1);
    assert!(matches!(
        fold_perf_data(&builder, &bin, name.as_bytes(), &w.finish()),
        Err(InputError::NotMapped { .. })
    ));
}
