//! `pcmap inline encode` / `pcmap inline decode` against the oracles: llvm-dwarfdump's count of
//! inlined functions, bpftool's raw dump of the split BTF, llvm-readelf / llvm-objcopy on the
//! rewritten ELF, and running it.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use pcmap_testkit::{build, build_with, run, run_ok, scratch_dir, tool};

const FORMATS: [&str; 4] = ["rfc", "btf-2025", "btf-2026", "compact"];

fn pcmap() -> Command {
    Command::new(env!("CARGO_BIN_EXE_pcmap"))
}

fn fixtures() -> Vec<(&'static str, PathBuf)> {
    vec![
        (
            "clang",
            build("btf-inl-clang", &["btf/inl.c"], &["-O2", "-g"]),
        ),
        (
            "gcc",
            build_with("gcc", "btf-inl-gcc", &["btf/inl.c"], &["-O2", "-g"]),
        ),
    ]
}

/// "#inlined functions" of `llvm-dwarfdump --statistics`.
fn dwarfdump_inlined(bin: &Path) -> u64 {
    let stats = run_ok(
        Command::new(tool("llvm-dwarfdump"))
            .arg("--statistics")
            .arg(bin),
    );
    let line = stats
        .lines()
        .find(|l| l.contains("\"#inlined functions\""))
        .expect("statistics line");
    line.split(':')
        .nth(1)
        .unwrap()
        .trim()
        .trim_end_matches(',')
        .parse()
        .unwrap()
}

struct Encoded {
    blob: PathBuf,
    types: PathBuf,
    base: PathBuf,
    elf: PathBuf,
}

fn encode(bin: &Path, format: &str, dir: &Path, tag: &str) -> Encoded {
    let e = Encoded {
        blob: dir.join(format!("{tag}.{format}")),
        types: dir.join(format!("{tag}.{format}.types")),
        base: dir.join(format!("{tag}.base")),
        elf: dir.join(format!("{tag}.{format}.elf")),
    };
    run_ok(
        pcmap()
            .args(["inline", "encode"])
            .arg(bin)
            .args(["--format", format, "-o"])
            .arg(&e.blob)
            .arg("--types")
            .arg(&e.types)
            .arg("--base-out")
            .arg(&e.base)
            .arg("--into")
            .arg(&e.elf),
    );
    e
}

fn decode_sites(args: &[&Path], extra: &[&str]) -> Vec<String> {
    let mut cmd = pcmap();
    cmd.args(["inline", "decode"]).arg(args[0]);
    if let Some(b) = args.get(1) {
        cmd.arg("--base").arg(b);
    }
    if let Some(t) = args.get(2) {
        cmd.arg("--types").arg(t);
    }
    cmd.args(extra).arg("--sites");
    let text = run_ok(&mut cmd);
    // One entry per site: the SITE line and its parameter lines.
    let mut sites = Vec::new();
    for line in text.lines() {
        if line.starts_with("SITE") {
            sites.push(line.to_string());
        } else if let Some(last) = sites.last_mut() {
            last.push('|');
            last.push_str(line.trim());
        }
    }
    sites.sort();
    sites
}

#[test]
fn every_encoding_decodes_back_to_the_same_sites() {
    let dir = scratch_dir("inline-btf-roundtrip");
    for (cc, bin) in fixtures() {
        let inlined = dwarfdump_inlined(&bin);
        let mut lossless = Vec::new();
        for format in FORMATS {
            let e = encode(&bin, format, &dir, cc);
            let sites = decode_sites(&[&e.blob, &e.base, &e.types], &["--format", format]);
            // Every DW_TAG_inlined_subroutine of the fixture has code, so every one is a site.
            assert_eq!(
                sites.len() as u64,
                inlined,
                "{cc} {format}: sites vs llvm-dwarfdump #inlined functions"
            );
            // Decoding from the rewritten ELF (base from its .BTF, types from .BTF.extra) gives the same.
            assert_eq!(
                decode_sites(&[&e.elf], &[]),
                sites,
                "{cc} {format}: decoding the ELF copy"
            );
            if format == "btf-2026" || format == "compact" {
                // Both keep every location the model has: same sites, same parameter lines.
                lossless.push(sites.clone());
            }
        }
        assert_eq!(
            lossless[0], lossless[1],
            "{cc}: btf-2026 and compact decode to different sites"
        );
        assert!(
            lossless[0].iter().any(|s| s.contains("reg=")),
            "{cc}: no register locations at all?"
        );
    }
}

#[test]
fn split_types_are_accepted_by_bpftool_and_decode_prints_the_same() {
    let dir = scratch_dir("inline-btf-bpftool");
    for (cc, bin) in fixtures() {
        for format in FORMATS {
            let e = encode(&bin, format, &dir, cc);
            let theirs = run_ok(
                Command::new(tool("bpftool"))
                    .args(["btf", "dump", "-B"])
                    .arg(&e.base)
                    .arg("file")
                    .arg(&e.types)
                    .args(["format", "raw"]),
            );
            assert!(
                theirs.contains("FUNC 'mix' type_id="),
                "{cc} {format}: {theirs}"
            );
            assert!(theirs.contains("FUNC_PROTO"), "{cc} {format}");
            let ours = run_ok(
                pcmap()
                    .args(["inline", "decode"])
                    .arg(&e.types)
                    .arg("--base")
                    .arg(&e.base),
            );
            assert_eq!(ours, theirs, "{cc} {format}");
            // The base itself (written by pahole), dumped without --base.
            let base_theirs = run_ok(
                Command::new(tool("bpftool"))
                    .args(["btf", "dump", "file"])
                    .arg(&e.base)
                    .args(["format", "raw"]),
            );
            let base_ours = run_ok(pcmap().args(["inline", "decode"]).arg(&e.base));
            assert_eq!(base_ours, base_theirs, "{cc}: base BTF");
            if format.starts_with("btf-") {
                let full = run_ok(
                    pcmap()
                        .args(["inline", "decode"])
                        .arg(&e.blob)
                        .arg("--base")
                        .arg(&e.base),
                );
                assert!(
                    full.starts_with(&theirs),
                    "{cc} {format}: the blob's standard records differ from the types file"
                );
                assert!(full.contains("LOCSEC 'inline.text'"), "{cc} {format}");
            }
        }
    }
}

#[test]
fn into_writes_an_elf_the_llvm_tools_accept_and_that_still_runs() {
    let dir = scratch_dir("inline-btf-into");
    for (cc, bin) in fixtures() {
        for format in ["btf-2026", "rfc"] {
            let e = encode(&bin, format, &dir, cc);
            let sections = run_ok(Command::new(tool("llvm-readelf")).arg("-SW").arg(&e.elf));
            let name = if format == "rfc" {
                ".BTF.inline"
            } else {
                ".BTF.extra"
            };
            assert!(
                sections.contains(name) && sections.contains(" .BTF "),
                "{cc} {format}: {sections}"
            );
            let dumped = dir.join(format!("{cc}.{format}.dumped"));
            run_ok(
                Command::new(tool("llvm-objcopy"))
                    .arg(format!("--dump-section={name}={}", dumped.display()))
                    .arg(&e.elf)
                    .arg(dir.join("discard")),
            );
            assert_eq!(
                std::fs::read(&dumped).unwrap(),
                std::fs::read(&e.blob).unwrap(),
                "{cc} {format}"
            );
            let a = run_ok(Command::new(&bin).arg0("inl").arg("q"));
            let b = run_ok(Command::new(&e.elf).arg0("inl").arg("q"));
            assert_eq!(a, b, "{cc} {format}");
        }
    }
}

#[test]
fn bad_input_fails_cleanly_without_output() {
    let dir = scratch_dir("inline-btf-bad");
    let (_, bin) = fixtures().remove(0);
    let e = encode(&bin, "btf-2026", &dir, "ok");
    // A corrupted blob: error, exit 1, no panic.
    let mut blob = std::fs::read(&e.blob).unwrap();
    let n = blob.len();
    blob.truncate(n - 7);
    let bad = dir.join("bad.btf");
    std::fs::write(&bad, &blob).unwrap();
    let out = run(pcmap()
        .args(["inline", "decode"])
        .arg(&bad)
        .arg("--base")
        .arg(&e.base));
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("pcmap: error:"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Not an ELF: error, exit 1, no output file.
    let target = dir.join("never.btf");
    let out = run(pcmap()
        .args(["inline", "encode"])
        .arg(&bad)
        .arg("-o")
        .arg(&target));
    assert_eq!(out.status.code(), Some(1));
    assert!(!target.exists());
}
