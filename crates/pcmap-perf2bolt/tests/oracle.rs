//! Differential tests of the aggregation library against perf2bolt 22 on fixture binaries.

mod support;

use pcmap_binary::bolt::BoltFunctions;
use pcmap_perf2bolt::aggregate::Aggregator;
use pcmap_perf2bolt::{fdata, preagg};
use pcmap_testkit as tk;

const FLAGS: &[&str] = &["-O2", "-fno-pie", "-no-pie", "-Wl,--emit-relocs"];

fn check(bin: &std::path::Path, tag: &str, seed: u64) {
    let dir = tk::scratch_dir(&format!("p2b-oracle-{tag}-{seed}"));
    let funcs = support::disassemble(bin);
    let text = support::generate(&funcs, 1500, seed, false);
    let prof = dir.join("prof.pa");
    std::fs::write(&prof, &text).unwrap();
    let (expected, stdout) = support::perf2bolt(bin, &prof, &dir.join("out.fdata"), &[]);

    let data = std::fs::read(bin).unwrap();
    let binary = pcmap_binary::Binary::parse(&data).unwrap();
    let image = BoltFunctions::discover(&binary).unwrap();
    let parsed = preagg::parse(text.as_bytes(), &|_| {}).unwrap();
    let agg = Aggregator::new(&image);
    let profile = agg.aggregate_traces(&parsed, &|_| {});
    let mut ours = Vec::new();
    fdata::write_branches(&mut ours, &image, &profile, false).unwrap();
    let ours = String::from_utf8(ours).unwrap();
    if ours != expected {
        let e: Vec<&str> = expected.lines().collect();
        let o: Vec<&str> = ours.lines().collect();
        let missing: Vec<_> = e.iter().filter(|l| !o.contains(l)).take(10).collect();
        let extra: Vec<_> = o.iter().filter(|l| !e.contains(l)).take(10).collect();
        panic!(
            "fdata differs ({tag}, seed {seed}, {} vs {} lines)\nmissing: {missing:#?}\nextra: {extra:#?}\nprofile: {}",
            o.len(),
            e.len(),
            prof.display()
        );
    }
    let stats = support::stat_lines(&stdout);
    let s = profile.stats;
    let pct = |n: u64| {
        if s.traces == 0 {
            String::new()
        } else {
            format!(
                " ({:.1}%)",
                f64::from(n as f32 * 100.0f32 / s.traces as f32)
            )
        }
    };
    let ours_stats = vec![
        format!(
            "PERF2BOLT: read {} aggregated brstack entries",
            parsed.entries
        ),
        format!(
            "PERF2BOLT: traces mismatching disassembled function contents: {}{}",
            s.mismatching,
            pct(s.mismatching)
        ),
        format!(
            "PERF2BOLT: out of range traces involving unknown regions: {}{}",
            s.out_of_range,
            pct(s.out_of_range)
        ),
    ];
    let mut ours_stats = ours_stats;
    let num_functions = agg.image().functions().len();
    ours_stats.extend(
        agg.function_stats(&profile.profiled_functions(num_functions))
            .report_lines(),
    );
    assert_eq!(ours_stats, stats, "{tag} seed {seed}");
}

#[test]
fn c_fixture_matches_perf2bolt() {
    let bin = tk::build("perf2bolt-p1", &["perf2bolt/p1.c"], FLAGS);
    for seed in 1..4 {
        check(&bin, "p1", seed);
    }
}

#[test]
fn asm_fixture_matches_perf2bolt() {
    let bin = tk::build("perf2bolt-p4", &["perf2bolt/p4.s"], FLAGS);
    for seed in 1..4 {
        check(&bin, "p4", seed);
    }
}

#[test]
fn pie_fixture_matches_perf2bolt() {
    // Position-independent code: PIC jump tables (`lea; movslq; add; jmp *%reg`).
    let bin = tk::build(
        "perf2bolt-p1pie",
        &["perf2bolt/p1.c"],
        &["-O2", "-fpie", "-pie", "-Wl,--emit-relocs"],
    );
    for seed in 1..4 {
        check(&bin, "p1pie", seed);
    }
}
