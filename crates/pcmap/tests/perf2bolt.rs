//! `pcmap perf2bolt` against perf2bolt 22 on fixture binaries built by the tests: identical fdata
//! (byte for byte for branch profiles; as a multiset of lines for basic samples, whose order is
//! hash order in perf2bolt) and identical printed statistics.

#[path = "../../pcmap-perf2bolt/tests/support/mod.rs"]
mod support;
use support::normalized_fdata as normalized;
use support::pcmap_preagg as pcmap;

use std::path::Path;
use std::process::Command;

use pcmap_testkit as tk;

const FLAGS: &[&str] = &["-O2", "-fno-pie", "-no-pie", "-Wl,--emit-relocs"];

fn differential(bin: &Path, tag: &str, seed: u64, basic: bool) {
    let dir = tk::scratch_dir(&format!("cli-perf2bolt-{tag}-{seed}"));
    let funcs = support::disassemble(bin);
    let prof = dir.join("prof.pa");
    std::fs::write(&prof, support::generate(&funcs, 2000, seed, basic)).unwrap();
    let extra: &[&str] = if basic { &["--ba"] } else { &[] };
    let (expected, p2b_stdout) = support::perf2bolt(bin, &prof, &dir.join("p2b.fdata"), extra);
    let ours_path = dir.join("pcmap.fdata");
    let out = pcmap(bin, &prof, &ours_path, extra);
    tk::assert_success("pcmap perf2bolt", &out);
    let ours = std::fs::read_to_string(&ours_path).unwrap();
    if basic {
        // The `no_lbr` header lists events in LLVM StringSet order: equal byte for byte.
        assert_eq!(
            ours.lines().next(),
            expected.lines().next(),
            "{tag} seed {seed}: header"
        );
        // Records are in hash order in perf2bolt's output.
        let e = normalized(&expected);
        let o = normalized(&ours);
        assert_eq!(
            o,
            e,
            "{tag} seed {seed} (basic), profile {}",
            prof.display()
        );
    } else {
        assert!(
            ours == expected,
            "{tag} seed {seed}: fdata differs, profile {}",
            prof.display()
        );
    }
    let ours_stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        support::stat_lines(&ours_stdout),
        support::stat_lines(&p2b_stdout),
        "{tag} seed {seed}"
    );
    assert!(!support::stat_lines(&ours_stdout).is_empty());
}

#[test]
fn branch_profiles_match_perf2bolt() {
    let p1 = tk::build("perf2bolt-p1", &["perf2bolt/p1.c"], FLAGS);
    let p4 = tk::build("perf2bolt-p4", &["perf2bolt/p4.s"], FLAGS);
    for seed in [11, 12] {
        differential(&p1, "p1", seed, false);
        differential(&p4, "p4", seed, false);
    }
}

/// Linked by GNU ld (gcc's default linker), which writes an FDE for the PLT: that code belongs
/// to BOLT's PLT pseudo functions, not to a function of its own, so the function count of the
/// statistics lines is perf2bolt's.
#[test]
fn branch_profiles_match_perf2bolt_gnu_ld() {
    let p1 = tk::build_with("gcc", "perf2bolt-p1-gnu-ld", &["perf2bolt/p1.c"], FLAGS);
    differential(&p1, "p1-gnu-ld", 13, false);
}

#[test]
fn basic_samples_match_perf2bolt() {
    let p1 = tk::build("perf2bolt-p1", &["perf2bolt/p1.c"], FLAGS);
    differential(&p1, "p1", 21, true);
}

#[test]
fn handwritten_records_match_perf2bolt() {
    // Every record type on fixed addresses of the assembly fixture, including call
    // continuation after `call g`, returns, external origins, duplicates and an event line.
    let bin = tk::build("perf2bolt-p4", &["perf2bolt/p4.s"], FLAGS);
    let funcs = support::disassemble(&bin);
    let f = funcs.iter().find(|f| f.name == "fn").expect("fn");
    let g = funcs.iter().find(|f| f.name == "g").expect("g");
    let at = |i: usize| f.insns[i].addr;
    let call = f
        .insns
        .iter()
        .position(|i| i.mnemonic.starts_with("call"))
        .unwrap();
    let ret_g = g.insns.last().unwrap().addr;
    let lines = [
        "E cycles".to_string(),
        format!("T {:x} {:x} {:x} 7", at(call), g.insns[0].addr, ret_g),
        format!("R {:x} {:x} {:x} 7", ret_g, at(call + 1), at(call + 3)),
        format!("R 0 {:x} {:x} 2", at(call + 1), at(call + 3)),
        format!("f {:x} {:x} 3", at(call + 1), at(call + 3)),
        format!("r {:x} {:x} 4", at(call + 1), at(call + 3)),
        format!("F {:x} {:x} 5", at(call + 1), at(call + 3)),
        format!("F {:x} {:x} 5", at(call + 3), at(1)),
        format!("B X:7f0000001000 {:x} 1 0", at(0)),
        format!("B {:x} {:x} 4 1", at(3), at(call + 1)),
        format!("B {:x} {:x} 6 2", at(3), at(call + 1)),
        format!("T {:x} {:x} {:x} 3", at(3), at(call + 1), g.insns[0].addr),
        format!(
            "T {:x} 7f0000001000 7f0000001010 3",
            f.insns.last().unwrap().addr
        ),
        format!("S {:x} 9", at(2)),
    ];
    let dir = tk::scratch_dir("cli-perf2bolt-hand");
    let prof = dir.join("hand.pa");
    std::fs::write(&prof, lines.join("\n") + "\n").unwrap();
    let (expected, p2b_stdout) = support::perf2bolt(&bin, &prof, &dir.join("p2b.fdata"), &[]);
    let out = pcmap(&bin, &prof, &dir.join("pcmap.fdata"), &[]);
    tk::assert_success("pcmap perf2bolt", &out);
    assert_eq!(
        std::fs::read_to_string(dir.join("pcmap.fdata")).unwrap(),
        expected
    );
    assert_eq!(
        support::stat_lines(&String::from_utf8_lossy(&out.stdout)),
        support::stat_lines(&p2b_stdout)
    );
}

#[test]
fn malformed_profiles_fail_without_output() {
    let bin = tk::build("perf2bolt-p4", &["perf2bolt/p4.s"], FLAGS);
    let dir = tk::scratch_dir("cli-perf2bolt-bad");
    for (i, bad) in [
        "B 0x10 20 1 0\n",
        "T 10 20 30 5",
        "Q 1 2\n",
        "B\t10 20 1 0\n",
        "B 10 20 1\n",
    ]
    .iter()
    .enumerate()
    {
        let prof = dir.join(format!("bad{i}.pa"));
        std::fs::write(&prof, bad).unwrap();
        // perf2bolt rejects these too (exit status 1).
        let theirs = tk::run(
            Command::new(tk::tool("perf2bolt"))
                .arg(&bin)
                .args(["--pa", "-p"])
                .arg(&prof)
                .arg("-o")
                .arg(dir.join("p2b.fdata")),
        );
        assert!(!theirs.status.success(), "perf2bolt accepted {bad:?}");
        let out_path = dir.join(format!("out{i}.fdata"));
        let out = pcmap(&bin, &prof, &out_path, &[]);
        assert_eq!(out.status.code(), Some(1), "{bad:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("line 1"),
            "{bad:?}"
        );
        assert!(!out_path.exists(), "partial output for {bad:?}");
    }
}

const PCMAP: &str = env!("CARGO_BIN_EXE_pcmap");

#[test]
fn perf_data_basic_samples_match_perf2bolt() {
    // Samples recorded here with the cpu-clock software event (no PMU needed).
    let p1 = tk::build("perf2bolt-p1", &["perf2bolt/p1.c"], FLAGS);
    let dir = tk::scratch_dir("cli-perf2bolt-perfdata-ba");
    let bin = dir.join("p1");
    std::fs::copy(&p1, &bin).unwrap();
    let data = dir.join("p1.perf.data");
    tk::run_ok(
        Command::new(tk::tool("perf"))
            .args(["record", "-q", "-e", "cpu-clock", "-o"])
            .arg(&data)
            .arg("--")
            .arg(&bin)
            .arg("20000000"),
    );
    let (expected, p2b, ours, stdout) =
        support::run_both_on_perf_data(PCMAP.as_ref(), &bin, &data, &dir, &["--ba"], false);
    assert!(
        expected.lines().count() > 2,
        "too few samples recorded:\n{expected}"
    );
    assert_eq!(normalized(&ours), normalized(&expected));
    let stat = |s: &str| -> Vec<String> {
        s.lines()
            .filter(|l| {
                l.starts_with("PERF2BOLT: read ")
                    || l.starts_with("PERF2BOLT: out of range samples")
            })
            .map(str::to_string)
            .collect()
    };
    assert_eq!(stat(&stdout), stat(&p2b));
}

#[test]
fn perf_data_branch_stacks_match_perf2bolt() {
    // Branch stacks cannot be recorded without a PMU: write them with pcmap-profile's perf.data
    // writer, along chains of real branches of the fixture, and let perf2bolt read them through
    // `perf script`.
    let p1 = tk::build("perf2bolt-p1", &["perf2bolt/p1.c"], FLAGS);
    let dir = tk::scratch_dir("cli-perf2bolt-perfdata-lbr");
    let bin = dir.join("p1");
    std::fs::copy(&p1, &bin).unwrap();
    let data = dir.join("lbr.perf.data");
    std::fs::write(&data, support::branch_stack_perf_data(&bin, 400, 7)).unwrap();
    let (expected, p2b, ours, stdout) =
        support::run_both_on_perf_data(PCMAP.as_ref(), &bin, &data, &dir, &[], false);
    assert!(
        expected.lines().count() > 10,
        "perf2bolt produced too little:\n{p2b}"
    );
    assert!(
        ours == expected,
        "fdata differs; perf.data at {}",
        data.display()
    );
    assert_eq!(
        support::perf_data_stat_lines(&stdout),
        support::perf_data_stat_lines(&p2b)
    );
}

/// YAML output against perf2bolt's: equal line for line, function and block hashes included.
fn yaml_differential(bin: &Path, tag: &str, seed: u64) {
    let dir = tk::scratch_dir(&format!("cli-perf2bolt-yaml-{tag}-{seed}"));
    let funcs = support::disassemble(bin);
    let prof = dir.join("prof.pa");
    std::fs::write(&prof, support::generate(&funcs, 2000, seed, false)).unwrap();
    // `-w` next to the fdata output, and `--profile-format yaml`, give the same YAML.
    support::perf2bolt(
        bin,
        &prof,
        &dir.join("p2b.fdata"),
        &["-w", dir.join("p2b.yaml").to_str().unwrap()],
    );
    let out = pcmap(
        bin,
        &prof,
        &dir.join("pcmap.yaml"),
        &["--profile-format", "yaml"],
    );
    tk::assert_success("pcmap perf2bolt", &out);
    let out = pcmap(
        bin,
        &prof,
        &dir.join("pcmap.fdata"),
        &["-w", dir.join("pcmap-w.yaml").to_str().unwrap()],
    );
    tk::assert_success("pcmap perf2bolt", &out);
    let theirs = std::fs::read_to_string(dir.join("p2b.yaml")).unwrap();
    let ours = std::fs::read_to_string(dir.join("pcmap.yaml")).unwrap();
    assert_eq!(
        ours,
        std::fs::read_to_string(dir.join("pcmap-w.yaml")).unwrap()
    );
    // Everything is compared, block hashes included.
    let mask = |s: &str| -> Vec<String> { s.lines().map(str::to_string).collect() };
    let (t, o) = (mask(&theirs), mask(&ours));
    assert!(t.len() > 20, "perf2bolt wrote too little YAML");
    for (i, (a, b)) in t.iter().zip(&o).enumerate() {
        assert_eq!(
            b,
            a,
            "{tag} seed {seed}: YAML line {} differs ({})",
            i + 1,
            dir.display()
        );
    }
    assert_eq!(o.len(), t.len(), "{tag} seed {seed}: YAML length differs");
    // llvm-bolt accepts the YAML and finds no stale function (the function hashes match).
    let log = tk::run_ok(
        Command::new(tk::tool("llvm-bolt"))
            .arg(bin)
            .arg("-data")
            .arg(dir.join("pcmap.yaml"))
            .arg("-o")
            .arg(dir.join("out.bolt")),
    );
    assert!(log.contains("have non-empty execution profile"), "{log}");
    assert!(!log.contains("possibly stale"), "{log}");
}

#[test]
fn yaml_matches_perf2bolt() {
    let p1 = tk::build("perf2bolt-p1", &["perf2bolt/p1.c"], FLAGS);
    let p4 = tk::build("perf2bolt-p4", &["perf2bolt/p4.s"], FLAGS);
    yaml_differential(&p1, "p1", 31);
    yaml_differential(&p4, "p4", 32);
}

/// `pcmap perf2bolt` takes perf2bolt's LLVM-style single-dash options, so it can replace
/// `perf2bolt` in a script: the bundled example profile, given with `-pa` and `-profile-format`,
/// gives the same files as perf2bolt-22 given the same command line.
#[test]
fn llvm_style_options_give_perf2bolts_output() {
    let root = tk::workspace_root();
    let bin = root.join("examples/prog");
    let profile = root.join("examples/prog.preagg");
    let dir = tk::scratch_dir("cli-perf2bolt-llvm-options");
    for (tag, extra) in [("fdata", &[][..]), ("yaml", &["-profile-format=yaml"][..])] {
        let ours = dir.join(format!("ours.{tag}"));
        let theirs = dir.join(format!("theirs.{tag}"));
        let args = |out: &Path| {
            let mut v: Vec<std::ffi::OsString> = vec![
                bin.clone().into(),
                "-p".into(),
                profile.clone().into(),
                "-pa".into(),
            ];
            v.extend(extra.iter().map(Into::into));
            v.push("-o".into());
            v.push(out.into());
            v
        };
        let out = tk::run(
            Command::new(env!("CARGO_BIN_EXE_pcmap"))
                .arg("perf2bolt")
                .args(args(&ours)),
        );
        assert!(
            out.status.success(),
            "pcmap: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        tk::run_ok(Command::new(tk::tool("perf2bolt")).args(args(&theirs)));
        let (a, b) = (
            std::fs::read(&ours).unwrap(),
            std::fs::read(&theirs).unwrap(),
        );
        assert!(!b.is_empty());
        if tag == "fdata" {
            assert_eq!(a, b, "fdata differs from perf2bolt's");
        } else {
            // YAML: equal apart from block hashes (pcmap writes only their offset field), and
            // the binary name both tools take from the command line.
            let strip = |t: &[u8]| -> Vec<String> {
                String::from_utf8_lossy(t)
                    .lines()
                    .filter(|l| !l.trim_start().starts_with("hash:") || l.starts_with("    hash:"))
                    .map(str::to_string)
                    .collect()
            };
            assert_eq!(strip(&a), strip(&b), "YAML differs beyond block hashes");
        }
    }
}

/// A code section without symbols (`.noplt` stubs): with the section symbol kept by
/// `--emit-relocs` it is a function `.noplt/1`; without, its code is unknown. Traces into it give
/// perf2bolt 22's fdata, YAML and statistics either way.
#[test]
fn code_sections_without_symbols_match_perf2bolt() {
    let srcs = ["perf2bolt/noplt-main.c", "perf2bolt/noplt-stubs.s"];
    for (tag, flags) in [
        (
            "relocs",
            &["-O1", "-fno-pie", "-no-pie", "-Wl,--emit-relocs"][..],
        ),
        ("plain", &["-O1", "-fno-pie", "-no-pie"][..]),
    ] {
        let bin = tk::build(&format!("perf2bolt-noplt-{tag}"), &srcs, flags);
        let headers = tk::run_ok(Command::new(tk::tool("llvm-readelf")).arg("-SW").arg(&bin));
        let noplt = headers
            .lines()
            .find_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                let i = f.iter().position(|w| *w == ".noplt")?;
                Some(tk::hex(f.get(i + 2)?))
            })
            .expect("the fixture has a .noplt section");
        let dir = tk::scratch_dir(&format!("cli-perf2bolt-noplt-{tag}"));
        let prof = dir.join("prof.pa");
        // A jump over a nop, then a fall-through to the `ret` of the second stub.
        std::fs::write(
            &prof,
            format!(
                "T {:x} {:x} {:x} 5\nT {:x} {:x} {:x} 3\n",
                noplt + 1,
                noplt + 4,
                noplt + 4,
                noplt + 16,
                noplt + 16,
                noplt + 18
            ),
        )
        .unwrap();
        let expected = fdata_yaml_and_stats_match_perf2bolt(&bin, &prof, &dir, tag);
        assert_eq!(
            expected.contains(".noplt/1"),
            tag == "relocs",
            "{tag}: perf2bolt's fdata:\n{expected}"
        );
    }
}

/// Run perf2bolt 22 and pcmap on `prof` (pre-aggregated) with `-w`, in `dir`, and assert that
/// fdata, YAML and printed statistics are equal; returns perf2bolt's fdata.
fn fdata_yaml_and_stats_match_perf2bolt(bin: &Path, prof: &Path, dir: &Path, tag: &str) -> String {
    let yaml = dir.join("p2b.yaml");
    let (expected, p2b_stdout) = support::perf2bolt(
        bin,
        prof,
        &dir.join("p2b.fdata"),
        &["-w", yaml.to_str().unwrap()],
    );
    let ours_yaml = dir.join("pcmap.yaml");
    let out = pcmap(
        bin,
        prof,
        &dir.join("pcmap.fdata"),
        &["-w", ours_yaml.to_str().unwrap()],
    );
    tk::assert_success("pcmap perf2bolt", &out);
    assert_eq!(
        std::fs::read_to_string(dir.join("pcmap.fdata")).unwrap(),
        expected,
        "{tag}: fdata ({})",
        dir.display()
    );
    assert_eq!(
        std::fs::read_to_string(&ours_yaml).unwrap(),
        std::fs::read_to_string(&yaml).unwrap(),
        "{tag}: YAML ({})",
        dir.display()
    );
    assert_eq!(
        support::stat_lines(&String::from_utf8_lossy(&out.stdout)),
        support::stat_lines(&p2b_stdout),
        "{tag}"
    );
    expected
}

/// Symbols inside functions: BOLT starts a block at each zero-sized symbol or local label after
/// the function's start (a secondary entry point) up to the first symbol that is neither, so
/// fall-throughs across them are recorded and the YAML has those blocks. fdata and YAML equal
/// perf2bolt 22's.
#[test]
fn labels_inside_functions_match_perf2bolt() {
    let bin = tk::build("perf2bolt-labels", &["perf2bolt/labels.s"], FLAGS);
    let nm = tk::run_ok(Command::new(tk::tool("llvm-nm")).arg(&bin));
    let sym = |name: &str| -> u64 {
        nm.lines()
            .find_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f.len() == 3 && f[2] == name).then(|| tk::hex(f[0]))
            })
            .unwrap_or_else(|| panic!("{name} in llvm-nm output:\n{nm}"))
    };
    // Each loop's `jne` is the 2-byte instruction before the next `call`/`ret`: take the loop
    // back-edge, then fall through the labels to it.
    let main_jne = sym("main_inner") + 3;
    let g_jne = sym("g_after") + 3;
    let dir = tk::scratch_dir("cli-perf2bolt-labels");
    let prof = dir.join("prof.pa");
    std::fs::write(
        &prof,
        format!(
            "T {main_jne:x} {:x} {main_jne:x} 7\nT {g_jne:x} {:x} {g_jne:x} 4\n",
            sym("main_loop"),
            sym("g_loop")
        ),
    )
    .unwrap();
    let expected = fdata_yaml_and_stats_match_perf2bolt(&bin, &prof, &dir, "labels");
    // The label fall-through is there (the check has teeth).
    assert!(
        expected.lines().count() >= 4,
        "perf2bolt's fdata:\n{expected}"
    );
}
