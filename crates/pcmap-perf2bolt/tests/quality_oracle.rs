//! BOLT's profile-quality figures (`pcmap_perf2bolt::quality`) against the line llvm-bolt 22
//! prints when it reads the fdata perf2bolt 22 wrote for the same pre-aggregated profile.

mod support;

use std::path::Path;

use pcmap_binary::bolt::BoltFunctions;
use pcmap_perf2bolt::aggregate::Aggregator;
use pcmap_perf2bolt::{preagg, quality};
use pcmap_testkit as tk;

const FLAGS: &[&str] = &["-O2", "-fno-pie", "-no-pie", "-Wl,--emit-relocs"];

/// Our figures for the profile `text` against `bin`, and llvm-bolt's for perf2bolt's fdata.
fn both(bin: &Path, tag: &str, text: &str) -> (Option<String>, Option<String>) {
    let dir = tk::scratch_dir(&format!("p2b-quality-{tag}"));
    let prof = dir.join("prof.pa");
    std::fs::write(&prof, text).unwrap();
    let fdata = dir.join("out.fdata");
    support::perf2bolt(bin, &prof, &fdata, &[]);
    let expected = support::bolt_quality_line(bin, &fdata, &dir);

    let data = std::fs::read(bin).unwrap();
    let binary = pcmap_binary::Binary::parse(&data).unwrap();
    let image = BoltFunctions::discover(&binary).unwrap();
    let parsed = preagg::parse(text.as_bytes(), &|_| {}).unwrap();
    let agg = Aggregator::new(&image);
    let profile = agg.aggregate_traces(&parsed, &|_| {});
    let view = quality::read_branch_profile(&agg, &profile);
    let ours = quality::quality(&agg, &view).map(|q| q.bolt_line());
    (ours, expected)
}

#[test]
fn example_profile_quality_matches_llvm_bolt() {
    let root = tk::workspace_root();
    let text = std::fs::read_to_string(root.join("examples/prog.preagg")).unwrap();
    let (ours, expected) = both(&root.join("examples/prog"), "example", &text);
    assert!(expected.is_some(), "llvm-bolt printed no quality line");
    assert_eq!(ours, expected);
}

#[test]
fn control_flow_profiles_quality_matches_llvm_bolt() {
    let many = tk::many_functions_source(300);
    let fixtures: [(&str, &[&str], &[&str]); 4] = [
        ("perf2bolt-p1", &["perf2bolt/p1.c"], FLAGS),
        ("perf2bolt-p4", &["perf2bolt/p4.s"], FLAGS),
        ("quality-many", &[many.to_str().unwrap()], FLAGS),
        (
            tk::EH_FIXTURES[0].0,
            &["perf2bolt/eh.cpp"],
            tk::EH_FIXTURES[0].1,
        ),
    ];
    let mut compared = 0;
    for (name, srcs, flags) in fixtures {
        let bin = tk::build(name, srcs, flags);
        for seed in 1..4 {
            let text = support::control_flow_profile(&bin, 400 * seed as usize, seed);
            let (ours, expected) = both(&bin, &format!("cf-{name}-{seed}"), &text);
            eprintln!("{name} {seed}: {expected:?}");
            assert_eq!(ours, expected, "{name} seed {seed}");
            compared += usize::from(expected.is_some());
        }
    }
    assert!(
        compared >= 10,
        "llvm-bolt printed figures for only {compared} profiles"
    );
}

#[test]
fn generated_profiles_quality_matches_llvm_bolt() {
    for (name, src) in [
        ("perf2bolt-p1", "perf2bolt/p1.c"),
        ("perf2bolt-p4", "perf2bolt/p4.s"),
    ] {
        let bin = tk::build(name, &[src], FLAGS);
        let funcs = support::disassemble(&bin);
        for seed in 1..4 {
            let text = support::generate(&funcs, 1500, seed, false);
            let (ours, expected) = both(&bin, &format!("{name}-{seed}"), &text);
            eprintln!("{name} {seed}: {expected:?}");
            assert_eq!(ours, expected, "{name} seed {seed}");
        }
    }
}
