//! One decode per function and run: aggregation and program statistics of a profiled binary
//! decode every function exactly once, the profiled ones included. An aggregator that hashes
//! (for the YAML profile: CFGs, block hashes, function hashes) decodes a function a second time
//! only to build its CFG, and hashes it from that decode.

mod support;

use pcmap_binary::bolt::{BoltFunctions, FunctionKind};
use pcmap_perf2bolt::aggregate::Aggregator;
use pcmap_perf2bolt::{preagg, yaml};
use pcmap_testkit as tk;

/// The bytes of the p1 fixture and a generated pre-aggregated profile of it.
fn p1_with_profile() -> (Vec<u8>, String) {
    let bin = tk::build(
        "perf2bolt-p1",
        &["perf2bolt/p1.c"],
        &["-O2", "-fno-pie", "-no-pie", "-Wl,--emit-relocs"],
    );
    let funcs = support::disassemble(&bin);
    let text = support::generate(&funcs, 1500, 7, false);
    (std::fs::read(&bin).unwrap(), text)
}

#[test]
fn every_function_is_decoded_once() {
    let (data, text) = p1_with_profile();
    let binary = pcmap_binary::Binary::parse(&data).unwrap();
    let image = BoltFunctions::discover(&binary).unwrap();
    let regular = image
        .functions()
        .iter()
        .filter(|f| f.kind == FunctionKind::Regular)
        .count();
    let parsed = preagg::parse(text.as_bytes(), &|_| {}).unwrap();
    for hashing in [false, true] {
        let agg = Aggregator::new(&image);
        let agg = if hashing { agg.with_hashing() } else { agg };
        let profile = agg.aggregate_traces(&parsed, &|_| {});
        let profiled = profile.profiled_functions(image.functions().len());
        let _ = agg.function_stats(&profiled);
        let y = yaml::branch_profile(&agg, &profile, "p1", &["cycles".to_string()]);
        assert!(!y.functions.is_empty(), "the profile touches no function");
        assert!(
            y.functions.iter().any(|f| !f.blocks.is_empty()),
            "no function with a CFG in the profile"
        );
        let cfgs = agg.built_cfgs();
        assert!(cfgs > 0, "hashing {hashing}: no CFG built");
        let expected = if hashing { regular + cfgs } else { regular };
        assert_eq!(
            agg.decoded_functions(),
            expected,
            "hashing {hashing}: {regular} functions, {cfgs} CFGs built"
        );
    }
}

/// The streamed YAML writer (`write_branch_profile`, what `pcmap perf2bolt` writes) writes the
/// document `branch_profile_with` builds, byte for byte, in input and in depth-first order; with
/// the hashes kept in the CFGs, or computed on demand by an aggregator that does not hash.
#[test]
fn streamed_yaml_is_the_built_document() {
    let (data, text) = p1_with_profile();
    let binary = pcmap_binary::Binary::parse(&data).unwrap();
    let image = BoltFunctions::discover(&binary).unwrap();
    let parsed = preagg::parse(text.as_bytes(), &|_| {}).unwrap();
    let events = ["cycles".to_string()];
    let mut reference: Option<Vec<u8>> = None;
    for dfs_order in [false, true] {
        let opts = yaml::YamlOptions { dfs_order };
        for hashing in [true, false] {
            let agg = Aggregator::new(&image);
            let agg = match (hashing, dfs_order) {
                (true, true) => agg.with_hashing().with_dfs_function_hashes(),
                (true, false) => agg.with_hashing(),
                (false, _) => agg,
            };
            let profile = agg.aggregate_traces(&parsed, &|_| {});
            let built = yaml::branch_profile_with(&agg, &profile, "p1", &events, opts);
            let mut want = Vec::new();
            pcmap_profile::yaml::write(&mut want, &built).unwrap();
            let mut got = Vec::new();
            let n =
                yaml::write_branch_profile(&mut got, &agg, &profile, "p1", &events, opts).unwrap();
            assert_eq!(n, built.functions.len() as u64);
            assert!(
                got == want,
                "dfs {dfs_order}, hashing {hashing}: the streamed YAML differs from the built one"
            );
            if !dfs_order {
                // The same document whether or not the CFGs kept their hashes.
                match &reference {
                    Some(r) => assert!(*r == got, "hashing changes the document"),
                    None => reference = Some(got),
                }
            }
        }
    }
}

/// The light pass over functions no profile touches (`cfg::scan`: no instruction kept) finds
/// what the full decode finds for BOLT's entry points and jump-table bounds, function by
/// function: on real C (zstd, whose switches become absolute jump tables without PIE and
/// `lea`/`movslq`/`add` sequences with it) and on the C and C++ fixtures.
#[test]
fn light_scan_equals_the_full_decode() {
    let binaries = [
        tk::build_zstd(
            "report-zstd-v1",
            &["-O2", "-g0", "-fno-pie", "-no-pie", "-Wl,--emit-relocs"],
        ),
        tk::build_zstd(
            "decode-once-zstd-pie",
            &["-O2", "-g0", "-fpie", "-pie", "-Wl,--emit-relocs"],
        ),
        tk::build(
            "perf2bolt-p1",
            &["perf2bolt/p1.c"],
            &["-O2", "-fno-pie", "-no-pie", "-Wl,--emit-relocs"],
        ),
        tk::build_eh(tk::EH_FIXTURES[1]),
    ];
    let (mut with_tables, mut with_references, mut with_entries, mut tableless) = (0, 0, 0, 0);
    for bin in &binaries {
        let data = std::fs::read(bin).unwrap();
        let binary = pcmap_binary::Binary::parse(&data).unwrap();
        let image = BoltFunctions::discover(&binary).unwrap();
        for f in image.functions() {
            if f.kind != FunctionKind::Regular {
                continue;
            }
            let light = pcmap_perf2bolt::cfg::scan(&image, f);
            let (decoded, references) = pcmap_perf2bolt::cfg::decode(&image, f);
            // The scans keep the references that make secondary entry points, in order.
            let entries: Vec<u64> = references
                .iter()
                .copied()
                .filter(|&a| image.entry_point_at(a).is_some())
                .collect();
            with_references += usize::from(!references.is_empty());
            with_entries += usize::from(!entries.is_empty());
            let full = decoded.scan(&image, f, references);
            assert_eq!(light, full, "{}: function {}", bin.display(), f.name());
            assert_eq!(
                light.references,
                entries,
                "{}: function {}",
                bin.display(),
                f.name()
            );
            with_tables += usize::from(!light.table_starts.is_empty());
            tableless += usize::from(light.tableless_indirect_jump);
        }
    }
    assert!(
        with_tables >= 10 && with_references >= 100,
        "too few functions exercise the scan: {with_tables} with jump tables, \
         {with_references} with references ({with_entries} making secondary entry points, \
         {tableless} with a tableless indirect jump)"
    );
}

/// The passes over the whole binary hand back what they have read (`Binary::set_release`):
/// discovery the code of every function (stretch by stretch), the data references the
/// relocation sections they read, and the decoding pass stretches of code that together cover
/// every function it decoded; the profile is the same as without the callback.
#[test]
fn whole_binary_passes_release_what_they_read() {
    use std::sync::Mutex;
    let (data, text) = p1_with_profile();
    let base = data.as_ptr() as usize;
    let released: Mutex<Vec<(usize, usize)>> = Mutex::new(Vec::new());
    let release = |b: &[u8]| {
        let start = b.as_ptr() as usize - base;
        released.lock().unwrap().push((start, start + b.len()));
    };
    let mut binary = pcmap_binary::Binary::parse(&data).unwrap();
    binary.set_release(&release);
    let covered = |from: usize, to: usize| {
        released
            .lock()
            .unwrap()
            .iter()
            .any(|&(s, e)| s <= from && to <= e)
    };
    let offset = |b: &[u8]| b.as_ptr() as usize - base;

    let image = BoltFunctions::discover(&binary).unwrap();
    let mut read = 0;
    for f in image.functions() {
        // The padding checks read up to each function's max size.
        let len = f.size.max(f.max_size);
        let Some(bytes) = binary.code_bytes(f.address, len) else {
            continue;
        };
        let at = offset(bytes);
        assert!(
            covered(at, at + bytes.len()),
            "{}: code not released by discovery",
            f.name()
        );
        read += 1;
    }
    assert!(read > 0);

    released.lock().unwrap().clear();
    assert!(
        !image.data_references().is_empty(),
        "p1 has no data references into code"
    );
    let rela_rodata = binary
        .section_by_name(".rela.rodata")
        .expect(".rela.rodata");
    let at = offset(rela_rodata.raw);
    assert!(
        covered(at, at + rela_rodata.raw.len()),
        ".rela.rodata not released after the data references"
    );

    released.lock().unwrap().clear();
    let parsed = preagg::parse(text.as_bytes(), &|_| {}).unwrap();
    let agg = Aggregator::new(&image);
    let profile = agg.aggregate_traces(&parsed, &|_| {});
    let mut decoded = 0;
    for f in image.functions() {
        if f.kind != FunctionKind::Regular {
            continue;
        }
        let bytes = binary.code_bytes(f.address, f.size).unwrap();
        let at = offset(bytes);
        assert!(
            covered(at, at + bytes.len()),
            "{}: code not released",
            f.name()
        );
        decoded += 1;
    }
    assert!(decoded > 0);

    // The same records as an aggregator over a binary without the callback.
    let plain = pcmap_binary::Binary::parse(&data).unwrap();
    let plain_image = BoltFunctions::discover(&plain).unwrap();
    let want = Aggregator::new(&plain_image).aggregate_traces(&parsed, &|_| {});
    assert_eq!(profile.records, want.records);
}

/// A scan index kept from one run ([`Aggregator::scan_index`], through its file form) gives a
/// later run on the same binary the same fdata, YAML and statistics without the decoding pass:
/// that run decodes only the functions it builds CFGs of. An index made on another binary's
/// model is refused.
#[test]
fn a_kept_scan_index_replaces_the_decoding_pass() {
    use pcmap_perf2bolt::fdata;
    use pcmap_perf2bolt::scan_index::ScanIndex;
    let (data, text) = p1_with_profile();
    let binary = pcmap_binary::Binary::parse(&data).unwrap();
    let image = BoltFunctions::discover(&binary).unwrap();
    let parsed = preagg::parse(text.as_bytes(), &|_| {}).unwrap();
    let events = ["cycles".to_string()];
    let run = |index: Option<ScanIndex>, hashing: bool| {
        let mut agg = Aggregator::new(&image);
        if hashing {
            agg = agg.with_hashing();
        }
        if let Some(index) = index {
            assert!(
                agg.take_scan_index(index),
                "an index of this binary is taken"
            );
        }
        let profile = agg.aggregate_traces(&parsed, &|_| {});
        let profiled = profile.profiled_functions(image.functions().len());
        let stats = agg.function_stats(&profiled);
        let mut fdata_out = Vec::new();
        fdata::write_branches(&mut fdata_out, &image, &profile, false).unwrap();
        let mut yaml_out = Vec::new();
        yaml::write_branch_profile(
            &mut yaml_out,
            &agg,
            &profile,
            "p1",
            &events,
            Default::default(),
        )
        .unwrap();
        let index = agg
            .scan_index()
            .expect("aggregation makes the scan")
            .clone();
        (
            fdata_out,
            yaml_out,
            stats,
            agg.decoded_functions(),
            agg.built_cfgs(),
            index,
        )
    };
    let regular = image
        .functions()
        .iter()
        .filter(|f| f.kind == FunctionKind::Regular)
        .count();
    for hashing in [false, true] {
        let (fdata_a, yaml_a, stats_a, decodes_a, cfgs_a, index) = run(None, hashing);
        assert!(
            !index.table_starts.is_empty() && !index.tableless_indirect_jumps.is_empty(),
            "the fixture has jump tables and table-less indirect jumps: {index:?}"
        );
        let kept = ScanIndex::decode(&index.encode()).unwrap();
        assert_eq!(kept, index);
        let (fdata_b, yaml_b, stats_b, decodes_b, cfgs_b, index_b) = run(Some(kept), hashing);
        assert_eq!(index_b, index);
        assert_eq!(fdata_b, fdata_a, "hashing {hashing}: fdata differs");
        assert_eq!(yaml_b, yaml_a, "hashing {hashing}: YAML differs");
        assert_eq!(stats_b, stats_a, "hashing {hashing}");
        assert_eq!(cfgs_b, cfgs_a, "hashing {hashing}");
        // With the pass every function is decoded, and a hashing aggregator decodes its CFGs'
        // functions again; without it, only the CFGs' functions are decoded, once.
        let pass = if hashing { regular + cfgs_a } else { regular };
        assert_eq!(decodes_a, pass, "hashing {hashing}: {cfgs_a} CFGs built");
        assert_eq!(decodes_b, cfgs_b, "hashing {hashing}: {cfgs_b} CFGs built");
    }
    // The same binary parsed again fits; another build of the program does not.
    let (fdata_a, .., index) = run(None, false);
    assert!(
        !index.data_references.is_empty(),
        "the fixture's data refers to its code (jump tables kept by --emit-relocs)"
    );
    assert_eq!(index.data_references, image.data_references());
    let again = pcmap_binary::Binary::parse(&data).unwrap();
    let again_image = BoltFunctions::discover(&again).unwrap();
    // The data references the index keeps replace reading the relocations again.
    again_image.take_data_references(pcmap_binary::bolt::DataReferences::known(
        &again,
        ScanIndex::decode(&index.encode()).unwrap().data_references,
    ));
    let mut agg = Aggregator::new(&again_image);
    assert!(agg.take_scan_index(index.clone()), "the same model fits");
    let profile = agg.aggregate_traces(&parsed, &|_| {});
    let mut fdata_b = Vec::new();
    fdata::write_branches(&mut fdata_b, &again_image, &profile, false).unwrap();
    assert_eq!(fdata_b, fdata_a, "fdata from the kept data references");
    let o0 = tk::build(
        "perf2bolt-p1-o0",
        &["perf2bolt/p1.c"],
        &["-O0", "-fno-pie", "-no-pie", "-Wl,--emit-relocs"],
    );
    let o0 = std::fs::read(&o0).unwrap();
    let o0 = pcmap_binary::Binary::parse(&o0).unwrap();
    let o0_image = BoltFunctions::discover(&o0).unwrap();
    let mut agg = Aggregator::new(&o0_image);
    assert!(
        !agg.take_scan_index(index),
        "an index of another build is refused"
    );
}
