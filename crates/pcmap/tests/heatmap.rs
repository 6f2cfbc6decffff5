//! `pcmap heatmap` against llvm-bolt-heatmap 22: every file it writes (the text heatmap at each
//! block size, `FILE.csv`, `FILE-section-hotness.csv`) byte for byte, and the lines it prints
//! about the input, for pre-aggregated profiles, perf.data with branch stacks and perf.data with
//! basic samples, on fixture programs the tests build.

#[path = "../../pcmap-perf2bolt/tests/support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use pcmap_testkit as tk;

const PCMAP: &str = env!("CARGO_BIN_EXE_pcmap");
const FLAGS: &[&str] = &["-O2", "-fno-pie", "-no-pie", "-Wl,--emit-relocs"];

/// The lines both tools print about the input and the maps (llvm-bolt-heatmap also prints
/// BOLT's set-up lines and the progress of the `perf script` jobs it runs).
fn stat_lines(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter(|l| {
            l.starts_with("PERF2BOLT: parse")
                || l.starts_with("PERF2BOLT: read ")
                || l.starts_with("PERF2BOLT: ignored")
                || l.starts_with("HEATMAP")
        })
        .map(|l| l.to_string())
        .collect()
}

/// The files a run with `-o DIR/hm` and block sizes `sizes` writes.
fn output_names(sizes: &[u64]) -> Vec<String> {
    let mut v = vec![
        "hm".to_string(),
        "hm.csv".to_string(),
        "hm-section-hotness.csv".to_string(),
    ];
    v.extend(sizes[1..].iter().map(|s| format!("hm-{s}")));
    v
}

fn show(what: &str, out: &Output) -> String {
    format!(
        "{what}: {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Run both tools with `args` (profile options and heatmap options) into `theirs/` and `ours/`
/// under `dir`, and compare every output file and the printed lines. Returns the oracle's
/// heatmap text (for sanity checks).
fn differential(bin: &Path, dir: &Path, args: &[&str], sizes: &[u64]) -> String {
    let theirs = dir.join("theirs");
    let ours = dir.join("ours");
    for d in [&theirs, &ours] {
        let _ = std::fs::remove_dir_all(d);
        std::fs::create_dir_all(d).unwrap();
    }
    let mut oracle = Command::new(tk::tool("llvm-bolt-heatmap"));
    oracle.arg(bin).args(args).arg("-o").arg(theirs.join("hm"));
    let cmd = format!("{oracle:?}");
    let o = tk::run(&mut oracle);
    assert!(o.status.success(), "{}", show(&cmd, &o));
    let mut mine = Command::new(PCMAP);
    mine.arg("heatmap")
        .arg(bin)
        .args(args)
        .arg("-o")
        .arg(ours.join("hm"));
    let mine_cmd = format!("{mine:?}");
    let m = tk::run(&mut mine);
    assert!(m.status.success(), "{}", show(&mine_cmd, &m));
    for name in output_names(sizes) {
        let expected = std::fs::read(theirs.join(&name))
            .unwrap_or_else(|e| panic!("{cmd} wrote no {name}: {e}\n{}", show(&cmd, &o)));
        let got = std::fs::read(ours.join(&name)).unwrap_or_else(|e| panic!("no {name}: {e}"));
        assert!(
            got == expected,
            "{name} differs from the oracle's\noracle: {cmd}\nours: {mine_cmd}\n--- oracle ---\n{}\n--- ours ---\n{}",
            String::from_utf8_lossy(&expected),
            String::from_utf8_lossy(&got)
        );
    }
    // The printed lines, with the output paths made equal.
    let t = String::from_utf8_lossy(&o.stdout).replace(theirs.to_str().unwrap(), "OUT");
    let u = String::from_utf8_lossy(&m.stdout).replace(ours.to_str().unwrap(), "OUT");
    assert_eq!(
        stat_lines(&u),
        stat_lines(&t),
        "printed lines differ\noracle: {cmd}\nours: {mine_cmd}"
    );
    assert!(
        stat_lines(&t)
            .iter()
            .any(|l| l.starts_with("HEATMAP: dumping"))
    );
    // The picture is written next to the maps.
    let svg = std::fs::read_to_string(ours.join("hm.svg")).unwrap();
    assert!(svg.starts_with("<?xml") && svg.trim_end().ends_with("</svg>"));
    std::fs::read_to_string(theirs.join("hm")).unwrap()
}

fn p1() -> PathBuf {
    tk::build("perf2bolt-p1", &["perf2bolt/p1.c"], FLAGS)
}

#[test]
fn preaggregated_profiles_match_llvm_bolt_heatmap() {
    // Every record type, external and mid-instruction addresses, invalid and reversed ranges,
    // basic samples; a hand-written assembly fixture and a C program.
    let p4 = tk::build("perf2bolt-p4", &["perf2bolt/p4.s"], FLAGS);
    for (tag, bin, seed) in [("p1", p1(), 31), ("p4", p4, 32)] {
        let dir = tk::scratch_dir(&format!("cli-heatmap-pa-{tag}"));
        let prof = dir.join("prof.pa");
        let funcs = support::disassemble(&bin);
        std::fs::write(&prof, support::generate(&funcs, 3000, seed, true)).unwrap();
        let p = prof.to_str().unwrap();
        let map = differential(&bin, &dir, &["--pa", "-p", p], &[64, 4096, 262_144]);
        assert!(map.contains("Legend:"), "{map}");
        // The options: other block sizes and line width, section letters in the legend, a
        // window of addresses, 64-bit address columns.
        differential(
            &bin,
            &dir,
            &[
                "--pa",
                "-p",
                p,
                "--block-size=16,128,1K",
                "--line-size=64",
                "--print-mappings",
            ],
            &[16, 128, 1024],
        );
        // Counting starts in the middle of the code.
        let min = format!("--min-address={:#x}", funcs[funcs.len() / 2].insns[0].addr);
        differential(
            &bin,
            &dir,
            &[
                "--pa",
                "-p",
                p,
                "--block-size=32",
                &min,
                "--max-address=0x1ffffffff",
            ],
            &[32],
        );
    }
}

#[test]
fn handwritten_preaggregated_records_match_llvm_bolt_heatmap() {
    // Address 0 (its own line, as BOLT prints it), ranges longer than 64 KiB, reversed ranges,
    // external addresses above the 4 GB limit, branch-only records (not counted), fall-throughs
    // of every kind, samples outside every section.
    let bin = p1();
    let code = support::Code::of(&bin);
    let b = code.branches();
    let (a0, a1) = (b[0].addr, b[b.len() - 1].addr);
    let text = format!(
        "E cycles\nS {a0:x} 5\nS 10 3\nB {a0:x} {a1:x} 7 1\nF {a0:x} {:x} 4\nf {a0:x} {:x} 2\n\
         r {a1:x} {:x} 2\nT {a0:x} {a1:x} {:x} 9\nT {a1:x} {a1:x} {a0:x} 3\nT {a0:x} {a0:x} {:x} 3\n\
         T X:7f0000001000 X:7f0000002000 X:7f0000002010 5\nR 0 {a0:x} {:x} 6\nS 7fff00000000 4\n",
        a0 + 16,
        a0 + 3,
        a1 + 40,
        a1 + 2,
        a0 + 0x20000,
        a0 + 200,
    );
    let dir = tk::scratch_dir("cli-heatmap-pa-handwritten");
    let prof = dir.join("hand.pa");
    std::fs::write(&prof, text).unwrap();
    let p = prof.to_str().unwrap();
    differential(&bin, &dir, &["--pa", "-p", p], &[64, 4096, 262_144]);
    differential(
        &bin,
        &dir,
        &["--pa", "-p", p, "--print-mappings", "--block-size=4,256"],
        &[4, 256],
    );
}

#[test]
fn many_functions_preaggregated_matches_llvm_bolt_heatmap() {
    // A larger generated program: many map lines, runs of empty lines, both gap rules.
    let src = tk::many_functions_source(1500);
    let bin = tk::build("heatmap-many", &[src.to_str().unwrap()], FLAGS);
    let dir = tk::scratch_dir("cli-heatmap-pa-many");
    let prof = dir.join("prof.pa");
    let funcs = support::disassemble(&bin);
    std::fs::write(&prof, support::generate(&funcs, 4000, 41, true)).unwrap();
    let p = prof.to_str().unwrap();
    differential(&bin, &dir, &["--pa", "-p", p], &[64, 4096, 262_144]);
    differential(
        &bin,
        &dir,
        &["--pa", "-p", p, "--block-size=8,64", "--line-size=32"],
        &[8, 64],
    );
}

#[test]
fn perf_data_branch_stacks_match_llvm_bolt_heatmap() {
    // Branch stacks cannot be recorded without a PMU: written with pcmap-profile's perf.data
    // writer along real branches of the fixture (some entries from the kernel, one sample of
    // another process); llvm-bolt-heatmap reads it through `perf script`.
    for (tag, bin, seed) in [
        ("p1", p1(), 7u64),
        (
            "many",
            tk::build(
                "heatmap-many",
                &[tk::many_functions_source(1500).to_str().unwrap()],
                FLAGS,
            ),
            8,
        ),
    ] {
        let dir = tk::scratch_dir(&format!("cli-heatmap-lbr-{tag}"));
        let exe = dir.join(tag);
        std::fs::copy(&bin, &exe).unwrap();
        let data = dir.join("lbr.perf.data");
        std::fs::write(&data, support::branch_stack_perf_data(&exe, 500, seed)).unwrap();
        let d = data.to_str().unwrap();
        differential(&exe, &dir, &["-p", d], &[64, 4096, 262_144]);
        differential(
            &exe,
            &dir,
            &["-p", d, "--block-size=16,256", "--print-mappings"],
            &[16, 256],
        );
    }
}

#[test]
fn perf_data_basic_samples_match_llvm_bolt_heatmap() {
    // Samples recorded here with the cpu-clock software event (no PMU needed).
    let dir = tk::scratch_dir("cli-heatmap-basic");
    let bin = dir.join("p1");
    std::fs::copy(p1(), &bin).unwrap();
    let data = dir.join("p1.perf.data");
    tk::run_ok(
        Command::new(tk::tool("perf"))
            .args(["record", "-q", "-e", "cpu-clock", "-c", "100000", "-o"])
            .arg(&data)
            .arg("--")
            .arg(&bin)
            .arg("20000000"),
    );
    let d = data.to_str().unwrap();
    differential(&bin, &dir, &["-p", d, "--ba"], &[64, 4096, 262_144]);
    // Without --ba, neither tool finds anything to draw in a profile without branch stacks.
    let o = tk::run(
        Command::new(tk::tool("llvm-bolt-heatmap"))
            .arg(&bin)
            .args(["-p", d, "-o"])
            .arg(dir.join("nb-theirs")),
    );
    let m = tk::run(
        Command::new(PCMAP)
            .args(["heatmap"])
            .arg(&bin)
            .args(["-p", d, "-o"])
            .arg(dir.join("nb-ours")),
    );
    assert!(!o.status.success(), "{}", show("llvm-bolt-heatmap", &o));
    assert!(!m.status.success(), "{}", show("pcmap heatmap", &m));
    assert!(
        String::from_utf8_lossy(&m.stderr).contains("no valid traces registered"),
        "{}",
        show("pcmap heatmap", &m)
    );
    assert_eq!(
        stat_lines(&String::from_utf8_lossy(&m.stdout)),
        stat_lines(&String::from_utf8_lossy(&o.stdout))
    );
}

#[test]
fn standard_output_matches_llvm_bolt_heatmap() {
    // Without -o, both tools print everything (lines, maps, CSVs) in the same order on stdout.
    let bin = p1();
    let dir = tk::scratch_dir("cli-heatmap-stdout");
    let prof = dir.join("prof.pa");
    std::fs::write(
        &prof,
        support::generate(&support::disassemble(&bin), 500, 5, true),
    )
    .unwrap();
    let o = tk::run_success(
        Command::new(tk::tool("llvm-bolt-heatmap"))
            .arg(&bin)
            .arg("--pa")
            .arg("-p")
            .arg(&prof),
    );
    let m = tk::run_success(
        Command::new(PCMAP)
            .arg("heatmap")
            .arg(&bin)
            .arg("--pa")
            .arg("-p")
            .arg(&prof),
    );
    // The oracle's own set-up lines (BOLT-INFO, the job banner) are all it prints beyond ours.
    let theirs: String = String::from_utf8_lossy(&o.stdout)
        .split_inclusive('\n')
        .filter(|l| !l.starts_with("BOLT-INFO") && !l.starts_with("PERF2BOLT: Starting"))
        .collect();
    assert!(
        String::from_utf8_lossy(&m.stdout) == theirs,
        "stdout differs\n--- oracle ---\n{theirs}\n--- ours ---\n{}",
        String::from_utf8_lossy(&m.stdout)
    );
}

#[test]
fn bad_block_sizes_are_usage_errors() {
    let bin = p1();
    for bad in ["64,100", "0", "4X", "5G"] {
        let out = tk::run(
            Command::new(PCMAP)
                .arg("heatmap")
                .arg(&bin)
                .args(["--pa", "-p", "/dev/null", "-o", "-"])
                .arg(format!("--block-size={bad}")),
        );
        assert_eq!(out.status.code(), Some(2), "{}", show(bad, &out));
    }
}

#[test]
fn bolted_binary_with_hot_text_matches_llvm_bolt_heatmap() {
    // A binary rewritten by BOLT with `-hot-text` (`__hot_start`/`__hot_end`: the `[hot text]`
    // row of the section table), hot code moved to a new `.text`, the original kept as
    // `.bolt.org.text`; profiled addresses are the BOLTed binary's own (no BAT translation).
    let bin = p1();
    let fdata = tk::derive(&tk::derived(&bin, "heatmap.fdata"), |out| {
        let pa = out.with_extension("pa");
        std::fs::write(
            &pa,
            support::generate(&support::disassemble(&bin), 2000, 3, false),
        )
        .unwrap();
        support::perf2bolt(&bin, &pa, out, &[]);
    });
    let bolted = tk::derive(&tk::derived(&bin, "heatmap.bolt"), |out| {
        tk::run_ok(
            Command::new(tk::tool("llvm-bolt"))
                .arg(&bin)
                .arg("-data")
                .arg(&fdata)
                .arg("-o")
                .arg(out)
                .args([
                    "-reorder-blocks=ext-tsp",
                    "-reorder-functions=hfsort",
                    "-hot-text",
                    "-split-functions",
                    "-enable-bat",
                ]),
        );
    });
    let syms = tk::run_ok(
        Command::new(tk::tool("llvm-readelf"))
            .arg("-sW")
            .arg(&bolted),
    );
    assert!(
        syms.contains("__hot_start") && syms.contains("__hot_end"),
        "{syms}"
    );
    let dir = tk::scratch_dir("cli-heatmap-bolted");
    let prof = dir.join("prof.pa");
    std::fs::write(
        &prof,
        support::generate(&support::disassemble(&bolted), 2000, 4, true),
    )
    .unwrap();
    let p = prof.to_str().unwrap();
    differential(&bolted, &dir, &["--pa", "-p", p], &[64, 4096, 262_144]);
    let hot = std::fs::read_to_string(dir.join("theirs/hm-section-hotness.csv")).unwrap();
    assert!(
        hot.contains("[hot text], ") && hot.contains(".bolt.org.text, "),
        "{hot}"
    );
}
