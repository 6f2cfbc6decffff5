//! End-to-end tests of `pcmap propeller` against clang-22, lld-22, llvm-readobj-22, qemu-user and
//! BOLT 22: profile a benchmark from a recorded control-flow trace, generate the profiles, rebuild
//! with basic-block sections and a symbol order, and check the result with the oracles.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

use pcmap_testkit::{build, derive, derived, run, run_ok, scratch_dir, tool};

#[path = "../../pcmap-perf2bolt/tests/support/mod.rs"]
mod support;

const SRC: &str = "propeller/bench.c";
const ITERATIONS: &str = "20000";

fn base_flags() -> Vec<&'static str> {
    vec![
        "-O2",
        "-fno-pie",
        "-no-pie",
        "-fbasic-block-address-map",
        "-Wl,--emit-relocs",
    ]
}

fn pcmap() -> Command {
    Command::new(env!("CARGO_BIN_EXE_pcmap"))
}

/// One executed QEMU translation block: first instruction, last instruction, end address.
#[derive(Clone, Copy, Debug)]
struct Tb {
    start: u64,
    last: u64,
    end: u64,
}

/// Record the program with `qemu-x86_64 -d in_asm,exec,nochain` (htr.md §2.2) and return the
/// executed translation blocks in order. `in_asm` gives every block's instructions (so its last
/// instruction and end), `exec` with `nochain` logs every execution.
fn record(exe: &Path, dir: &Path, tag: &str) -> Vec<Tb> {
    let log = dir.join(format!("{tag}.qemu.log"));
    run_ok(
        Command::new(tool("qemu-x86_64"))
            .args(["-d", "in_asm,exec,nochain", "-D"])
            .arg(&log)
            .arg(exe)
            .arg(ITERATIONS),
    );
    let text = std::fs::read_to_string(&log).expect("read qemu log");
    let _ = std::fs::remove_file(&log);
    let mut blocks: HashMap<u64, (u64, u64)> = HashMap::new();
    let mut cur: Vec<(u64, u64)> = Vec::new(); // (address, length) of the instructions of the open IN block
    let mut trace = Vec::new();
    let hexnum = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).expect("hex");
    let close = |cur: &mut Vec<(u64, u64)>, blocks: &mut HashMap<u64, (u64, u64)>| {
        if let (Some(&(first, _)), Some(&(last, len))) = (cur.first(), cur.last()) {
            blocks.insert(first, (last, last + len));
        }
        cur.clear();
    };
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("Trace ") {
            close(&mut cur, &mut blocks);
            let inside = rest.split('[').nth(1).expect("exec line has [..]");
            let pc = hexnum(inside.split('/').nth(1).expect("second field is the pc"));
            let &(last, end) = blocks
                .get(&pc)
                .unwrap_or_else(|| panic!("no IN block for executed pc {pc:#x}"));
            trace.push(Tb {
                start: pc,
                last,
                end,
            });
        } else if line.starts_with("0x") && line.contains(":  ") {
            let (a, rest) = line.split_once(":  ").unwrap();
            let addr = hexnum(a);
            let toks: Vec<&str> = rest.split_whitespace().collect();
            let nbytes = toks
                .iter()
                .take_while(|t| t.len() == 2 && t.chars().all(|c| c.is_ascii_hexdigit()))
                .count() as u64;
            if nbytes < toks.len() as u64 {
                cur.push((addr, nbytes));
            } else if let Some(l) = cur.last_mut() {
                l.1 += nbytes; // continuation line of a long instruction
            }
        } else if line.is_empty() || line.starts_with("IN:") || line.starts_with("----") {
            close(&mut cur, &mut blocks);
        }
    }
    assert!(
        trace.len() > 10_000,
        "suspiciously short trace ({} blocks)",
        trace.len()
    );
    trace
}

/// Executable address ranges of the main program.
fn exe_ranges(exe: &Path) -> Vec<(u64, u64)> {
    let data = std::fs::read(exe).unwrap();
    let bin = pcmap_binary::Binary::parse(&data).unwrap();
    bin.segments()
        .iter()
        .filter(|s| s.p_type == pcmap_binary::PT_LOAD && s.flags & 1 != 0)
        .map(|s| (s.vaddr, s.vaddr + s.mem_size))
        .collect()
}

fn inside(ranges: &[(u64, u64)], a: u64) -> bool {
    ranges.iter().any(|&(s, e)| s <= a && a < e)
}

/// Taken branches (source, target) in the trace: consecutive blocks that are not contiguous.
fn taken(trace: &[Tb]) -> impl Iterator<Item = (u64, u64)> + '_ {
    trace
        .windows(2)
        .filter(|w| w[1].start != w[0].end)
        .map(|w| (w[0].last, w[1].start))
}

/// Number of taken branches whose source is in the main program.
fn taken_in_program(trace: &[Tb], ranges: &[(u64, u64)]) -> usize {
    taken(trace)
        .filter(|&(from, _)| inside(ranges, from))
        .count()
}

/// The LBR-style pre-aggregated profile of the trace: `T branch target ft_end count`, where
/// ft_end is the source of the next taken branch.
fn preaggregated(trace: &[Tb], ranges: &[(u64, u64)]) -> String {
    let branches: Vec<(u64, u64)> = taken(trace).collect();
    let mut agg: BTreeMap<(u64, u64, u64), u64> = BTreeMap::new();
    for w in branches.windows(2) {
        let ((from, to), (next_from, _)) = (w[0], w[1]);
        if inside(ranges, from) || inside(ranges, to) {
            *agg.entry((from, to, next_from)).or_default() += 1;
        }
    }
    agg.iter()
        .map(|((f, t, e), c)| format!("T {f:x} {t:x} {e:x} {c}\n"))
        .collect()
}

/// Blocks of the map per function: (address, ranges of (id, start, end)), from llvm-readobj-22 JSON.
type Ranges = Vec<Vec<(u64, u64, u64)>>;
fn readobj_map(exe: &Path) -> BTreeMap<String, (u64, Ranges)> {
    let out = run_ok(
        Command::new(tool("llvm-readobj"))
            .args(["--bb-addr-map", "--elf-output-style=JSON"])
            .arg(exe),
    );
    let v: serde_json::Value = serde_json::from_str(&out).expect("readobj JSON");
    let mut m = BTreeMap::new();
    for f in v[0]["BBAddrMap"].as_array().expect("BBAddrMap") {
        let f = &f["Function"];
        let ranges = f["BB Ranges"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let base = r["Base Address"].as_u64().unwrap();
                r["BB Entries"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|e| {
                        let s = base + e["Offset"].as_u64().unwrap();
                        (
                            e["ID"].as_u64().unwrap(),
                            s,
                            s + e["Size"].as_u64().unwrap(),
                        )
                    })
                    .collect()
            })
            .collect();
        m.insert(
            f["Name"].as_str().unwrap().to_string(),
            (f["At"].as_u64().unwrap(), ranges),
        );
    }
    m
}

fn symbols(exe: &Path) -> HashMap<String, u64> {
    let out = run_ok(Command::new(tool("llvm-nm")).arg(exe));
    out.lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let (a, _t, n) = (it.next()?, it.next()?, it.next()?);
            Some((n.to_string(), u64::from_str_radix(a, 16).ok()?))
        })
        .collect()
}

/// cc profile: function name -> clusters (a minimal reading of the `f`/`c` lines used here).
fn cc_clusters(text: &str) -> BTreeMap<String, Vec<Vec<u64>>> {
    let mut m: BTreeMap<String, Vec<Vec<u64>>> = BTreeMap::new();
    let mut cur = String::new();
    for l in text.lines() {
        if let Some(f) = l.strip_prefix("f ") {
            cur = f.split(' ').next().unwrap().to_string();
            m.insert(cur.clone(), vec![]);
        } else if let Some(c) = l.strip_prefix("c ") {
            m.get_mut(&cur)
                .unwrap()
                .push(c.split(' ').map(|x| x.parse().unwrap()).collect());
        }
    }
    m
}

struct Original {
    exe: PathBuf,
    dir: PathBuf,
    trace: Vec<Tb>,
    profile: PathBuf,
}

fn original() -> Original {
    let exe = build("propeller-bench", &[SRC], &base_flags());
    let dir = scratch_dir("propeller-e2e");
    let trace = record(&exe, &dir, "original");
    let profile = derived(&exe, "pa");
    let ranges = exe_ranges(&exe);
    derive(&profile, |tmp| {
        std::fs::write(tmp, preaggregated(&trace, &ranges)).unwrap()
    });
    Original {
        exe,
        dir,
        trace,
        profile,
    }
}

fn generate(o: &Original, extra: &[&str]) -> (PathBuf, PathBuf, String) {
    let cc = o.dir.join("cc.txt");
    let ld = o.dir.join("ld.txt");
    let out = run(pcmap()
        .arg("propeller")
        .arg(&o.exe)
        .arg("-p")
        .arg(&o.profile)
        .arg("--pa")
        .arg("--cc-profile")
        .arg(&cc)
        .arg("--ld-profile")
        .arg(&ld)
        .arg("--verbose")
        .args(extra));
    pcmap_testkit::assert_success("pcmap propeller", &out);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (cc, ld, stderr)
}

fn rebuild(o: &Original, cc: &Path, ld: &Path, name: &str) -> PathBuf {
    let out = o.dir.join(name);
    let mut cmd = Command::new(tool("clang"));
    cmd.arg("-fuse-ld=lld")
        .args(base_flags())
        .arg(format!("-fbasic-block-sections=list={}", cc.display()))
        .arg(format!("-Wl,--symbol-ordering-file={}", ld.display()))
        .arg(pcmap_testkit::fixtures_dir().join("src").join(SRC))
        .arg("-o")
        .arg(&out);
    let res = pcmap_testkit::run_success(&mut cmd);
    let stderr = String::from_utf8_lossy(&res.stderr);
    assert!(
        !stderr.contains("warning"),
        "clang/lld warned about the profiles:\n{stderr}"
    );
    out
}

#[test]
fn end_to_end_layout_reduces_taken_branches_and_matches_the_request() {
    let o = original();
    let ranges = exe_ranges(&o.exe);
    let (cc, ld, stderr) = generate(&o, &["--emit-cfg"]);
    eprintln!("{stderr}");
    let cc_text = std::fs::read_to_string(&cc).unwrap();
    let ld_text = std::fs::read_to_string(&ld).unwrap();
    eprintln!("--- cc profile ---\n{cc_text}--- ld profile ---\n{ld_text}");
    assert!(
        stderr.contains("process: ext-TSP score"),
        "verbose scores per function"
    );
    assert!(!cc_text.contains("  ") && !cc_text.lines().any(|l| l.contains('#')));

    let new_exe = rebuild(&o, &cc, &ld, "bench.propeller");
    // Same output.
    let want = run_ok(Command::new(&o.exe).arg(ITERATIONS));
    assert_eq!(run_ok(Command::new(&new_exe).arg(ITERATIONS)), want);

    // The rebuilt map shows the requested order, with exactly the never-executed blocks in `.cold`.
    let before = readobj_map(&o.exe);
    let after = readobj_map(&new_exe);
    let syms = symbols(&new_exe);
    let clusters = cc_clusters(&cc_text);
    assert!(
        clusters.contains_key("process") && clusters.contains_key("classify"),
        "{clusters:?}"
    );
    for (name, cl) in &clusters {
        let (_, old_ranges) = &before[name];
        let (_, new_ranges) = &after[name];
        assert_eq!(cl.len(), 1, "one hot cluster per function");
        let new_ids: Vec<u64> = new_ranges[0].iter().map(|b| b.0).collect();
        assert_eq!(&new_ids, &cl[0], "{name}: hot range order");
        // Executed blocks of the original according to the trace (an oracle independent of pcmap).
        let executed = |s: u64, e: u64| o.trace.iter().any(|tb| tb.start < e && s < tb.end);
        let all: Vec<(u64, u64, u64)> = old_ranges.iter().flatten().copied().collect();
        for &(id, s, e) in &all {
            if s == e {
                continue; // zero-sized blocks are never executed on their own
            }
            let hot = cl[0].contains(&id);
            assert_eq!(
                hot,
                executed(s, e) || id == 0,
                "{name}: block {id} hot={hot}"
            );
        }
        let cold_ids: Vec<u64> = new_ranges.iter().skip(1).flatten().map(|b| b.0).collect();
        let mut expect_cold: Vec<u64> = all
            .iter()
            .map(|b| b.0)
            .filter(|id| !cl[0].contains(id))
            .collect();
        let mut got = cold_ids.clone();
        got.sort();
        expect_cold.sort();
        assert_eq!(got, expect_cold, "{name}: cold blocks");
        if !cold_ids.is_empty() {
            let cold_base = new_ranges[1][0].1;
            assert_eq!(
                syms.get(&format!("{name}.cold")),
                Some(&cold_base),
                "{name}.cold symbol at the cold range"
            );
        }
    }
    // The ld profile order is honoured: listed symbols appear in increasing address order.
    let addrs: Vec<u64> = ld_text.lines().map(|s| syms[s]).collect();
    assert!(
        addrs.windows(2).all(|w| w[0] < w[1]),
        "symbol order {ld_text} -> {addrs:x?}"
    );

    // Fewer taken branches in a recorded trace of the rebuilt program.
    let taken_before = taken_in_program(&o.trace, &ranges);
    let new_trace = record(&new_exe, &o.dir, "propeller");
    let taken_after = taken_in_program(&new_trace, &exe_ranges(&new_exe));

    // Reference: BOLT with the same profile.
    let fdata = o.dir.join("bench.fdata");
    run_ok(
        Command::new(tool("perf2bolt"))
            .arg("--pa")
            .arg("-p")
            .arg(&o.profile)
            .arg("-o")
            .arg(&fdata)
            .arg(&o.exe),
    );
    let bolted = o.dir.join("bench.bolt");
    run_ok(
        Command::new(tool("llvm-bolt"))
            .arg(&o.exe)
            .arg("-data")
            .arg(&fdata)
            .args(["-reorder-blocks=ext-tsp", "-split-functions", "-o"])
            .arg(&bolted),
    );
    assert_eq!(run_ok(Command::new(&bolted).arg(ITERATIONS)), want);
    let bolt_trace = record(&bolted, &o.dir, "bolt");
    let taken_bolt = taken_in_program(&bolt_trace, &exe_ranges(&bolted));
    eprintln!(
        "taken branches in the program: original {taken_before}, pcmap propeller {taken_after} ({:+.1}%), \
         BOLT ext-tsp+split {taken_bolt} ({:+.1}%)",
        (taken_after as f64 / taken_before as f64 - 1.0) * 100.0,
        (taken_bolt as f64 / taken_before as f64 - 1.0) * 100.0
    );
    assert!(
        taken_after < taken_before,
        "{taken_after} >= {taken_before}"
    );
}

#[test]
fn binary_without_map_is_an_error_and_writes_nothing() {
    let exe = build(
        "propeller-bench-nomap",
        &[SRC],
        &["-O2", "-fno-pie", "-no-pie"],
    );
    let dir = scratch_dir("propeller-nomap");
    let pa = dir.join("p.pa");
    std::fs::write(&pa, "T 201000 201010 201020 5\n").unwrap();
    let (cc, ld) = (dir.join("cc.txt"), dir.join("ld.txt"));
    let out = run(pcmap()
        .arg("propeller")
        .arg(&exe)
        .arg("-p")
        .arg(&pa)
        .arg("--pa")
        .arg("--cc-profile")
        .arg(&cc)
        .arg("--ld-profile")
        .arg(&ld));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("-fbasic-block-address-map"), "{stderr}");
    assert!(!cc.exists() && !ld.exists());
}

#[test]
fn stale_profiles_give_errors_or_warnings_with_counts() {
    let exe = build("propeller-bench", &[SRC], &base_flags());
    let dir = scratch_dir("propeller-stale");
    let (cc, ld) = (dir.join("cc.txt"), dir.join("ld.txt"));
    let go = |pa: &Path| {
        run(pcmap()
            .arg("propeller")
            .arg(&exe)
            .arg("-p")
            .arg(pa)
            .arg("--pa")
            .arg("--cc-profile")
            .arg(&cc)
            .arg("--ld-profile")
            .arg(&ld))
    };
    // Entirely outside the binary: an error naming the record count, no output.
    let pa = dir.join("stale.pa");
    std::fs::write(
        &pa,
        "T 7f0000001000 7f0000002000 7f0000002010 5\nB 7f0000003000 7f0000004000 2 0\n",
    )
    .unwrap();
    let out = go(&pa);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("none of its 3 branch/fall-through records"),
        "{stderr}"
    );
    assert!(!cc.exists() && !ld.exists());

    // Partly stale: profiles written, warnings with counts. next_rand is a single block.
    let map = readobj_map(&exe);
    let (at, ranges) = &map["next_rand"];
    let last = ranges[0].last().unwrap();
    let ret = last.2 - 1; // the `ret` byte
    std::fs::write(
        &pa,
        format!("T 7f0000001000 {at:x} {ret:x} 100\nT 7f0000001000 7f0000002000 7f0000002010 5\nF {ret:x} {at:x} 1\n"),
    )
    .unwrap();
    let out = go(&pa);
    pcmap_testkit::assert_success("pcmap propeller", &out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("1 of 2 branch records (50.0%)"), "{stderr}");
    assert!(
        stderr.contains("2 of 3 fall-through ranges (66.7%)"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(&cc).unwrap(),
        "v1\nf next_rand\nc 0\n"
    );
    assert_eq!(std::fs::read_to_string(&ld).unwrap(), "next_rand\n");

    // Malformed: a located parse error.
    std::fs::write(&pa, "T 201000 zz 201020 5\n").unwrap();
    let out = go(&pa);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("stale.pa: 1:10:") && stderr.contains("`zz`"),
        "{stderr}"
    );
}

/// `g` and `h` lines: with a map carrying block hashes (`-mllvm -emit-bb-hash`), the `h` line
/// holds llvm-readobj's hash of every block, and clang accepts the file silently.
#[test]
fn cfg_and_hash_lines_are_accepted_by_clang() {
    let mut flags = base_flags();
    flags.extend(["-mllvm", "-emit-bb-hash"]);
    let exe = build("propeller-bench-hash", &[SRC], &flags);
    let dir = scratch_dir("propeller-hash");
    let ranges = exe_ranges(&exe);
    let trace = record(&exe, &dir, "hash");
    let profile = dir.join("p.pa");
    std::fs::write(&profile, preaggregated(&trace, &ranges)).unwrap();
    let (cc, ld) = (dir.join("cc.txt"), dir.join("ld.txt"));
    let out = run(pcmap()
        .arg("propeller")
        .arg(&exe)
        .arg("-p")
        .arg(&profile)
        .arg("--pa")
        .arg("--cc-profile")
        .arg(&cc)
        .arg("--ld-profile")
        .arg(&ld)
        .args(["--emit-cfg", "--emit-hashes"]));
    pcmap_testkit::assert_success("pcmap propeller --emit-cfg --emit-hashes", &out);
    let text = std::fs::read_to_string(&cc).unwrap();
    // Hashes against the oracle.
    let v: serde_json::Value = serde_json::from_str(&run_ok(
        Command::new(tool("llvm-readobj"))
            .args(["--bb-addr-map", "--elf-output-style=JSON"])
            .arg(&exe),
    ))
    .unwrap();
    let mut oracle: HashMap<(String, u64), u64> = HashMap::new();
    for f in v[0]["BBAddrMap"].as_array().unwrap() {
        let name = f["Function"]["Name"].as_str().unwrap().to_string();
        for r in f["Function"]["BB Ranges"].as_array().unwrap() {
            for e in r["BB Entries"].as_array().unwrap() {
                oracle.insert(
                    (name.clone(), e["ID"].as_u64().unwrap()),
                    e["Hash"].as_u64().unwrap(),
                );
            }
        }
    }
    let (mut func, mut h_lines, mut g_lines) = (String::new(), 0, 0);
    for l in text.lines() {
        if let Some(f) = l.strip_prefix("f ") {
            func = f.split(' ').next().unwrap().to_string();
        } else if let Some(h) = l.strip_prefix("h ") {
            h_lines += 1;
            for item in h.split(' ') {
                let (id, hash) = item.split_once(':').unwrap();
                let key = (func.clone(), id.parse::<u64>().unwrap());
                assert_eq!(
                    u64::from_str_radix(hash, 16).unwrap(),
                    oracle[&key],
                    "{key:?}"
                );
            }
        } else if l.starts_with("g ") {
            g_lines += 1;
        }
    }
    let functions = text.lines().filter(|l| l.starts_with("f ")).count();
    assert!(
        functions > 0 && h_lines == functions && g_lines == functions,
        "{text}"
    );
    let mut cmd = Command::new(tool("clang"));
    cmd.arg("-fuse-ld=lld")
        .args(&flags)
        .arg(format!("-fbasic-block-sections=list={}", cc.display()))
        .arg(format!("-Wl,--symbol-ordering-file={}", ld.display()))
        .arg(pcmap_testkit::fixtures_dir().join("src").join(SRC))
        .arg("-o")
        .arg(dir.join("rebuilt"));
    let res = run(&mut cmd);
    let stderr = String::from_utf8_lossy(&res.stderr);
    assert!(
        res.status.success() && !stderr.contains("warning"),
        "{stderr}"
    );
    assert_eq!(
        run_ok(Command::new(dir.join("rebuilt")).arg(ITERATIONS)),
        run_ok(Command::new(&exe).arg(ITERATIONS))
    );
}

/// A real perf.data without branch stacks (this machine has no LBR: `perf record -e cpu-clock`)
/// is read, its samples are reported as carrying no branch information, and no profile is written.
#[test]
fn perf_data_without_branch_stacks_is_reported() {
    let exe = build("propeller-bench", &[SRC], &base_flags());
    let dir = scratch_dir("propeller-perf");
    let data = dir.join("perf.data");
    run_ok(
        Command::new(tool("perf"))
            .args(["record", "-q", "-e", "cpu-clock", "-c", "10000", "-o"])
            .arg(&data)
            .arg("--")
            .arg(&exe)
            .arg("2000000"),
    );
    let (cc, ld) = (dir.join("cc.txt"), dir.join("ld.txt"));
    let out = run(pcmap()
        .arg("propeller")
        .arg(&exe)
        .arg("-p")
        .arg(&data)
        .arg("--cc-profile")
        .arg(&cc)
        .arg("--ld-profile")
        .arg(&ld));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("samples have no branch stack"), "{stderr}");
    assert!(
        stderr.contains("no branch or fall-through records"),
        "{stderr}"
    );
    assert!(!cc.exists() && !ld.exists());
}

const REGIONS: &str = "propeller/regions.c";

/// Rebuild `src` with the profiles; clang and lld must not warn.
fn relink(src: &str, dir: &Path, cc: &Path, ld: &Path, name: &str) -> PathBuf {
    let out = dir.join(name);
    let mut cmd = Command::new(tool("clang"));
    cmd.arg("-fuse-ld=lld")
        .args(base_flags())
        .arg(format!("-fbasic-block-sections=list={}", cc.display()))
        .arg(format!("-Wl,--symbol-ordering-file={}", ld.display()))
        .arg(pcmap_testkit::fixtures_dir().join("src").join(src))
        .arg("-o")
        .arg(&out);
    let res = pcmap_testkit::run_success(&mut cmd);
    let stderr = String::from_utf8_lossy(&res.stderr);
    assert!(
        !stderr.contains("warning"),
        "clang/lld warned about the profiles:\n{stderr}"
    );
    out
}

/// `pcmap propeller` with `-p` inputs and extra options, writing `<tag>.cc` and `<tag>.ld`.
fn propeller_run(
    exe: &Path,
    dir: &Path,
    profiles: &[&Path],
    tag: &str,
    extra: &[&str],
) -> (PathBuf, PathBuf, String) {
    let cc = dir.join(format!("{tag}.cc"));
    let ld = dir.join(format!("{tag}.ld"));
    let mut cmd = pcmap();
    cmd.arg("propeller").arg(exe);
    for p in profiles {
        cmd.arg("-p").arg(p);
    }
    cmd.arg("--pa")
        .arg("--cc-profile")
        .arg(&cc)
        .arg("--ld-profile")
        .arg(&ld)
        .arg("--verbose")
        .args(extra);
    let out = run(&mut cmd);
    pcmap_testkit::assert_success("pcmap propeller", &out);
    (cc, ld, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// Inter-function reordering on a function with three hot regions, each calling its own helper:
/// the cc profile splits the function into `.__part.N` clusters, clang and lld accept it without
/// a warning, the program prints the same, llvm-nm and llvm-readobj show the clusters at the
/// requested places, and a qemu trace of the relinked program takes no more branches than with
/// one cluster per function. The taken branches of BOLT (ext-TSP + function splitting) on the
/// same profile are printed beside them.
#[test]
fn several_clusters_per_function_relink_in_the_requested_order() {
    let exe = build("propeller-regions", &[REGIONS], &base_flags());
    let dir = scratch_dir("propeller-regions");
    let ranges = exe_ranges(&exe);
    let trace = record(&exe, &dir, "regions");
    let profile = dir.join("regions.pa");
    std::fs::write(&profile, preaggregated(&trace, &ranges)).unwrap();
    let want = run_ok(Command::new(&exe).arg(ITERATIONS));

    let (cc_n, ld_n, err_n) = propeller_run(
        &exe,
        &dir,
        &[&profile],
        "several",
        &["--inter-function-reordering"],
    );
    let (cc_1, ld_1, err_1) = propeller_run(&exe, &dir, &[&profile], "one", &[]);
    eprintln!("--- several ---\n{err_n}--- one ---\n{err_1}");
    assert!(
        err_n.contains("layout after, inter-function reordering") && err_n.contains("[written]"),
        "{err_n}"
    );
    assert!(err_1.contains("estimated taken branches"), "{err_1}");
    let cc_text = std::fs::read_to_string(&cc_n).unwrap();
    let ld_text = std::fs::read_to_string(&ld_n).unwrap();
    eprintln!("--- cc profile ---\n{cc_text}--- ld profile ---\n{ld_text}");
    let clusters = cc_clusters(&cc_text);
    let split: Vec<&String> = clusters
        .iter()
        .filter(|(_, c)| c.len() > 1)
        .map(|(n, _)| n)
        .collect();
    assert!(split.contains(&&"work".to_string()), "{clusters:?}");
    assert!(ld_text.contains("work.__part.1\n"), "{ld_text}");

    let several = relink(REGIONS, &dir, &cc_n, &ld_n, "regions.several");
    let one = relink(REGIONS, &dir, &cc_1, &ld_1, "regions.one");
    assert_eq!(run_ok(Command::new(&several).arg(ITERATIONS)), want);
    assert_eq!(run_ok(Command::new(&one).arg(ITERATIONS)), want);

    // llvm-nm: every listed symbol exists, in the requested order.
    let syms = symbols(&several);
    let addrs: Vec<u64> = ld_text
        .lines()
        .map(|s| *syms.get(s).unwrap_or_else(|| panic!("{s} not in llvm-nm")))
        .collect();
    assert!(
        addrs.windows(2).all(|w| w[0] < w[1]),
        "symbol order {ld_text} -> {addrs:x?}"
    );
    // llvm-readobj: each cluster is one block range of the rebuilt map, starting at its symbol.
    let after = readobj_map(&several);
    for (name, cl) in &clusters {
        let (_, new_ranges) = &after[name];
        for (i, c) in cl.iter().enumerate() {
            let sym = if i == 0 {
                name.clone()
            } else {
                format!("{name}.__part.{i}")
            };
            let at = syms[&sym];
            let range = new_ranges
                .iter()
                .find(|r| r.first().map(|b| b.1) == Some(at))
                .unwrap_or_else(|| panic!("{sym}: no block range at {at:#x}: {new_ranges:?}"));
            let ids: Vec<u64> = range.iter().map(|b| b.0).collect();
            assert_eq!(&ids, c, "{sym}: blocks of the range");
        }
    }

    // Taken branches measured on qemu traces of the same run.
    let taken = |exe: &Path, tag: &str| {
        let t = record(exe, &dir, tag);
        taken_in_program(&t, &exe_ranges(exe))
    };
    let taken_before = taken_in_program(&trace, &ranges);
    let taken_several = taken(&several, "several");
    let taken_one = taken(&one, "one");
    let fdata = dir.join("regions.fdata");
    run_ok(
        Command::new(tool("perf2bolt"))
            .arg("--pa")
            .arg("-p")
            .arg(&profile)
            .arg("-o")
            .arg(&fdata)
            .arg(&exe),
    );
    let bolted = dir.join("regions.bolt");
    run_ok(
        Command::new(tool("llvm-bolt"))
            .arg(&exe)
            .arg("-data")
            .arg(&fdata)
            .args(["-reorder-blocks=ext-tsp", "-split-functions", "-o"])
            .arg(&bolted),
    );
    assert_eq!(run_ok(Command::new(&bolted).arg(ITERATIONS)), want);
    let taken_bolt = taken(&bolted, "bolt");
    let rel = |x: usize| (x as f64 / taken_before as f64 - 1.0) * 100.0;
    eprintln!(
        "taken branches: original {taken_before}, pcmap several clusters {taken_several} ({:+.1}%), \
         pcmap one cluster {taken_one} ({:+.1}%), BOLT ext-tsp+split-functions {taken_bolt} ({:+.1}%)",
        rel(taken_several),
        rel(taken_one),
        rel(taken_bolt)
    );
    assert!(
        taken_several <= taken_one,
        "several clusters {taken_several} > one cluster {taken_one}"
    );
}

/// The benchmark and its profile (recorded once and cached), with a scratch directory of its own.
fn profiled(tag: &str) -> Original {
    let exe = build("propeller-bench", &[SRC], &base_flags());
    let dir = scratch_dir(tag);
    let profile = derived(&exe, "pa");
    derive(&profile, |tmp| {
        let trace = record(&exe, &dir, "profile");
        std::fs::write(tmp, preaggregated(&trace, &exe_ranges(&exe))).unwrap()
    });
    Original {
        exe,
        dir,
        trace: Vec::new(),
        profile,
    }
}

/// `pcmap propeller` on `profiles` (with `--pa` and `extra`): the cc and ld profiles it writes.
fn profiles_from(o: &Original, profiles: &[&Path], tag: &str, extra: &[&str]) -> (String, String) {
    let (cc, ld, _) = propeller_run(&o.exe, &o.dir, profiles, tag, extra);
    (
        std::fs::read_to_string(cc).unwrap(),
        std::fs::read_to_string(ld).unwrap(),
    )
}

/// The bridge from BOLT: the fdata and the YAML perf2bolt 22 writes for a pre-aggregated profile
/// give `pcmap propeller` the same cc profile (clusters, block and edge counts) and ld profile as
/// the pre-aggregated profile itself.
#[test]
fn fdata_yaml_and_preaggregated_profiles_give_identical_layouts() {
    let o = profiled("propeller-bridge");
    let fdata = o.dir.join("bridge.fdata");
    let yaml = o.dir.join("bridge.yaml");
    let out = run(Command::new(tool("perf2bolt"))
        .arg("--pa")
        .arg("-p")
        .arg(&o.profile)
        .arg("-o")
        .arg(&fdata)
        .arg("-w")
        .arg(&yaml)
        .arg(&o.exe));
    pcmap_testkit::assert_success("perf2bolt", &out);
    for extra in [
        &["--emit-cfg"][..],
        &["--emit-cfg", "--inter-function-reordering"],
    ] {
        let from_pa = profiles_from(&o, &[&o.profile], "bridge-pa", extra);
        let from_fdata = profiles_from(&o, &[&fdata], "bridge-fdata", extra);
        let from_yaml = profiles_from(&o, &[&yaml], "bridge-yaml", extra);
        assert!(
            from_pa.0.lines().filter(|l| l.starts_with("g ")).count() >= 4,
            "{}",
            from_pa.0
        );
        assert_eq!(from_fdata, from_pa, "fdata vs pre-aggregated ({extra:?})");
        assert_eq!(from_yaml, from_pa, "YAML vs pre-aggregated ({extra:?})");
    }
}

/// Several profiles in one run are merged before layout: two halves of a pre-aggregated profile
/// (repeated `-p`), and a perf.data with branch stacks mixed with pre-aggregated text
/// (comma-separated), give the profiles of the one file holding all their records.
#[test]
fn several_profiles_are_merged_before_layout() {
    let o = profiled("propeller-merge");
    let text = std::fs::read_to_string(&o.profile).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let (a, b) = lines.split_at(lines.len() / 2);
    let (pa_a, pa_b) = (o.dir.join("half-a.pa"), o.dir.join("half-b.pa"));
    std::fs::write(&pa_a, a.join("\n") + "\n").unwrap();
    std::fs::write(&pa_b, b.join("\n") + "\n").unwrap();
    let whole = profiles_from(&o, &[&o.profile], "merge-whole", &["--emit-cfg"]);
    let halves = profiles_from(&o, &[&pa_a, &pa_b], "merge-halves", &["--emit-cfg"]);
    assert_eq!(halves, whole);

    // perf.data with branch stacks (written like `perf record -b`) plus the trace profile.
    let perf = o.dir.join("merge.perf.data");
    std::fs::write(&perf, support::branch_stack_perf_data(&o.exe, 400, 19)).unwrap();
    // The perf.data as pre-aggregated text, by perf2bolt's reading (checked against perf2bolt 22
    // in the perf2bolt tests).
    let perf_pa = o.dir.join("merge.perf.pa");
    let out = run(pcmap()
        .arg("perf2bolt")
        .arg(&o.exe)
        .arg("-p")
        .arg(&perf)
        .arg("--ignore-build-id")
        .arg("--profile-format=preagg")
        .arg("-o")
        .arg(&perf_pa));
    pcmap_testkit::assert_success("pcmap perf2bolt --profile-format=preagg", &out);
    let all = o.dir.join("merge.all.pa");
    std::fs::write(&all, std::fs::read_to_string(&perf_pa).unwrap() + &text).unwrap();
    let merged = profiles_from(&o, &[&all], "merge-all", &["--emit-cfg"]);
    let list = format!("{},{}", perf.display(), o.profile.display());
    let mixed = profiles_from(&o, &[Path::new(&list)], "merge-mixed", &["--emit-cfg"]);
    assert_eq!(mixed, merged);
    assert_ne!(mixed, whole, "the perf.data records changed nothing");
}

/// The bridge to BOLT: `pcmap bbmap profile --format yaml` writes, for a binary built with
/// `-fbasic-block-address-map`, a YAML profile llvm-bolt 22 applies with no stale function
/// (`-stale-threshold=0` makes any stale function fatal; a corrupted hash shows the check
/// bites), and `--format fdata` the fdata perf2bolt 22 writes for the same profile.
#[test]
fn bbmap_profile_writes_bolt_profiles_llvm_bolt_applies() {
    let o = profiled("propeller-bbmap-bolt");
    let yaml = o.dir.join("bbmap.yaml");
    let out = run(pcmap()
        .args(["bbmap", "profile"])
        .arg(&o.exe)
        .arg("-p")
        .arg(&o.profile)
        .args(["--pa", "--format", "yaml", "-o"])
        .arg(&yaml));
    pcmap_testkit::assert_success("pcmap bbmap profile --format yaml", &out);
    let bolt = |profile: &Path| {
        run(Command::new(tool("llvm-bolt"))
            .arg(&o.exe)
            .arg("-data")
            .arg(profile)
            .args([
                "-report-stale",
                "-stale-threshold=0",
                "-reorder-blocks=ext-tsp",
                "-o",
            ])
            .arg(o.dir.join("bbmap.bolt")))
    };
    let res = bolt(&yaml);
    pcmap_testkit::assert_success("llvm-bolt -data bbmap.yaml", &res);
    let log =
        String::from_utf8_lossy(&res.stdout).into_owned() + &String::from_utf8_lossy(&res.stderr);
    assert!(!log.to_lowercase().contains("stale"), "{log}");
    let applied = log
        .lines()
        .find(|l| {
            l.contains("functions in the binary") && l.contains("have non-empty execution profile")
        })
        .unwrap_or_else(|| panic!("no profile applied:\n{log}"));
    let n: u64 = applied
        .trim_start_matches("BOLT-INFO: ")
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(n >= 4, "{applied}");
    assert_eq!(
        run_ok(Command::new(o.dir.join("bbmap.bolt")).arg(ITERATIONS)),
        run_ok(Command::new(&o.exe).arg(ITERATIONS))
    );
    // A wrong function hash is reported as stale, and fatal with this threshold.
    let text = std::fs::read_to_string(&yaml).unwrap();
    let (i, line) = text
        .lines()
        .enumerate()
        .find(|(_, l)| l.trim_start().starts_with("hash:") && l.contains("0x"))
        .unwrap();
    let (prefix, last) = line.trim_end().split_at(line.trim_end().len() - 1);
    let mut bad: Vec<String> = text.lines().map(str::to_string).collect();
    bad[i] = format!("{prefix}{}", if last == "0" { "1" } else { "0" });
    let bad_yaml = o.dir.join("bbmap.bad.yaml");
    std::fs::write(&bad_yaml, bad.join("\n") + "\n").unwrap();
    let res = bolt(&bad_yaml);
    let log =
        String::from_utf8_lossy(&res.stdout).into_owned() + &String::from_utf8_lossy(&res.stderr);
    assert!(
        !res.status.success() && log.contains("stale"),
        "a corrupted hash went unnoticed:\n{log}"
    );

    // fdata: what perf2bolt 22 writes for the same profile.
    let fdata = o.dir.join("bbmap.fdata");
    let out = run(pcmap()
        .args(["bbmap", "profile"])
        .arg(&o.exe)
        .arg("-p")
        .arg(&o.profile)
        .args(["--pa", "--format", "fdata", "-o"])
        .arg(&fdata));
    pcmap_testkit::assert_success("pcmap bbmap profile --format fdata", &out);
    let p2b = o.dir.join("bbmap.p2b.fdata");
    run_ok(
        Command::new(tool("perf2bolt"))
            .arg("--pa")
            .arg("-p")
            .arg(&o.profile)
            .arg("-o")
            .arg(&p2b)
            .arg(&o.exe),
    );
    assert_eq!(
        support::normalized_fdata(&std::fs::read_to_string(&fdata).unwrap()),
        support::normalized_fdata(&std::fs::read_to_string(&p2b).unwrap())
    );

    // The same profile cut in two and given as `-p A,B` adds up to perf2bolt's fdata of the
    // whole, and to the same JSON block profile as the whole.
    let whole = std::fs::read_to_string(&o.profile).unwrap();
    let lines: Vec<&str> = whole.lines().collect();
    let (a, b) = lines.split_at(lines.len() / 2);
    let (pa, pb) = (o.dir.join("half-a.pa"), o.dir.join("half-b.pa"));
    std::fs::write(&pa, a.join("\n") + "\n").unwrap();
    std::fs::write(&pb, b.join("\n") + "\n").unwrap();
    let both = format!("{},{}", pa.display(), pb.display());
    let halves = o.dir.join("bbmap.halves.fdata");
    let out = run(pcmap()
        .args(["bbmap", "profile"])
        .arg(&o.exe)
        .args(["-p", &both, "--pa", "--format", "fdata", "-o"])
        .arg(&halves));
    pcmap_testkit::assert_success("pcmap bbmap profile -p A,B --format fdata", &out);
    assert_eq!(
        support::normalized_fdata(&std::fs::read_to_string(&halves).unwrap()),
        support::normalized_fdata(&std::fs::read_to_string(&p2b).unwrap())
    );
    let json = |ps: &[&Path]| {
        let mut cmd = pcmap();
        cmd.args(["bbmap", "profile"]).arg(&o.exe).arg("--pa");
        for p in ps {
            cmd.arg("-p").arg(p);
        }
        run_ok(&mut cmd)
    };
    assert_eq!(json(&[&pa, &pb]), json(&[o.profile.as_path()]));
}

/// The layout options keep the Propeller tool's names and switch: `--split-functions=false`
/// keeps every block in the function body (no `.cold` symbol), `--reorder-hot-blocks=false`
/// keeps the hot blocks in their address order (llvm-readobj's map order), and
/// `--chain-split=false` / `--call-chain-clustering=false` still give profiles clang accepts.
#[test]
fn layout_options_switch_with_the_propeller_tools_names() {
    let o = profiled("propeller-options");
    let map = readobj_map(&o.exe);
    let (cc, ld) = profiles_from(&o, &[&o.profile], "opt-default", &[]);
    assert!(ld.contains(".cold\n"), "{ld}");
    let cl = cc_clusters(&cc);
    assert!(cl.values().any(|c| c[0].len() > 1), "{cc}");

    let (cc, ld) = profiles_from(
        &o,
        &[&o.profile],
        "opt-nosplit",
        &["--split-functions=false"],
    );
    assert!(!ld.contains(".cold"), "{ld}");
    for (name, c) in cc_clusters(&cc) {
        let all: usize = map[&name].1.iter().map(Vec::len).sum();
        assert_eq!(c.iter().map(Vec::len).sum::<usize>(), all, "{name}: {cc}");
    }

    let (cc, _) = profiles_from(
        &o,
        &[&o.profile],
        "opt-noreorder",
        &["--reorder-hot-blocks=false"],
    );
    for (name, c) in cc_clusters(&cc) {
        let order: Vec<u64> = map[&name].1.iter().flatten().map(|b| b.0).collect();
        let pos: Vec<usize> = c[0]
            .iter()
            .map(|id| order.iter().position(|x| x == id).unwrap())
            .collect();
        assert!(
            pos.windows(2).all(|w| w[0] < w[1]),
            "{name}: {c:?} vs {order:?}"
        );
    }

    let (cc, ld) = profiles_from(
        &o,
        &[&o.profile],
        "opt-others",
        &[
            "--chain-split=false",
            "--call-chain-clustering=false",
            "--inter-function-reordering=true",
        ],
    );
    let dir = o.dir.clone();
    std::fs::write(dir.join("others.cc"), &cc).unwrap();
    std::fs::write(dir.join("others.ld"), &ld).unwrap();
    let exe = relink(
        SRC,
        &dir,
        &dir.join("others.cc"),
        &dir.join("others.ld"),
        "bench.others",
    );
    assert_eq!(
        run_ok(Command::new(&exe).arg(ITERATIONS)),
        run_ok(Command::new(&o.exe).arg(ITERATIONS))
    );
}

/// BOLT profiles that do not fit the binary: a YAML function whose hash llvm-bolt would find
/// stale, and fdata naming a function the binary lacks, are left out with a warning; malformed
/// fdata and a profile of a BOLT-optimized binary are errors naming the file, and nothing is
/// written.
#[test]
fn bolt_profiles_that_do_not_fit_are_reported() {
    let o = profiled("propeller-bridge-bad");
    let fdata = o.dir.join("p2b.fdata");
    let yaml = o.dir.join("p2b.yaml");
    let out = run(Command::new(tool("perf2bolt"))
        .arg("--pa")
        .arg("-p")
        .arg(&o.profile)
        .arg("-o")
        .arg(&fdata)
        .arg("-w")
        .arg(&yaml)
        .arg(&o.exe));
    pcmap_testkit::assert_success("perf2bolt", &out);
    let go = |p: &Path, tag: &str| {
        let cc = o.dir.join(format!("{tag}.cc"));
        let ld = o.dir.join(format!("{tag}.ld"));
        let out = run(pcmap()
            .arg("propeller")
            .arg(&o.exe)
            .arg("-p")
            .arg(p)
            .arg("--cc-profile")
            .arg(&cc)
            .arg("--ld-profile")
            .arg(&ld));
        (out, cc, ld)
    };

    // `process`'s function hash changed: stale, left out.
    let text = std::fs::read_to_string(&yaml).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let at = lines
        .iter()
        .position(|l| l.trim() == "- name:            process")
        .expect("process in the YAML");
    let h = lines[at + 2].clone();
    assert!(h.trim_start().starts_with("hash:"), "{h}");
    let flipped = if h.ends_with('0') { "1" } else { "0" };
    lines[at + 2] = format!("{}{flipped}", &h[..h.len() - 1]);
    let stale = o.dir.join("stale.yaml");
    std::fs::write(&stale, lines.join("\n") + "\n").unwrap();
    let (out, cc, _) = go(&stale, "stale");
    pcmap_testkit::assert_success("pcmap propeller -p stale.yaml", &out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("1 functions are stale"), "{stderr}");
    // Its own records are gone: only its entry stays hot (main's calls into it remain).
    let cc = std::fs::read_to_string(cc).unwrap();
    let clusters = cc_clusters(&cc);
    assert_eq!(clusters["process"], vec![vec![0]], "{cc}");
    assert!(clusters["classify"][0].len() > 1, "{cc}");

    // A record naming a function the binary does not have.
    let extra = o.dir.join("extra.fdata");
    std::fs::write(
        &extra,
        std::fs::read_to_string(&fdata).unwrap() + "1 no_such_function 0 1 main 0 0 5\n",
    )
    .unwrap();
    let (out, _, _) = go(&extra, "extra");
    pcmap_testkit::assert_success("pcmap propeller -p extra.fdata", &out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("1 records name functions"), "{stderr}");

    // Malformed fdata: an error naming the file, no output.
    let bad = o.dir.join("bad.fdata");
    std::fs::write(&bad, "1 main 0 1 main zz 0 5\n").unwrap();
    let (out, cc, ld) = go(&bad, "bad");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("bad.fdata: 1:17:") && stderr.contains("`zz`"),
        "{stderr}"
    );
    assert!(!cc.exists() && !ld.exists());

    // fdata of a BOLT-optimized binary.
    let bolted = o.dir.join("bolted.fdata");
    std::fs::write(
        &bolted,
        "boltedcollection\n".to_string() + &std::fs::read_to_string(&fdata).unwrap(),
    )
    .unwrap();
    let (out, cc, _) = go(&bolted, "bolted");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("BOLT-optimized"), "{stderr}");
    assert!(!cc.exists());
}
