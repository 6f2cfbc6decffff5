//! `pcmap info` against llvm-readelf, and the CLI's error and exit-code contract.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use pcmap_testkit::{build, hex, run_ok, scratch_dir, tool};
use serde_json::Value;

fn pcmap() -> Command {
    Command::new(env!("CARGO_BIN_EXE_pcmap"))
}

fn prog() -> PathBuf {
    build(
        "prog",
        &["binary/prog.c", "binary/other.c"],
        &[
            "-O2",
            "-fno-pie",
            "-no-pie",
            "-Wl,--emit-relocs",
            "-Wl,--build-id=sha1",
        ],
    )
}

fn json(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "pcmap failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("valid JSON")
}

/// `(name, type, address, size)` of every section, from `llvm-readelf -S -W`.
fn readelf_sections(path: &Path) -> Vec<(String, String, u64, u64)> {
    let text = run_ok(
        Command::new(tool("llvm-readelf"))
            .args(["-S", "-W"])
            .arg(path),
    );
    text.lines()
        .filter_map(|l| {
            let l = l.trim_start();
            let rest = l.strip_prefix('[')?;
            let (idx, rest) = rest.split_once(']')?;
            if idx.trim() == "0" || idx.trim() == "Nr" {
                return None;
            }
            let f: Vec<&str> = rest.split_whitespace().collect();
            Some((f[0].to_string(), f[1].to_string(), hex(f[2]), hex(f[4])))
        })
        .collect()
}

#[test]
fn info_json_agrees_with_llvm_readelf() {
    let path = prog();
    let v = json(
        &pcmap()
            .arg("info")
            .arg(&path)
            .arg("--json")
            .output()
            .unwrap(),
    );
    assert_eq!(v["kind"], "executable (ET_EXEC)");
    assert_eq!(v["machine"], "x86-64");
    assert_eq!(v["class"], "ELF64");
    let notes = run_ok(Command::new(tool("llvm-readelf")).arg("--notes").arg(&path));
    let build_id = notes
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
        .unwrap()
        .trim();
    assert_eq!(v["build_id"], build_id);
    let ours: Vec<(String, String, u64, u64)> = v["sections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_string(),
                s["type"].as_str().unwrap().to_string(),
                hex(s["address"].as_str().unwrap()),
                s["size"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(ours, readelf_sections(&path));
    assert_eq!(v["has"]["bolt_bat"], false);
    assert_eq!(v["has"]["debug_info"], false);

    let funcs = json(
        &pcmap()
            .args(["info", "--functions", "--json"])
            .arg(&path)
            .output()
            .unwrap(),
    );
    let names: Vec<&str> = funcs
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"main") && names.contains(&"fib"));
    let helper2 = funcs
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["bolt_name"] == "helper/2")
        .expect("helper/2");
    assert_eq!(helper2["bolt_file_name"], "helper/other.c/1");
}

#[test]
fn info_reports_sections_pcmap_cares_about() {
    let bbmap = build(
        "info-bbaddrmap",
        &["binary/prog.c", "binary/other.c"],
        &["-O2", "-g", "-fbasic-block-address-map"],
    );
    let v = json(
        &pcmap()
            .arg("info")
            .arg(&bbmap)
            .arg("--json")
            .output()
            .unwrap(),
    );
    assert_eq!(v["has"]["bb_addr_map"], true);
    assert_eq!(v["has"]["debug_info"], true);
    let text = pcmap().arg("info").arg(&bbmap).output().unwrap();
    pcmap_testkit::assert_success(&format!("pcmap info {}", bbmap.display()), &text);
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(
        text.contains("basic-block address map (SHT_LLVM_BB_ADDR_MAP): yes"),
        "{text}"
    );
}

fn expect_bad_input(bytes: &[u8], needles: &[&str]) {
    let dir = scratch_dir("info-bad");
    let path = dir.join("bad.elf");
    std::fs::write(&path, bytes).unwrap();
    let out = pcmap().arg("info").arg(&path).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "exit code; stderr: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stderr.contains("bad.elf"), "the file is named: {stderr}");
    for n in needles {
        assert!(stderr.contains(n), "expected {n:?} in: {stderr}");
    }
}

#[test]
fn malformed_inputs_exit_1_with_located_errors() {
    let good = std::fs::read(prog()).unwrap();
    expect_bad_input(&good[..40], &["file header", "needs 64"]);
    let mut b = good.clone();
    let len = b.len() as u64;
    b[0x28..0x30].copy_from_slice(&(len - 8).to_le_bytes());
    expect_bad_input(&b, &["section header table", "past the end of the file"]);
    let mut b = good.clone();
    let shoff = u64::from_le_bytes(b[0x28..0x30].try_into().unwrap()) as usize;
    b[shoff + 64..shoff + 68].copy_from_slice(&0x00ff_ffffu32.to_le_bytes());
    expect_bad_input(&b, &["name of section 1", "outside"]);
    expect_bad_input(b"hello", &["not an ELF file"]);

    // A compressed section with a corrupt stream: `info` checks every compressed section.
    let g = build(
        "prog-g-zlib",
        &["binary/prog.c", "binary/other.c"],
        &["-O2", "-g", "-gz=zlib"],
    );
    let mut b = std::fs::read(&g).unwrap();
    let v = json(&pcmap().arg("info").arg(&g).arg("--json").output().unwrap());
    let s = v["sections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == ".debug_info")
        .unwrap();
    assert_eq!(s["compressed"], "zlib");
    let off = hex(s["offset"].as_str().unwrap()) as usize;
    let size = s["size"].as_u64().unwrap() as usize;
    for x in &mut b[off + 26..off + size] {
        *x ^= 0xa5;
    }
    expect_bad_input(&b, &[".debug_info", "cannot decompress", "zlib"]);

    let missing = pcmap()
        .args(["info", "/nonexistent/file"])
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("/nonexistent/file"));
}

#[test]
fn usage_errors_exit_2_and_help_explains() {
    let out = pcmap().args(["info"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = pcmap().args(["no-such-subcommand"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let help = pcmap().arg("--help").output().unwrap();
    pcmap_testkit::assert_success("pcmap --help", &help);
    let help = String::from_utf8(help.stdout).unwrap();
    assert!(
        help.contains("info") && help.contains("Describe an ELF binary"),
        "{help}"
    );
}
