//! `pcmap perf2bolt` on perf.data of position-independent executables and shared libraries,
//! against perf2bolt 22: run-time addresses are mapped to the binary's addresses through the
//! `MMAP2` events (several mappings, several processes, `--pid`), as perf2bolt does.
//!
//! Basic samples are recorded here with `perf record -e cpu-clock`; branch stacks (which need a
//! PMU) are written with pcmap-profile's perf.data writer at non-zero load addresses.

#[path = "../../pcmap-perf2bolt/tests/support/mod.rs"]
mod support;
use support::normalized_fdata as normalized;
use support::perf_data_stat_lines as stats;

use std::path::{Path, PathBuf};
use std::process::Command;

use pcmap_profile::perfdata::{BranchEntry, writer};
use pcmap_testkit as tk;

const PCMAP: &str = env!("CARGO_BIN_EXE_pcmap");
const PIE: &[&str] = &[
    "-O2",
    "-fpie",
    "-pie",
    "-Wl,--emit-relocs",
    "-Wl,--build-id",
];
const SHARED: &[&str] = &[
    "-O2",
    "-fPIC",
    "-shared",
    "-Wl,--emit-relocs",
    "-Wl,--build-id",
    "-Wl,-soname,libhot.so",
];

/// The PIE program in `dir` (copied, so perf's mmap events name it there).
fn pie_program(dir: &Path) -> PathBuf {
    let p = tk::build("perf2bolt-p1-pie", &["perf2bolt/p1.c"], PIE);
    let bin = dir.join("p1pie");
    std::fs::copy(&p, &bin).unwrap();
    bin
}

/// `libhot.so` and a PIE program using it, both in `dir`.
fn library_and_program(dir: &Path) -> (PathBuf, PathBuf) {
    let lib = tk::build("perf2bolt-libhot", &["perf2bolt/libhot.c"], SHARED);
    let lib_path = lib.to_str().unwrap().to_string();
    let prog = tk::build(
        "perf2bolt-uselib",
        &["perf2bolt/uselib.c", &lib_path],
        &["-O2", "-fpie", "-pie"],
    );
    let (l, p) = (dir.join("libhot.so"), dir.join("uselib"));
    std::fs::copy(&lib, &l).unwrap();
    std::fs::copy(&prog, &p).unwrap();
    (l, p)
}

fn record(dir: &Path, program: &Path, data: &Path) {
    tk::run_ok(
        Command::new(tk::tool("perf"))
            .env("LD_LIBRARY_PATH", dir)
            .args(["record", "-q", "-e", "cpu-clock", "-o"])
            .arg(data)
            .arg("--")
            .arg(program)
            .arg("20000000"),
    );
}

fn check_basic(bin: &Path, data: &Path, dir: &Path) {
    let (expected, p2b, ours, stdout) =
        support::run_both_on_perf_data(PCMAP.as_ref(), bin, data, dir, &["--ba"], false);
    assert!(
        expected.lines().count() > 2,
        "too few samples recorded:\n{expected}\n{p2b}"
    );
    assert_eq!(normalized(&ours), normalized(&expected));
    assert_eq!(stats(&stdout), stats(&p2b));
}

#[test]
fn perf_data_basic_samples_of_a_pie_executable_match_perf2bolt() {
    let dir = tk::scratch_dir("cli-perf2bolt-pie-ba");
    let bin = pie_program(&dir);
    let data = dir.join("pie.perf.data");
    record(&dir, &bin, &data);
    check_basic(&bin, &data, &dir);
}

#[test]
fn perf_data_basic_samples_of_a_shared_library_match_perf2bolt() {
    let dir = tk::scratch_dir("cli-perf2bolt-dso-ba");
    let (lib, prog) = library_and_program(&dir);
    let data = dir.join("dso.perf.data");
    record(&dir, &prog, &data);
    check_basic(&lib, &data, &dir);
}

/// The build-id of `bin` (from llvm-readelf).
fn build_id(bin: &Path) -> Vec<u8> {
    let notes = tk::run_ok(Command::new(tk::tool("llvm-readelf")).arg("-n").arg(bin));
    let hex = notes
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
        .expect("the binary has a build-id")
        .trim()
        .to_string();
    (0..hex.len() / 2)
        .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

/// One process of a synthetic recording: its pid and where the binary is loaded.
struct Process {
    pid: u32,
    base: u64,
    samples: u64,
    /// Forked (after recording started) from this process instead of mapping the binary itself.
    parent: Option<u32>,
}

/// A perf.data file with branch-stack samples of `bin` loaded at `base` in each process (one
/// `MMAP2` per executable `PT_LOAD` segment, plus a mapping of another library), chains of real
/// taken branches of the binary at run-time addresses, some entered from the kernel or from the
/// other library, some mispredicted.
fn branch_stacks(bin: &Path, procs: &[Process], seed: u64) -> Vec<u8> {
    let phdrs = tk::run_ok(Command::new(tk::tool("llvm-readelf")).arg("-lW").arg(bin));
    let code = support::Code::of(bin);
    let branches = code.branches();
    let next_cf = |addr: u64| code.next_control_flow(addr);
    let mut w = writer::Writer::new(writer::Options::default());
    let name = bin.to_str().unwrap().as_bytes();
    let other = b"/usr/lib/x86_64-linux-gnu/libother.so".as_slice();
    let other_base = 0x7f12_3400_0000u64;
    for p in procs {
        if let Some(parent) = p.parent {
            w.task(false, p.pid, parent, p.pid, parent, 5_000_000);
            continue;
        }
        w.comm(p.pid, p.pid, b"prog", 1);
        for l in phdrs
            .lines()
            .filter(|l| l.trim_start().starts_with("LOAD") && l.contains(" E "))
        {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (off, vaddr, memsz) = (tk::hex(f[1]), tk::hex(f[2]), tk::hex(f[5]));
            w.mmap2(
                p.pid,
                p.pid,
                p.base + (vaddr & !0xfff),
                memsz + (vaddr & 0xfff),
                off & !0xfff,
                name,
                2,
            );
        }
        w.mmap2(p.pid, p.pid, other_base, 0x20000, 0x1000, other, 3);
    }
    w.build_id(-1, &build_id(bin), name);
    let mut state = seed;
    let mut rnd = |n: usize| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((state >> 33) % n as u64) as usize
    };
    let mut time = 10;
    for p in procs {
        for _ in 0..p.samples {
            let mut chain: Vec<BranchEntry> = Vec::new();
            let mut b = branches[rnd(branches.len())].clone();
            for _ in 0..(1 + rnd(16)) {
                let Some(t) = b.target else { break };
                chain.push(BranchEntry {
                    from: p.base + b.addr,
                    to: p.base + t,
                    flags: (rnd(5) == 0) as u64,
                });
                match next_cf(t) {
                    Some(n) if n.target.is_some() => b = n,
                    _ => break,
                }
            }
            match rnd(10) {
                0 => chain.push(BranchEntry {
                    from: 0xffff_ffff_8100_0000,
                    to: p.base + b.addr,
                    flags: 0,
                }),
                1 => chain.push(BranchEntry {
                    from: other_base + 0x1234,
                    to: p.base + b.addr,
                    flags: 0,
                }),
                _ => {}
            }
            chain.reverse();
            time += 1;
            w.sample(&writer::SampleSpec {
                ip: p.base + b.addr,
                pid: p.pid,
                tid: p.pid,
                time,
                period: 1,
                branches: chain,
                hw_idx: 0,
            });
        }
    }
    w.finish()
}

fn check_branch_stacks(bin: &Path, data: &Path, dir: &Path, extra: &[&str]) {
    let (expected, p2b, ours, stdout) =
        support::run_both_on_perf_data(PCMAP.as_ref(), bin, data, dir, extra, false);
    assert!(
        expected.lines().count() > 10,
        "perf2bolt produced too little:\n{p2b}"
    );
    assert!(
        ours == expected,
        "fdata differs; perf.data at {}",
        data.display()
    );
    assert_eq!(stats(&stdout), stats(&p2b));
}

const PIE_BASE: u64 = 0x5555_5555_4000;
const LIB_BASE: u64 = 0x7f3a_1c20_0000;

#[test]
fn branch_stacks_of_a_pie_executable_match_perf2bolt() {
    let dir = tk::scratch_dir("cli-perf2bolt-pie-lbr");
    let bin = pie_program(&dir);
    let data = dir.join("lbr.perf.data");
    let procs = [Process {
        pid: 4242,
        base: PIE_BASE,
        samples: 400,
        parent: None,
    }];
    std::fs::write(&data, branch_stacks(&bin, &procs, 7)).unwrap();
    check_branch_stacks(&bin, &data, &dir, &[]);
}

#[test]
fn branch_stacks_of_a_shared_library_match_perf2bolt() {
    let dir = tk::scratch_dir("cli-perf2bolt-dso-lbr");
    let (lib, _) = library_and_program(&dir);
    let data = dir.join("lbr.perf.data");
    let procs = [Process {
        pid: 777,
        base: LIB_BASE,
        samples: 400,
        parent: None,
    }];
    std::fs::write(&data, branch_stacks(&lib, &procs, 11)).unwrap();
    check_branch_stacks(&lib, &data, &dir, &[]);
}

#[test]
fn pid_selects_one_of_two_processes_like_perf2bolt() {
    let dir = tk::scratch_dir("cli-perf2bolt-pie-pid");
    let bin = pie_program(&dir);
    let data = dir.join("two.perf.data");
    // Two processes with the binary at different addresses (ASLR), and a child forked from the
    // first one (it inherits the mapping).
    let procs = [
        Process {
            pid: 100,
            base: PIE_BASE,
            samples: 300,
            parent: None,
        },
        Process {
            pid: 200,
            base: PIE_BASE + 0x1234_5000,
            samples: 200,
            parent: None,
        },
        Process {
            pid: 150,
            base: PIE_BASE,
            samples: 100,
            parent: Some(100),
        },
    ];
    std::fs::write(&data, branch_stacks(&bin, &procs, 3)).unwrap();
    check_branch_stacks(&bin, &data, &dir, &[]);
    check_branch_stacks(&bin, &data, &dir, &["--pid", "200"]);
    check_branch_stacks(&bin, &data, &dir, &["--pid", "150"]);
    // A pid that did not map the binary: both fail, we without output.
    let out = dir.join("none.fdata");
    let o = tk::run(
        Command::new(PCMAP)
            .arg("perf2bolt")
            .arg(&bin)
            .args(["-p"])
            .arg(&data)
            .args(["--pid", "300", "-o"])
            .arg(&out),
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("PID 300"));
    assert!(!out.exists());
}
