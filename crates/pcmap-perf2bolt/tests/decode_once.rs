//! One decode per function and run: aggregation, program statistics and the YAML profile
//! (CFGs, block hashes, function hashes) of a profiled binary decode every function exactly
//! once, the profiled ones included.

mod support;

use pcmap_binary::bolt::{BoltFunctions, FunctionKind};
use pcmap_perf2bolt::aggregate::Aggregator;
use pcmap_perf2bolt::{preagg, yaml};
use pcmap_testkit as tk;

#[test]
fn every_function_is_decoded_once() {
    let bin = tk::build(
        "perf2bolt-p1",
        &["perf2bolt/p1.c"],
        &["-O2", "-fno-pie", "-no-pie", "-Wl,--emit-relocs"],
    );
    let funcs = support::disassemble(&bin);
    let text = support::generate(&funcs, 1500, 7, false);
    let data = std::fs::read(&bin).unwrap();
    let binary = pcmap_binary::Binary::parse(&data).unwrap();
    let image = BoltFunctions::discover(&binary).unwrap();
    let regular = image
        .functions()
        .iter()
        .filter(|f| f.kind == FunctionKind::Regular)
        .count();
    let parsed = preagg::parse(text.as_bytes(), &|_| {}).unwrap();
    let agg = Aggregator::new(&image).with_hashing();
    let profile = agg.aggregate_traces(&parsed, &|_| {});
    let profiled = profile.profiled_functions(image.functions().len());
    let _ = agg.function_stats(&profiled);
    let y = yaml::branch_profile(&agg, &profile, "p1", &["cycles".to_string()]);
    assert!(!y.functions.is_empty(), "the profile touches no function");
    assert!(
        y.functions.iter().any(|f| !f.blocks.is_empty()),
        "no function with a CFG in the profile"
    );
    assert_eq!(agg.decoded_functions(), regular);
}
