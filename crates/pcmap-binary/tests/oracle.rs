//! pcmap-binary against the LLVM 22 tools on fixture binaries the tests build themselves:
//! function symbols vs `llvm-readelf --symbols`, build-ids vs `llvm-readelf --notes`,
//! instruction boundaries and branch targets vs `llvm-objdump -d`, and BOLT's local-function
//! names vs `llvm-bolt --print-cfg`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use pcmap_binary::{Binary, BranchKind, FileKind, MappedFile};
use pcmap_testkit::{build, hex, run_ok, tool};

const PROG: &[&str] = &["binary/prog.c", "binary/other.c"];

/// Every fixture: (name, path).
fn fixtures() -> Vec<(&'static str, PathBuf)> {
    vec![
        ("prog", prog()),
        (
            "prog-pie",
            build(
                "prog-pie",
                PROG,
                &["-O1", "-fPIE", "-pie", "-Wl,--build-id=md5"],
            ),
        ),
        (
            "prog-fsections",
            build(
                "prog-fsections",
                PROG,
                &[
                    "-O2",
                    "-ffunction-sections",
                    "-Wl,--gc-sections",
                    "-Wl,--build-id=uuid",
                ],
            ),
        ),
        (
            "exc",
            build("exc", &["binary/exc.cc"], &["-O2", "-Wl,--build-id=sha1"]),
        ),
        (
            "secondary",
            build(
                "secondary",
                &["binary/secondary.s"],
                &["-nostdlib", "-static", "-Wl,-e,main", "-Wl,--build-id=sha1"],
            ),
        ),
        (
            "stripped",
            build(
                "stripped",
                PROG,
                &["-O2", "-s", "-Wl,--export-dynamic", "-Wl,--build-id=sha1"],
            ),
        ),
        (
            "i386.o",
            build(
                "i386.o",
                &["binary/freestanding.c"],
                &["--target=i386-linux-gnu", "-O2", "-c"],
            ),
        ),
        (
            "ppc64be.o",
            build(
                "ppc64be.o",
                &["binary/freestanding.c"],
                &["--target=powerpc64-linux-gnu", "-O2", "-c"],
            ),
        ),
        (
            "mips32be.o",
            build(
                "mips32be.o",
                &["binary/freestanding.c"],
                &["--target=mips-linux-gnu", "-O2", "-c"],
            ),
        ),
        (
            "aarch64.o",
            build(
                "aarch64.o",
                &["binary/freestanding.c"],
                &["--target=aarch64-linux-gnu", "-O2", "-c"],
            ),
        ),
    ]
}

fn prog() -> PathBuf {
    build(
        "prog",
        PROG,
        &[
            "-O2",
            "-fno-pie",
            "-no-pie",
            "-Wl,--emit-relocs",
            "-Wl,--build-id=sha1",
        ],
    )
}

/// `(name, value, size)` of defined FUNC/IFUNC symbols in `.symtab` (or `.dynsym` when the file
/// has no `.symtab`), as llvm-readelf prints them.
fn readelf_functions(path: &Path) -> Vec<(String, u64, u64)> {
    let text = run_ok(
        Command::new(tool("llvm-readelf"))
            .args(["--symbols", "-W"])
            .arg(path),
    );
    let mut tables: BTreeMap<String, Vec<(String, u64, u64)>> = BTreeMap::new();
    let mut current = String::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("Symbol table '") {
            current = rest.split('\'').next().unwrap().to_string();
            tables.entry(current.clone()).or_default();
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 8 || !fields[0].ends_with(':') {
            continue;
        }
        let (value, size, ty, ndx) = (fields[1], fields[2], fields[3], fields[6]);
        if !(ty == "FUNC" || ty == "IFUNC") || ndx == "UND" {
            continue;
        }
        let name = fields[7].split('@').next().unwrap().to_string();
        let size = if let Some(h) = size.strip_prefix("0x") {
            hex(h)
        } else {
            size.parse().unwrap()
        };
        tables
            .get_mut(&current)
            .unwrap()
            .push((name, hex(value), size));
    }
    let mut v = tables
        .remove(".symtab")
        .or_else(|| tables.remove(".dynsym"))
        .unwrap_or_default();
    v.sort();
    v
}

fn readelf_build_id(path: &Path) -> Option<String> {
    let text = run_ok(
        Command::new(tool("llvm-readelf"))
            .args(["--notes"])
            .arg(path),
    );
    text.lines().find_map(|l| {
        l.trim()
            .strip_prefix("Build ID: ")
            .map(|s| s.trim().to_string())
    })
}

#[test]
fn functions_and_build_ids_match_llvm_readelf() {
    for (name, path) in fixtures() {
        let file = MappedFile::open(&path).unwrap();
        let bin = Binary::parse(file.bytes()).unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut ours: Vec<(String, u64, u64)> = bin
            .function_table()
            .symbols()
            .iter()
            .map(|s| (s.name.to_string(), s.address, s.size))
            .collect();
        ours.sort();
        let theirs = readelf_functions(&path);
        assert!(
            !theirs.is_empty(),
            "{name}: llvm-readelf lists no functions"
        );
        assert_eq!(
            ours, theirs,
            "{name}: function symbols differ from llvm-readelf"
        );
        assert_eq!(
            bin.build_id_hex(),
            readelf_build_id(&path),
            "{name}: build-id"
        );
    }
}

#[test]
fn file_kinds_machines_and_classes() {
    let f = fixtures();
    let get = |n: &str| f.iter().find(|(k, _)| *k == n).unwrap().1.clone();
    let check = |n: &str, kind: FileKind, is_64: bool, le: bool| {
        let file = MappedFile::open(get(n)).unwrap();
        let bin = Binary::parse(file.bytes()).unwrap();
        assert_eq!(
            (bin.kind(), bin.is_64(), bin.is_little_endian()),
            (kind, is_64, le),
            "{n}"
        );
    };
    check("prog", FileKind::Executable, true, true);
    check("prog-pie", FileKind::PieExecutable, true, true);
    check("i386.o", FileKind::Relocatable, false, true);
    check("ppc64be.o", FileKind::Relocatable, true, false);
    check("mips32be.o", FileKind::Relocatable, false, false);
    // AArch64 is recognised but not disassembled, with a clear error.
    let file = MappedFile::open(get("aarch64.o")).unwrap();
    let bin = Binary::parse(file.bytes()).unwrap();
    assert_eq!(bin.machine(), pcmap_binary::Machine::Aarch64);
    let f0 = &bin.functions()[0];
    let err = bin
        .instructions(f0)
        .err()
        .expect("AArch64 must not decode yet")
        .to_string();
    assert!(
        err.contains("AArch64") && err.contains("not supported"),
        "{err}"
    );
}

/// One instruction line of `llvm-objdump -d --no-show-raw-insn`: address and direct target.
struct ObjdumpInsn {
    address: u64,
    target: Option<u64>,
    branch: bool,
}

fn is_branch_mnemonic(m: &str) -> bool {
    m.starts_with('j') || m.starts_with("call") || m.starts_with("loop")
}

fn objdump(path: &Path, extra: &[&str]) -> Vec<ObjdumpInsn> {
    let text = run_ok(
        Command::new(tool("llvm-objdump"))
            .args(["-d", "--no-show-raw-insn", "--no-print-imm-hex"])
            .args(extra)
            .arg(path),
    );
    let mut out = Vec::new();
    for line in text.lines() {
        let Some((addr, rest)) = line.split_once(':') else {
            continue;
        };
        let addr = addr.trim();
        if !line.starts_with(' ') || addr.is_empty() || !addr.bytes().all(|b| b.is_ascii_hexdigit())
        {
            continue;
        }
        let tokens: Vec<&str> = rest.split_whitespace().collect();
        // Skip prefixes (rep, lock, notrack, bnd, data16, ...) to the mnemonic that branches.
        let pos = tokens.iter().position(|t| is_branch_mnemonic(t));
        let (branch, target) = match pos {
            Some(p) => {
                let op = tokens.get(p + 1).copied().unwrap_or("");
                (true, op.strip_prefix("0x").map(hex))
            }
            None => (false, None),
        };
        out.push(ObjdumpInsn {
            address: u64::from_str_radix(addr, 16).unwrap(),
            target,
            branch,
        });
    }
    out
}

/// Compare every function's instruction starts and direct branch targets with objdump's.
fn compare_instructions(name: &str, path: &Path) -> usize {
    let theirs = objdump(path, &[]);
    let by_addr: BTreeMap<u64, &ObjdumpInsn> = theirs.iter().map(|i| (i.address, i)).collect();
    let file = MappedFile::open(path).unwrap();
    let bin = Binary::parse(file.bytes()).unwrap();
    let relocatable = bin.kind() == FileKind::Relocatable;
    let mut checked = 0;
    for f in bin.functions() {
        if f.size == 0
            || relocatable
                && bin
                    .functions()
                    .iter()
                    .filter(|g| g.address == f.address)
                    .count()
                    > 1
        {
            // Relocatable objects restart addresses at 0 in every section: objdump's listing
            // cannot be keyed by address there when two functions share an offset.
            continue;
        }
        let fname = bin.function_name(f);
        let ours: Vec<_> = bin.instructions(f).unwrap().collect();
        let our_starts: BTreeSet<u64> = ours.iter().map(|i| i.address()).collect();
        let their_starts: BTreeSet<u64> =
            by_addr.range(f.address..f.end()).map(|(a, _)| *a).collect();
        if our_starts != their_starts {
            let only_ours: Vec<String> = our_starts
                .difference(&their_starts)
                .take(5)
                .map(|a| format!("{a:#x}"))
                .collect();
            let only_theirs: Vec<String> = their_starts
                .difference(&our_starts)
                .take(5)
                .map(|a| format!("{a:#x}"))
                .collect();
            panic!(
                "{name}: instruction starts of {fname} differ: only pcmap {only_ours:?}, only objdump {only_theirs:?}"
            );
        }
        for i in &ours {
            let t = by_addr[&i.address()];
            let ours_branch = i.kind().is_branch() && i.kind() != BranchKind::Return;
            assert_eq!(
                ours_branch,
                t.branch,
                "{name}: branch class at {:#x} in {fname}",
                i.address()
            );
            if i.kind().is_branch() {
                assert_eq!(
                    i.target(),
                    t.target,
                    "{name}: target at {:#x} in {fname}",
                    i.address()
                );
            }
            checked += 1;
        }
    }
    checked
}

#[test]
fn instructions_match_llvm_objdump_on_fixtures() {
    for (name, path) in fixtures() {
        if name == "aarch64.o" || name == "ppc64be.o" || name == "mips32be.o" {
            continue;
        }
        let n = compare_instructions(name, &path);
        assert!(n > 10, "{name}: only {n} instructions compared");
    }
}

#[test]
fn instructions_match_llvm_objdump_on_lld() {
    // A large binary from the Debian packages (about 4 MB of .text); its symbols come from .dynsym.
    let lld = tool("lld");
    let n = compare_instructions("lld", &lld);
    assert!(n > 1000, "only {n} instructions of lld compared");

    // Its symbols cover little of the code, so also decode all of .text linearly and compare
    // every instruction start and direct target objdump prints.
    let file = MappedFile::open(&lld).unwrap();
    let bin = Binary::parse(file.bytes()).unwrap();
    let text = bin.section_by_name(".text").unwrap();
    let ours: Vec<_> = bin.decode(text.raw, text.address).unwrap().collect();
    let theirs = objdump(&lld, &["--section=.text"]);
    assert!(
        theirs.len() > 500_000,
        "objdump listed only {} instructions",
        theirs.len()
    );
    let mut mismatches = Vec::new();
    let mut j = 0;
    for i in &ours {
        while j < theirs.len() && theirs[j].address < i.address() {
            mismatches.push(format!("objdump-only start {:#x}", theirs[j].address));
            j += 1;
        }
        match theirs.get(j) {
            Some(t) if t.address == i.address() => {
                let ours_branch = i.kind().is_branch() && i.kind() != BranchKind::Return;
                if ours_branch != t.branch || (ours_branch && i.target() != t.target) {
                    mismatches.push(format!(
                        "branch at {:#x}: pcmap {:?} {:?}, objdump {:?}",
                        i.address(),
                        i.kind(),
                        i.target(),
                        t.target
                    ));
                }
                j += 1;
            }
            _ => mismatches.push(format!("pcmap-only start {:#x}", i.address())),
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} mismatches in lld .text, first: {:?}",
        mismatches.len(),
        &mismatches[..mismatches.len().min(10)]
    );
    assert_eq!(ours.len(), theirs.len());
}

/// `llvm-bolt --print-cfg` lists every function it processed with all its names.
fn bolt_function_names(path: &Path) -> Vec<(String, BTreeSet<String>)> {
    let out = Command::new(tool("llvm-bolt"))
        .arg(path)
        .args(["-o", "/dev/null", "--print-cfg"])
        .output()
        .expect("run llvm-bolt");
    pcmap_testkit::assert_success(
        &format!("llvm-bolt {} -o /dev/null --print-cfg", path.display()),
        &out,
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let mut result: Vec<(String, BTreeSet<String>)> = Vec::new();
    let mut in_names = false;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("Binary Function \"") {
            let quoted = rest.split('"').next().unwrap();
            let primary = quoted.split("(*").next().unwrap().to_string();
            result.push((primary.clone(), BTreeSet::from([primary])));
            in_names = false;
            continue;
        }
        if let Some(rest) = line.strip_prefix("  All names   : ") {
            result.last_mut().unwrap().1.insert(rest.trim().to_string());
            in_names = true;
            continue;
        }
        if in_names && line.starts_with("                ") {
            result.last_mut().unwrap().1.insert(line.trim().to_string());
            continue;
        }
        in_names = false;
    }
    result
}

#[test]
fn local_function_names_match_bolt() {
    let path = prog();
    let file = MappedFile::open(&path).unwrap();
    let bin = Binary::parse(file.bytes()).unwrap();
    let bolt = bolt_function_names(&path);
    assert!(bolt.len() > 10);
    let mut seen_second_helper = false;
    for (primary, all) in &bolt {
        let f = bin
            .function_table()
            .by_name(primary)
            .next()
            .unwrap_or_else(|| panic!("BOLT function {primary} not found by its BOLT name"));
        let names = bin.function_table().names_of(f);
        assert_eq!(&*names[0].bolt_name, primary.as_str(), "primary BOLT name");
        for s in names.iter().filter(|s| !s.is_ifunc) {
            assert!(
                all.contains(&s.bolt_name.to_string()),
                "{} not among BOLT's names {all:?}",
                s.bolt_name
            );
            if let Some(alt) = s.bolt_file_name.as_deref() {
                assert!(
                    all.iter().any(|n| n == alt),
                    "{alt} not among BOLT's names {all:?}"
                );
            }
        }
        seen_second_helper |= primary == "helper/2";
    }
    assert!(
        seen_second_helper,
        "fixture must have two local functions named helper"
    );
}
