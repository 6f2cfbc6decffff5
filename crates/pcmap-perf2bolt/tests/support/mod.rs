//! Test support: pre-aggregated profiles generated from `llvm-objdump -d` of a fixture (the
//! oracle's disassembly, not ours), covering every record type, external addresses, invalid
//! traces, call continuations, returns, duplicates and mid-instruction addresses.

#![allow(dead_code)]

use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, Output};

use pcmap_testkit as tk;

/// One instruction from llvm-objdump.
#[derive(Debug, Clone)]
pub struct Insn {
    pub addr: u64,
    pub mnemonic: String,
    pub target: Option<u64>,
}

/// A function's instructions.
#[derive(Debug, Clone)]
pub struct Func {
    pub name: String,
    pub insns: Vec<Insn>,
}

/// Disassemble with llvm-objdump (all executable sections).
pub fn disassemble(bin: &Path) -> Vec<Func> {
    let text = tk::run_ok(
        Command::new(tk::tool("llvm-objdump"))
            .args(["-d", "--no-show-raw-insn"])
            .arg(bin),
    );
    let mut funcs: Vec<Func> = Vec::new();
    for line in text.lines() {
        if line.ends_with(">:") && !line.starts_with(' ') {
            let name = line
                .split('<')
                .nth(1)
                .unwrap_or("")
                .trim_end_matches(">:")
                .to_string();
            funcs.push(Func {
                name,
                insns: Vec::new(),
            });
            continue;
        }
        let t = line.trim_start();
        let Some((a, rest)) = t.split_once(':') else {
            continue;
        };
        let Ok(addr) = u64::from_str_radix(a, 16) else {
            continue;
        };
        let mut parts = rest.split_whitespace();
        let Some(mnemonic) = parts.next() else {
            continue;
        };
        let target = parts
            .next()
            .and_then(|op| op.strip_prefix("0x"))
            .and_then(|h| u64::from_str_radix(h, 16).ok())
            .filter(|_| mnemonic.starts_with('j') || mnemonic.starts_with("call"));
        if let Some(f) = funcs.last_mut() {
            f.insns.push(Insn {
                addr,
                mnemonic: mnemonic.to_string(),
                target,
            });
        }
    }
    funcs.retain(|f| !f.insns.is_empty());
    funcs
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn is_cf(m: &str) -> bool {
    m.starts_with('j') || m.starts_with("ret")
}

/// The first control-flow instruction at or after `addr` in `f` (a valid fall-through end).
fn ft_end(f: &Func, addr: u64) -> u64 {
    f.insns
        .iter()
        .find(|i| i.addr >= addr && is_cf(&i.mnemonic))
        .map_or(addr, |i| i.addr)
}

/// Generate `n` pre-aggregated records (plus `E` lines) for `funcs` with seed `seed`.
pub fn generate(funcs: &[Func], n: usize, seed: u64, with_samples: bool) -> String {
    generate_records(funcs, n, seed, with_samples, false)
}

/// Like [`generate`], but only records a program could produce: taken branches leave branch
/// instructions for their own targets, returns land after calls, code outside the binary enters
/// functions at their entries (no branch from any instruction to any other, none from outside
/// into the middle of a function, none from the middle of an instruction).
pub fn generate_realistic(funcs: &[Func], n: usize, seed: u64) -> String {
    generate_records(funcs, n, seed, false, true)
}

fn generate_records(
    funcs: &[Func],
    n: usize,
    seed: u64,
    with_samples: bool,
    realistic: bool,
) -> String {
    let mut r = Rng(seed);
    let mut out = String::from("E cycles\n");
    let mut lines: Vec<String> = Vec::new();
    let all: Vec<(usize, usize)> = funcs
        .iter()
        .enumerate()
        .flat_map(|(fi, f)| (0..f.insns.len()).map(move |ii| (fi, ii)))
        .collect();
    let ext = |r: &mut Rng| 0x7f00_0000_1000u64 + (r.below(16) as u64) * 0x10;
    for _ in 0..n {
        let (fi, ii) = all[r.below(all.len())];
        let f = &funcs[fi];
        let i = &f.insns[ii];
        let any = |r: &mut Rng| {
            let (fj, ij) = all[r.below(all.len())];
            funcs[fj].insns[ij].addr
        };
        let same = |r: &mut Rng| f.insns[r.below(f.insns.len())].addr;
        let next_addr = f.insns.get(ii + 1).map_or(i.addr + 1, |x| x.addr);
        let cnt = 1 + r.below(50);
        let kind = r.below(16);
        if realistic && matches!(kind, 8..=11 | 14 | 15) {
            continue;
        }
        let line = match kind {
            0..=2 => {
                // Taken branch at a real branch/call with a (mostly valid) fall-through.
                let Some(t) = i.target else { continue };
                let end = match r.below(4) {
                    0 => same(&mut r),
                    1 => any(&mut r),
                    _ => funcs
                        .iter()
                        .find(|g| g.insns.iter().any(|x| x.addr == t))
                        .map_or(t, |g| ft_end(g, t)),
                };
                format!("T {:x} {:x} {:x} {cnt}", i.addr, t, end)
            }
            3 => {
                let Some(t) = i.target else { continue };
                format!("B {:x} {:x} {cnt} {}", i.addr, t, r.below(cnt))
            }
            4 => {
                // Return into a call continuation.
                if !i.mnemonic.starts_with("call") {
                    continue;
                }
                let ret = funcs[r.below(funcs.len())]
                    .insns
                    .iter()
                    .find(|x| x.mnemonic.starts_with("ret"))
                    .map_or(0, |x| x.addr);
                let src = if r.below(4) == 0 { 0 } else { ret };
                format!(
                    "R {:x} {:x} {:x} {cnt}",
                    src,
                    next_addr,
                    ft_end(f, next_addr)
                )
            }
            5 => format!(
                "F {:x} {:x} {cnt}",
                i.addr,
                if r.below(3) == 0 {
                    same(&mut r)
                } else {
                    ft_end(f, i.addr)
                }
            ),
            6 => {
                let k = if r.below(2) == 0 { "f" } else { "r" };
                format!("{k} {:x} {:x} {cnt}", next_addr, ft_end(f, next_addr))
            }
            7 => format!("B X:{:x} {:x} {cnt} 0", ext(&mut r), f.insns[0].addr),
            8 => format!("T {:x} {:x} {:x} {cnt}", i.addr, ext(&mut r), ext(&mut r)),
            9 => format!(
                "T {:x} {:x} {:x} {cnt}",
                ext(&mut r),
                i.addr,
                ft_end(f, i.addr)
            ),
            10 => format!("B {:x} {:x} {cnt} {}", any(&mut r), any(&mut r), r.below(3)),
            11 => format!(
                "T {:x} {:x} {:x} {cnt}",
                i.addr + 1,
                same(&mut r) + 1,
                same(&mut r)
            ),
            12 if with_samples => format!(
                "S {:x} {cnt}",
                if r.below(8) == 0 { ext(&mut r) } else { i.addr }
            ),
            13 if !lines.is_empty() => {
                // Duplicate of an earlier record with another count.
                let prev = lines[r.below(lines.len())].clone();
                let mut fields: Vec<&str> = prev.split(' ').collect();
                let c = (1 + r.below(9)).to_string();
                let k = if fields[0] == "B" {
                    fields.len() - 2
                } else {
                    fields.len() - 1
                };
                fields[k] = &c;
                fields.join(" ")
            }
            14 => format!("T {:x} {:x} {:x} {cnt}", i.addr, any(&mut r), any(&mut r)),
            _ => {
                if !i.mnemonic.starts_with("ret") {
                    continue;
                }
                format!(
                    "T {:x} {:x} {:x} {cnt}",
                    i.addr,
                    next_addr,
                    ft_end(f, next_addr)
                )
            }
        };
        lines.push(line);
    }
    for l in &lines {
        let _ = writeln!(out, "{l}");
    }
    if with_samples {
        out.push_str("E cpu-clock\n");
    }
    out
}

/// perf2bolt's statistics lines (prefix `PERF2BOLT: ` and one of the known messages).
pub fn stat_lines(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter(|l| {
            l.starts_with("PERF2BOLT: traces mismatching")
                || l.starts_with("PERF2BOLT: out of range")
                || l.starts_with("PERF2BOLT: read ")
                || (l.starts_with("BOLT-INFO: ") && l.contains(" out of "))
                || l.contains("with profile could not be optimized")
                || l.contains("functions have instructions with unknown control flow")
        })
        .map(str::to_string)
        .collect()
}

/// The statistics lines both tools print when reading perf.data (`read`, `ignored samples`,
/// `traces mismatching`, `out of range`).
pub fn perf_data_stat_lines(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter(|l| {
            l.starts_with("PERF2BOLT: read ")
                || l.starts_with("PERF2BOLT: out of range")
                || l.starts_with("PERF2BOLT: traces mismatching")
                || l.starts_with("PERF2BOLT: ignored samples")
        })
        .map(str::to_string)
        .collect()
}

/// Run perf2bolt 22 on a pre-aggregated profile; returns (fdata, stdout).
pub fn perf2bolt(bin: &Path, profile: &Path, out: &Path, extra: &[&str]) -> (String, String) {
    let stdout = tk::run_ok(
        Command::new(tk::tool("perf2bolt"))
            .arg(bin)
            .arg("--pa")
            .arg("-p")
            .arg(profile)
            .arg("-o")
            .arg(out)
            .args(extra),
    );
    (std::fs::read_to_string(out).unwrap_or_default(), stdout)
}

/// `pcmap perf2bolt BIN --pa -p PROFILE -o OUT EXTRA...`, whatever its exit status (only the
/// `pcmap` crate's tests have the CLI to run).
pub fn pcmap_preagg(bin: &Path, profile: &Path, out: &Path, extra: &[&str]) -> Output {
    let Some(exe) = option_env!("CARGO_BIN_EXE_pcmap") else {
        panic!("only the pcmap crate's tests run the CLI");
    };
    tk::run(
        Command::new(exe)
            .arg("perf2bolt")
            .arg(bin)
            .arg("--pa")
            .arg("-p")
            .arg(profile)
            .arg("-o")
            .arg(out)
            .args(extra),
    )
}

/// The instructions of a binary in address order, for generating branch records that follow its
/// real control flow.
pub struct Code {
    insns: Vec<Insn>,
}

impl Code {
    /// Disassemble `bin` (llvm-objdump).
    pub fn of(bin: &Path) -> Code {
        Code {
            insns: disassemble(bin).into_iter().flat_map(|f| f.insns).collect(),
        }
    }

    /// Instructions with a direct target.
    pub fn branches(&self) -> Vec<&Insn> {
        self.insns.iter().filter(|i| i.target.is_some()).collect()
    }

    /// The first jump or return at or after `addr`: where a fall-through from `addr` ends.
    pub fn next_control_flow(&self, addr: u64) -> Option<Insn> {
        self.insns
            .iter()
            .find(|i| {
                i.addr >= addr && (i.mnemonic.starts_with('j') || i.mnemonic.starts_with("ret"))
            })
            .cloned()
    }
}

/// Pre-aggregated traces that follow `bin`'s real control flow (llvm-objdump's disassembly):
/// each record takes a real branch and falls through to the next jump or return, so most
/// functions get a profile llvm-bolt accepts as valid (random records make almost every
/// profile invalid, and then llvm-bolt prints no figures).
pub fn control_flow_profile(bin: &Path, n: usize, seed: u64) -> String {
    let code = Code::of(bin);
    let branches = code.branches();
    let mut state = seed;
    let mut rnd = |n: usize| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((state >> 33) % n as u64) as usize
    };
    let mut out = String::from("E cycles\n");
    for _ in 0..n {
        let b = branches[rnd(branches.len())];
        let Some(t) = b.target else { continue };
        let count = 1 + rnd(1000);
        match code.next_control_flow(t) {
            Some(end) if rnd(8) != 0 => {
                out.push_str(&format!("T {:x} {t:x} {:x} {count}\n", b.addr, end.addr))
            }
            _ => out.push_str(&format!("B {:x} {t:x} {count} 0\n", b.addr)),
        }
    }
    out
}

/// An fdata file as a sorted multiset of lines with the `no_lbr` event list sorted (perf2bolt
/// writes both in hash order).
pub fn normalized_fdata(s: &str) -> Vec<String> {
    let mut v: Vec<String> = s
        .lines()
        .map(|l| {
            let mut w: Vec<&str> = l.split(' ').collect();
            if w[0] == "no_lbr" {
                w[1..].sort_unstable();
            }
            w.join(" ")
        })
        .collect();
    v.sort();
    v
}

/// Lines of an fdata file as a sorted multiset (for outputs whose order is hash order).
pub fn sorted_lines(s: &str) -> Vec<&str> {
    let mut v: Vec<&str> = s.lines().collect();
    v.sort_unstable();
    v
}

/// A perf.data file with `n` branch-stack samples of `bin` (written with pcmap-profile's
/// writer: branch stacks cannot be recorded without a PMU), as perf would record them for a
/// process running `bin`: COMM, one MMAP2 per executable LOAD segment, the build-id, then
/// samples whose stacks are chains of real taken branches of the binary (each fall-through
/// running to the next control-flow instruction), some entered from kernel addresses, some
/// mispredicted, and one sample of another process (to be ignored).
pub fn branch_stack_perf_data(bin: &Path, n: u64, seed: u64) -> Vec<u8> {
    use pcmap_profile::perfdata::{BranchEntry, writer};
    let phdrs = tk::run_ok(Command::new(tk::tool("llvm-readelf")).arg("-lW").arg(bin));
    let notes = tk::run_ok(Command::new(tk::tool("llvm-readelf")).arg("-n").arg(bin));
    let build_id_hex = notes
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
        .expect("the binary has a build-id")
        .trim()
        .to_string();
    let build_id: Vec<u8> = (0..build_id_hex.len() / 2)
        .map(|i| u8::from_str_radix(&build_id_hex[2 * i..2 * i + 2], 16).unwrap())
        .collect();
    let code = Code::of(bin);
    let branches = code.branches();
    let next_cf = |addr: u64| code.next_control_flow(addr);
    let mut w = writer::Writer::new(writer::Options::default());
    let pid = 4242;
    let name = bin.to_str().unwrap().as_bytes();
    w.comm(pid, pid, b"prog", 1);
    for l in phdrs
        .lines()
        .filter(|l| l.trim_start().starts_with("LOAD") && l.contains(" R E "))
    {
        let f: Vec<&str> = l.split_whitespace().collect();
        let (off, vaddr, memsz) = (tk::hex(f[1]), tk::hex(f[2]), tk::hex(f[5]));
        w.mmap2(
            pid,
            pid,
            vaddr & !0xfff,
            memsz + (vaddr & 0xfff),
            off & !0xfff,
            name,
            2,
        );
    }
    w.build_id(pid as i32, &build_id, name);
    let mut state = seed;
    let mut rnd = |n: usize| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((state >> 33) % n as u64) as usize
    };
    for k in 0..n {
        let mut chain: Vec<BranchEntry> = Vec::new();
        let mut b = branches[rnd(branches.len())].clone();
        for _ in 0..(1 + rnd(16)) {
            let Some(t) = b.target else { break };
            chain.push(BranchEntry {
                from: b.addr,
                to: t,
                flags: (rnd(5) == 0) as u64,
            });
            match next_cf(t) {
                Some(n) if n.target.is_some() => b = n,
                _ => break,
            }
        }
        if rnd(10) == 0 {
            chain.push(BranchEntry {
                from: 0xffff_ffff_8100_0000,
                to: b.addr,
                flags: 0,
            });
        }
        chain.reverse();
        w.sample(&writer::SampleSpec {
            ip: b.addr,
            pid,
            tid: pid,
            time: 10 + k,
            period: 1,
            branches: chain,
            hw_idx: 0,
        });
    }
    w.sample(&writer::SampleSpec {
        ip: 1,
        pid: 99,
        tid: 99,
        time: 10 + n,
        period: 1,
        branches: vec![],
        hw_idx: 0,
    });
    w.finish()
}

/// perf2bolt 22 and `pcmap perf2bolt` (the executable at `pcmap`) on the same perf.data with
/// the same `extra` options, writing `p2b.fdata` and `pcmap.fdata` (and, with `yaml`, `-w`
/// `p2b.yaml` and `pcmap.yaml`) in `dir`. Returns (perf2bolt's fdata, its stdout, pcmap's
/// fdata, pcmap's stdout); pcmap must succeed.
pub fn run_both_on_perf_data(
    pcmap: &Path,
    bin: &Path,
    data: &Path,
    dir: &Path,
    extra: &[&str],
    yaml: bool,
) -> (String, String, String, String) {
    let yaml_args = |tag: &str| -> Vec<std::ffi::OsString> {
        if yaml {
            vec!["-w".into(), dir.join(format!("{tag}.yaml")).into()]
        } else {
            Vec::new()
        }
    };
    let theirs = tk::run_ok(
        Command::new(tk::tool("perf2bolt"))
            .arg(bin)
            .arg("-p")
            .arg(data)
            .arg("-o")
            .arg(dir.join("p2b.fdata"))
            .args(yaml_args("p2b"))
            .args(extra),
    );
    let out = tk::run(
        Command::new(pcmap)
            .arg("perf2bolt")
            .arg(bin)
            .arg("-p")
            .arg(data)
            .arg("-o")
            .arg(dir.join("pcmap.fdata"))
            .args(yaml_args("pcmap"))
            .args(extra),
    );
    pcmap_testkit::assert_success("pcmap perf2bolt", &out);
    (
        std::fs::read_to_string(dir.join("p2b.fdata")).unwrap(),
        theirs,
        std::fs::read_to_string(dir.join("pcmap.fdata")).unwrap(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// The profile-quality line llvm-bolt 22 prints when it reads the fdata at `fdata` for `bin`
/// (its output binary goes to `dir` and is removed).
pub fn bolt_quality_line(bin: &Path, fdata: &Path, dir: &Path) -> Option<String> {
    let out = tk::run_ok(
        Command::new(tk::tool("llvm-bolt"))
            .arg(bin)
            .arg(format!("-data={}", fdata.display()))
            .arg("-o")
            .arg(dir.join("out.bolt")),
    );
    let _ = std::fs::remove_file(dir.join("out.bolt"));
    out.lines()
        .find(|l| l.starts_with("BOLT-INFO: profile quality metrics"))
        .map(str::to_string)
}
