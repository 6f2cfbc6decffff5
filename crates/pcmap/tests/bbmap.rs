//! `pcmap bbmap` against the oracles: `dump --json` equals llvm-readobj's JSON, files llvm-readobj
//! rejects are rejected, every `<BBn>` label of `llvm-objdump --symbolize-operands` maps back to
//! block n with `lookup`, cpu-clock samples land in the blocks containing them (checked against
//! llvm-readobj's map), and edges from a pre-aggregated file match a hand-computed expectation.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use pcmap_testkit::{build, fixtures_dir, run, run_ok, scratch_dir, tool};
use serde_json::Value;

fn pcmap() -> Command {
    Command::new(env!("CARGO_BIN_EXE_pcmap"))
}

fn src(name: &str) -> String {
    format!("bbmap/{name}")
}

/// llvm-readobj's map with the per-section `"BBAddrMap"` keys merged, or `Err` if it refuses.
fn readobj_maps(path: &Path) -> Result<Value, String> {
    let out = run(Command::new(tool("llvm-readobj"))
        .args(["--elf-output-style=JSON", "--bb-addr-map"])
        .arg(path));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if stderr.contains("unable to") {
        return Err(stderr);
    }
    let text = String::from_utf8_lossy(&out.stdout)
        .replace(",\"BBAddrMap\":[]", "")
        .replace("],\"BBAddrMap\":[", ",");
    let v: Value = serde_json::from_str(&text).expect("readobj JSON");
    Ok(v[0]
        .get("BBAddrMap")
        .cloned()
        .unwrap_or(Value::Array(vec![])))
}

fn fixtures() -> Vec<PathBuf> {
    let fx = fixtures_dir().join("src/bbmap");
    let clusters = format!(
        "-fbasic-block-sections=list={}",
        fx.join("clusters.txt").display()
    );
    let bb = ["-O2", "-fbasic-block-address-map"];
    let with =
        |extra: &[&str]| -> Vec<String> { bb.iter().chain(extra).map(|s| s.to_string()).collect() };
    let mk = |name: &str, file: &str, extra: &[&str]| {
        let f = with(extra);
        let f: Vec<&str> = f.iter().map(String::as_str).collect();
        build(name, &[&src(file)], &f)
    };
    vec![
        mk("bbc-basic.exe", "basic.c", &[]),
        mk("bbc-basic.o", "basic.c", &["-c"]),
        mk("bbc-eh.exe", "eh.cc", &[]),
        mk("bbc-jumptable.exe", "jumptable.c", &[]),
        mk("bbc-clusters.exe", "hotcold.c", &[&clusters]),
        mk(
            "bbc-hash-pgo.o",
            "basic.c",
            &[
                "-c",
                "-mllvm",
                "-emit-bb-hash",
                "-mllvm",
                "-pgo-analysis-map=all",
            ],
        ),
        mk(
            "bbc-crel.o",
            "basic.c",
            &["-c", "-Wa,--crel,--allow-experimental-crel"],
        ),
        mk(
            "bbc-aarch64.o",
            "basic.c",
            &["-c", "--target=aarch64-linux-gnu"],
        ),
        build(
            "bbc-zero.exe",
            &[&src("zero.c")],
            &["-O0", "-fbasic-block-address-map"],
        ),
        build(
            "bbc-asm.exe",
            &[&src("asm.s"), &src("asm_main.c")],
            &["-O0", "-fno-pie", "-no-pie", "-fbasic-block-address-map"],
        ),
    ]
}

#[test]
fn dump_json_equals_readobj() {
    for f in fixtures() {
        let out = run_ok(pcmap().args(["bbmap", "dump", "--json"]).arg(&f));
        let ours: Value = serde_json::from_str(&out).expect("dump --json is JSON");
        let theirs = readobj_maps(&f).expect("readobj accepts the fixture");
        assert_eq!(ours[0]["BBAddrMap"], theirs, "{}", f.display());
        // The text dump works on the same files.
        run_ok(pcmap().args(["bbmap", "dump"]).arg(&f));
    }
}

#[test]
fn files_readobj_rejects_are_rejected() {
    let dir = fixtures_dir().join("src/bbmap/yaml");
    let out = scratch_dir("bbc-reject");
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let stem = p.file_stem().unwrap().to_string_lossy().into_owned();
        if !stem.starts_with("bad-") {
            continue;
        }
        let elf = out.join(format!("{stem}.elf"));
        run_ok(Command::new(tool("yaml2obj")).arg(&p).arg("-o").arg(&elf));
        assert!(readobj_maps(&elf).is_err(), "{stem}: readobj accepts it");
        for args in [&["dump", "--json"][..], &["dump"][..], &["stats"][..]] {
            let o = run(pcmap().arg("bbmap").args(args).arg(&elf));
            assert_eq!(o.status.code(), Some(1), "{stem} {args:?} must fail");
            assert!(o.stdout.is_empty(), "{stem}: no partial output");
            assert!(
                String::from_utf8_lossy(&o.stderr).contains("error"),
                "{stem}"
            );
        }
        n += 1;
    }
    assert!(n >= 15);
}

/// (symbol, BB id, address) for every `<BBn>` label llvm-objdump prints.
fn objdump_labels(bin: &Path) -> Vec<(String, u32, u64)> {
    let text = run_ok(
        Command::new(tool("llvm-objdump"))
            .args(["-d", "--symbolize-operands", "--no-show-raw-insn"])
            .arg(bin),
    );
    let mut labels = Vec::new();
    let mut symbol = String::new();
    let mut pending: Vec<u32> = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_suffix(">:").filter(|_| !line.starts_with('<'))
            && let Some((_, name)) = rest.split_once(" <")
        {
            symbol = name.to_string();
            pending.clear();
            continue;
        }
        if let Some(rest) = line.strip_prefix("<BB") {
            let id: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
            pending.push(id.parse().unwrap());
            continue;
        }
        let t = line.trim_start();
        if let Some((addr, _)) = t.split_once(':')
            && let Ok(a) = u64::from_str_radix(addr, 16)
        {
            for id in pending.drain(..) {
                labels.push((symbol.clone(), id, a));
            }
        }
    }
    labels
}

#[test]
fn objdump_block_labels_map_back_to_their_blocks() {
    let mut checked = 0;
    for f in fixtures() {
        if f.to_string_lossy().ends_with(".o") {
            continue;
        }
        let labels = objdump_labels(&f);
        // Labels at the same address: the first is the branch-target answer, the last the
        // answer for an instruction address (zero-sized blocks come first).
        let mut at: BTreeMap<(String, u64), Vec<u32>> = BTreeMap::new();
        for (s, id, a) in &labels {
            at.entry((s.clone(), *a)).or_default().push(*id);
        }
        let addrs: Vec<String> = at.keys().map(|(_, a)| format!("{a:#x}")).collect();
        if addrs.is_empty() {
            continue;
        }
        let plain = run_ok(pcmap().args(["bbmap", "lookup"]).arg(&f).args(&addrs));
        let target = run_ok(
            pcmap()
                .args(["bbmap", "lookup", "--target"])
                .arg(&f)
                .args(&addrs),
        );
        for (((sym, a), ids), (p, t)) in at.iter().zip(plain.lines().zip(target.lines())) {
            for (line, want) in [(p, *ids.last().unwrap()), (t, ids[0])] {
                let parse = |line: &str| -> (String, u32) {
                    // "0x... -> NAME range R BBn [start, end) index i"
                    let rest = line.split_once(" -> ").unwrap().1;
                    let mut w = rest.split_whitespace();
                    let name = w.next().unwrap().to_string();
                    let id = w.nth(2).unwrap().trim_start_matches("BB").parse().unwrap();
                    (name, id)
                };
                assert!(line.starts_with(&format!("{a:#x} -> ")), "{line}");
                let (name, id) = parse(line);
                assert_eq!(
                    id,
                    want,
                    "{}: label <BB{want}> of {sym} at {a:#x}: {line}",
                    f.display()
                );
                // Split parts (`f.cold`, `f.__part.N`) belong to function `f`.
                assert!(
                    sym == &name || sym.starts_with(&format!("{name}.")),
                    "{sym} vs {line}"
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 80, "only {checked} labels checked");
}

/// Block of `ip` in llvm-readobj's map: (function name, block id, start).
fn oracle_block(map: &Value, ip: u64) -> Option<(String, u64, u64)> {
    for f in map.as_array().unwrap() {
        let f = &f["Function"];
        for r in f["BB Ranges"].as_array().unwrap() {
            let base = r["Base Address"].as_u64().unwrap();
            for e in r["BB Entries"].as_array().unwrap() {
                let s = base + e["Offset"].as_u64().unwrap();
                if ip >= s && ip < s + e["Size"].as_u64().unwrap() {
                    return Some((
                        f["Name"].as_str().unwrap().to_string(),
                        e["ID"].as_u64().unwrap(),
                        s,
                    ));
                }
            }
        }
    }
    None
}

#[test]
fn cpu_clock_samples_land_in_their_blocks() {
    let bin = build(
        "bbc-hotcold-nopie",
        &[&src("hotcold.c")],
        &["-O2", "-fno-pie", "-no-pie", "-fbasic-block-address-map"],
    );
    let dir = scratch_dir("bbc-perf");
    let data = dir.join("perf.data");
    run_ok(
        Command::new(tool("perf"))
            .args(["record", "-q", "-e", "cpu-clock", "-c", "50000", "-o"])
            .arg(&data)
            .arg(&bin)
            .arg("60000000"),
    );
    let ips = run_ok(
        Command::new(tool("perf"))
            .args(["script", "-F", "ip", "-i"])
            .arg(&data),
    );
    let ips: Vec<u64> = ips
        .lines()
        .filter_map(|l| u64::from_str_radix(l.trim(), 16).ok())
        .collect();
    assert!(ips.len() > 100, "too few samples: {}", ips.len());
    let pa = dir.join("samples.pa");
    let text: String = ips.iter().map(|ip| format!("S {ip:x} 1\n")).collect();
    std::fs::write(&pa, text).unwrap();
    let out = dir.join("profile.json");
    run_ok(
        pcmap()
            .args(["bbmap", "profile"])
            .arg(&bin)
            .arg("-p")
            .arg(&pa)
            .arg("--pa")
            .arg("-o")
            .arg(&out),
    );
    let prof: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();

    let map = readobj_maps(&bin).unwrap();
    let mut expected: BTreeMap<(String, u64, u64), u64> = BTreeMap::new();
    let mut unmapped = 0u64;
    for &ip in &ips {
        match oracle_block(&map, ip) {
            Some(k) => *expected.entry(k).or_default() += 1,
            None => unmapped += 1,
        }
    }
    let mut got: BTreeMap<(String, u64, u64), u64> = BTreeMap::new();
    for b in prof["blocks"].as_array().unwrap() {
        got.insert(
            (
                b["function"].as_str().unwrap().to_string(),
                b["id"].as_u64().unwrap(),
                b["start"].as_u64().unwrap(),
            ),
            b["samples"].as_u64().unwrap(),
        );
    }
    assert_eq!(got, expected);
    assert_eq!(prof["unmapped_samples"].as_u64().unwrap(), unmapped);
    assert_eq!(prof["total_samples"].as_u64().unwrap(), ips.len() as u64);
    assert!(
        got.keys().any(|(f, _, _)| f == "work"),
        "the hot function was sampled"
    );

    // The same samples read straight from perf.data (mappings matched by build-id).
    let out2 = dir.join("profile-perfdata.json");
    run_ok(
        pcmap()
            .args(["bbmap", "profile"])
            .arg(&bin)
            .arg("-p")
            .arg(&data)
            .arg("-o")
            .arg(&out2),
    );
    let prof2: Value = serde_json::from_slice(&std::fs::read(&out2).unwrap()).unwrap();
    let mut got2: BTreeMap<(String, u64, u64), u64> = BTreeMap::new();
    for b in prof2["blocks"].as_array().unwrap() {
        got2.insert(
            (
                b["function"].as_str().unwrap().to_string(),
                b["id"].as_u64().unwrap(),
                b["start"].as_u64().unwrap(),
            ),
            b["samples"].as_u64().unwrap(),
        );
    }
    assert_eq!(got2, expected, "perf.data path");
    assert_eq!(prof2["total_samples"].as_u64().unwrap(), ips.len() as u64);
}

#[test]
fn preaggregated_edges_match_hand_computed_counts() {
    let bin = build(
        "bbc-asm.exe",
        &[&src("asm.s"), &src("asm_main.c")],
        &["-O0", "-fno-pie", "-no-pie", "-fbasic-block-address-map"],
    );
    // Addresses of asmfn (A) and main (M) from the symbol table.
    let nm = run_ok(Command::new(tool("llvm-nm")).arg(&bin));
    let sym = |name: &str| {
        nm.lines()
            .find(|l| l.ends_with(&format!(" {name}")))
            .map(|l| u64::from_str_radix(l.split_whitespace().next().unwrap(), 16).unwrap())
            .unwrap()
    };
    let (a, m) = (sym("asmfn"), sym("main"));
    // The call in main: its address and its return address, from the disassembly.
    let dis = run_ok(
        Command::new(tool("llvm-objdump"))
            .args(["-d", "--no-show-raw-insn", "--disassemble-symbols=main"])
            .arg(&bin),
    );
    let insns: Vec<u64> = dis
        .lines()
        .filter_map(|l| {
            l.trim()
                .split_once(':')
                .and_then(|(x, _)| u64::from_str_radix(x, 16).ok())
        })
        .collect();
    let call_line = dis.lines().position(|l| l.contains("call")).unwrap();
    let call_at = dis
        .lines()
        .nth(call_line)
        .unwrap()
        .trim()
        .split_once(':')
        .unwrap()
        .0;
    let call_at = u64::from_str_radix(call_at, 16).unwrap();
    let ret_to = *insns.iter().find(|&&x| x > call_at).unwrap();
    // asm.s layout: BB0 [A, A+4) (testl; je), BB1 zero-sized at A+4, BB2 [A+4, A+10) (movl; ret).
    let pa = format!(
        "S {s1:x} 3\nS {pad:x} 2\nB {je:x} {b2:x} 10 1\nT {je:x} {b2:x} {ret:x} 4\nF {b2:x} {ret:x} 7\n\
         B {call_at:x} {a:x} 6 0\nB {ret:x} {ret_to:x} 6 0\nB X:1234 {a:x} 2 0\nF {a:x} {m:x} 1\n",
        s1 = a + 1,
        pad = a + 0xb,
        je = a + 2,
        b2 = a + 4,
        ret = a + 9,
    );
    let dir = scratch_dir("bbc-preagg");
    std::fs::write(dir.join("p.pa"), pa).unwrap();
    let prof: Value = serde_json::from_str(&run_ok(
        pcmap()
            .args(["bbmap", "profile"])
            .arg(&bin)
            .arg("-p")
            .arg(dir.join("p.pa"))
            .arg("--pa"),
    ))
    .unwrap();
    let key = |b: &Value| format!("{}:BB{}", b["function"].as_str().unwrap(), b["id"]);
    let mut branches = BTreeMap::new();
    for e in prof["branch_edges"].as_array().unwrap() {
        branches.insert(
            (
                key(&e["from"]),
                key(&e["to"]),
                e["kind"].as_str().unwrap().to_string(),
            ),
            (
                e["count"].as_u64().unwrap(),
                e["mispredicts"].as_u64().unwrap(),
            ),
        );
    }
    let s = |x: &str| x.to_string();
    let expected_branches = BTreeMap::from([
        // je to .Lb2 lands on the zero-sized BB1 at the same address (Propeller's target rule).
        ((s("asmfn:BB0"), s("asmfn:BB1"), s("branch")), (14, 1)),
        ((s("main:BB0"), s("asmfn:BB0"), s("call")), (6, 0)),
        ((s("asmfn:BB2"), s("main:BB0"), s("return")), (6, 0)),
    ]);
    assert_eq!(branches, expected_branches);
    let mut falls = BTreeMap::new();
    for e in prof["fallthrough_edges"].as_array().unwrap() {
        falls.insert(
            (key(&e["from"]), key(&e["to"])),
            e["count"].as_u64().unwrap(),
        );
    }
    assert_eq!(
        falls,
        BTreeMap::from([((s("asmfn:BB1"), s("asmfn:BB2")), 11)])
    );
    let blocks: Vec<(String, u64)> = prof["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (key(b), b["samples"].as_u64().unwrap()))
        .collect();
    assert_eq!(blocks, vec![(s("asmfn:BB0"), 3)]);
    for (field, want) in [
        ("total_samples", 5),
        ("unmapped_samples", 2),
        ("total_branches", 28),
        ("unmapped_branches", 2),
        ("total_fallthroughs", 12),
        ("invalid_fallthroughs", 1),
        ("unmapped_fallthroughs", 0),
    ] {
        assert_eq!(prof[field].as_u64().unwrap(), want, "{field}");
    }
}

#[test]
fn stats_and_bad_input() {
    let exe = &fixtures()[0];
    let v: Value =
        serde_json::from_str(&run_ok(pcmap().args(["bbmap", "stats", "--json"]).arg(exe))).unwrap();
    let map = readobj_maps(exe).unwrap();
    let blocks: usize = map
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|f| f["Function"]["BB Ranges"].as_array().unwrap().iter())
        .map(|r| r["BB Entries"].as_array().unwrap().len())
        .sum();
    assert_eq!(v["blocks"].as_u64().unwrap() as usize, blocks);
    assert_eq!(
        v["functions"].as_u64().unwrap() as usize,
        map.as_array().unwrap().len()
    );
    // The section size from llvm-readelf.
    let sections = run_ok(
        Command::new(tool("llvm-readelf"))
            .args(["-S", "-W"])
            .arg(exe),
    );
    let line = sections
        .lines()
        .find(|l| l.contains(".llvm_bb_addr_map"))
        .unwrap();
    let size_field = line
        .split_whitespace()
        .skip_while(|w| !w.contains(".llvm_bb_addr_map"))
        .nth(4)
        .unwrap();
    assert_eq!(
        v["map_size"].as_u64().unwrap(),
        u64::from_str_radix(size_field, 16).unwrap()
    );
    // Bad input: not ELF, missing file, bad address.
    let dir = scratch_dir("bbc-bad");
    std::fs::write(dir.join("junk"), b"not an elf").unwrap();
    for args in [
        vec!["dump".to_string(), dir.join("junk").display().to_string()],
        vec![
            "dump".to_string(),
            dir.join("missing").display().to_string(),
        ],
        vec![
            "lookup".to_string(),
            exe.display().to_string(),
            "zzz".to_string(),
        ],
    ] {
        let o = run(pcmap().arg("bbmap").args(&args));
        assert_eq!(o.status.code(), Some(1), "{args:?}");
    }
    // A failed profile leaves no output file.
    let out = dir.join("out.json");
    let o = run(pcmap()
        .args(["bbmap", "profile"])
        .arg(exe)
        .arg("-p")
        .arg(dir.join("junk"))
        .arg("--pa")
        .arg("-o")
        .arg(&out));
    assert_eq!(o.status.code(), Some(1));
    assert!(!out.exists());
}

/// The `.bb_info` layout of the proposal, written with our encoder from llvm-readobj's view of a
/// real map and added to the binary with llvm-objcopy, reads back (with `--legacy`) as the same
/// blocks at the same addresses; without `--legacy` the section is ignored.
#[test]
fn bb_info_proposal_section_reads_back_with_legacy() {
    use pcmap_bbmap::encode::{EncodeOptions, encode_section};
    use pcmap_bbmap::model::{BbEntry, BbRange, BlockMetadata, Features, FunctionMap, Layout};
    let exe = &fixtures()[0];
    let map = readobj_maps(exe).unwrap();
    let mut functions = Vec::new();
    for f in map.as_array().unwrap() {
        let r = &f["Function"]["BB Ranges"][0];
        let entries: Vec<BbEntry> = r["BB Entries"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let flag = |k: &str, bit: u32| if e[k].as_bool().unwrap() { bit } else { 0 };
                BbEntry {
                    id: i as u32, // the proposal numbers blocks by position
                    offset: e["Offset"].as_u64().unwrap() as u32,
                    size: e["Size"].as_u64().unwrap() as u32,
                    metadata: BlockMetadata(
                        flag("HasReturn", 1)
                            | flag("HasTailCall", 2)
                            | flag("IsEHPad", 4)
                            | flag("CanFallThrough", 8)
                            | flag("HasIndirectBranch", 16),
                    ),
                    ..Default::default()
                }
            })
            .collect();
        functions.push(FunctionMap {
            layout: Layout::BbInfoProposal,
            features: Features(0),
            ranges: vec![BbRange {
                base_address: r["Base Address"].as_u64().unwrap(),
                num_blocks: entries.len() as u32,
                entries,
            }],
            pgo: None,
        });
    }
    let (bytes, _) = encode_section(&functions, EncodeOptions::ELF64LE).unwrap();
    let dir = scratch_dir("bbc-bbinfo");
    std::fs::write(dir.join("bb_info.bin"), bytes).unwrap();
    let out = dir.join("with-bbinfo.exe");
    run_ok(
        Command::new(tool("llvm-objcopy"))
            .arg("--remove-section=.llvm_bb_addr_map")
            .arg(format!(
                "--add-section=.bb_info={}",
                dir.join("bb_info.bin").display()
            ))
            .arg(exe)
            .arg(&out),
    );
    let plain: Value =
        serde_json::from_str(&run_ok(pcmap().args(["bbmap", "dump", "--json"]).arg(&out))).unwrap();
    assert_eq!(plain[0]["BBAddrMap"], Value::Array(vec![]));
    let legacy: Value = serde_json::from_str(&run_ok(
        pcmap()
            .args(["bbmap", "dump", "--json", "--legacy"])
            .arg(&out),
    ))
    .unwrap();
    let strip_ids = |v: &Value| -> Vec<(String, u64, u64, u64)> {
        v.as_array()
            .unwrap()
            .iter()
            .flat_map(|f| {
                let name = f["Function"]["Name"].as_str().unwrap().to_string();
                let base = f["Function"]["BB Ranges"][0]["Base Address"]
                    .as_u64()
                    .unwrap();
                f["Function"]["BB Ranges"][0]["BB Entries"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(move |e| {
                        (
                            name.clone(),
                            base,
                            e["Offset"].as_u64().unwrap(),
                            e["Size"].as_u64().unwrap(),
                        )
                    })
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    assert_eq!(strip_ids(&legacy[0]["BBAddrMap"]), strip_ids(&map));
    // Lookups work on the legacy map too.
    let a = map[0]["Function"]["At"].as_u64().unwrap();
    let o = run_ok(
        pcmap()
            .args(["bbmap", "lookup", "--legacy"])
            .arg(&out)
            .arg(format!("{a:#x}")),
    );
    assert!(o.contains(" BB0 "), "{o}");
}
