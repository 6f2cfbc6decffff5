//! The CFGs built here against BOLT's own (`llvm-bolt --print-cfg --strict`): same simple
//! functions, same block offsets, same successors in the same order, and (C++ exceptions) the
//! same landing pads of each block.

use std::collections::BTreeMap;
use std::process::Command;

use pcmap_binary::bolt::BoltFunctions;
use pcmap_perf2bolt::aggregate::Aggregator;
use pcmap_testkit as tk;

const FLAGS: &[&str] = &["-O2", "-fno-pie", "-no-pie", "-Wl,--emit-relocs"];

/// BOLT's view of one function: simple flag and blocks (instruction count, successor indices).
/// (`--print-cfg` prints re-encoded offsets, so blocks are compared by instruction counts.)
#[derive(Debug, Default, PartialEq)]
struct BoltFunction {
    simple: bool,
    blocks: Vec<(u64, Vec<usize>)>,
    /// Per block, its landing pads (the throw edges), when any block has one.
    landing_pads: Vec<Vec<usize>>,
}

fn bolt_cfgs(bin: &std::path::Path) -> BTreeMap<u64, (String, BoltFunction)> {
    // One scratch directory per call: the tests run in parallel and a scratch directory is
    // emptied when it is handed out.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let out_bin = tk::scratch_dir(&format!("cfg-oracle-{n}")).join("out.bolt");
    let text = tk::run_ok(
        Command::new(tk::tool("llvm-bolt"))
            .arg(bin)
            .arg("-o")
            .arg(&out_bin)
            .args(["--print-cfg", "--strict", "--lite=0"]),
    );
    let mut funcs = BTreeMap::new();
    let mut name = String::new();
    let mut addr = 0u64;
    let mut cur = BoltFunction::default();
    let mut labels: BTreeMap<String, u64> = BTreeMap::new();
    let mut pending: Vec<(String, Vec<String>)> = Vec::new();
    let mut pads: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut cur_label: Option<String> = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("Binary Function \"") {
            name = rest.split('"').next().unwrap_or_default().to_string();
            cur = BoltFunction::default();
            labels.clear();
            pending.clear();
            pads.clear();
            cur_label = None;
        } else if let Some(v) = line.trim().strip_prefix("Address     : 0x") {
            addr = u64::from_str_radix(v, 16).unwrap();
        } else if let Some(v) = line.trim().strip_prefix("IsSimple    : ") {
            cur.simple = v == "1";
        } else if line.starts_with('.') && line.contains(" instructions, align") {
            let label = line.split_whitespace().next().unwrap().to_string();
            pending.push((label.clone(), Vec::new()));
            cur_label = Some(label);
        } else if let Some(l) = &cur_label
            && line.starts_with("    ")
            && line.as_bytes().get(12) == Some(&b':')
            && !line.contains("!CFI")
        {
            *labels.entry(l.clone()).or_default() += 1;
        } else if let Some(s) = line.trim().strip_prefix("Successors: ") {
            let succ: Vec<String> = s
                .split(", ")
                .map(|x| x.split_whitespace().next().unwrap().to_string())
                .collect();
            pending.last_mut().unwrap().1 = succ;
        } else if let Some(s) = line.trim().strip_prefix("Landing Pads: ") {
            let label = pending.last().unwrap().0.clone();
            pads.insert(label, s.split(", ").map(str::to_string).collect());
        } else if line.starts_with("End of Function") {
            let index: BTreeMap<&str, usize> = pending
                .iter()
                .enumerate()
                .map(|(i, (l, _))| (l.as_str(), i))
                .collect();
            for (l, succ) in &pending {
                let n = labels.get(l).copied().unwrap_or(0);
                cur.blocks
                    .push((n, succ.iter().map(|s| index[s.as_str()]).collect()));
            }
            if !pads.is_empty() {
                cur.landing_pads = pending
                    .iter()
                    .map(|(l, _)| {
                        pads.get(l).map_or_else(Vec::new, |p| {
                            p.iter().map(|x| index[x.as_str()]).collect()
                        })
                    })
                    .collect();
            }
            funcs.insert(addr, (name.clone(), std::mem::take(&mut cur)));
        }
    }
    funcs
}

/// Compare every function BOLT prints; returns how many of them have landing pads.
fn compare(bin: &std::path::Path) -> usize {
    let bolt = bolt_cfgs(bin);
    let data = std::fs::read(bin).unwrap();
    let binary = pcmap_binary::Binary::parse(&data).unwrap();
    let image = BoltFunctions::discover(&binary).unwrap();
    let agg = Aggregator::new(&image);
    let mut checked = 0;
    let mut with_pads = 0;
    for (i, f) in image.functions().iter().enumerate() {
        let Some((bname, b)) = bolt.get(&f.address) else {
            continue;
        };
        let c = agg.cfg(i);
        let ours = BoltFunction {
            simple: c.simple,
            blocks: if c.simple {
                c.blocks
                    .iter()
                    .map(|bb| {
                        let n = u64::from(bb.end_insn - bb.first_insn);
                        (n, bb.succs.iter().map(|&s| s as usize).collect())
                    })
                    .collect()
            } else {
                Vec::new()
            },
            landing_pads: if c.simple && c.blocks.iter().any(|b| !c.landing_pads_of(b).is_empty()) {
                c.blocks
                    .iter()
                    .map(|b| c.landing_pads_of(b).iter().map(|&p| p as usize).collect())
                    .collect()
            } else {
                Vec::new()
            },
        };
        // llvm-bolt moves each conditional tail call into an extra block at the end of the
        // layout (listed first among the branch's successors); perf2bolt aggregates before that.
        let mut blocks = if b.simple {
            b.blocks.clone()
        } else {
            Vec::new()
        };
        let real = c.blocks.len().min(blocks.len());
        for (bi, blk) in blocks.iter_mut().enumerate().take(real) {
            let ctc = c
                .last_insn(bi)
                .is_some_and(|i| i.tail_call() && i.flow() == pcmap_perf2bolt::cfg::Flow::CondJump);
            if ctc {
                blk.1.retain(|&s| s < real);
            }
        }
        blocks.truncate(real);
        let mut landing_pads = if b.simple {
            b.landing_pads.clone()
        } else {
            Vec::new()
        };
        landing_pads.truncate(real);
        let theirs = BoltFunction {
            simple: b.simple,
            blocks,
            landing_pads,
        };
        assert_eq!(
            ours,
            theirs,
            "function {} ({bname}) at {:#x}",
            f.name(),
            f.address
        );
        assert!(
            bname.starts_with(f.name()),
            "name {} vs BOLT {bname}",
            f.name()
        );
        checked += 1;
        with_pads += usize::from(!theirs.landing_pads.is_empty());
    }
    assert!(checked >= 5, "only {checked} functions compared");
    with_pads
}

#[test]
fn cfg_matches_bolt_on_c_fixture() {
    let _ = compare(&tk::build("perf2bolt-p1", &["perf2bolt/p1.c"], FLAGS));
}

#[test]
fn cfg_matches_bolt_on_asm_fixture() {
    let _ = compare(&tk::build("perf2bolt-p4", &["perf2bolt/p4.s"], FLAGS));
}

#[test]
fn cfg_matches_bolt_on_pie_fixture() {
    let _ = compare(&tk::build(
        "perf2bolt-p1pie",
        &["perf2bolt/p1.c"],
        &["-O2", "-fpie", "-pie", "-Wl,--emit-relocs"],
    ));
}

#[test]
fn cfg_matches_bolt_on_cpp_exceptions_fixture() {
    for fixture @ (name, _) in tk::EH_FIXTURES {
        let with_pads = compare(&tk::build_eh(fixture));
        assert!(
            with_pads >= 4,
            "{name}: {with_pads} functions with landing pads"
        );
    }
}
