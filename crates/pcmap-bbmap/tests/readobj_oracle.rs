//! The decoder against llvm-readobj 22: for every fixture (compiled with clang-22 with each
//! map-producing flag, linked with lld, compressed with llvm-objcopy, or written with yaml2obj in
//! all four ELF classes/byte orders) our llvm-readobj-style JSON must equal
//! `llvm-readobj --elf-output-style=JSON --bb-addr-map` field for field, and every file
//! llvm-readobj refuses to dump must be refused.

use std::path::{Path, PathBuf};
use std::process::Command;

use pcmap_bbmap::elf::{ReadOptions, read_elf};
use pcmap_testkit::{build, derive, derived, fixtures_dir, run, run_ok, scratch_dir, tool};
use serde_json::Value;

/// llvm-readobj's verdict: `Err(warnings)` when it could not dump a map section.
pub fn readobj(path: &Path) -> Result<Value, String> {
    let out = run(Command::new(tool("llvm-readobj"))
        .args(["--elf-output-style=JSON", "--bb-addr-map"])
        .arg(path));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success() || !stderr.is_empty(),
        "readobj failed on {}",
        path.display()
    );
    if stderr.contains("unable to") {
        return Err(stderr);
    }
    // llvm-readobj repeats the "BBAddrMap" key once per map section: merge the lists.
    let text = String::from_utf8_lossy(&out.stdout)
        .replace(",\"BBAddrMap\":[]", "")
        .replace("],\"BBAddrMap\":[", ",");
    let mut v: Value = serde_json::from_str(&text).expect("readobj JSON");
    let top = v[0].as_object_mut().expect("object");
    top.entry("BBAddrMap").or_insert(Value::Array(vec![]));
    let fs = top["FileSummary"].as_object_mut().expect("summary");
    fs.remove("File");
    fs.remove("LoadName");
    Ok(v)
}

fn ours(path: &Path) -> Result<Value, String> {
    let data = std::fs::read(path).expect("read fixture");
    let maps = read_elf(&data, ReadOptions::default()).map_err(|e| e.to_string())?;
    let text = pcmap_bbmap::readobj::render_file("x", &maps);
    let mut v: Value = serde_json::from_str(&text).expect("our JSON parses");
    v[0]["FileSummary"].as_object_mut().unwrap().remove("File");
    Ok(v)
}

fn check(path: &Path) {
    match (readobj(path), ours(path)) {
        (Ok(a), Ok(b)) => {
            if a != b {
                let fa = &a[0]["BBAddrMap"];
                let fb = &b[0]["BBAddrMap"];
                panic!(
                    "{}: JSON differs\nreadobj: {}\nours:    {}",
                    path.display(),
                    serde_json::to_string(fa).unwrap(),
                    serde_json::to_string(fb).unwrap()
                );
            }
        }
        (Err(_), Err(_)) => {}
        (Err(w), Ok(_)) => panic!("{}: readobj rejects ({w}) but we accept", path.display()),
        (Ok(_), Err(e)) => panic!("{}: readobj accepts but we reject: {e}", path.display()),
    }
}

fn src(name: &str) -> String {
    format!("bbmap/{name}")
}

const BB: &[&str] = &["-O2", "-fbasic-block-address-map"];

fn flags(extra: &[&str]) -> Vec<String> {
    BB.iter().chain(extra).map(|s| s.to_string()).collect()
}

fn b(name: &str, file: &str, extra: &[&str]) -> PathBuf {
    let f = flags(extra);
    let f: Vec<&str> = f.iter().map(String::as_str).collect();
    build(name, &[&src(file)], &f)
}

/// Compiled fixtures covering every feature clang-22 emits.
pub fn compiled_corpus() -> Vec<PathBuf> {
    let fx = fixtures_dir().join("src/bbmap");
    let clusters = format!(
        "-fbasic-block-sections=list={}",
        fx.join("clusters.txt").display()
    );
    let cfg = format!(
        "-fbasic-block-sections=list={}",
        fx.join("cfg.txt").display()
    );
    let mut v = vec![
        b("bb-basic.o", "basic.c", &["-c"]),
        b("bb-basic.exe", "basic.c", &[]),
        b("bb-basic-nopie.exe", "basic.c", &["-fno-pie", "-no-pie"]),
        b(
            "bb-labels.o",
            "basic.c",
            &["-c", "-fbasic-block-sections=labels", "-Wno-deprecated"],
        ),
        b("bb-fsec.o", "fsec.c", &["-c", "-ffunction-sections"]),
        b(
            "bb-fsec-gc.exe",
            "fsec.c",
            &["-ffunction-sections", "-Wl,--gc-sections"],
        ),
        b("bb-eh.o", "eh.cc", &["-c"]),
        b("bb-eh.exe", "eh.cc", &[]),
        b("bb-jumptable.exe", "jumptable.c", &[]),
        build(
            "bb-zero.o",
            &[&src("zero.c")],
            &["-O0", "-fbasic-block-address-map", "-c"],
        ),
        b("bb-hash.o", "basic.c", &["-c", "-mllvm", "-emit-bb-hash"]),
        b("bb-hash.exe", "hotcold.c", &["-mllvm", "-emit-bb-hash"]),
        b(
            "bb-pgo-noprofile.o",
            "basic.c",
            &["-c", "-mllvm", "-pgo-analysis-map=all"],
        ),
        b(
            "bb-skip.o",
            "basic.c",
            &[
                "-c",
                "-mllvm",
                "-pgo-analysis-map=func-entry-count",
                "-mllvm",
                "-basic-block-address-map-skip-bb-entries",
            ],
        ),
        b(
            "bb-crel.o",
            "basic.c",
            &["-c", "-Wa,--crel,--allow-experimental-crel"],
        ),
        b(
            "bb-aarch64.o",
            "basic.c",
            &["-c", "--target=aarch64-linux-gnu"],
        ),
        b("bb-clusters.exe", "hotcold.c", &[&clusters]),
        b("bb-clusters.o", "hotcold.c", &["-c", &clusters]),
        b(
            "bb-postlink.o",
            "hotcold.c",
            &[
                "-c",
                &cfg,
                "-mllvm",
                "-pgo-analysis-map=bb-freq,br-prob",
                "-mllvm",
                "-pgo-analysis-map-emit-bb-sections-cfg",
            ],
        ),
        build("bb-asm.o", &[&src("asm.s")], &["-c"]),
    ];
    // zlib- and zstd-compressed maps.
    let exe = b("bb-basic.exe", "basic.c", &[]);
    for alg in ["zlib", "zstd"] {
        v.push(derive(&derived(&exe, alg), |tmp| {
            std::fs::copy(&exe, tmp).unwrap();
            run_ok(
                Command::new(tool("llvm-objcopy"))
                    .arg(format!("--compress-sections=.llvm_bb_addr_map={alg}"))
                    .arg(tmp),
            );
        }));
    }
    // A real instrumentation profile: PGO analysis map and machine function splitting.
    let profdata = pgo_profile();
    let use_flag = format!("-fprofile-instr-use={}", profdata.display());
    v.push(b(
        "bb-mfs.exe",
        "hotcold.c",
        &[&use_flag, "-fsplit-machine-functions"],
    ));
    v.push(b(
        "bb-mfs.o",
        "hotcold.c",
        &["-c", &use_flag, "-fsplit-machine-functions"],
    ));
    v.push(b(
        "bb-pgo.exe",
        "hotcold.c",
        &[&use_flag, "-mllvm", "-pgo-analysis-map=all"],
    ));
    v
}

/// Instrumented build of hotcold.c, run, merged into a `.profdata`.
pub fn pgo_profile() -> PathBuf {
    let instr = build(
        "bb-hotcold-instr",
        &[&src("hotcold.c")],
        &["-O2", "-fprofile-instr-generate"],
    );
    derive(&derived(&instr, "profdata"), |tmp| {
        let dir = scratch_dir("bb-pgo");
        let raw = dir.join("p.profraw");
        run_ok(
            Command::new(&instr)
                .arg("200000")
                .env("LLVM_PROFILE_FILE", &raw),
        );
        run_ok(
            Command::new(tool("llvm-profdata"))
                .args(["merge", "-o"])
                .arg(tmp)
                .arg(&raw),
        );
    })
}

#[test]
fn compiled_fixtures_match_readobj() {
    let corpus = compiled_corpus();
    for p in &corpus {
        check(p);
    }
    // The flags really produced the features they are meant to cover.
    let all: Vec<Value> = corpus.iter().map(|p| ours(p).unwrap()).collect();
    let text = serde_json::to_string(&all).unwrap();
    for needle in [
        "\"HasTailCall\":true",
        "\"IsEHPad\":true",
        "\"HasIndirectBranch\":true",
        "\"Callsite End Offsets\"",
        "\"Hash\":",
        "\"PostLink Frequency\"",
        "\"FuncEntryCount\"",
        "\"Successors\"",
    ] {
        assert!(text.contains(needle), "no fixture covers {needle}");
    }
    assert!(
        text.contains("\"Size\":0,") || text.contains("\"Size\":0}"),
        "no fixture has a zero-sized block"
    );
    let mfs = ours(
        &corpus
            .iter()
            .find(|p| p.to_string_lossy().contains("bb-mfs.exe"))
            .unwrap()
            .clone(),
    )
    .unwrap();
    assert!(
        mfs[0]["BBAddrMap"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["Function"]["BB Ranges"].as_array().unwrap().len() > 1),
        "machine function splitting gave no second range"
    );
}

#[test]
fn gc_sections_drops_the_map_of_a_removed_function() {
    let exe = b(
        "bb-fsec-gc.exe",
        "fsec.c",
        &["-ffunction-sections", "-Wl,--gc-sections"],
    );
    let v = ours(&exe).unwrap();
    let names: Vec<&str> = v[0]["BBAddrMap"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["Function"]["Name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"used") && !names.contains(&"unused_function"),
        "{names:?}"
    );
    let obj = b("bb-fsec.o", "fsec.c", &["-c", "-ffunction-sections"]);
    let maps = read_elf(&std::fs::read(obj).unwrap(), ReadOptions::default()).unwrap();
    assert!(
        maps.sections.len() >= 3,
        "one map section per function section"
    );
}

/// llvm-readobj 22 refuses REL relocations (i386 objects), so the object is checked against the
/// same object linked with its only text section at 0x500000: addresses are section offsets + 0x500000.
#[test]
fn i386_rel_object_matches_the_object_linked_at_zero() {
    let obj = b("bb-i386.o", "basic.c", &["-c", "--target=i386-linux-gnu"]);
    assert!(
        readobj(&obj).is_err(),
        "readobj 22 is expected to reject REL maps"
    );
    let linked = derive(&derived(&obj, "at0"), |tmp| {
        run_ok(
            Command::new(tool("ld.lld"))
                .args(["-m", "elf_i386", "-e", "0", "-Ttext=0x500000"])
                .arg(&obj)
                .arg("-o")
                .arg(tmp),
        );
    });
    let mut expected = readobj(&linked).expect("readobj reads the linked file");
    let mut got = ours(&obj).expect("we read REL objects");
    for f in got[0]["BBAddrMap"].as_array_mut().unwrap() {
        let f = &mut f["Function"];
        f["At"] = (f["At"].as_u64().unwrap() + 0x500000).into();
        for r in f["BB Ranges"].as_array_mut().unwrap() {
            r["Base Address"] = (r["Base Address"].as_u64().unwrap() + 0x500000).into();
        }
    }
    assert_eq!(
        got[0]["BBAddrMap"].take(),
        expected[0]["BBAddrMap"].take(),
        "i386 REL object"
    );
}

/// Every YAML file under fixtures/src/bbmap/yaml, in ELF64/ELF32 and little/big endian.
#[test]
fn yaml2obj_files_match_readobj() {
    let dir = fixtures_dir().join("src/bbmap/yaml");
    let out = scratch_dir("bb-yaml");
    let mut n = 0;
    let mut rejected = 0;
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        for (class, data) in [("64", "LSB"), ("64", "MSB"), ("32", "LSB"), ("32", "MSB")] {
            let t = text
                .replace("ELFCLASS64", &format!("ELFCLASS{class}"))
                .replace("ELFDATA2LSB", &format!("ELFDATA2{data}"));
            let y = out.join(format!("{stem}-{class}{data}.yaml"));
            let elf = y.with_extension("elf");
            std::fs::write(&y, t).unwrap();
            let made = run(Command::new(tool("yaml2obj")).arg(&y).arg("-o").arg(&elf));
            if !made.status.success() {
                // Only 64-bit-only values (e.g. a 33-bit addend) may fail in ELF32 variants.
                assert_eq!(class, "32", "yaml2obj failed on {}", y.display());
                continue;
            }
            check(&elf);
            n += 1;
            if readobj(&elf).is_err() {
                rejected += 1;
                if class == "64" && data == "LSB" {
                    assert!(stem.starts_with("bad-"), "{stem} unexpectedly rejected");
                }
            } else {
                assert!(!stem.starts_with("bad-"), "{stem} unexpectedly accepted");
            }
        }
    }
    assert!(n >= 100 && rejected >= 70, "{n} files, {rejected} rejected");
}
