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
/// One block of llvm-readobj's `--bb-addr-map`.
struct ReadobjBlock {
    function: String,
    id: u64,
    start: u64,
    end: u64,
    /// `HasReturn` or `HasTailCall`: control leaves the function from this block.
    leaves: bool,
}

fn readobj_blocks(bin: &Path) -> Vec<ReadobjBlock> {
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
                blocks.push(ReadobjBlock {
                    function: f["Name"].as_str().unwrap().to_string(),
                    id: e["ID"].as_u64().unwrap(),
                    start: s,
                    end: s + e["Size"].as_u64().unwrap(),
                    leaves: e["HasReturn"] == true || e["HasTailCall"] == true,
                });
            }
        }
    }
    blocks
}

/// pcmap's frames equal llvm-symbolizer's (`--output-style=JSON` `Symbol` entries); pcmap says
/// null where llvm-symbolizer says "".
fn assert_frames_equal(ctx: &str, ours: &[Value], theirs: &[Value]) {
    assert_eq!(ours.len(), theirs.len(), "{ctx}\n{theirs:?}");
    let s = |v: &Value| v.as_str().unwrap_or("").to_string();
    for (o, t) in ours.iter().zip(theirs) {
        assert_eq!(s(&o["function"]), s(&t["FunctionName"]), "{ctx}");
        assert_eq!(s(&o["file"]), s(&t["FileName"]), "{ctx}");
        assert_eq!(o["line"], t["Line"], "{ctx}");
        assert_eq!(o["column"], t["Column"], "{ctx}");
    }
}

/// pcmap's block layer for `addr` equals llvm-readobj's block containing it (or both have
/// none); true when there is a block.
fn assert_block_equal(ctx: &str, ours: &Value, blocks: &[ReadobjBlock], addr: u64) -> bool {
    let theirs = blocks.iter().find(|b| addr >= b.start && addr < b.end);
    match (theirs, ours.is_null()) {
        (None, true) => false,
        (Some(t), false) => {
            assert_eq!(ours["function"], t.function.as_str(), "{ctx}");
            assert_eq!(ours["id"], t.id, "{ctx}");
            assert_eq!(
                (ours["start"].as_u64(), ours["end"].as_u64()),
                (Some(t.start), Some(t.end)),
                "{ctx}"
            );
            true
        }
        (t, _) => panic!(
            "{ctx}: llvm-readobj's block {:?}",
            t.map(|t| (&t.function, t.id, t.start, t.end))
        ),
    }
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
            assert_frames_equal(&ctx, e["frames"].as_array().unwrap(), tf);
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
            with_block += usize::from(assert_block_equal(&ctx, &e["block"], &blocks, addr));
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

/// `--input-binary`: an address of the BOLTed binary leads, through BAT, to the input binary's
/// block (llvm-readobj 22 on the input binary) and inline frames (llvm-symbolizer 22 --inlining on
/// the input binary) at the translated input address; the BAT layer equals `pcmap bat translate`.
#[test]
fn bolted_addresses_lead_to_the_input_binarys_blocks_and_frames() {
    let input = build(
        "explain-bolt-input",
        &["inline/inline.c"],
        &[
            "-O2",
            "-g",
            "-gdwarf-5",
            "-fbasic-block-address-map",
            "-fno-pie",
            "-no-pie",
            "-Wl,--emit-relocs",
        ],
    );
    let bolted = bolt_with_instrumentation(
        &input,
        &[],
        &[
            "--enable-bat",
            "-reorder-blocks=ext-tsp",
            "-split-functions",
            "-split-all-cold",
        ],
    );
    let (i, b) = (input.to_str().unwrap(), bolted.to_str().unwrap());
    let addrs = addresses(&bolted, 2);
    let mut args = vec!["explain", b, "--input-binary", i, "--json"];
    args.extend(addrs.iter().map(String::as_str));
    let ours: Value = serde_json::from_str(&pcmap(&args)).expect("explain JSON");
    let ours = ours.as_array().unwrap();
    assert_eq!(ours.len(), addrs.len());
    let mut args = vec!["bat", "translate", b];
    args.extend(addrs.iter().map(String::as_str));
    let translated_lines = pcmap(&args);
    let input_addrs: Vec<String> = ours
        .iter()
        .filter_map(|e| e["code_address"].as_u64())
        .map(|a| format!("{a:#x}"))
        .collect();
    let frames = symbolizer(i, "--inlining", &input_addrs);
    let blocks = readobj_blocks(&input);
    let (mut through_bat, mut cold, mut with_block, mut k) = (0, 0, 0, 0);
    for (e, line) in ours.iter().zip(translated_lines.lines()) {
        let ctx = format!("{e}");
        let o = &e["bolt"];
        // BAT layer: pcmap bat translate (checked against perf2bolt 22 in tests/bat.rs).
        assert_eq!(
            format!(
                "{:#x} -> {} + {:#x}",
                e["address"].as_u64().unwrap(),
                o["function"].as_str().unwrap(),
                o["offset"].as_u64().unwrap()
            ),
            line
        );
        through_bat += (o["translated"] == true) as usize;
        cold += (o["fragment"] == "cold") as usize;
        let Some(code) = e["code_address"].as_u64() else {
            assert!(e["block"].is_null() && e["frames"].as_array().unwrap().is_empty());
            continue;
        };
        assert_eq!(o["input_address"].as_u64(), Some(code), "{ctx}");
        // Frames: llvm-symbolizer on the input binary at the input address.
        let tf = frames[k]["Symbol"].as_array().unwrap();
        k += 1;
        assert_frames_equal(&ctx, e["frames"].as_array().unwrap(), tf);
        // Block: llvm-readobj's map of the input binary.
        with_block += usize::from(assert_block_equal(&ctx, &e["block"], &blocks, code));
    }
    assert!(
        through_bat > 100,
        "only {through_bat} addresses through BAT"
    );
    assert!(with_block > 100, "only {with_block} addresses with a block");
    eprintln!(
        "BOLTed inline.c: {} addresses, {through_bat} through BAT ({cold} in cold fragments), \
         {k} input addresses with frames equal to llvm-symbolizer, {with_block} blocks equal to \
         llvm-readobj",
        addrs.len()
    );
}

/// Addresses from standard input, one line at a time through a pipe: each answer comes back
/// before the next address is written, and equals the answer for the same address given as an
/// argument.
#[test]
fn standard_input_is_answered_line_by_line() {
    use std::io::{BufRead, BufReader, Write};
    let bin = build_with(
        "clang",
        "explain-clang",
        &["inline/inline.c"],
        &["-O2", "-g", "-gdwarf-5", "-fbasic-block-address-map"],
    );
    let b = bin.to_str().unwrap();
    let addrs = addresses(&bin, 97);
    let err_path = tempfile::NamedTempFile::new().unwrap().into_temp_path();
    let mut child = Command::new(env!("CARGO_BIN_EXE_pcmap"))
        .args(["explain", b, "--json"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .expect("spawn pcmap explain");
    let stderr = || std::fs::read_to_string(&err_path).unwrap_or_default();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    for a in addrs.iter().take(10) {
        writeln!(stdin, "{a}").unwrap();
        stdin.flush().unwrap();
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let streamed: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
            panic!(
                "pcmap explain {b} --json (stdin): {e} on {line:?}; stderr:\n{}",
                stderr()
            )
        });
        let single: Value = serde_json::from_str(&pcmap(&["explain", b, "--json", a])).unwrap();
        assert_eq!(streamed, single[0], "{a}");
    }
    drop(stdin);
    let status = child.wait().unwrap();
    assert!(
        status.success(),
        "pcmap explain {b} --json (stdin) exited with {status}; stderr:\n{}",
        stderr()
    );
}

/// `-p`: each block's counts equal what the pre-aggregated profile says about the block's
/// address range in llvm-readobj 22's map (samples inside it, branches landing at its start).
#[test]
fn block_counts_follow_the_profile() {
    let bin = build_with(
        "clang",
        "explain-clang",
        &["inline/inline.c"],
        &["-O2", "-g", "-gdwarf-5", "-fbasic-block-address-map"],
    );
    let b = bin.to_str().unwrap();
    let blocks = readobj_blocks(&bin);
    assert!(blocks.len() > 20);
    // Samples at every 3rd address of every 2nd block; a branch from each block's last byte to
    // the start of the next block of the same function (a jump within the function).
    let mut pa = String::new();
    let mut expected_samples = vec![0u64; blocks.len()];
    let mut expected_in = vec![0u64; blocks.len()];
    for (n, blk) in blocks.iter().enumerate() {
        if n % 2 == 0 {
            for a in (blk.start..blk.end).step_by(3) {
                let c = 1 + (a % 5);
                pa.push_str(&format!("S {a:x} {c}\n"));
                expected_samples[n] += c;
            }
        }
        if let Some(next) = blocks.get(n + 1)
            // A branch out of a block that returns or tail-calls leaves the function, so it
            // does not enter the next block as a jump.
            && !blk.leaves
            && next.function == blk.function
            && next.start > blk.start
            && blk.end > blk.start
        {
            let c = 10 + n as u64;
            pa.push_str(&format!("B {:x} {:x} {c} 0\n", blk.end - 1, next.start));
            expected_in[n + 1] += c;
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("p.preagg");
    std::fs::write(&profile, pa).unwrap();
    let mut args = vec![
        "explain",
        b,
        "--json",
        "-p",
        profile.to_str().unwrap(),
        "--pa",
    ];
    let starts: Vec<String> = blocks
        .iter()
        .filter(|b| b.end > b.start)
        .map(|b| format!("{:#x}", b.start))
        .collect();
    args.extend(starts.iter().map(String::as_str));
    let ours: Value = serde_json::from_str(&pcmap(&args)).expect("explain JSON");
    let mut checked = 0;
    for e in ours.as_array().unwrap() {
        let a = e["address"].as_u64().unwrap();
        let n = blocks
            .iter()
            .position(|b| b.start == a && b.end > b.start)
            .unwrap();
        let c = &e["block"]["counts"];
        assert_eq!(c["samples"].as_u64(), Some(expected_samples[n]), "{e}");
        assert_eq!(c["branches_in"].as_u64(), Some(expected_in[n]), "{e}");
        checked += 1;
    }
    assert!(checked > 20);
}
