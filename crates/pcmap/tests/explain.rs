//! `pcmap explain` layer by layer against the oracles: the symbol and the inline frames against
//! llvm-symbolizer 22, the inline sites around an address against llvm-symbolizer's inline frames
//! (one site per inlined frame, innermost first; their parameter locations are the ones
//! `tests/inline.rs` checks against `perf probe`), the basic block against llvm-readobj 22's
//! `--bb-addr-map`, and the BOLT input location against `pcmap bat translate` (which
//! `tests/bat.rs` checks against perf2bolt 22).

use std::path::Path;
use std::process::Command;

use pcmap_testkit::{bolt_with_instrumentation, build, build_with, run_ok, tool};
use serde_json::Value;

fn pcmap(args: &[&str]) -> String {
    run_ok(Command::new(env!("CARGO_BIN_EXE_pcmap")).args(args))
}

/// Every `step`-th address inside the defined function symbols (llvm-nm).
fn addresses(bin: &Path, step: usize) -> Vec<String> {
    let out = run_ok(
        Command::new(tool("llvm-nm"))
            .args(["-S", "--defined-only"])
            .arg(bin),
    );
    let mut v: Vec<u64> = out
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 4 && matches!(f[2], "t" | "T")).then(|| {
                let a = u64::from_str_radix(f[0], 16).unwrap();
                a..a + u64::from_str_radix(f[1], 16).unwrap()
            })
        })
        .flat_map(|r| r.step_by(step))
        .collect();
    v.sort_unstable();
    v.dedup();
    v.iter().map(|a| format!("{a:#x}")).collect()
}

fn symbolizer(bin: &str, inline: &str, addrs: &[String]) -> Vec<Value> {
    let out = run_ok(
        Command::new(tool("llvm-symbolizer"))
            .arg(format!("--obj={bin}"))
            .args([inline, "--output-style=JSON"])
            .args(addrs),
    );
    serde_json::from_str::<Value>(&out)
        .expect("llvm-symbolizer JSON")
        .as_array()
        .unwrap()
        .clone()
}

/// Block of `ip` in llvm-readobj's map: (function name, block id, start, end).
fn readobj_blocks(bin: &Path) -> Vec<(String, u64, u64, u64)> {
    let out = run_ok(
        Command::new(tool("llvm-readobj"))
            .args(["--elf-output-style=JSON", "--bb-addr-map"])
            .arg(bin),
    );
    let text = out
        .replace(",\"BBAddrMap\":[]", "")
        .replace("],\"BBAddrMap\":[", ",");
    let v: Value = serde_json::from_str(&text).expect("readobj JSON");
    let mut blocks = Vec::new();
    for f in v[0]["BBAddrMap"].as_array().into_iter().flatten() {
        let f = &f["Function"];
        for r in f["BB Ranges"].as_array().unwrap() {
            let base = r["Base Address"].as_u64().unwrap();
            for e in r["BB Entries"].as_array().unwrap() {
                let s = base + e["Offset"].as_u64().unwrap();
                blocks.push((
                    f["Name"].as_str().unwrap().to_string(),
                    e["ID"].as_u64().unwrap(),
                    s,
                    s + e["Size"].as_u64().unwrap(),
                ));
            }
        }
    }
    blocks
}

#[test]
fn symbol_frames_sites_and_blocks_equal_the_oracles() {
    for (compiler, flags) in [
        (
            "clang",
            &["-O2", "-g", "-gdwarf-5", "-fbasic-block-address-map"][..],
        ),
        ("gcc", &["-O2", "-g", "-gdwarf-5"][..]),
    ] {
        let bin = build_with(
            compiler,
            &format!("explain-{compiler}"),
            &["inline/inline.c"],
            flags,
        );
        let b = bin.to_str().unwrap();
        let addrs = addresses(&bin, 3);
        assert!(addrs.len() >= 1000, "{compiler}: {} addresses", addrs.len());
        let mut args = vec!["explain", b, "--json"];
        args.extend(addrs.iter().map(String::as_str));
        let ours: Value = serde_json::from_str(&pcmap(&args)).expect("explain JSON");
        let ours = ours.as_array().unwrap();
        let single = symbolizer(b, "--no-inlines", &addrs);
        let inlined = symbolizer(b, "--inlining", &addrs);
        let blocks = readobj_blocks(&bin);
        // The sites with their parameter locations, as `pcmap inline sites` (checked against
        // `perf probe` in tests/inline.rs) reports them.
        let all_sites: Value =
            serde_json::from_str(&pcmap(&["inline", "sites", b, "--json"])).expect("sites JSON");
        let by_die: std::collections::HashMap<u64, &Value> = all_sites
            .as_array()
            .unwrap()
            .iter()
            .map(|s| (s["die"].as_u64().unwrap(), s))
            .collect();
        assert_eq!(blocks.is_empty(), compiler == "gcc");
        let (mut sites, mut with_block) = (0, 0);
        for (i, e) in ours.iter().enumerate() {
            let a = &addrs[i];
            let ctx = format!("{compiler} {a}: {e}");
            // Symbol: llvm-symbolizer's symbol-table name and start.
            let t = &single[i]["Symbol"][0];
            assert_eq!(e["symbol"]["name"], t["FunctionName"], "{ctx}\n{t}");
            assert_eq!(
                format!("{:#x}", e["symbol"]["address"].as_u64().unwrap()),
                t["StartAddress"].as_str().unwrap(),
                "{ctx}"
            );
            // Frames: llvm-symbolizer --inlining.
            let tf = inlined[i]["Symbol"].as_array().unwrap();
            let of = e["frames"].as_array().unwrap();
            assert_eq!(of.len(), tf.len(), "{ctx}\n{tf:?}");
            // pcmap says null where llvm-symbolizer says "".
            let s = |v: &Value| v.as_str().unwrap_or("").to_string();
            for (o, t) in of.iter().zip(tf) {
                assert_eq!(s(&o["function"]), s(&t["FunctionName"]), "{ctx}");
                assert_eq!(s(&o["file"]), s(&t["FileName"]), "{ctx}");
                assert_eq!(o["line"], t["Line"], "{ctx}");
                assert_eq!(o["column"], t["Column"], "{ctx}");
            }
            // Sites: one per inlined frame, innermost first, named as the frame.
            let os = e["sites"].as_array().unwrap();
            assert_eq!(os.len(), tf.len() - 1, "{ctx}\n{tf:?}");
            for (s, t) in os.iter().zip(tf) {
                assert_eq!(s["function"], t["FunctionName"], "{ctx}");
                assert_eq!(Some(&s), by_die.get(&s["die"].as_u64().unwrap()), "{ctx}");
            }
            sites += os.len();
            // Block: llvm-readobj's map.
            let addr = e["address"].as_u64().unwrap();
            let theirs = blocks.iter().find(|b| addr >= b.2 && addr < b.3);
            match (theirs, e["block"].is_null()) {
                (None, true) => {}
                (Some(t), false) => {
                    let o = &e["block"];
                    assert_eq!(o["function"], t.0.as_str(), "{ctx}");
                    assert_eq!(o["id"], t.1, "{ctx}");
                    assert_eq!(
                        (o["start"].as_u64(), o["end"].as_u64()),
                        (Some(t.2), Some(t.3))
                    );
                    with_block += 1;
                }
                (t, _) => panic!("{ctx}: llvm-readobj's block {t:?}"),
            }
        }
        assert!(sites > 100, "{compiler}: only {sites} inline sites seen");
        eprintln!(
            "{compiler}: {} addresses: symbol and frames equal llvm-symbolizer, {sites} inline sites, {with_block} blocks equal llvm-readobj",
            addrs.len()
        );
        // The text layout names every layer.
        let text = pcmap(&["explain", b, &addrs[addrs.len() / 2]]);
        assert!(
            text.contains("  symbol  ") && text.contains("  frame   "),
            "{text}"
        );
        if compiler == "clang" {
            assert!(text.contains("  block   "), "{text}");
        }
    }
}

#[test]
fn bolt_layer_equals_bat_translate() {
    let binary = build(
        "bat-loops",
        &["bat/loops.c"],
        &["-O2", "-g0", "-fno-pie", "-no-pie", "-Wl,--emit-relocs"],
    );
    let bolted = bolt_with_instrumentation(
        &binary,
        &["300000", "18"],
        &[
            "--enable-bat",
            "-reorder-blocks=ext-tsp",
            "-reorder-functions=cdsort",
            "-split-functions",
            "-split-all-cold",
        ],
    );
    let b = bolted.to_str().unwrap();
    let addrs = addresses(&bolted, 1);
    let mut args = vec!["explain", b, "--json"];
    args.extend(addrs.iter().map(String::as_str));
    let ours: Value = serde_json::from_str(&pcmap(&args)).expect("explain JSON");
    let mut args = vec!["bat", "translate", b];
    args.extend(addrs.iter().map(String::as_str));
    let theirs = pcmap(&args);
    let mut translated = 0;
    for (e, line) in ours.as_array().unwrap().iter().zip(theirs.lines()) {
        let o = &e["bolt"];
        let ours_line = format!(
            "{:#x} -> {} + {:#x}",
            e["address"].as_u64().unwrap(),
            o["function"].as_str().unwrap(),
            o["offset"].as_u64().unwrap()
        );
        assert_eq!(ours_line, line);
        translated += (o["translated"] == true) as usize;
    }
    assert_eq!(ours.as_array().unwrap().len(), theirs.lines().count());
    assert!(
        translated > 100,
        "only {translated} addresses in BAT fragments"
    );
    eprintln!(
        "BOLTed loops: {} addresses, {translated} through BAT, equal to pcmap bat translate",
        addrs.len()
    );
}
