//! `pcmap bbmap profile` and `pcmap propeller` attribute branches and fall-throughs to blocks
//! through the same block attributor: on the same binary and profile, the intra-function edge
//! counts of the block profile (branch edges of kind `branch` plus fall-through edges) equal the
//! successor counts of Propeller's CFG (`g` lines of `--emit-cfg`), for every function Propeller
//! lays out. Both read the same perf.data the same way as well.

#[path = "../../pcmap-perf2bolt/tests/support/mod.rs"]
mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use pcmap_testkit as tk;
use serde_json::Value;

const PCMAP: &str = env!("CARGO_BIN_EXE_pcmap");

/// (function, from block ID, to block ID) -> count.
type Edges = BTreeMap<(String, u64, u64), u64>;

/// Intra-function edges of `pcmap bbmap profile`'s JSON.
fn bbmap_edges(bin: &Path, profile: &Path, pa: bool, out: &Path) -> Edges {
    let mut cmd = Command::new(PCMAP);
    cmd.args(["bbmap", "profile"])
        .arg(bin)
        .arg("-p")
        .arg(profile)
        .arg("-o")
        .arg(out);
    if pa {
        cmd.arg("--pa");
    }
    tk::run_ok(&mut cmd);
    let v: Value = serde_json::from_slice(&std::fs::read(out).unwrap()).unwrap();
    let mut edges = Edges::new();
    let key = |e: &Value| {
        (
            e["from"]["function"].as_str().unwrap().to_string(),
            e["from"]["id"].as_u64().unwrap(),
            e["to"]["id"].as_u64().unwrap(),
        )
    };
    for e in v["branch_edges"].as_array().unwrap() {
        if e["kind"] == "branch" {
            *edges.entry(key(e)).or_default() += e["count"].as_u64().unwrap();
        }
    }
    for e in v["fallthrough_edges"].as_array().unwrap() {
        *edges.entry(key(e)).or_default() += e["count"].as_u64().unwrap();
    }
    edges
}

/// Successor counts of `pcmap propeller --emit-cfg`'s `g` lines, per laid-out function.
fn propeller_edges(bin: &Path, profile: &Path, pa: bool, dir: &Path) -> Edges {
    let (cc, ld) = (dir.join("cc.txt"), dir.join("ld.txt"));
    let mut cmd = Command::new(PCMAP);
    cmd.arg("propeller")
        .arg(bin)
        .arg("-p")
        .arg(profile)
        .arg("--cc-profile")
        .arg(&cc)
        .arg("--ld-profile")
        .arg(&ld)
        .arg("--emit-cfg");
    if pa {
        cmd.arg("--pa");
    }
    tk::run_ok(&mut cmd);
    let text = std::fs::read_to_string(&cc).unwrap();
    let mut edges = Edges::new();
    let mut func = String::new();
    for line in text.lines() {
        if let Some(names) = line.strip_prefix("f ") {
            func = names.split(' ').next().unwrap().to_string();
        } else if let Some(nodes) = line.strip_prefix("g ") {
            for node in nodes.split(' ') {
                let mut parts = node.split(',');
                let bb: u64 = parts
                    .next()
                    .unwrap()
                    .split(':')
                    .next()
                    .unwrap()
                    .parse()
                    .unwrap();
                for succ in parts {
                    let (s, c) = succ.split_once(':').unwrap();
                    edges.insert((func.clone(), bb, s.parse().unwrap()), c.parse().unwrap());
                }
            }
        }
    }
    edges
}

fn compare(bin: &Path, profile: &Path, pa: bool, dir: &Path) -> usize {
    let ours = bbmap_edges(bin, profile, pa, &dir.join("profile.json"));
    let cfg = propeller_edges(bin, profile, pa, dir);
    assert!(!cfg.is_empty(), "Propeller laid out nothing");
    let laid_out: std::collections::BTreeSet<&String> = cfg.keys().map(|k| &k.0).collect();
    let ours: Edges = ours
        .into_iter()
        .filter(|(k, _)| laid_out.contains(&k.0))
        .collect();
    assert_eq!(ours, cfg);
    cfg.len()
}

fn binary() -> std::path::PathBuf {
    tk::build(
        "attribution-p1",
        &["perf2bolt/p1.c"],
        &["-O2", "-fno-pie", "-no-pie", "-fbasic-block-address-map"],
    )
}

#[test]
fn bbmap_profile_and_propeller_count_the_same_edges_from_preaggregated_text() {
    let bin = binary();
    let dir = tk::scratch_dir("attribution-pa");
    // Every record type, external addresses, invalid and mid-instruction traces, returns.
    let profile = dir.join("p.pa");
    let text = support::generate(&support::disassemble(&bin), 3000, 5, false);
    std::fs::write(&profile, text).unwrap();
    assert!(compare(&bin, &profile, true, &dir) > 5);
}

#[test]
fn bbmap_profile_and_propeller_count_the_same_edges_from_perf_data() {
    let p1 = binary();
    let dir = tk::scratch_dir("attribution-perf");
    let bin = dir.join("p1");
    std::fs::copy(&p1, &bin).unwrap();
    let data = dir.join("lbr.perf.data");
    std::fs::write(&data, support::branch_stack_perf_data(&bin, 400, 9)).unwrap();
    assert!(compare(&bin, &data, false, &dir) > 5);
}
