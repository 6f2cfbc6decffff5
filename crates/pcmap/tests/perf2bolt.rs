//! `pcmap perf2bolt` against perf2bolt 22 on fixture binaries built by the tests: identical fdata
//! (byte for byte for branch profiles; as a multiset of lines for basic samples, whose order is
//! hash order in perf2bolt) and identical printed statistics.

#[path = "../../pcmap-perf2bolt/tests/support/mod.rs"]
mod support;
use support::normalized_fdata as normalized;
use support::pcmap_preagg as pcmap;

use std::path::{Path, PathBuf};
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
    records_match_perf2bolt(&bin, "hand", &lines);
}

/// The pre-aggregated `lines` give the same fdata and statistics with pcmap as with perf2bolt.
fn records_match_perf2bolt(bin: &Path, tag: &str, lines: &[String]) {
    let dir = tk::scratch_dir(&format!("cli-perf2bolt-{tag}"));
    let prof = dir.join(format!("{tag}.pa"));
    std::fs::write(&prof, lines.join("\n") + "\n").unwrap();
    let (expected, p2b_stdout) = support::perf2bolt(bin, &prof, &dir.join("p2b.fdata"), &[]);
    let out = pcmap(bin, &prof, &dir.join("pcmap.fdata"), &[]);
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

/// A branch into the middle of an instruction: BOLT builds no CFG for that function (its
/// traces' fall-throughs are not recorded, and perf2bolt says one function "could not be
/// optimized"), while the same code without that branch keeps its CFG.
#[test]
fn branch_into_an_instruction_matches_perf2bolt() {
    let bin = tk::build("perf2bolt-midinsn", &["perf2bolt/midinsn.s"], FLAGS);
    let funcs = support::disassemble(&bin);
    let mut lines = Vec::new();
    for name in ["overlap", "plain"] {
        let f = funcs.iter().find(|f| f.name == name).expect(name);
        let at = |i: usize| f.insns[i].addr;
        let je = f.insns.iter().position(|i| i.mnemonic == "je").expect("je");
        let target = f.insns[je].target.expect("je target");
        let ret = f.insns.last().unwrap().addr;
        lines.extend([
            format!("B {:x} {target:x} 3 1", at(je)),
            format!("F {:x} {:x} 4", at(0), at(je)),
            format!("T {:x} {target:x} {ret:x} 2", at(je)),
            format!("F {:x} {ret:x} 5", at(je + 1)),
        ]);
    }
    records_match_perf2bolt(&bin, "midinsn", &lines);
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
        let expected = fdata_yaml_and_stats_match_perf2bolt(&bin, &prof, &dir, tag, &[]);
        assert_eq!(
            expected.contains(".noplt/1"),
            tag == "relocs",
            "{tag}: perf2bolt's fdata:\n{expected}"
        );
    }
}

/// Run perf2bolt 22 and pcmap on `prof` (pre-aggregated) with `extra` options and `-w`, in
/// `dir`, and assert that fdata, YAML and printed statistics are equal; returns perf2bolt's fdata.
fn fdata_yaml_and_stats_match_perf2bolt(
    bin: &Path,
    prof: &Path,
    dir: &Path,
    tag: &str,
    extra: &[&str],
) -> String {
    let yaml = dir.join("p2b.yaml");
    let ours_yaml = dir.join("pcmap.yaml");
    let with_yaml = |y: &Path| -> Vec<String> {
        let mut v: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        v.extend(["-w".to_string(), y.display().to_string()]);
        v
    };
    let (theirs, ours) = (with_yaml(&yaml), with_yaml(&ours_yaml));
    let theirs: Vec<&str> = theirs.iter().map(String::as_str).collect();
    let ours: Vec<&str> = ours.iter().map(String::as_str).collect();
    let (expected, p2b_stdout) = support::perf2bolt(bin, prof, &dir.join("p2b.fdata"), &theirs);
    let out = pcmap(bin, prof, &dir.join("pcmap.fdata"), &ours);
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

/// The address of a symbol of `bin`, as llvm-nm 22 lists it (panics naming the symbol and
/// llvm-nm's output when it is missing).
fn symbol_addresses(bin: &Path) -> impl Fn(&str) -> u64 {
    let nm = tk::run_ok(Command::new(tk::tool("llvm-nm")).arg(bin));
    move |name: &str| -> u64 {
        nm.lines()
            .find_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f.len() == 3 && f[2] == name).then(|| tk::hex(f[0]))
            })
            .unwrap_or_else(|| panic!("{name} in llvm-nm output:\n{nm}"))
    }
}

/// Symbols inside functions: BOLT starts a block at each zero-sized symbol or local label after
/// the function's start (a secondary entry point) up to the first symbol that is neither, so
/// fall-throughs across them are recorded and the YAML has those blocks. fdata and YAML equal
/// perf2bolt 22's.
#[test]
fn labels_inside_functions_match_perf2bolt() {
    let bin = tk::build("perf2bolt-labels", &["perf2bolt/labels.s"], FLAGS);
    let sym = symbol_addresses(&bin);
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
    let expected = fdata_yaml_and_stats_match_perf2bolt(&bin, &prof, &dir, "labels", &[]);
    // The label fall-through is there (the check has teeth).
    assert!(
        expected.lines().count() >= 4,
        "perf2bolt's fdata:\n{expected}"
    );
}

/// The bytes between a function's end and the next function (BOLT's `hasValidCodePadding`):
/// `int3` alone, or NOPs (`0F 1F` whatever its ModRM reg field), zero bytes and jumps forward
/// within it in any mix, are padding; an `int3` after a NOP, another reserved-NOP opcode, a
/// jump back, a `ret`, or a NOP cut short where the next function starts are not. Without
/// relocations such a function's addresses end at its size; with them (`--emit-relocs`) BOLT
/// ignores the function ("has invalid padding") and keeps its extent. Branches into and out of
/// each padding give perf2bolt 22's fdata, YAML, statistics and warnings, in both modes, and so
/// do later runs that take the padding verdicts from `--scan-cache`.
#[test]
fn padding_after_functions_matches_perf2bolt() {
    let pads = [
        ("pad_nops", true),
        ("pad_int3", true),
        ("pad_zeros", true),
        ("pad_mixed", false),
        ("pad_jump", true),
        ("pad_jump_back", false),
        ("pad_nop_reg", true),
        ("pad_hint", false),
        ("pad_ret", false),
        ("pad_cut", false),
    ];
    for (tag, flags) in [
        ("relocs", FLAGS),
        ("plain", &["-O2", "-fno-pie", "-no-pie"][..]),
    ] {
        let bin = tk::build(
            &format!("perf2bolt-padding-{tag}"),
            &["perf2bolt/padding.s"],
            flags,
        );
        let sym = symbol_addresses(&bin);
        let main_ret = sym("main") + 2;
        let mut records = String::new();
        for (f, _) in pads {
            // Each function is a one-byte `ret`: its padding starts at offset 1.
            let at = sym(f) + 2;
            records += &format!("B {main_ret:x} {at:x} 4 0\nB {at:x} {main_ret:x} 2 0\n");
        }
        let dir = tk::scratch_dir(&format!("cli-perf2bolt-padding-{tag}"));
        let prof = dir.join("prof.pa");
        std::fs::write(&prof, records).unwrap();
        let expected = fdata_yaml_and_stats_match_perf2bolt(&bin, &prof, &dir, tag, &[]);
        // The warnings of ignored functions.
        let (theirs, ours) = run_both_plain(&bin, &prof, &dir);
        let ignored = |o: &std::process::Output| {
            stderr_lines(o, |l| {
                l.ends_with("has invalid padding. Ignoring the function")
            })
        };
        assert_eq!(ignored(&ours), ignored(&theirs), "{tag}");
        // With `--scan-cache`: the first run keeps the padding verdicts, the second takes them
        // instead of decoding the paddings. Both give perf2bolt's fdata, YAML and warnings.
        let cache = dir.join("cache");
        for step in ["first", "second"] {
            let (out, fdata, yaml) = pcmap_with_scan_cache(&bin, &prof, &dir, step, &cache);
            let note = if step == "first" { "written" } else { "read" };
            assert!(
                String::from_utf8_lossy(&out.stderr).contains(&format!(": {note}")),
                "{tag}, {step} run: the cache is {note}:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert_eq!(
                fdata, expected,
                "{tag}, {step} run with --scan-cache: fdata"
            );
            assert_eq!(
                yaml,
                std::fs::read_to_string(dir.join("p2b.yaml")).unwrap(),
                "{tag}, {step} run with --scan-cache: YAML"
            );
            assert_eq!(
                ignored(&out),
                ignored(&theirs),
                "{tag}, {step} run with --scan-cache"
            );
        }
        // The checks have teeth: perf2bolt ignores the functions with invalid padding in
        // relocation mode; without relocations, it names valid paddings after their function
        // and not the others.
        for (f, valid) in pads {
            let warned = ignored(&theirs)
                .iter()
                .any(|l| l.contains(&format!(" {f} ")));
            assert_eq!(
                warned,
                tag == "relocs" && !valid,
                "{tag}: {f}: {:?}",
                ignored(&theirs)
            );
            if tag == "plain" {
                assert_eq!(
                    expected.contains(&format!(" {f} 2 ")),
                    valid,
                    "{tag}: {f}: perf2bolt's fdata:\n{expected}"
                );
            }
        }
    }
}

/// Run pcmap on `prof` with `--scan-cache cache` (and `-v=1`, so it says whether it read or
/// wrote the cache), writing `step.fdata` and `step.yaml` into `dir`; it must succeed. Returns
/// the run, the fdata and the YAML.
fn pcmap_with_scan_cache(
    bin: &Path,
    prof: &Path,
    dir: &Path,
    step: &str,
    cache: &Path,
) -> (std::process::Output, String, String) {
    let (fdata, yaml) = (
        dir.join(format!("{step}.fdata")),
        dir.join(format!("{step}.yaml")),
    );
    let out = pcmap(
        bin,
        prof,
        &fdata,
        &[
            "-w",
            yaml.to_str().unwrap(),
            "--scan-cache",
            cache.to_str().unwrap(),
            "-v=1",
        ],
    );
    tk::assert_success("pcmap perf2bolt --scan-cache", &out);
    let read = |p: &Path| std::fs::read_to_string(p).unwrap();
    (out, read(&fdata), read(&yaml))
}

/// Run perf2bolt 22 and pcmap on `prof` (pre-aggregated) with no other option, writing into
/// `dir`; both must succeed. Returns perf2bolt's run and pcmap's, for their printed lines.
fn run_both_plain(
    bin: &Path,
    prof: &Path,
    dir: &Path,
) -> (std::process::Output, std::process::Output) {
    // Each run must succeed; a failure names the command and prints its status and output.
    let run = |exe: &mut Command, out: &str| {
        let cmd = exe
            .arg(bin)
            .args(["--pa", "-p"])
            .arg(prof)
            .arg("-o")
            .arg(dir.join(out));
        let what = format!("{cmd:?}");
        let output = tk::run(cmd);
        tk::assert_success(&what, &output);
        output
    };
    let theirs = run(&mut Command::new(tk::tool("perf2bolt")), "p2b.fdata");
    let ours = run(Command::new(PCMAP).arg("perf2bolt"), "pcmap.fdata");
    (theirs, ours)
}

/// The lines of a run's stderr that `keep` selects.
fn stderr_lines(o: &std::process::Output, keep: impl Fn(&str) -> bool) -> Vec<String> {
    String::from_utf8_lossy(&o.stderr)
        .lines()
        .filter(|l| keep(l))
        .map(str::to_string)
        .collect()
}

/// The lines of BOLT's profile density report in a run's stdout and stderr: the
/// `Functions with density >= X` line and its sparse/empty-profile warnings.
fn density_lines(out: &std::process::Output) -> Vec<String> {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    text.lines()
        .filter(|l| {
            l.contains("Functions with density >= ")
                || l.starts_with("BOLT-WARNING: BOLT is estimated to optimize better")
                || l.starts_with("BOLT-WARNING: the output profile is empty")
        })
        .map(str::to_string)
        .collect()
}

/// perf2bolt 22 and `pcmap perf2bolt` on `bin` and `profile` with `extra` options: the density
/// lines (stdout and stderr) are equal and present.
fn density_matches_perf2bolt(bin: &Path, profile: &Path, dir: &Path, extra: &[&str]) {
    let run = |exe: &mut Command, out: &str| {
        tk::run(
            exe.arg(bin)
                .arg("-p")
                .arg(profile)
                .arg("-o")
                .arg(dir.join(out))
                .args(extra),
        )
    };
    let theirs = run(&mut Command::new(tk::tool("perf2bolt")), "p2b.fdata");
    tk::assert_success("perf2bolt", &theirs);
    let ours = run(Command::new(PCMAP).arg("perf2bolt"), "pcmap.fdata");
    tk::assert_success("pcmap perf2bolt", &ours);
    let expected = density_lines(&theirs);
    assert!(
        expected.iter().any(|l| l.contains("density >=")),
        "perf2bolt printed no density line: {}",
        String::from_utf8_lossy(&theirs.stdout)
    );
    assert_eq!(
        density_lines(&ours),
        expected,
        "{} on {} with {extra:?}",
        bin.display(),
        profile.display()
    );
}

/// BOLT's profile density report (`Functions with density >= X account for Y% total sample
/// counts.` and the sparse-profile warning) and its options (`--show-density`,
/// `--profile-density-cutoff-hot`, `--profile-density-threshold`, in LLVM's spellings) give
/// perf2bolt 22's lines for pre-aggregated branch and sample profiles and for perf.data with
/// branch stacks, on plain and PIE builds.
#[test]
fn density_lines_match_perf2bolt() {
    let p1 = tk::build("perf2bolt-p1", &["perf2bolt/p1.c"], FLAGS);
    let p4 = tk::build("perf2bolt-p4", &["perf2bolt/p4.s"], FLAGS);
    let dir = tk::scratch_dir("cli-perf2bolt-density");
    let options: [&[&str]; 5] = [
        &[],
        &["--show-density"],
        &["-profile-density-cutoff-hot", "500000"],
        &["--profile-density-cutoff-hot=-5", "-show-density=true"],
        &[
            "--profile-density-threshold=1000000",
            "-profile-density-cutoff-hot=995000",
        ],
    ];
    for (tag, bin) in [("p1", &p1), ("p4", &p4)] {
        let funcs = support::disassemble(bin);
        for (kind, basic) in [("branch", false), ("basic", true)] {
            let prof = dir.join(format!("{tag}-{kind}.pa"));
            std::fs::write(&prof, support::generate(&funcs, 2000, 41, basic)).unwrap();
            for extra in options {
                let mut args = vec!["--pa"];
                if basic {
                    args.push("--ba");
                }
                args.extend_from_slice(extra);
                density_matches_perf2bolt(bin, &prof, &dir, &args);
            }
        }
    }
    // perf.data with branch stacks (the test writer's), plain and PIE.
    let pie = tk::build(
        "perf2bolt-p1-pie-density",
        &["perf2bolt/p1.c"],
        &["-O2", "-fpie", "-pie", "-Wl,--emit-relocs"],
    );
    for (tag, built) in [("p1", &p1), ("pie", &pie)] {
        let bin = dir.join(tag);
        std::fs::copy(built, &bin).unwrap();
        let data = dir.join(format!("{tag}.perf.data"));
        std::fs::write(&data, support::branch_stack_perf_data(&bin, 400, 5)).unwrap();
        for extra in options {
            density_matches_perf2bolt(&bin, &data, &dir, extra);
        }
    }
}

/// `--profile-use-dfs` (LLVM spellings too): YAML blocks in BOLT's depth-first order, numbered
/// in that order, function hashes over that order and `dfs-order: true`, byte for byte as
/// perf2bolt 22 writes them, for branch and sample profiles (pre-aggregated and perf.data), on
/// C, assembly (every conditional-jump form, canonical or not) and C++ with landing pads.
#[test]
fn dfs_order_yaml_matches_perf2bolt() {
    let builds = [
        tk::build("perf2bolt-p1", &["perf2bolt/p1.c"], FLAGS),
        tk::build("perf2bolt-p4", &["perf2bolt/p4.s"], FLAGS),
        tk::build(
            "perf2bolt-eh",
            &["perf2bolt/eh.cpp"],
            &["-O2", "-fno-pie", "-no-pie", "-Wl,--emit-relocs"],
        ),
    ];
    let dir = tk::scratch_dir("cli-perf2bolt-dfs");
    let spellings: [&[&str]; 2] = [&["--profile-use-dfs"], &["-profile-use-dfs=true"]];
    let mut compared = 0;
    for (n, bin) in builds.iter().enumerate() {
        let funcs = support::disassemble(bin);
        for (kind, basic) in [("branch", false), ("basic", true)] {
            let prof = dir.join(format!("{n}-{kind}.pa"));
            std::fs::write(&prof, support::generate(&funcs, 2000, 51, basic)).unwrap();
            let mut args = vec!["--profile-format=yaml"];
            if basic {
                args.push("--ba");
            }
            args.extend_from_slice(spellings[n % 2]);
            let (expected, _) = support::perf2bolt(bin, &prof, &dir.join("p2b.yaml"), &args);
            let out = pcmap(bin, &prof, &dir.join("pcmap.yaml"), &args);
            tk::assert_success("pcmap perf2bolt", &out);
            assert!(expected.contains("dfs-order:       true"), "{expected}");
            assert_eq!(
                std::fs::read_to_string(dir.join("pcmap.yaml")).unwrap(),
                expected,
                "{} {kind} ({})",
                bin.display(),
                dir.display()
            );
            compared += expected.matches("- bid:").count();
        }
    }
    // perf.data with branch stacks.
    let bin = dir.join("p1");
    std::fs::copy(&builds[0], &bin).unwrap();
    let data = dir.join("lbr.perf.data");
    std::fs::write(&data, support::branch_stack_perf_data(&bin, 400, 13)).unwrap();
    support::run_both_on_perf_data(
        PCMAP.as_ref(),
        &bin,
        &data,
        &dir,
        &["--profile-use-dfs"],
        true,
    );
    let expected = std::fs::read_to_string(dir.join("p2b.yaml")).unwrap();
    assert_eq!(
        std::fs::read_to_string(dir.join("pcmap.yaml")).unwrap(),
        expected
    );
    compared += expected.matches("- bid:").count();
    assert!(compared > 50, "too few blocks compared: {compared}");
}

/// `--impute-trace-fall-through`: traces without a fall-through part get perf2bolt 22's
/// imputed length; fdata, YAML and statistics equal perf2bolt's, and differ from the run
/// without the option (the generated profiles have `B` records whose imputed fall-through
/// crosses blocks).
#[test]
fn imputed_fall_throughs_match_perf2bolt() {
    let p1 = tk::build("perf2bolt-p1", &["perf2bolt/p1.c"], FLAGS);
    let p4 = tk::build("perf2bolt-p4", &["perf2bolt/p4.s"], FLAGS);
    let dir = tk::scratch_dir("cli-perf2bolt-impute");
    let mut changed = false;
    for (tag, bin) in [("p1", &p1), ("p4", &p4)] {
        let funcs = support::disassemble(bin);
        let prof = dir.join(format!("{tag}.pa"));
        std::fs::write(&prof, support::generate(&funcs, 2000, 61, false)).unwrap();
        for spelling in [
            "--impute-trace-fall-through",
            "-impute-trace-fall-through=1",
        ] {
            let p2b_yaml = dir.join("p2b.yaml");
            let (expected, p2b_stdout) = support::perf2bolt(
                bin,
                &prof,
                &dir.join("p2b.fdata"),
                &[spelling, "-w", p2b_yaml.to_str().unwrap()],
            );
            let ours_yaml = dir.join("pcmap.yaml");
            let out = pcmap(
                bin,
                &prof,
                &dir.join("pcmap.fdata"),
                &[spelling, "-w", ours_yaml.to_str().unwrap()],
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
                std::fs::read_to_string(&p2b_yaml).unwrap(),
                "{tag}: YAML"
            );
            assert_eq!(
                support::stat_lines(&String::from_utf8_lossy(&out.stdout)),
                support::stat_lines(&p2b_stdout),
                "{tag}"
            );
            let (plain, _) = support::perf2bolt(bin, &prof, &dir.join("plain.fdata"), &[]);
            changed |= plain != expected;
        }
    }
    assert!(
        changed,
        "imputation changed no fdata: the check has no teeth"
    );
}

/// perf2bolt 22's options that change none of its outputs for conversion (`--aggregate-only`,
/// on in perf2bolt; memory-profile switches; `--bolt-info`; `--ignore-interrupt-lbr`, on by
/// default; `--show-density`, always on; `-v=1`, whose lines describe BOLT's rewriting) are
/// accepted in LLVM's spellings and give perf2bolt's fdata, YAML and statistics.
#[test]
fn no_op_options_are_accepted_like_perf2bolt() {
    let p1 = tk::build("perf2bolt-p1", &["perf2bolt/p1.c"], FLAGS);
    let dir = tk::scratch_dir("cli-perf2bolt-no-op-options");
    let funcs = support::disassemble(&p1);
    let prof = dir.join("p1.pa");
    std::fs::write(&prof, support::generate(&funcs, 1000, 71, false)).unwrap();
    let extra = [
        "--aggregate-only",
        "-parse-mem-profile=false",
        "--filter-mem-profile=0",
        "-bolt-info",
        "--ignore-interrupt-lbr=true",
        "--show-density",
        "-v=1",
    ];
    let expected = fdata_yaml_and_stats_match_perf2bolt(&p1, &prof, &dir, "no-op options", &extra);
    assert!(expected.lines().count() > 10, "{expected}");
}

/// A function with a sized data object in its middle (`f_table` in `f`): BOLT's
/// `adjustFunctionBoundaries` sees a symbol before the function's end that may not be inside it,
/// prints "symbol seen in the middle of the function" and makes the function non-simple: its
/// branches are recorded, its fall-throughs count as mismatching, it is counted among the
/// functions that could not be optimized, and its YAML entry has no blocks and hash 0. fdata,
/// YAML, statistics, density lines and the error line equal perf2bolt 22's.
#[test]
fn functions_with_a_symbol_inside_match_perf2bolt() {
    let bin = tk::build("perf2bolt-ignored", &["perf2bolt/ignored.s"], FLAGS);
    let sym = symbol_addresses(&bin);
    let (main_loop, f, f_loop, f_end, g, g_loop) = (
        sym("main_loop"),
        sym("f"),
        sym("f_loop"),
        sym("f_end"),
        sym("g"),
        sym("g_loop"),
    );
    // Instruction lengths of the fixture: main_loop: call (5), subl (3), jne (2), call g (5),
    // ret; f: movl (5); f_loop: addl (3), subl (3), jne (2), jmp (2); g: movl (5); g_loop: addl
    // (3), subl (3), jne (2), ret.
    let main_jne = main_loop + 8;
    let f_jne = f_loop + 6;
    let g_jne = g_loop + 6;
    let lines = [
        format!("T {main_jne:x} {main_loop:x} {main_jne:x} 9"),
        format!("T {main_loop:x} {f:x} {f_jne:x} 10"),
        format!("T {f_jne:x} {f_loop:x} {f_jne:x} 40"),
        format!("T {:x} {f_end:x} {f_end:x} 10", f_jne + 2),
        format!("R {f_end:x} {:x} {main_jne:x} 10", main_loop + 5),
        format!("T {:x} {g:x} {g_jne:x} 1", main_jne + 2),
        format!("T {g_jne:x} {g_loop:x} {g_jne:x} 2"),
        format!("R {:x} {:x} {:x} 1", g_jne + 2, main_jne + 7, main_jne + 7),
        format!("B {f_jne:x} {f_loop:x} 3 1"),
    ];
    let dir = tk::scratch_dir("cli-perf2bolt-ignored");
    let prof = dir.join("prof.pa");
    std::fs::write(&prof, lines.join("\n") + "\n").unwrap();
    let expected = fdata_yaml_and_stats_match_perf2bolt(&bin, &prof, &dir, "ignored", &[]);
    // f's branch is recorded, its fall-throughs are not (the check has teeth).
    assert!(
        expected.lines().any(|l| l.starts_with("1 f ")),
        "perf2bolt's fdata:\n{expected}"
    );
    // The printed error and density lines too.
    let (theirs, ours) = run_both_plain(&bin, &prof, &dir);
    let errors = |o: &std::process::Output| stderr_lines(o, |l| l.starts_with("BOLT-ERROR"));
    assert_eq!(errors(&ours), errors(&theirs));
    assert_eq!(errors(&theirs).len(), 1, "{:?}", errors(&theirs));
    assert_eq!(density_lines(&ours), density_lines(&theirs));
    assert!(String::from_utf8_lossy(&theirs.stdout).contains("could not be optimized"));
    // perf.data with branch stacks along the fixture's branches.
    let copy = dir.join("ignored");
    std::fs::copy(&bin, &copy).unwrap();
    let data = dir.join("lbr.perf.data");
    std::fs::write(&data, support::branch_stack_perf_data(&copy, 300, 17)).unwrap();
    let (expected, p2b, ours, stdout) =
        support::run_both_on_perf_data(PCMAP.as_ref(), &copy, &data, &dir, &[], true);
    assert!(
        expected.lines().any(|l| l.starts_with("1 f ")),
        "perf2bolt's fdata:\n{expected}"
    );
    assert_eq!(ours, expected, "perf.data fdata ({})", dir.display());
    assert_eq!(
        std::fs::read_to_string(dir.join("pcmap.yaml")).unwrap(),
        std::fs::read_to_string(dir.join("p2b.yaml")).unwrap()
    );
    assert_eq!(
        support::perf_data_stat_lines(&stdout),
        support::perf_data_stat_lines(&p2b)
    );
    assert_eq!(support::stat_lines(&stdout), support::stat_lines(&p2b));
}

/// `--heatmap FILE`: perf2bolt 22 also draws the profile's code heatmap (llvm-bolt-heatmap's
/// outputs: FILE, FILE.csv, FILE-section-hotness.csv, FILE-4096, FILE-262144) and converts as
/// usual. pcmap writes the same files byte for byte (through the `pcmap heatmap` code), prints
/// the same `HEATMAP:` lines and the same fdata, for pre-aggregated branch and sample profiles
/// and for perf.data with branch stacks.
#[test]
fn heatmap_option_matches_perf2bolt() {
    let p1 = tk::build("perf2bolt-p1", &["perf2bolt/p1.c"], FLAGS);
    let dir = tk::scratch_dir("cli-perf2bolt-heatmap");
    let funcs = support::disassemble(&p1);
    let bin = dir.join("p1");
    std::fs::copy(&p1, &bin).unwrap();
    let data = dir.join("lbr.perf.data");
    std::fs::write(&data, support::branch_stack_perf_data(&bin, 400, 19)).unwrap();
    let mut cases: Vec<(PathBuf, Vec<&str>)> = vec![(data, vec![])];
    for (kind, basic) in [("branch", false), ("basic", true)] {
        let prof = dir.join(format!("{kind}.pa"));
        std::fs::write(&prof, support::generate(&funcs, 2000, 81, basic)).unwrap();
        cases.push((
            prof,
            if basic {
                vec!["--pa", "--ba"]
            } else {
                vec!["--pa"]
            },
        ));
    }
    let heat_lines = |out: &std::process::Output| -> Vec<String> {
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.starts_with("HEATMAP:"))
            .map(|l| l.replace("/theirs/", "/").replace("/ours/", "/"))
            .collect()
    };
    for (n, (profile, extra)) in cases.iter().enumerate() {
        let run = |exe: &mut Command, tag: &str| {
            let sub = dir.join(tag);
            let _ = std::fs::remove_dir_all(&sub);
            std::fs::create_dir_all(&sub).unwrap();
            let out = tk::run(
                exe.arg(&bin)
                    .arg("-p")
                    .arg(profile)
                    .arg("-o")
                    .arg(sub.join("out.fdata"))
                    .arg(format!("--heatmap={}", sub.join("hm").display()))
                    .args(extra),
            );
            tk::assert_success(tag, &out);
            out
        };
        let theirs = run(&mut Command::new(tk::tool("perf2bolt")), "theirs");
        let ours = run(Command::new(PCMAP).arg("perf2bolt"), "ours");
        assert_eq!(heat_lines(&ours), heat_lines(&theirs), "case {n}");
        assert!(
            heat_lines(&theirs).len() >= 4,
            "case {n}: {:?}",
            heat_lines(&theirs)
        );
        for f in [
            "hm",
            "hm.csv",
            "hm-section-hotness.csv",
            "hm-4096",
            "hm-262144",
        ] {
            let read = |tag: &str| std::fs::read(dir.join(tag).join(f)).unwrap();
            assert!(read("ours") == read("theirs"), "case {n}: {f} differs");
        }
        let fdata = |tag: &str| {
            support::sorted_lines(
                &std::fs::read_to_string(dir.join(tag).join("out.fdata")).unwrap(),
            )
            .into_iter()
            .filter(|l| !l.starts_with("no_lbr"))
            .map(str::to_string)
            .collect::<Vec<_>>()
        };
        assert_eq!(fdata("ours"), fdata("theirs"), "case {n}: fdata");
    }
}

/// `--max-samples N` stops reading a perf.data file with branch stacks after its first N samples
/// (every process's counted), as perf2bolt 22 does: same fdata and statistics, fewer records than
/// the whole file gives. And the warning for branch entries without a prediction flag, and the
/// event name of `--ba` fdata for an event the header does not name.
#[test]
fn max_samples_matches_perf2bolt() {
    let p1 = tk::build("perf2bolt-p1", &["perf2bolt/p1.c"], FLAGS);
    let dir = tk::scratch_dir("cli-perf2bolt-max-samples");
    let bin = dir.join("p1");
    std::fs::copy(&p1, &bin).unwrap();
    let data = dir.join("lbr.perf.data");
    std::fs::write(&data, support::branch_stack_perf_data(&bin, 400, 11)).unwrap();
    let (whole, _, _, _) =
        support::run_both_on_perf_data(PCMAP.as_ref(), &bin, &data, &dir, &[], false);
    // perf2bolt warns on standard error when an entry has neither branch-prediction flag (the
    // writer leaves some without); so does pcmap.
    let warning = "PERF2BOLT-WARNING: misprediction bit is missing in profile";
    let stderr_of = |cmd: &mut Command| {
        let out = tk::run_success(cmd);
        String::from_utf8_lossy(&out.stderr).contains(warning)
    };
    let theirs = stderr_of(
        Command::new(tk::tool("perf2bolt"))
            .arg(&bin)
            .arg("-p")
            .arg(&data)
            .arg("-o")
            .arg(dir.join("w.fdata")),
    );
    let ours = stderr_of(
        Command::new(PCMAP)
            .arg("perf2bolt")
            .arg(&bin)
            .arg("-p")
            .arg(&data)
            .arg("-o")
            .arg(dir.join("w2.fdata")),
    );
    assert!(theirs, "perf2bolt warns on this file");
    assert_eq!(ours, theirs, "the misprediction-bit warning");
    // The same file as basic samples: its event has no name in the header, so both name it from
    // the attribute with perf's modifiers (`cycles:uh` for a user-only event).
    let (expected, p2b, ours, _) =
        support::run_both_on_perf_data(PCMAP.as_ref(), &bin, &data, &dir, &["--ba"], false);
    assert!(
        expected.starts_with("no_lbr cycles:uh:"),
        "{p2b}\n{expected}"
    );
    let sorted = |s: &str| {
        let mut v: Vec<String> = s.lines().map(String::from).collect();
        v.sort();
        v
    };
    assert_eq!(sorted(&ours), sorted(&expected), "--ba fdata");
    for extra in [["--max-samples=150"], ["-max-samples=1"]] {
        let (expected, p2b, ours, stdout) =
            support::run_both_on_perf_data(PCMAP.as_ref(), &bin, &data, &dir, &extra, false);
        assert_ne!(
            expected, whole,
            "{extra:?} changes perf2bolt's output:\n{p2b}"
        );
        assert!(
            ours == expected,
            "{extra:?}: fdata differs; see {}",
            dir.display()
        );
        assert_eq!(
            support::perf_data_stat_lines(&stdout),
            support::perf_data_stat_lines(&p2b),
            "{extra:?}"
        );
    }
}

/// `--time-aggr` prints perf2bolt's `Aggregator` timer table after the same outputs: the same
/// title lines, and phase names perf2bolt uses (times differ; pcmap prints wall time only).
#[test]
fn time_aggr_prints_the_aggregator_timer_table() {
    let p1 = tk::build("perf2bolt-p1", &["perf2bolt/p1.c"], FLAGS);
    let dir = tk::scratch_dir("cli-perf2bolt-time-aggr");
    let funcs = support::disassemble(&p1);
    let prof = dir.join("p1.pa");
    std::fs::write(&prof, support::generate(&funcs, 1000, 5, false)).unwrap();
    fdata_yaml_and_stats_match_perf2bolt(&p1, &prof, &dir, "time-aggr", &["-time-aggr"]);
    let table = |stdout: &str| -> (Vec<String>, Vec<String>) {
        let lines: Vec<&str> = stdout
            .lines()
            .skip_while(|l| !l.starts_with("==="))
            .collect();
        let title = lines.iter().take(3).map(|l| l.to_string()).collect();
        let names = lines
            .iter()
            .filter_map(|l| l.rsplit_once("%)  ").map(|(_, n)| n.to_string()))
            .collect();
        (title, names)
    };
    let (_, p2b) = support::perf2bolt(&p1, &prof, &dir.join("a.fdata"), &["--time-aggr"]);
    let out = pcmap(&p1, &prof, &dir.join("b.fdata"), &["--time-aggr"]);
    tk::assert_success("pcmap perf2bolt --time-aggr", &out);
    let (their_title, their_names) = table(&p2b);
    let (our_title, our_names) = table(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(our_title, their_title);
    assert!(our_names.contains(&"Total".to_string()), "{our_names:?}");
    for n in &our_names {
        assert!(
            their_names.contains(n),
            "{n} is not among perf2bolt's {their_names:?}"
        );
    }
}

/// perf2bolt's `--spe` (Arm only) and `--itrace` (processor traces through `perf script`) are
/// refused with an error that says why and, for `--itrace`, what to run instead; no output.
#[test]
fn spe_and_itrace_are_refused_with_a_reason() {
    let p1 = tk::build("perf2bolt-p1", &["perf2bolt/p1.c"], FLAGS);
    let dir = tk::scratch_dir("cli-perf2bolt-refused");
    let out_path = dir.join("out.fdata");
    for (opt, says) in [
        ("-spe", "only on AArch64"),
        (
            "--itrace=i100usle",
            "perf inject -i IN --itrace=i100usle -o OUT",
        ),
    ] {
        let out = tk::run(
            Command::new(PCMAP)
                .arg("perf2bolt")
                .arg(&p1)
                .args(["-p", "/nonexistent.perf.data", "-o"])
                .arg(&out_path)
                .arg(opt),
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{opt}: {stderr}");
        assert!(stderr.contains(says), "{opt}: {stderr}");
        assert!(!out_path.exists());
    }
}

/// zstd built for BOLT (-O2, `--emit-relocs`), position-independent or not: one build of each,
/// shared by the tests that use it.
fn zstd(pie: bool) -> PathBuf {
    let (tag, pic): (&str, &[&str]) = if pie {
        ("pie", &["-fpie", "-pie"])
    } else {
        ("no-pie", &["-fno-pie", "-no-pie"])
    };
    let flags = [&["-O2", "-Wl,--emit-relocs"], pic].concat();
    tk::build_zstd(&format!("perf2bolt-zstd-{tag}"), &flags)
}

/// zstd's C library (real C, from the zstd-sys crate) linked with `--emit-relocs`, as a
/// position-independent executable and not: clang hoists the `lea` of some `switch` tables out
/// of their loops, so the dispatch block holds only `movslq; add; jmp *%reg`. BOLT still finds
/// those tables from the `lea` and, in relocation mode, reads such a jump as unknown control flow
/// (successors: every offset data refers to) rather than a tail call; absolute tables only a
/// `mov` reads count through their relocations. A table ends where the next table of the binary
/// starts, whichever function it belongs to: in the PIE build, reading
/// `ZSTD_CCtxParams_setParameter`'s table on into the next function's (its entries are offsets
/// from the table, so they can land in the wrong function) took that function's CFG away.
/// fdata, YAML and statistics (the "unknown control flow" line included) equal perf2bolt 22's.
#[test]
fn zstd_jump_tables_with_hoisted_bases_match_perf2bolt() {
    let line = "functions have instructions with unknown control flow";
    for (tag, pie) in [("no-pie", false), ("pie", true)] {
        let bin = zstd(pie);
        let dir = tk::scratch_dir(&format!("cli-perf2bolt-zstd-{tag}"));
        let prof = dir.join("zstd.pa");
        std::fs::write(&prof, support::control_flow_profile(&bin, 30000, 3)).unwrap();
        let expected = fdata_yaml_and_stats_match_perf2bolt(&bin, &prof, &dir, tag, &[]);
        assert!(expected.lines().count() > 100, "{tag}: {expected}");
        // The builds have the jumps this test is about.
        let (_, stdout) = support::perf2bolt(&bin, &prof, &dir.join("again.fdata"), &[]);
        assert!(
            stdout.contains(line),
            "{tag}: no unknown control flow:\n{stdout}"
        );
    }
}

/// `--profile-format parquet` runs `pcmap-fleet perf2bolt` (here a stand-in script named by
/// `PCMAP_FLEET` that records its arguments; the real one is tested against perf2bolt 22 in
/// pcmap-fleet's tests) with the binary, the profile, the output and the input flags; its
/// failure is pcmap's, and a missing `PCMAP_FLEET` is named.
#[test]
fn parquet_output_runs_pcmap_fleet() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tk::scratch_dir("cli-perf2bolt-parquet");
    let args_file = dir.join("args");
    let script = dir.join("fake-fleet");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$@\" > '{}'\nexit ${{FAKE_STATUS:-0}}\n",
            args_file.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let run = |status: &str, fleet: &Path| {
        // A script just written can be briefly "busy" (ETXTBSY) while a process another test
        // thread is starting still holds a copy of the writer's descriptor: run it again then.
        let mut attempts = 0;
        loop {
            let out = tk::run(
                Command::new(PCMAP)
                    .args(["perf2bolt", "prog", "-p", "prog.pa", "--pa"])
                    .args(["--ignore-build-id", "--profile-format", "parquet"])
                    .args(["-o", "shard.parquet"])
                    .env("PCMAP_FLEET", fleet)
                    .env("FAKE_STATUS", status),
            );
            attempts += 1;
            if attempts == 5 || !String::from_utf8_lossy(&out.stderr).contains("Text file busy") {
                return out;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    };
    let out = run("0", &script);
    assert!(
        out.status.success(),
        "pcmap perf2bolt --profile-format parquet: {} {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(&args_file).unwrap(),
        "perf2bolt\nprog\n-p\nprog.pa\n-o\nshard.parquet\n--pa\n--ignore-build-id\n"
    );
    let out = run("3", &script);
    assert_eq!(out.status.code(), Some(1), "a failing pcmap-fleet");
    assert!(String::from_utf8_lossy(&out.stderr).contains("fake-fleet perf2bolt failed"));
    let out = run("0", &dir.join("missing"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.code() == Some(1)
            && stderr.contains("PCMAP_FLEET=")
            && stderr.contains("missing"),
        "missing PCMAP_FLEET: {} {stderr}",
        out.status
    );
}

/// `--scan-cache DIR` on zstd (jump tables, table-less indirect jumps): the first run writes the
/// findings of the decoding pass and the model of the functions, later runs read them; fdata,
/// YAML and statistics stay perf2bolt 22's in every run. A damaged file is reported with its
/// offset and replaced, a kept model that does not fit is reported and the functions are
/// discovered again, and a cache that cannot be written costs a warning, not the run.
#[test]
fn scan_cache_keeps_perf2bolts_output() {
    let bin = zstd(false);
    let dir = tk::scratch_dir("cli-perf2bolt-scan-cache");
    let prof = dir.join("zstd.pa");
    std::fs::write(&prof, support::control_flow_profile(&bin, 30000, 5)).unwrap();
    let p2b_yaml = dir.join("p2b.yaml");
    let (expected, p2b_stdout) = support::perf2bolt(
        &bin,
        &prof,
        &dir.join("p2b.fdata"),
        &["-w", p2b_yaml.to_str().unwrap()],
    );
    let expected_yaml = std::fs::read_to_string(&p2b_yaml).unwrap();
    let cache = dir.join("cache");
    let run = |step: &str, cache: &Path| -> String {
        let (out, fdata, yaml) = pcmap_with_scan_cache(&bin, &prof, &dir, step, cache);
        assert_eq!(fdata, expected, "{step}: fdata");
        assert_eq!(yaml, expected_yaml, "{step}: YAML");
        assert_eq!(
            support::stat_lines(&String::from_utf8_lossy(&out.stdout)),
            support::stat_lines(&p2b_stdout),
            "{step}: statistics"
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let files = || -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(&cache)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        v.sort();
        v
    };

    let first = run("first", &cache);
    let [file] = &files()[..] else {
        panic!("one index expected in {}: {:?}", cache.display(), files());
    };
    assert!(
        first.contains("written") && !first.contains("warning"),
        "{first}"
    );
    let written = std::fs::read(file).unwrap();
    let second = run("second", &cache);
    assert!(
        second.contains(&format!("scan cache {}: read", file.display())),
        "{second}"
    );
    assert_eq!(
        std::fs::read(file).unwrap(),
        written,
        "a read index is left as it is"
    );

    // Damaged: cut short. Reported (file, offset, what was expected), decoded again, replaced.
    std::fs::write(file, &written[..written.len() / 2]).unwrap();
    let third = run("damaged", &cache);
    assert!(
        third.contains("pcmap: warning: scan cache")
            && third.contains(&file.display().to_string())
            && third.contains("byte offset")
            && third.contains("written"),
        "{third}"
    );
    assert_eq!(
        std::fs::read(file).unwrap(),
        written,
        "the damaged index is replaced"
    );

    // Whole, but with a kept model of the functions that is not the one the index was made on
    // (one function a byte longer): reported, the functions discovered again, the output
    // unchanged. The index is taken all the same (its findings are the model's own).
    let mut index = pcmap_perf2bolt::scan_index::ScanIndex::decode(&written).unwrap();
    let model = index
        .discovered
        .as_mut()
        .expect("the index keeps the model");
    let f = model
        .functions
        .iter_mut()
        .find(|f| f.size > 0)
        .expect("a sized function");
    f.size += 1;
    std::fs::write(file, index.encode()).unwrap();
    let misfit = run("model that does not fit", &cache);
    assert!(
        misfit.contains("pcmap: warning: scan cache: the model of the functions of")
            && misfit.contains("does not fit")
            && misfit.contains("discovering them again")
            && misfit.contains(&format!("scan cache {}: read", file.display())),
        "{misfit}"
    );

    // A cache "directory" that is a file: nothing can be written there.
    let not_a_dir = dir.join("not-a-dir");
    std::fs::write(&not_a_dir, b"").unwrap();
    let fourth = run("unwritable", &not_a_dir);
    assert!(
        fourth.contains("pcmap: warning: scan cache") && fourth.contains("not written"),
        "{fourth}"
    );
}

/// `--scan-cache` keys a binary left unchanged for a while by its identity (no read of its
/// bytes), and a binary written again in place, even with the same bytes, by a new identity: the
/// index made for the old one is not taken. Each step waits until the file is settled, so the
/// kind of key does not depend on how fast the runs are.
#[test]
fn scan_cache_keys_a_settled_binary_by_identity() {
    let dir = tk::scratch_dir("cli-perf2bolt-scan-cache-identity");
    let bin = dir.join("zstd");
    let bytes = std::fs::read(zstd(false)).unwrap();
    std::fs::write(&bin, &bytes).unwrap();
    let prof = dir.join("zstd.pa");
    std::fs::write(&prof, support::control_flow_profile(&bin, 3000, 7)).unwrap();
    let (expected, _) = support::perf2bolt(&bin, &prof, &dir.join("p2b.fdata"), &[]);
    let cache = dir.join("cache");
    let settle = || std::thread::sleep(std::time::Duration::from_millis(2200));
    let run = |step: &str| -> String {
        let (out, fdata, _) = pcmap_with_scan_cache(&bin, &prof, &dir, step, &cache);
        assert_eq!(fdata, expected, "{step}: fdata");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let indexes = || std::fs::read_dir(&cache).map_or(0, |d| d.count());

    settle();
    let first = run("first");
    assert!(
        first.contains("key of") && first.contains("its identity") && first.contains("written"),
        "{first}"
    );
    let second = run("second");
    assert!(
        second.contains("its identity") && second.contains(": read"),
        "{second}"
    );
    assert_eq!(indexes(), 1);

    // The same bytes written again: a new change time, so a new identity.
    std::fs::write(&bin, &bytes).unwrap();
    settle();
    let third = run("rewritten");
    assert!(
        third.contains("its identity") && third.contains("written") && !third.contains(": read"),
        "{third}"
    );
    assert_eq!(indexes(), 2);
}

/// A profile that touches a small part of a real program (zstd): the YAML writer then builds
/// the touched functions' CFGs stretch by stretch before aggregating (releasing the code it
/// read), a path a profile of most of the code does not take. fdata, YAML (block hashes
/// included) and statistics equal perf2bolt 22's.
#[test]
fn sparse_yaml_profiles_match_perf2bolt() {
    let bin = zstd(false);
    let dir = tk::scratch_dir("cli-perf2bolt-sparse-yaml");
    let full = support::control_flow_profile(&bin, 30000, 11);
    let profile: String = full.lines().take(25).map(|l| format!("{l}\n")).collect();
    // The precondition: the records' functions hold well under half of the code.
    let funcs = support::disassemble(&bin);
    let extent = |f: &support::Func| match (f.insns.first(), f.insns.last()) {
        (Some(a), Some(b)) => (a.addr, b.addr + 1),
        _ => (0, 0),
    };
    let total: u64 = funcs.iter().map(|f| extent(f).1 - extent(f).0).sum();
    let mut touched = std::collections::BTreeSet::new();
    for l in profile.lines().skip(1) {
        for a in l.split(' ').skip(1).take(3) {
            let Ok(a) = u64::from_str_radix(a, 16) else {
                continue;
            };
            if let Some(k) = funcs.iter().position(|f| {
                let (lo, hi) = extent(f);
                lo <= a && a < hi
            }) {
                touched.insert(k);
            }
        }
    }
    let touched_bytes: u64 = touched
        .iter()
        .map(|&k| extent(&funcs[k]).1 - extent(&funcs[k]).0)
        .sum();
    assert!(
        touched_bytes * 4 < total,
        "the profile touches {touched_bytes} of {total} bytes of code"
    );
    let prof = dir.join("sparse.pa");
    std::fs::write(&prof, profile).unwrap();
    let expected = fdata_yaml_and_stats_match_perf2bolt(&bin, &prof, &dir, "sparse", &[]);
    assert!(expected.lines().count() > 20, "{expected}");
}
